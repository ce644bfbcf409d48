"""JIT compile time of the training step, cold and with a warm persistent cache.

Runs `benchmarks.train_throughput --compile_only` in four fresh processes.
The first two share a new, empty cache directory: the first compiles from
scratch (filling both caches), the second starts warm the way the runner does
(step cache + XLA's persistent cache). The last two repeat that in another
directory with `--no_step_cache`: XLA's persistent cache alone, which still
traces and lowers the step in Python. Prints JSON with the times and ratios.

    uv run python -m benchmarks.compile_time --preset quick
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

from benchmarks.common import emit
from benchmarks.common import machine


def compile_once(args, cache_dir: str, *extra: str) -> dict:
  cmd = [
    sys.executable,
    "-m",
    "benchmarks.train_throughput",
    "--compile_only",
    "--cache_dir",
    cache_dir,
    "--preset",
    args.preset,
    "--env",
    args.env,
    "--task",
    args.task,
    *extra,
  ]
  out = subprocess.run(cmd, capture_output=True, text=True, check=True)
  return json.loads(out.stdout)["results"][0]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--env", default="joystick")
  parser.add_argument("--task", default="flat_terrain")
  parser.add_argument("--preset", default="quick")
  args = parser.parse_args()
  with tempfile.TemporaryDirectory() as cache_dir, tempfile.TemporaryDirectory() as xla_dir:
    cold_run = compile_once(args, cache_dir)
    warm_run = compile_once(args, cache_dir)
    xla_cold_run = compile_once(args, xla_dir, "--no_step_cache")
    xla_only_run = compile_once(args, xla_dir, "--no_step_cache")
  cold, warm, xla_only = cold_run["compile_s"], warm_run["compile_s"], xla_only_run["compile_s"]
  emit(
    {
      "benchmark": "compile_time",
      "machine": machine(),
      "results": [
        {
          "env": args.env,
          "task": args.task,
          "preset": args.preset,
          "cold_compile_s": cold,
          "warm_compile_s": warm,
          "warm_to_cold": round(warm / cold, 4),
          "warm_step_cache": warm_run["step_cache"],
          # Without the step cache (its own cache directory): Python tracing +
          # lowering run on every start.
          "cold_xla_cache_only_s": xla_cold_run["compile_s"],
          "warm_xla_cache_only_s": xla_only,
          "warm_xla_cache_only_to_cold": round(xla_only / cold, 4),
          "warm_xla_cache_only_trace_s": xla_only_run["trace_s"],
        }
      ],
    }
  )


if __name__ == "__main__":
  main()
