"""Train MuJoCo Playground's CartpoleBalance/CartpoleSwingup with our PPO runner.

A sanity check of the whole pipeline (MJX, PPO, TensorBoard, checkpoints)
that needs no downloads and learns in a few minutes on a laptop CPU:

    uv run playground/cartpole/runner.py --env balance --preset quick

It is also the smallest example of a robot runner: see "Add your own robot"
in the README.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ml_collections import config_dict

from playground.common import hyperparameters
from playground.common.runner import BaseRunner

#: --env name -> MuJoCo Playground registry name.
ENVS = {"balance": "CartpoleBalance", "swingup": "CartpoleSwingup"}


def ppo_config(env_name: str, preset: str) -> config_dict.ConfigDict:
  """PPO settings for the cartpole tasks."""
  del env_name
  c = hyperparameters.default_config()
  c.update(
    dict(
      num_timesteps=5_000_000,
      num_envs=1024,
      unroll_length=30,
      batch_size=512,
      num_minibatches=16,
      num_updates_per_batch=8,
      learning_rate=1e-3,
      entropy_cost=1e-2,
      discounting=0.97,
      reward_scaling=10.0,
      max_grad_norm=1.0,
      policy_hidden_layer_sizes=(32, 32, 32, 32),
      value_hidden_layer_sizes=(64, 64, 64),
      activation="swish",
      num_eval_envs=64,
      eval_every=1_000_000,
      log_every=200_000,
      # Brax's default initialization: a random untrained policy.
      init_noise_std=0.694,
      init_action_mean_scale=1.0,
      checkpoint_every=1_000_000,
      keep_last=3,
    )
  )
  if preset == "quick":
    c.update(
      dict(
        num_timesteps=3_000_000,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=16,
        num_updates_per_batch=4,
        num_eval_envs=16,
        eval_every=300_000,
        log_every=300_000,
        checkpoint_every=1_500_000,
      )
    )
  elif preset == "smoke":
    c.update(
      dict(
        num_timesteps=8_192,
        num_envs=16,
        batch_size=16,
        num_minibatches=4,
        unroll_length=16,
        num_updates_per_batch=1,
        num_eval_envs=4,
        eval_every=8_192,
        log_every=4_096,
        checkpoint_every=8_192,
      )
    )
  return c


class CartpoleRunner(BaseRunner):
  """Runner for MuJoCo Playground's cartpole (no robot-specific code)."""

  robot = "cartpole"
  default_env = "balance"
  default_task = "default"

  def env_names(self) -> Sequence[str]:
    return tuple(ENVS)

  def task_names(self, env_name: str) -> Sequence[str]:
    del env_name
    return ("default",)

  def default_env_config(self, env_name: str) -> config_dict.ConfigDict:
    from mujoco_playground import registry  # loads JAX: not at import, the CLI checks flags first

    config = registry.get_default_config(ENVS[env_name])
    config.impl = "jax"  # the faster implementation on CPU for this tiny model
    return config

  def make_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict):
    from mujoco_playground import registry  # loads JAX: not at import, the CLI checks flags first

    del task
    return registry.load(ENVS[env_name], config=env_config)

  def make_randomizer(self, env, env_config):
    del env, env_config
    return None

  def ppo_config(self, env_name: str, preset: str) -> config_dict.ConfigDict:
    return ppo_config(env_name, preset)

  def policy_contract(self, env, env_config):
    """The mirror only: the reflection through the rail's middle, where cart position, pole
    sine, both velocities and the force change sign (observation: x, cos, sin, x', angle')."""
    from playground.common.export.contract import PolicyContract
    from playground.common.tasks import symmetry

    del env, env_config
    flip = symmetry.SignedPermutation((0, 1, 2, 3, 4), (-1.0, 1.0, -1.0, -1.0, -1.0))
    return PolicyContract(mirror=symmetry.Mirror(observation=flip, action=symmetry.SignedPermutation((0,), (-1.0,))))


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  return CartpoleRunner.main(argv)


if __name__ == "__main__":
  sys.exit(main())
