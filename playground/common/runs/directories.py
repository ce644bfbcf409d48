"""Run directories: safe names, what may be deleted, the run record and `--list`.

A run directory is `<output_dir>/<exp_name>/`. The project marks every run
directory it creates with a small marker file (`MARKER`) next to the run's
`config.json`; only a directory with either file, lying strictly inside
`--output_dir`, is ever deleted by `--overwrite`.

Import-light on purpose (no JAX): the checks before training and `--list` use it.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

from playground.common.runs import tensorboard

#: The repository (or installed source tree) root: default home of checkpoints and caches.
REPO_ROOT = Path(__file__).resolve().parents[3]
MARKER = ".duck-playground-run"
CONFIG_FILE = "config.json"
META_FILE = "meta.json"
STATE_DIR = "state"
STEP_DIR_PATTERN = re.compile(r"^\d{12}$")


class RunDirError(ValueError):
  """A run directory or name that the project refuses to use (a one-line message)."""


class CheckpointError(RuntimeError):
  """A checkpoint path is missing, incomplete, corrupted or incompatible."""


# ---- Names and paths.


def check_exp_name(name: str) -> None:
  """Raises RunDirError unless `name` is exactly one plain path component.

  Refused: empty, `.`, `..`, any `/` or `\\`, and NUL, so that
  `<output_dir>/<name>` is always a direct child of `output_dir`.
  """
  if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
    raise RunDirError(
      f"--exp_name {name!r} must be one directory name (no '/', '\\', '..' or '.'), e.g. --exp_name my_run"
    )


def check_writable_dir(path: Path, flag: str = "--output_dir") -> None:
  """Raises RunDirError if directory `path` cannot be created or written; creates nothing."""
  path = Path(path).expanduser().absolute()
  existing = path
  while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
    existing = existing.parent
  if not existing.is_dir():
    what = "is" if existing == path else f"is below {existing}, which is"
    raise RunDirError(f"{flag} {path} {what} not a directory")
  if not os.access(existing, os.W_OK | os.X_OK):
    raise RunDirError(f"{flag} {path}: {existing} is not writable")


# ---- What the project created.


def read_record(run_dir: Path) -> dict[str, Any]:
  """The run's `config.json` (written by `record.write_config`).

  Raises:
    RunDirError: if it is missing, unreadable or not a run record.
  """
  path = Path(run_dir) / CONFIG_FILE
  try:
    record = json.loads(path.read_text())
  except (OSError, ValueError) as e:
    raise RunDirError(f"cannot read the run record {path}: {e}") from None
  if not _is_record(record):
    raise RunDirError(f"{path} is not a run record of this project (no robot, flags and ppo_config)")
  return record


def _is_record(record: Any) -> bool:
  return isinstance(record, dict) and isinstance(record.get("flags"), dict) and {"robot", "ppo_config"} <= set(record)


def is_run_dir(path: Path) -> bool:
  """True for a directory this project created as a run (marker or run record inside)."""
  path = Path(path)
  if not path.is_dir():
    return False
  if (path / MARKER).is_file():
    return True
  try:
    return _is_record(json.loads((path / CONFIG_FILE).read_text()))
  except (OSError, ValueError):
    return False


def write_marker(run_dir: Path, robot: str) -> None:
  """Marks `run_dir` as created by this project (kept if already there)."""
  path = Path(run_dir) / MARKER
  if not path.exists():
    created = datetime.datetime.now().isoformat(timespec="seconds")
    path.write_text(json.dumps({"robot": robot, "created": created}) + "\n")


def deletable_run_dir(run_dir: Path, output_dir: Path) -> Path:
  """The resolved directory `--overwrite` may delete for `run_dir`.

  Raises:
    RunDirError: unless `run_dir` resolves (symbolic links followed) to a run
      directory of this project strictly inside the resolved `output_dir`.
  """
  base = Path(output_dir).expanduser().resolve()
  target = Path(run_dir).expanduser().resolve()
  if target == base or not target.is_relative_to(base):
    raise RunDirError(f"--overwrite refused: {run_dir} resolves to {target}, which is not inside --output_dir {base}")
  if not target.is_dir():
    raise RunDirError(
      f"--overwrite refused: {target} is not a directory; remove it yourself or choose another --exp_name"
    )
  if not is_run_dir(target):
    raise RunDirError(
      f"--overwrite refused: {target} is not a run directory of this project (no {CONFIG_FILE} or {MARKER}); "
      "remove it yourself or choose another --exp_name"
    )
  return target


def delete_run_dir(run_dir: Path, output_dir: Path) -> Path:
  """Deletes a run directory after `deletable_run_dir` accepts it; returns what was deleted."""
  target = deletable_run_dir(run_dir, output_dir)
  # `target` is a real path inside output_dir; rmtree removes links inside it
  # without following them.
  shutil.rmtree(target)
  return target


# ---- Checkpoints (names and metadata; loading them lives in `checkpoints`).


def step_dir_name(step: int) -> str:
  return f"{int(step):012d}"


def is_complete(path: Path) -> bool:
  """True for a finished checkpoint directory (meta and Orbax commit present)."""
  path = Path(path)
  return STEP_DIR_PATTERN.match(path.name) is not None and (path / META_FILE).is_file() and (path / STATE_DIR).is_dir()


def write_atomic(path: Path, data: bytes) -> None:
  """Writes `data` to `path` through a hidden temporary file and a rename: never half-written."""
  path = Path(path)
  tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
  tmp.write_bytes(data)
  os.replace(tmp, path)


def list_checkpoints(run_dir: Path) -> list[Path]:
  """Complete checkpoints of a run, oldest first."""
  run_dir = Path(run_dir)
  if not run_dir.is_dir():
    return []
  found = [p for p in run_dir.iterdir() if p.is_dir() and is_complete(p)]
  return sorted(found, key=lambda p: int(p.name))


def latest_checkpoint(run_dir: Path) -> Path | None:
  """The newest complete checkpoint of a run, or None."""
  found = list_checkpoints(run_dir)
  return found[-1] if found else None


def resolve(path: str | Path) -> Path:
  """A checkpoint step directory from a step directory or a run directory.

  Raises:
    CheckpointError: if there is nothing loadable at `path`.
  """
  path = Path(path).expanduser()
  if not path.exists():
    raise CheckpointError(f"checkpoint path {path} does not exist")
  path = path.resolve()  # Orbax restores only absolute paths
  if STEP_DIR_PATTERN.match(path.name):
    if not is_complete(path):
      raise CheckpointError(
        f"checkpoint {path} is incomplete (no {META_FILE} or {STATE_DIR}/); "
        f"use the run directory {path.parent} to pick its latest complete checkpoint"
      )
    return path
  latest = latest_checkpoint(path)
  if latest is None:
    raise CheckpointError(f"{path} holds no complete checkpoint (expected step directories like 000001048576/)")
  return latest


def read_meta(step_dir: Path) -> dict[str, Any]:
  """A checkpoint's `meta.json` (step, compatibility fingerprint, versions).

  Raises:
    CheckpointError: if it is missing or unreadable.
  """
  try:
    return json.loads((Path(step_dir) / META_FILE).read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise CheckpointError(f"checkpoint {step_dir} has an unreadable {META_FILE}: {e}") from e


# ---- `--list`.


@dataclasses.dataclass
class RunSummary:
  """One line of `--list`."""

  name: str
  env: str
  task: str
  steps_done: int
  steps_planned: int | None
  last_checkpoint: int | None
  last_eval_return: float | None

  @property
  def state(self) -> str:
    if self.last_checkpoint is None:
      return "no checkpoint"
    if self.steps_planned is not None and self.last_checkpoint >= self.steps_planned:
      return "finished"
    return "interrupted"


def summarize(run_dir: Path) -> RunSummary:
  """What `--list` shows for one run directory (its record, checkpoints and TensorBoard scalars)."""
  run_dir = Path(run_dir)
  try:
    record = read_record(run_dir)
  except RunDirError:
    record = {}
  planned = record.get("ppo_config", {}).get("num_timesteps")
  steps = [int(p.name) for p in list_checkpoints(run_dir)]
  try:
    scalars = tensorboard.read_scalars(run_dir)
  except Exception:
    scalars = {}  # a damaged event file: the listing still shows the rest
  logged = [step for points in scalars.values() for step, _ in points]
  evals = [v for _, v in scalars.get("eval/episode_reward", []) if math.isfinite(v)]
  return RunSummary(
    name=run_dir.name,
    env=str(record.get("env", "?")),
    task=str(record.get("task", "?")),
    steps_done=max(logged + steps + [0]),
    steps_planned=int(planned) if planned is not None else None,
    last_checkpoint=steps[-1] if steps else None,
    last_eval_return=evals[-1] if evals else None,
  )


def list_runs(output_dir: Path) -> list[RunSummary]:
  """Summaries of the run directories directly under `output_dir`, by name.

  Raises:
    RunDirError: if `output_dir` is not a directory.
  """
  output_dir = Path(output_dir).expanduser()
  if not output_dir.is_dir():
    raise RunDirError(f"--output_dir {output_dir} is not a directory")
  return [summarize(p) for p in sorted(output_dir.iterdir()) if is_run_dir(p)]


def format_runs(runs: list[RunSummary]) -> list[str]:
  """Aligned lines for `--list`: a header, then one line per run."""
  header = ("run", "env/task", "steps done/planned", "checkpoint", "eval return", "state")
  rows = [header]
  for r in runs:
    planned = f"{r.steps_planned:,}" if r.steps_planned is not None else "?"
    rows.append(
      (
        r.name,
        f"{r.env}/{r.task}",
        f"{r.steps_done:,}/{planned}",
        f"{r.last_checkpoint:,}" if r.last_checkpoint is not None else "-",
        f"{r.last_eval_return:.3f}" if r.last_eval_return is not None else "-",
        r.state,
      )
    )
  widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
  return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
