"""The scorecard's fixed-push entries with many seeds: push falls with less sampling noise.

The in-run scorecard plays each push entry (0.5 m/s kicks every 3 s for
10 s, standing and walking at 0.1 m/s) with 12 seeds, and every checkpoint
draws the same models, noise and kick directions; one entry's count moves
by up to 6 of 12 between draws (docs/research-log.md). This plays only
those two entries, with `--seeds` episodes each (scorecard conditions:
randomization, noise and delays on), and prints falls, survival, kicks and
fall causes per entry as JSON.

  uv run python -m benchmarks.push_entries checkpoints/<run>/<step> --seeds 36
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import emit
from benchmarks.common import machine


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("path", help="run directory, checkpoint directory or .onnx file")
  parser.add_argument("--seeds", type=int, default=36, help="episodes per entry")
  parser.add_argument("--seed", type=int, default=0, help="base seed of models, noise, delays and kicks")
  parser.add_argument("--runtime", action="store_true", help="observe as the robot runtime does")
  args = parser.parse_args()
  if args.seeds < 1:
    raise SystemExit(f"error: --seeds must be at least 1, got {args.seeds}")

  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.evaluation import scorecard

  policy_path, env_config, _ = policy_io.resolve_policy(Path(args.path))
  # The suite's entries with its fixed kicks (`scorecard.FIXED_PUSHES`); `score` would play the whole suite for none.
  commands = [c for c in scorecard.suite() if c.pushes == scorecard.FIXED_PUSHES]
  if not commands:
    raise SystemExit("error: the scorecard suite has no fixed-push entries")
  card = scorecard.score(
    policy_path,
    env_config,
    seeds=args.seeds,
    seed=args.seed,
    commands=commands,
    source="runtime" if args.runtime else "env",
  )
  entries = {
    c.name: {k: card["commands"][c.name][k] for k in ("episodes", "falls", "survival_s", "pushes", "fall_causes")}
    for c in commands
  }
  emit(
    {
      "policy": str(policy_path),
      "training_step": card["training_step"],
      "source": card["source"],
      "seeds": args.seeds,
      "seed": args.seed,
      "conditions": card["conditions"],
      "machine": machine(),
      "falls": sum(e["falls"] for e in entries.values()),
      "episodes": sum(e["episodes"] for e in entries.values()),
      "entries": entries,
    }
  )


if __name__ == "__main__":
  main()
