"""Joystick task: track a base velocity command and a head pose command.

The command (vx, vy, yaw rate, neck_pitch, head_pitch, head_yaw, head_roll)
is resampled every few seconds; a configurable share of the velocity commands
is exactly zero so that the policy also learns to stand still.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jp
from ml_collections import config_dict

from playground.common import rewards
from playground.open_duck_mini_v2 import base
from playground.open_duck_mini_v2 import observations as obs_lib


def default_config() -> config_dict.ConfigDict:
  """Default configuration of the joystick task."""
  config = base.base_config()
  config.command_config = config_dict.ConfigDict(
      dict(
          lin_vel_x=(-0.15, 0.15),  # m/s
          lin_vel_y=(-0.2, 0.2),  # m/s
          ang_vel_yaw=(-1.0, 1.0),  # rad/s
          neck_pitch=(-0.34, 1.1),  # rad, offsets added to the home pose
          head_pitch=(-0.78, 0.78),
          head_yaw=(-1.5, 1.5),
          head_roll=(-0.5, 0.5),
          zero_command_prob=0.2,  # share of zero velocity commands
          zero_head_prob=0.5,  # share of zero head commands
          resample_interval=(4.0, 8.0),  # s
      )
  )
  config.reward_config = config_dict.ConfigDict(
      dict(
          scales=dict(
              tracking_lin_vel=2.5,
              tracking_ang_vel=6.0,
              head_tracking=1.0,
              torques=-1.0e-3,
              action_rate=-0.5,
              stand_still=-0.2,
              alive=20.0,
              termination=0.0,
              orientation=-1.0,
              lin_vel_z=0.0,
              ang_vel_xy=-0.05,
              feet_air_time=1.0,
              feet_slip=-0.1,
          ),
          tracking_sigma=0.01,
          head_tracking_sigma=0.1,
          feet_air_time_threshold=0.2,
      )
  )
  return config


class Joystick(base.OpenDuckMiniV2Env):
  """Velocity + head command tracking for the Open Duck Mini V2."""

  @classmethod
  def default_config(cls) -> config_dict.ConfigDict:
    return default_config()

  def sample_command(self, rng: jax.Array) -> jax.Array:
    c = self._config.command_config
    keys = jax.random.split(rng, 9)
    ranges = (c.lin_vel_x, c.lin_vel_y, c.ang_vel_yaw, c.neck_pitch, c.head_pitch, c.head_yaw, c.head_roll)
    values = jp.array([
        jax.random.uniform(k, (), minval=lo, maxval=hi) for k, (lo, hi) in zip(keys[:7], ranges)
    ])
    zero_vel = jax.random.bernoulli(keys[7], c.zero_command_prob)
    zero_head = jax.random.bernoulli(keys[8], c.zero_head_prob)
    mask = jp.concatenate([jp.full(3, ~zero_vel), jp.full(4, ~zero_head)])
    return values * mask

  def compute_rewards(
      self,
      readings: obs_lib.Readings,
      info: dict[str, Any],
      action: jax.Array,
      terminated: jax.Array,
      first_contact: jax.Array,
  ) -> dict[str, jax.Array]:
    cfg = self._config.reward_config
    command = info["command"]
    head = self._ids.head_act
    terms = {
        "tracking_lin_vel": lambda: rewards.tracking_lin_vel(
            command[:2], readings.local_linvel[:2], cfg.tracking_sigma
        ),
        "tracking_ang_vel": lambda: rewards.tracking_ang_vel(
            command[2], readings.gyro[2], cfg.tracking_sigma
        ),
        "head_tracking": lambda: rewards.head_tracking(
            command[3:7], readings.joint_pos[head], cfg.head_tracking_sigma
        ),
        "torques": lambda: rewards.torques(readings.actuator_force),
        "action_rate": lambda: rewards.action_rate(action, info["last_actions"][0]),
        "stand_still": lambda: rewards.stand_still(command[:3], readings.joint_pos),
        "alive": rewards.alive,
        "termination": lambda: rewards.termination(terminated),
        "orientation": lambda: rewards.orientation(readings.gravity),
        "lin_vel_z": lambda: rewards.lin_vel_z(readings.global_linvel),
        "ang_vel_xy": lambda: rewards.ang_vel_xy(readings.global_angvel),
        "feet_air_time": lambda: rewards.feet_air_time(
            info["feet_air_time"], first_contact, command[:3], cfg.feet_air_time_threshold
        ),
        "feet_slip": lambda: rewards.feet_slip(
            readings.feet_contacts, readings.feet_vel.reshape(2, 3)[:, :2]
        ),
    }
    unknown = set(self.active_reward_terms) - set(terms)
    if unknown:
      raise ValueError(f"reward_config.scales has unknown terms {sorted(unknown)}")
    return {name: terms[name]() for name in self.active_reward_terms}
