"""SIGKILL during a checkpoint save: does the latest checkpoint still load?

Each trial starts (or resumes) a smoke run that saves every iteration, waits
until a checkpoint is being written (a `.tmp-*` directory exists next to at
least one complete checkpoint), sleeps a random fraction of a typical save,
and kills the process with SIGKILL. It then loads the latest complete
checkpoint with `playground.common.runs.checkpoints` (what `--resume` would
use). Prints JSON: how many trials left a loadable latest checkpoint
(target: all).

    uv run python -m benchmarks.kill_during_save --trials 10
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import emit
from benchmarks.common import machine

REPO_ROOT = Path(__file__).resolve().parents[1]
DUCK = REPO_ROOT / "playground" / "open_duck_mini_v2" / "runner.py"


def _saving(run_dir: Path) -> bool:
  from playground.common.runs import directories

  if not run_dir.is_dir():
    return False
  writing = any(p.name.startswith(".tmp-") for p in run_dir.iterdir())
  return writing and bool(directories.list_checkpoints(run_dir))


def trial(output_dir: Path, resume: bool, max_delay_s: float, rng: random.Random, timeout_s: float) -> dict:
  """One start-and-kill; returns what was observed and whether the latest checkpoint loads."""
  from playground.common.runs import checkpoints

  run_dir = output_dir / "killed"
  flags = ["--num_timesteps", "100000000", "--checkpoint_every", "1280", "--keep_last", "3"]
  command = [sys.executable, str(DUCK), "--preset", "smoke", "--output_dir", str(output_dir), "--exp_name", "killed"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.Popen(
    command + flags + (["--resume"] if resume else []),
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    env=env,
    cwd=REPO_ROOT,
  )
  deadline, caught = time.monotonic() + timeout_s, False
  while time.monotonic() < deadline and proc.poll() is None:
    if _saving(run_dir):
      caught = True
      break
    time.sleep(0.005)
  delay = rng.uniform(0.0, max_delay_s)
  time.sleep(delay)
  was_writing = _saving(run_dir)
  proc.send_signal(signal.SIGKILL)
  proc.wait(timeout=60)
  latest = checkpoints.latest_checkpoint(run_dir)
  loadable, error = False, None
  if latest is not None:
    try:
      import orbax.checkpoint as ocp

      with ocp.StandardCheckpointer() as checkpointer:
        tree = checkpointer.restore(latest / checkpoints.STATE_DIR)
      loadable = bool(tree["training_state"]["params"]["policy"])
    except Exception as e:  # noqa: BLE001 - any failure means not loadable
      error = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
  return {
    "caught_a_save": caught,
    "delay_s": round(delay, 3),
    "killed_while_writing": was_writing,
    "latest": latest.name if latest else None,
    "loadable": loadable,
    "error": error,
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--trials", type=int, default=10)
  parser.add_argument("--max_delay_s", type=float, default=0.3, help="kill within this long after a save starts")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--timeout_s", type=float, default=600.0, help="per trial, to the first save seen")
  args = parser.parse_args()
  rng = random.Random(args.seed)
  work = Path(tempfile.mkdtemp(prefix="kill_during_save-"))
  trials = []
  start = time.monotonic()
  try:
    for i in range(args.trials):
      trials.append(trial(work, i > 0 and (work / "killed").is_dir(), args.max_delay_s, rng, args.timeout_s))
  finally:
    shutil.rmtree(work, ignore_errors=True)
  emit(
    {
      "benchmark": "kill_during_save",
      "machine": machine(),
      "trials": len(trials),
      "killed_while_writing": sum(t["killed_while_writing"] for t in trials),
      "loadable_latest": sum(t["loadable"] for t in trials),
      "wall_s": round(time.monotonic() - start, 1),
      "details": trials,
    }
  )


if __name__ == "__main__":
  main()
