"""Checks a robot's log: which runtime contract it speaks, setup faults, the servos, and the policy it ran.

    uv run playground/open_duck_mini_v2/check_log.py robot_saved_obs.pkl    # against this project's contract
    uv run playground/open_duck_mini_v2/check_log.py robot_saved_obs.pkl --policy duck.onnx
    uv run playground/open_duck_mini_v2/check_log.py robot_saved_obs.pkl --policy duck.onnx --no_sim

The log is what the Open Duck runtime writes with `--save_obs` (`uv run walk
--save_obs 1`): the observations its loop fed the policy, pickled. It is read
without running code (numpy arrays, lists and numbers only). One line per
finding on stdout (`diagnosis.check`): the contract the runtime speaks (IMU
slots and order, joint-velocity scale, phase rule, head mix, init_pos),
setup faults (IMU mounting, joint offsets at rest, foot switches) and the
servos (lag and speed against the file's servo profile). With `--policy`:
the file's metadata is the reference, the file is replayed on the logged
observations (the logged actions must be its outputs), and it is played in
simulation for the log's commands to name the observation slots where the
robot leaves the simulated range (a PNG of them, next to the log unless
`--plot`). What each finding means and how to fix it: docs/on-the-robot.md.

Exit status: 0 when no finding is an error, 1 when one is, 2 when the log or
the file cannot be read (one line on stderr).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from playground.open_duck_mini_v2.evaluation import diagnosis
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import robot_log
from playground.open_duck_mini_v2.evaluation import sim_gap

logger = logging.getLogger("playground")


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
  parser = argparse.ArgumentParser(description="Check an Open Duck runtime log (robot_saved_obs.pkl).")
  parser.add_argument("log", help=f"the runtime's --save_obs file ({robot_log.RUNTIME_LOG_NAME})")
  parser.add_argument("--policy", help="the .onnx file the robot ran: its metadata is the reference; replayed")
  parser.add_argument("--no_sim", action="store_true", help="with --policy: skip the comparison with the simulation")
  parser.add_argument("--robots", type=int, default=2, help="simulated robots to compare with (default 2)")
  parser.add_argument("--seed", type=int, default=0, help="seed of the simulated robots")
  parser.add_argument("--plot", help="PNG of the robot against the simulation (default: <log>_vs_sim.png)")
  args = parser.parse_args(argv)
  try:
    if args.robots < 1:
      raise robot_log.LogError(f"--robots must be at least 1, got {args.robots}")
    obs = robot_log.load(args.log)
    env_config = None
    if args.policy:
      policy_path, env_config, _ = policy_io.resolve_policy(args.policy)
      metadata = policy_io.read_metadata(policy_path)
      ref = robot_log.Reference.of_metadata(metadata, f"{policy_path.name}'s metadata")
    else:
      ref = robot_log.Reference.of_metadata(None, "the contract this project's files are made for (no --policy)")
    findings = diagnosis.check(obs, ref)
    if args.policy:
      findings.append(diagnosis.replay(obs, policy_io.onnx_policy(policy_path, batched=True)))
      if not args.no_sim:
        logger.info("playing %s in simulation for the log's commands (%d robots)...", policy_path.name, args.robots)
        plot_path = Path(args.plot) if args.plot else Path(args.log).with_name(Path(args.log).stem + "_vs_sim.png")
        try:
          finding, _ = sim_gap.compare(
            obs, policy_path, ref, env_config, robots=args.robots, seed=args.seed, plot_path=plot_path
          )
        except policy_io.ScoreError as e:  # a file of another project: everything but the simulation
          finding = robot_log.Finding("sim", "info", f"not simulated: {e}")
        findings.append(finding)
  except (robot_log.LogError, policy_io.ScoreError) as e:
    sys.stderr.write(f"error: {e}\n")
    return 2
  for finding in findings:
    print(finding.line())
  return robot_log.exit_status(findings)


if __name__ == "__main__":
  sys.exit(main())
