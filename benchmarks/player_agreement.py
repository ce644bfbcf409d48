"""Two players, one policy: the generic MJX player against the duck's MuJoCo C player.

    uv run python -m benchmarks.player_agreement tests/fixtures/walker/policy.onnx --seeds 4

The generic player (`playground.common.evaluation.player`) plays any robot's
MJX env as it trains; the Open Duck Mini V2's player steps MuJoCo's C engine
and observes through the env's functions (`open_duck_mini_v2/evaluation/player.py`).
They share the scorecard arithmetic and nothing else that moves the robot:
physics engine, command setting, velocity measurement and fall check are
written apart. Both play the same file on the same entries (standing, 0.1 m/s
forward and backward, 0.5 rad/s turns, no pushes), in the env config the
scorecard plays a file in (`OpenDuckMiniV2Runner.play_env_config`: the file
adds the reference gait, the env does not; the env's own kicks off), with the
training randomization, noise and delays, and print both cards' per-entry falls and velocities. Where
they disagree by more than the spread across seeds, one of them is wrong.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.common import emit
from benchmarks.common import machine

ENTRIES = {
  "stand": (0.0, 0.0, 0.0),
  "forward_0.1": (0.1, 0.0, 0.0),
  "backward_0.1": (-0.1, 0.0, 0.0),
  "turn_left_0.5": (0.0, 0.0, 0.5),
  "turn_right_0.5": (0.0, 0.0, -0.5),
}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("policy", help="an .onnx file next to its run's config.json")
  parser.add_argument("--seeds", type=int, default=4, help="episodes per entry")
  args = parser.parse_args()
  from ml_collections import config_dict

  from playground.common.evaluation import player
  from playground.common.evaluation.scorecard import Command
  from playground.common.evaluation.scorecard import Suite
  from playground.common.runs.arguments import RunArgs
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.evaluation import scorecard
  from playground.open_duck_mini_v2.model import commands
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  policy_path, env_config, _ = policy_io.resolve_policy(Path(args.policy))
  metadata = policy_io.read_metadata(policy_path)
  entries = tuple(Command(name, ((0.0, *v),)) for name, v in ENTRIES.items())
  cards = {}
  started = time.monotonic()
  cards["c"] = scorecard.score(policy_path, env_config, seeds=args.seeds, commands=entries)
  c_seconds = time.monotonic() - started
  runner = OpenDuckMiniV2Runner(RunArgs(env=metadata["env"], task=metadata["task"]))
  # As the C player plays it: the feed-forward is the file's, pushes are the entries' (none here).
  config = runner.play_env_config(metadata["env"], config_dict.ConfigDict(env_config))
  env = runner.make_env(metadata["env"], metadata["task"], config)
  suite = Suite(entries, commands.NAMES, seeds=args.seeds)
  started = time.monotonic()
  cards["mjx"] = player.score(policy_path, env, suite, runner.make_randomizer(env, config))
  mjx_seconds = time.monotonic() - started
  rows = {
    name: {
      player_name: {
        "falls": card["commands"][name]["falls"],
        "episodes": card["commands"][name]["episodes"],
        **card["commands"][name]["achieved"],
      }
      for player_name, card in cards.items()
    }
    for name in ENTRIES
  }
  emit(
    {
      "benchmark": "player_agreement",
      "policy": str(policy_path),
      "seeds": args.seeds,
      "entries": rows,
      "wall_s": {"c": round(c_seconds, 1), "mjx": round(mjx_seconds, 1)},
      "machine": machine(),
    },
  )


if __name__ == "__main__":
  main()
