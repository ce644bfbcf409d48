"""The Open Duck Mini V2's commands: their names, ranges and sampling.

A policy is commanded with 7 numbers, in this order: the base velocity
(`vx`, `vy` in m/s, `yaw_rate` in rad/s) and four head offsets from the home
pose (rad). The observation's `command` block, the policy file's metadata and
input clamp, the tasks' sampling and rewards, the scorecard and playback all
read them from here. A task's `command_config` holds each command's
(low, high) range under its config key (`CONFIG_KEYS`, the names runs have
recorded since the first release); a task whose config names no velocity
range (`standing`) is commanded at zero velocity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jp

from playground.common import configs

NAMES = ("vx", "vy", "yaw_rate", "neck_pitch", "head_pitch", "head_yaw", "head_roll")
SIZE = len(NAMES)
#: Each command's range key in a task's `command_config`.
CONFIG_KEYS = ("lin_vel_x", "lin_vel_y", "ang_vel_yaw", "neck_pitch", "head_pitch", "head_yaw", "head_roll")
#: The base velocity (vx, vy, yaw_rate), its planar part (vx, vy), and the yaw rate's index.
VELOCITY = slice(0, 3)
PLANAR = slice(0, 2)
YAW_RATE = 2
#: The head offsets (neck pitch, head pitch, head yaw, head roll).
HEAD = slice(3, SIZE)
#: rad: the range of each head offset from the home pose that every task trains with.
HEAD_RANGES = {
  "neck_pitch": (-0.34, 1.1),
  "head_pitch": (-0.78, 0.78),
  "head_yaw": (-1.5, 1.5),
  "head_roll": (-0.5, 0.5),
}


def walks(command_config: Mapping[str, Any]) -> bool:
  """Whether a task's commands include a base velocity (its config names the velocity ranges)."""
  return CONFIG_KEYS[0] in command_config


def single_axis_prob(command_config: Mapping[str, Any]) -> float:
  """The share of velocity commands on one axis only (`single_axis_prob`, default 0).

  Raises:
    ConfigError: the value is not a probability in [0, 1].
  """
  value = command_config.get("single_axis_prob", 0.0)
  if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
    raise configs.ConfigError(f"command_config.single_axis_prob must be a probability in [0, 1], got {value!r}")
  return float(value)


def ranges(command_config: Mapping[str, Any]) -> list[tuple[float, float]]:
  """(low, high) of each command a task trains with; (0, 0) for the velocities of a task that stands."""
  keys = CONFIG_KEYS if walks(command_config) else CONFIG_KEYS[HEAD]
  found = [tuple(command_config[k]) for k in keys]
  return found if walks(command_config) else [(0.0, 0.0)] * 3 + found


def velocity_ranges(command_config: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
  """Command name -> (low, high) of the base velocity commands."""
  return dict(zip(NAMES[VELOCITY], ranges(command_config)[VELOCITY]))


def sample(rng: jax.Array, command_config: Any) -> jax.Array:
  """One episode segment's command [7], uniform in each range.

  A share `zero_command_prob` of the velocity commands and `zero_head_prob`
  of the head commands are zero; a task that stands has zero velocity. A
  share `single_axis_prob` (default 0) of the velocity commands moves on one
  axis only, forward, sideways or turning with equal odds: the pure walks,
  side steps and turns that a joystick sends and the scorecard plays, which
  three uniform draws almost never give. At 0 the draws are those of
  configs without the key.
  """
  c = command_config
  if walks(c):
    single = single_axis_prob(c)
    if single:
      rng, axis_key, single_key = jax.random.split(rng, 3)
    keys = jax.random.split(rng, SIZE + 2)
    bounds = [c[k] for k in CONFIG_KEYS]
    values = jp.array([jax.random.uniform(k, (), minval=lo, maxval=hi) for k, (lo, hi) in zip(keys[:SIZE], bounds)])
    zero_vel = jax.random.bernoulli(keys[SIZE], c.zero_command_prob)
    zero_head = jax.random.bernoulli(keys[SIZE + 1], c.zero_head_prob)
    velocity = jp.full(3, ~zero_vel)
    if single:
      axis = jax.random.randint(axis_key, (), 0, 3)
      velocity &= jp.where(jax.random.bernoulli(single_key, single), jp.arange(3) == axis, True)
    mask = jp.concatenate([velocity, jp.full(4, ~zero_head)])
    return values * mask
  head_keys = CONFIG_KEYS[HEAD]
  keys = jax.random.split(rng, len(head_keys) + 1)
  bounds = [c[k] for k in head_keys]
  head = jp.array([jax.random.uniform(k, (), minval=lo, maxval=hi) for k, (lo, hi) in zip(keys[:-1], bounds)])
  head = head * ~jax.random.bernoulli(keys[-1], c.zero_head_prob)
  return jp.concatenate([jp.zeros(3), head])
