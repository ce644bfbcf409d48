"""The Open Duck Mini V2's environment table: names, classes, randomization targets.

A leaf module (it imports no other module of the package at import time)
that the runner, the scorecard and playback share.
"""

from __future__ import annotations

from playground.common import configs
from playground.open_duck_mini_v2.model import constants

ENVS = ("joystick", "standing")


def env_class(env_name: str):
  """The environment class of `env_name` (see `ENVS`), imported on demand.

  Imported lazily: the command line is validated before JAX is loaded.
  """
  configs.check_choice("--env", env_name, ENVS)
  if env_name == "joystick":
    from playground.open_duck_mini_v2.tasks import joystick

    return joystick.Joystick
  from playground.open_duck_mini_v2.tasks import standing

  return standing.Standing


def randomization_targets():
  """The model elements domain randomization changes (`randomize.RandomizationTargets`)."""
  from playground.common.tasks import randomize

  return randomize.RandomizationTargets(
    floor_geom=constants.FLOOR_GEOM,
    trunk_body=constants.ROOT_BODY,
    actuators=constants.ACTUATOR_NAMES,
    head_actuators=constants.HEAD_JOINT_NAMES,
  )
