"""JIT compile time of the training step, cold and with a warm persistent cache.

Runs `benchmarks.train_throughput --compile_only` twice in fresh processes
sharing a new, empty cache directory: the first compiles from scratch, the
second reads the persistent cache. Prints JSON with both times and the ratio.

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


def compile_once(args, cache_dir: str) -> dict:
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
  ]
  out = subprocess.run(cmd, capture_output=True, text=True, check=True)
  return json.loads(out.stdout)["results"][0]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--env", default="joystick")
  parser.add_argument("--task", default="flat_terrain")
  parser.add_argument("--preset", default="quick")
  args = parser.parse_args()
  with tempfile.TemporaryDirectory() as cache_dir:
    cold_run = compile_once(args, cache_dir)
    warm_run = compile_once(args, cache_dir)
  cold, warm = cold_run["compile_s"], warm_run["compile_s"]
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
          # Python tracing + lowering, which no compilation cache can skip.
          "cold_trace_s": cold_run["trace_s"],
          "warm_trace_s": warm_run["trace_s"],
        }
      ],
    }
  )


if __name__ == "__main__":
  main()
