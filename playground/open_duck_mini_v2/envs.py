"""The Open Duck Mini V2's environment table: names, classes, command ranges, randomization targets.

A leaf module (it imports no other module of the package at import time)
that the runner, the scorecard and playback share.
"""

from __future__ import annotations

from ml_collections import config_dict

from playground.common import config as config_lib
from playground.open_duck_mini_v2 import constants as consts

ENVS = ("joystick", "standing")


def env_class(env_name: str):
  """The environment class of `env_name` (see `ENVS`), imported on demand.

  Imported lazily: the command line is validated before JAX is loaded.
  """
  config_lib.check_choice("--env", env_name, ENVS)
  if env_name == "joystick":
    from playground.open_duck_mini_v2 import joystick

    return joystick.Joystick
  from playground.open_duck_mini_v2 import standing

  return standing.Standing


def command_ranges(env_name: str, env_config: config_dict.ConfigDict) -> list[tuple[float, float]]:
  """(low, high) of the 7 commands an env trains with (velocities 0 on `standing`)."""
  c = env_config.command_config
  head = [tuple(c[k]) for k in ("neck_pitch", "head_pitch", "head_yaw", "head_roll")]
  if env_name == "standing":
    return [(0.0, 0.0)] * 3 + head
  return [tuple(c.lin_vel_x), tuple(c.lin_vel_y), tuple(c.ang_vel_yaw), *head]


def randomization_targets():
  """The model elements domain randomization changes (`randomize.RandomizationTargets`)."""
  from playground.common import randomize

  return randomize.RandomizationTargets(
    floor_geom=consts.FLOOR_GEOM,
    trunk_body=consts.ROOT_BODY,
    actuators=consts.ACTUATOR_NAMES,
    head_actuators=consts.HEAD_JOINT_NAMES,
  )
