"""The README and docs/: links resolve, the README stays a short guide, and its numbers match the code.

Fast and JAX-free: reads Markdown files and imports only `presets.py`
(which needs ml_collections).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, ROOT / "BENCHMARKS.md", *DOCS]

README_MAX_LINES = 300
#: Inline Markdown links `[text](target)`; images included.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: Run codenames belong in docs/research-log.md, not in the user guide.
CODENAMES = (
  "expB refF imitG cleanE1 standQ ffA ffB ttwC ttwE pushD termF termG latH discI ftJ histK "
  "bigL bigM strideS presetP critD ftL lrM comW comW1 pushF"
).split()


def _strip_code(text: str) -> str:
  """`text` without fenced code blocks and inline code, where `#` and brackets are not Markdown."""
  text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
  return re.sub(r"`[^`\n]*`", "", text)


def github_anchor(heading: str) -> str:
  """GitHub's anchor of a heading: lowercase, punctuation other than '-' and '_' removed, spaces to '-'."""
  text = heading.strip().lower()
  text = re.sub(r"[^\w\- ]", "", text)
  return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
  """The anchors of every heading in `path` (repeated headings get GitHub's -1, -2 suffixes)."""
  text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
  seen: dict[str, int] = {}
  out = set()
  for match in re.finditer(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
    anchor = github_anchor(match.group(1))
    count = seen.get(anchor, 0)
    seen[anchor] = count + 1
    out.add(anchor if count == 0 else f"{anchor}-{count}")
  return out


def links(path: Path) -> list[str]:
  """The relative link targets of `path` (web and mail links left out)."""
  targets = LINK.findall(_strip_code(path.read_text()))
  return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_the_anchor_rule_follows_github():
  assert github_anchor("Score a policy: does it walk?") == "score-a-policy-does-it-walk"
  assert github_anchor("Training at ±3.5 cm, judged at ±3 (`comW`)") == "training-at-35-cm-judged-at-3-comw"
  assert github_anchor("The `quick` and `smoke` presets") == "the-quick-and-smoke-presets"


def test_the_docs_exist():
  names = {p.name for p in DOCS}
  for name in (
    "reward.md",
    "reference-gait.md",
    "randomization.md",
    "scorecard.md",
    "on-the-robot.md",
    "runs-and-resume.md",
    "scaling.md",
    "results.md",
    "research-log.md",
  ):
    assert name in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path):
  broken = []
  for target in links(page):
    file_part, _, anchor = target.partition("#")
    resolved = (page.parent / file_part).resolve() if file_part else page
    if not resolved.exists():
      broken.append(f"{target} (no such file)")
    elif anchor and (resolved.is_dir() or resolved.suffix != ".md" or anchor not in anchors(resolved)):
      broken.append(f"{target} (no such heading)")
  assert not broken, f"{page.name}: broken links: {broken}"


def test_the_readme_is_a_short_guide_without_run_codenames():
  text = README.read_text()
  assert len(text.splitlines()) <= README_MAX_LINES
  named = [name for name in CODENAMES if re.search(rf"\b{re.escape(name)}\b", text)]
  assert not named, f"run codenames in README.md (they belong in docs/research-log.md): {named}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_speaks_of_sessions(page: Path):
  numbered = enumerate(page.read_text().splitlines(), 1)
  # Work sessions, not the code's `Session` (a training run's parts) or its modules session.py, session_setup.py.
  lines = [f"{i}: {line}" for i, line in numbered if re.search(r"\bsessions?\b(?!\.py|_setup)", line)]
  assert not lines, f"{page.name}: say a date or a commit instead: {lines}"


def test_the_readme_quotes_the_code():
  from playground.open_duck_mini_v2.presets import PRESETS

  text = README.read_text()
  cpu, full = PRESETS["cpu"].ppo, PRESETS["full"].ppo
  assert cpu["num_timesteps"] == 16_000_000 and cpu["num_envs"] == 256
  assert "256 envs, 16M steps" in text
  assert full["num_timesteps"] == 150_000_000 and full["num_envs"] == 8192
  assert "8192 envs, 150M steps" in text
  quick, smoke = PRESETS["quick"].ppo, PRESETS["smoke"].ppo
  assert quick["num_timesteps"] == 1_500_000 and quick["num_envs"] == 128
  assert "128 envs, 1.5M steps" in text
  assert smoke["num_timesteps"] == 2_560 and smoke["num_envs"] == 16
  assert "16 envs, 2,560 steps" in text
  assert "uv run pytest -n 3 tests" in text
  assert "uv run pytest -n 3 tests" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_counts_the_cartpole_example():
  lines = len((ROOT / "playground" / "cartpole" / "runner.py").read_text().splitlines())
  match = re.search(r"`playground/cartpole/runner.py` is the minimal\s+example, (\d+) lines", README.read_text())
  assert match, "README.md no longer quotes the cartpole example's length"
  assert int(match.group(1)) == lines


def test_the_readme_observation_layout_matches_the_code():
  """The README's runtime contract: 101 floats in the order of `observations.STATE_LAYOUT`.

  `observations.py` imports JAX, so its field order is read from the source;
  the size and the joint-velocity scale come from `runtime.py` (no JAX).
  """
  from playground.open_duck_mini_v2.evaluation import runtime

  source = (ROOT / "playground" / "open_duck_mini_v2" / "model" / "observations.py").read_text()
  fields = re.search(r"_STATE_FIELDS = \((.*?)\n\)", source, flags=re.S)
  assert fields, "observations.py no longer declares _STATE_FIELDS"
  names = re.findall(r'\("(\w+)",', fields.group(1))
  readme = README.read_text()
  row = next(line for line in readme.splitlines() if line.startswith("| input `obs`"))
  quoted = ["gyro", "accelerometer", "command", "joint positions", "joint velocities", "last 3 actions"]
  quoted += ["motor targets", "feet contacts", "phase"]
  assert len(names) == len(quoted) == 9
  positions = [row.index(q) for q in quoted]
  assert positions == sorted(positions), "the README lists the observation out of order"
  assert runtime.OBSERVATION_SIZE == 101 and "float32 `[batch, 101]`" in row
  assert runtime.JOINT_VEL_SCALE == 0.05 and "x 0.05" in row
