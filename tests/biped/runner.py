"""The test biped's runner: `BaseRunner` with the biped's envs, randomization, PPO settings and contract.

    python tests/biped/runner.py --preset smoke --output_dir /tmp/runs

Uses only what the library documents for a new robot (docs/adding-a-robot.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ml_collections import config_dict

from playground.common import hyperparameters
from playground.common.runner import BaseRunner


class BipedRunner(BaseRunner):
  """Runner for the test biped's one env, `walk`."""

  robot = "test_biped"
  default_env = "walk"
  default_task = "flat"

  def env_names(self) -> Sequence[str]:
    return ("walk",)

  def task_names(self, env_name: str) -> Sequence[str]:
    del env_name
    return ("flat",)

  def default_env_config(self, env_name: str) -> config_dict.ConfigDict:
    import biped  # loads JAX: only once the command line has been checked

    del env_name
    return biped.default_config()

  def make_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict):
    import biped

    del env_name, task
    return biped.Walk(env_config)

  def make_randomizer(self, env, env_config: config_dict.ConfigDict):
    import biped

    from playground.common.tasks import randomize

    if not env_config.domain_randomization.enabled:
      return None
    targets = randomize.RandomizationTargets(biped.FLOOR_GEOM, biped.TRUNK_BODY, biped.ACTUATOR_NAMES)
    return randomize.make_randomization_fn(env.mj_model, targets, env_config.domain_randomization)

  def ppo_config(self, env_name: str, preset: str) -> config_dict.ConfigDict:
    del env_name
    c = hyperparameters.default_config()
    c.update(policy_hidden_layer_sizes=(32, 32), value_hidden_layer_sizes=(32, 32), num_eval_envs=4)
    if preset == "smoke":
      c.update(
        num_timesteps=1280, num_envs=16, batch_size=16, num_minibatches=4, unroll_length=20,
        num_updates_per_batch=1, eval_every=1280, log_every=640, checkpoint_every=1280,
      )  # fmt: skip
    return c

  def policy_contract(self, env, env_config: config_dict.ConfigDict):
    """The biped's metadata, its command clamped to the trained range, its home pose as a probe, its mirror."""
    import biped
    import numpy as np

    from playground.common.export.contract import PolicyContract

    home = np.zeros((1, biped.LAYOUT.size), np.float32)
    home[0, biped.LAYOUT.slices["upvector"]] = (0.0, 0.0, 1.0)
    return PolicyContract(
      metadata={
        "observation_layout": biped.LAYOUT.to_json(),
        "action_names": list(biped.ACTUATOR_NAMES),
        "command_names": list(biped.COMMAND_NAMES),
        "command_range": {"vx": list(env_config.command_range)},
        "action_scale": float(env_config.action_scale),
        "control_period_s": float(env_config.ctrl_dt),
      },
      input_bounds=biped.observation_bounds(env_config),
      probe_observations=home,
      mirror=biped.mirror(env.mj_model),
    )

  def score_suite(self, env_name: str):
    """Standing, walking at 0.1 and 0.2 m/s, and walking under 0.3 m/s kicks, 3 s each."""
    import biped

    from playground.common.evaluation.scorecard import Command
    from playground.common.evaluation.scorecard import Pushes
    from playground.common.evaluation.scorecard import Suite

    del env_name
    kicks = Pushes(magnitude=(0.3, 0.3), interval=(1.0, 1.0))
    return Suite(
      commands=(
        Command("stand", ((0.0, 0.0),), 3.0),
        Command("forward_0.1", ((0.0, 0.1),), 3.0),
        Command("forward_0.2", ((0.0, 0.2),), 3.0),
        Command("push_forward_0.1_0.3", ((0.0, 0.1),), 3.0, pushes=kicks),
      ),
      command_names=biped.COMMAND_NAMES,
      walking_speeds={"vx_at_0.1": 0.07},
    )


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  return BipedRunner.main(argv)


if __name__ == "__main__":
  sys.exit(main())
