"""Standing task: keep balance and track head commands at zero base velocity."""

from __future__ import annotations

import jax
import jax.numpy as jp
from ml_collections import config_dict

from playground.common.tasks import rewards
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.tasks import base


def default_config() -> config_dict.ConfigDict:
  """Default configuration of the standing task."""
  config = base.base_config()
  config.command_config = config_dict.ConfigDict(
    dict(
      **commands.HEAD_RANGES,  # rad, offsets added to the home pose
      zero_head_prob=0.3,
      resample_interval=(2.0, 5.0),
    )
  )
  config.reward_config = config_dict.ConfigDict(
    dict(
      scales=dict(
        head_tracking=2.0,
        base_velocity=1.0,
        torques=-1.0e-3,
        action_rate=-0.5,
        stand_still=-0.5,
        alive=20.0,
        termination=0.0,
        orientation=-5.0,
        base_height=0.0,
      ),
      tracking_sigma=0.01,
      head_tracking_sigma=0.1,
      base_height_target=0.16,
    )
  )
  return config


class Standing(base.OpenDuckMiniV2Env):
  """Balance in place while following neck/head commands."""

  @classmethod
  def default_config(cls) -> config_dict.ConfigDict:
    return default_config()

  def sample_command(self, rng: jax.Array) -> jax.Array:
    return commands.sample(rng, self._config.command_config)

  def compute_rewards(self, readings: observations.Readings, step: observations.StepContext) -> dict[str, jax.Array]:
    command, action, last_action, terminated = step.command, step.action, step.last_action, step.terminated
    cfg = self._config.reward_config
    head = self._ids.head_act
    legs = jp.array([i for i in range(observations.NUM_ACTIONS) if i not in set(head.tolist())])
    terms = {
      "head_tracking": lambda: rewards.joint_tracking(
        command[commands.HEAD], readings.joint_pos[head], cfg.head_tracking_sigma
      ),
      "base_velocity": lambda: (
        rewards.tracking_lin_vel(jp.zeros(2), readings.local_linvel[:2], cfg.tracking_sigma)
        * rewards.tracking_ang_vel(jp.zeros(()), readings.gyro[2], cfg.tracking_sigma)
      ),
      "torques": lambda: rewards.torques(readings.actuator_force),
      "action_rate": lambda: rewards.action_rate(action, last_action),
      "stand_still": lambda: rewards.stand_still(jp.zeros(3), readings.joint_pos[legs]),
      "alive": rewards.alive,
      "termination": lambda: rewards.termination(terminated),
      "orientation": lambda: rewards.orientation(readings.gravity),
      "base_height": lambda: rewards.base_height(readings.base_height[0], cfg.base_height_target),
    }
    unknown = set(self.active_reward_terms) - set(terms)
    if unknown:
      raise ValueError(f"reward_config.scales has unknown terms {sorted(unknown)}")
    return {name: terms[name]() for name in self.active_reward_terms}
