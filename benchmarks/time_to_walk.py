"""Wall-clock time to a walking policy: the CPU preset end to end, judged by the scorecard.

Runs `playground/open_duck_mini_v2/runner.py --preset cpu` as a subprocess from
an empty compilation cache (cold start), then scores every checkpoint with
`score.py`'s suite (randomization, noise and delays on, `--seeds` episodes per
command) and reports each checkpoint's scorecard against the wall-clock time
at which it was written, the first checkpoint that meets the walking target
(no falls, vx >= 0.07 m/s at the 0.1 m/s command, yaw rate >= 0.3 rad/s at
the 0.5 rad/s command), and a PNG of the curve.

  uv run python -m benchmarks.time_to_walk                          # train, then score
  uv run python -m benchmarks.time_to_walk --run_dir checkpoints/X  # score an existing run
  uv run python -m benchmarks.time_to_walk --work_dir checkpoints/ttw  # train, keep the run
  uv run python -m benchmarks.time_to_walk --run_dir checkpoints/X --score_set domain_randomization.com_offset=0.05
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import emit
from benchmarks.common import machine
from playground.common import configs
from playground.common.evaluation import best_policy
from playground.common.runs import checkpoints
from playground.open_duck_mini_v2.evaluation import scorecard

RUNNER = Path(__file__).resolve().parents[1] / "playground" / "open_duck_mini_v2" / "runner.py"
TARGET = {"falls": 0, **scorecard.WALKING_SPEEDS}


def meets_target(headline: dict) -> bool:
  """The walking target of the CPU preset: no falls, and it walks on command."""
  return headline["falls"] <= TARGET["falls"] and best_policy.walks_on_command(headline, scorecard.WALKING_SPEEDS)


def train(args: argparse.Namespace, work: Path) -> tuple[Path, float]:
  """Runs the preset from a cold cache; returns (run dir, start time).

  The runner's console output goes to `train.log` in the work directory.
  """
  command = [
    sys.executable, str(RUNNER), "--preset", args.preset, "--output_dir", str(work / "runs"),
    "--exp_name", "walk", "--compilation_cache_dir", str(work / "cache"), *args.runner_args,
  ]  # fmt: skip
  log_path = work / "train.log"
  started = time.time()
  with open(log_path, "w") as log:
    result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
  if result.returncode != 0:
    kept = "" if args.work_dir else " (removed with the temporary folder: pass --work_dir to keep it)"
    tail = log_path.read_text()[-3000:]
    raise SystemExit(f"training failed (exit {result.returncode}):\n{tail}\nwhole log: {log_path}{kept}")
  return work / "runs" / "walk", started


def in_run_score(step_dir: Path, seeds: int) -> dict | None:
  """The scorecard the runner wrote next to the checkpoint, if it played `seeds` episodes per command.

  The runner scores with the same suite, seeds and env config as `score.py`,
  so its card is the one `scorecard.score` would compute again.
  """
  path = step_dir / "score.json"
  if not path.is_file():
    return None
  card = json.loads(path.read_text())
  return card if card.get("seeds") == seeds and not card.get("overrides") else None


def score_run(run_dir: Path, started: float, seeds: int, overrides: list[tuple[str, str]] = ()) -> list[dict]:
  """The scorecard of every checkpoint, with the wall-clock time it was written.

  `overrides` (`--score_set`) change the run's env config for scoring only.
  """
  env_config = json.loads((run_dir / "config.json").read_text())["env_config"]
  rows = []
  for step_dir in checkpoints.list_checkpoints(run_dir):
    written = (step_dir / checkpoints.META_FILE).stat().st_mtime
    card = in_run_score(step_dir, seeds) if not overrides else None
    if card is None:
      card = scorecard.score(step_dir / "policy.onnx", env_config, seeds=seeds, overrides=overrides)
    rows.append(
      {
        "step": int(step_dir.name),
        "wall_clock_min": round((written - started) / 60.0, 2),
        "headline": card["headline"],
        "walks": meets_target(card["headline"]),
      }
    )
  return rows


def plot(rows: list[dict], path: Path) -> None:
  """Falls, forward speed and yaw rate against wall-clock minutes, with the targets."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  t = [r["wall_clock_min"] for r in rows]
  fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
  series = (
    ("fall share", [r["headline"]["falls"] / max(r["headline"]["episodes"], 1) for r in rows], 0.0),
    ("vx at 0.1 m/s command", [r["headline"].get("vx_at_0.1", 0.0) for r in rows], TARGET["vx_at_0.1"]),
    ("yaw rate at 0.5 rad/s", [r["headline"].get("yaw_rate_at_0.5", 0.0) for r in rows], TARGET["yaw_rate_at_0.5"]),
  )
  for ax, (label, values, target) in zip(axes, series):
    ax.plot(t, values, marker="o")
    ax.axhline(target, color="red", linestyle="--", linewidth=0.8)
    ax.set_ylabel(label)
  axes[-1].set_xlabel("wall-clock minutes from start (cold cache)")
  fig.suptitle("time to walk (scorecard with randomization, noise and delays; target dashed)", fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--preset", default="cpu")
  parser.add_argument("--run_dir", help="score an existing run instead of training one")
  parser.add_argument(
    "--started_at",
    type=float,
    help="with --run_dir: unix time the run was started (default: its event file's time, written after the"
    " process start-up and before compilation: about 20 s late on 2 cores)",
  )
  parser.add_argument(
    "--seeds",
    type=int,
    default=12,
    help="scorecard episodes per command (fewer than 12 under-read speeds and miss rare falls: "
    "docs/research-log.md); the runner's own score is reused when it played as many",
  )
  parser.add_argument("--png", default="time_to_walk.png")
  parser.add_argument(
    "--work_dir", help="keep the run and its cache here (must not exist) instead of a temporary folder"
  )
  configs.add_override_argument(
    parser,
    "--score_set",
    help="score under a changed env config, e.g. domain_randomization.com_offset=0.05 (repeatable)",
  )
  parser.add_argument("runner_args", nargs="*", help="extra runner flags after --, e.g. -- --num_timesteps 8000000")
  args = parser.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  overrides = configs.parse_overrides(args.overrides)
  if args.run_dir:
    run_dir = Path(args.run_dir)
    started = args.started_at
    if started is None:
      events = sorted(run_dir.glob("events.out.tfevents.*"))
      started = float(events[0].name.split(".")[3])
    rows = score_run(run_dir, started, args.seeds, overrides)
    source = str(run_dir)
  elif args.work_dir:
    work = Path(args.work_dir)
    if work.exists():
      raise SystemExit(f"--work_dir {work} exists; pass a new folder (the cache must start cold)")
    work.mkdir(parents=True)
    run_dir, started = train(args, work)
    rows = score_run(run_dir, started, args.seeds, overrides)
  else:
    with tempfile.TemporaryDirectory(prefix="time_to_walk-") as tmp:
      run_dir, started = train(args, Path(tmp))
      rows = score_run(run_dir, started, args.seeds, overrides)
  if not args.run_dir:
    source = f"--preset {args.preset} {' '.join(args.runner_args)}".strip()
  plot(rows, Path(args.png))
  first = next((r for r in rows if r["walks"]), None)
  emit(
    {
      "benchmark": "time_to_walk",
      "machine": machine(),
      "source": source,
      "target": TARGET,
      "seeds": args.seeds,
      "score_overrides": args.overrides,
      "checkpoints": rows,
      "first_walking_checkpoint": first,
      "png": args.png,
    }
  )


if __name__ == "__main__":
  main()
