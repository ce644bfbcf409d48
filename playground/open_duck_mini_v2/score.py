"""Policy scorecard: does the duck walk on command, and stay up when pushed?

    uv run playground/open_duck_mini_v2/score.py checkpoints/<run>            # latest checkpoint
    uv run playground/open_duck_mini_v2/score.py checkpoints/<run>/<step>     # one checkpoint
    uv run playground/open_duck_mini_v2/score.py policy.onnx [--clean] [--seeds 3]
    uv run playground/open_duck_mini_v2/score.py policy.onnx --runtime [--cutoff_frequency 40] [--save_obs DIR]
    uv run playground/open_duck_mini_v2/score.py checkpoints/<run> --set domain_randomization.com_offset=0.05
    uv run playground/open_duck_mini_v2/score.py policy.onnx --servo c001 [--runtime]   # with other servos

Plays the policy in MuJoCo's C engine (`scorecard.score`) on a fixed suite of
commands (stand, forward 0.1 and 0.15 m/s, backward 0.1, sideways +-0.1,
turn +-0.5 and +-1.0 rad/s, a 20 s script that changes the command every
4 s, forward 0.1 with the runtime's 1.3x phase button) and of pushes
(standing and walking at 0.1 m/s with 0.5 m/s kicks every 3 s, and walking
with the training env's kicks), several seeds each. Every episode runs on
its own domain-randomized model with the training env's sensor noise and
action/IMU delays (`--clean` turns all three off). Observations come from
the training env's own functions, or with `--runtime` from an independent
implementation of the Open Duck robot runtime's loop (`runtime.py`: a 2 s
hold, the phase starting at (0, 0), its options `--clip_motor_velocity` and
`--cutoff_frequency`; `--save_obs DIR` writes each entry's first episode
as the runtime's log, to compare with a robot's: check_log.py). `--set
KEY=VALUE` changes the run's env config before playing (e.g. wider
randomization ranges than the policy was trained with). `--servo NAME` plays it with the servos of a profile
(`servos.PROFILES`: gains, force limit, speed limit and their randomization)
instead of those it trained with: will this file work with my servos?

Per command it reports survival time and falls (and why: tipped, sank,
non-finite state or action), the achieved vx / vy / yaw rate in the heading
frame (after a settling second) against the command, tracking errors,
distance, foot slip, joint-limit hits, action smoothness and mechanical
power; a table on stdout, a JSON file and a PNG. The headline: falls
without pushes, falls under pushes, mean velocity-tracking error, speeds
at the 0.1 m/s and 0.5 rad/s commands. The JSON also lists every episode
(command, seed, fell, why, survival time and its model's trunk
centre-of-mass offset), to tell what makes a policy fall.

The policy's ONNX metadata (robot, observation layout, action order, home
pose, control period) must match the model, or it is refused in one line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from playground.common import configs
from playground.common.evaluation.scorecard import table
from playground.common.evaluation.scorecard import write
from playground.common.export import onnx_graph
from playground.common.runner import setup_compilation_cache
from playground.common.runs import checkpoints
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation.policy_io import ScoreError
from playground.open_duck_mini_v2.evaluation.scorecard import score
from playground.open_duck_mini_v2.model import servos

logger = logging.getLogger("playground")


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
  parser = argparse.ArgumentParser(description="Score an Open Duck Mini V2 policy on a fixed command suite.")
  parser.add_argument("path", help="run directory (latest checkpoint), checkpoint directory, or .onnx file")
  parser.add_argument("--seeds", type=int, default=3, help="episodes per command (default 3)")
  parser.add_argument("--seed", type=int, default=0, help="base seed of randomization, noise, delays and pushes")
  parser.add_argument("--clean", action="store_true", help="no domain randomization, sensor noise or delays")
  parser.add_argument("--pushes", action="store_true", help="add the training env's kicks to every entry")
  parser.add_argument(
    "--runtime",
    action="store_true",
    help="observe as the Open Duck robot runtime does (2 s hold, phase from (0, 0)), not with the env's functions",
  )
  parser.add_argument(
    "--clip_motor_velocity",
    action="store_true",
    help="with --runtime: clip each target's change to the policy's max_motor_velocity per step (runtime option)",
  )
  parser.add_argument(
    "--cutoff_frequency", type=float, help="with --runtime: the runtime's low-pass filter on the targets (Hz)"
  )
  parser.add_argument(
    "--save_obs",
    metavar="DIR",
    help="with --runtime: write each entry's first episode as the robot runtime's log, DIR/<entry>.pkl "
    "(compare it with your robot's: check_log.py)",
  )
  parser.add_argument("--task", help="scene (default: the policy's own)")
  parser.add_argument(
    "--servo",
    help=f"play with the servos of this profile, not the policy's own ({', '.join(servos.PROFILES)}; docs/servos.md)",
  )
  configs.add_override_argument(
    parser, help="change the run's env config before playing, e.g. domain_randomization.com_offset=0.05 (repeatable)"
  )
  parser.add_argument("--output", help="directory for score.json and score.png (default: next to the policy)")
  args = parser.parse_args(argv)
  setup_compilation_cache(None)
  try:
    if args.seeds < 1:
      raise ScoreError(f"--seeds must be at least 1, got {args.seeds}")
    if args.save_obs is not None and not args.runtime:
      raise ScoreError("--save_obs writes the robot runtime's log: add --runtime")
    if (args.clip_motor_velocity or args.cutoff_frequency is not None) and not args.runtime:
      raise ScoreError("--clip_motor_velocity and --cutoff_frequency are options of the runtime loop: add --runtime")
    if args.cutoff_frequency is not None and not args.cutoff_frequency > 0:
      raise ScoreError(f"--cutoff_frequency must be a positive frequency in Hz, got {args.cutoff_frequency}")
    if args.servo is not None:
      servos.profile(args.servo)
    overrides = configs.parse_overrides(args.overrides)
    policy_path, env_config, out_dir = policy_io.resolve_policy(args.path)
    options = None
    if args.runtime:
      metadata = policy_io.read_metadata(policy_path)
      options = runtime.RuntimeOptions(
        max_motor_velocity=float(metadata.get("max_motor_velocity", 5.24)) if args.clip_motor_velocity else None,
        cutoff_frequency=args.cutoff_frequency,
      )
    card = score(
      policy_path,
      env_config,
      args.seeds,
      args.clean,
      args.seed,
      args.task,
      pushes=args.pushes,
      overrides=overrides,
      source="runtime" if args.runtime else "env",
      runtime_options=options,
      servo=args.servo,
      save_obs=args.save_obs,
    )
  except (ScoreError, checkpoints.CheckpointError, onnx_graph.ExportError, configs.ConfigError) as e:
    sys.stderr.write(f"error: {e}\n")
    return 2
  # Other conditions than the training ones never overwrite the run's own score.json.
  conditions = (
    ("_runtime", args.runtime),
    ("_clean", args.clean),
    ("_pushes", args.pushes),
    ("_set", bool(overrides)),
    (f"_{args.servo}", args.servo is not None),
  )
  stem = ("score" if Path(args.path).is_dir() else f"{policy_path.stem}_score") + "".join(
    suffix for suffix, on in conditions if on
  )
  json_path, png_path = write(card, Path(args.output) if args.output else out_dir, stem)
  print(table(card))
  logger.info("wrote %s and %s (%.1f s)", json_path, png_path, card["wall_time_s"])
  if args.save_obs is not None:
    logger.info("wrote the runtime's log of each entry's first episode to %s/<entry>.pkl", args.save_obs)
  return 0


if __name__ == "__main__":
  sys.exit(main())
