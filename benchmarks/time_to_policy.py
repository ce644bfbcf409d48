"""Wall-clock time to a trained policy: the runner's own command, end to end.

Runs `playground/open_duck_mini_v2/runner.py` as a subprocess once per
`--cpu_devices` value, one after the other, each with an empty compilation
cache (cold start) and its own output directory, and reports the wall-clock
time, the evaluation curve, the training throughput and the time spent in
evaluations, read back from the run's TensorBoard files.

  uv run python -m benchmarks.time_to_policy --preset quick --cpu_devices auto 1
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
from playground.common.runs.tensorboard import read_scalars

RUNNER = Path(__file__).resolve().parents[1] / "playground" / "open_duck_mini_v2" / "runner.py"


def one_run(args: argparse.Namespace, cpu_devices: str, work: Path) -> dict:
  """Trains once from a cold cache; returns the measurements."""
  name = f"devices-{cpu_devices}"
  command = [
    sys.executable, str(RUNNER), "--env", args.env, "--task", args.task, "--preset", args.preset,
    "--output_dir", str(work / "runs"), "--exp_name", name, "--cpu_devices", cpu_devices,
    "--compilation_cache_dir", str(work / f"cache-{name}"),
  ]  # fmt: skip
  if args.num_timesteps:
    command += ["--num_timesteps", str(args.num_timesteps)]
  start = time.monotonic()
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  wall = time.monotonic() - start
  if result.returncode != 0:
    raise SystemExit(f"run {name} failed:\n{result.stderr[-3000:]}")
  run_dir = work / "runs" / name
  config = json.loads((run_dir / "config.json").read_text())
  scalars = read_scalars(run_dir)
  sps = [v for _, v in scalars.get("perf/sps", [])]
  return {
    "cpu_devices": cpu_devices,
    "device_count": config["device_count"],
    "wall_clock_s": round(wall, 1),
    "compile_time_s": round(scalars["perf/compile_time_s"][0][1], 1) if "perf/compile_time_s" in scalars else None,
    "train_steps_per_s_median": round(sorted(sps)[len(sps) // 2], 1) if sps else None,
    "eval_walltime_s_total": round(sum(v for _, v in scalars.get("eval/walltime", [])), 1),
    "eval_curve": [
      {"step": int(s), "reward": round(r, 1), "length": round(length, 1)}
      for (s, r), (_, length) in zip(scalars["eval/episode_reward"], scalars["eval/episode_length"])
    ],
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--env", default="joystick")
  parser.add_argument("--task", default="flat_terrain")
  parser.add_argument("--preset", default="quick")
  parser.add_argument("--num_timesteps", type=int, help="default: the preset's")
  parser.add_argument("--cpu_devices", nargs="+", default=["auto", "1"])
  args = parser.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  with tempfile.TemporaryDirectory(prefix="time_to_policy-") as tmp:
    runs = [one_run(args, value, Path(tmp)) for value in args.cpu_devices]
  emit({"benchmark": "time_to_policy", "machine": machine(), "preset": args.preset, "task": args.task, "runs": runs})


if __name__ == "__main__":
  main()
