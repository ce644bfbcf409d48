"""From a policy action to servo targets: what the runtime sends, and where the servos drive."""

from __future__ import annotations

import jax
import jax.numpy as jp

from playground.open_duck_mini_v2.model.robot_model import RobotIndices


def commanded_targets(ids: RobotIndices, action: jax.Array, command: jax.Array, action_scale: float) -> jax.Array:
  """What the robot runtime sends to the servos: home + scale * action (+ head command).

  No limits: the runtime sends (and observes) these raw targets and lets the
  servos limit the motion (see `motor_targets`).
  """
  targets = jp.asarray(ids.home_ctrl) + action_scale * action
  return targets.at[ids.head_act].add(command[3:7])


def motor_targets(
  ids: RobotIndices,
  action: jax.Array,
  command: jax.Array,
  previous_targets: jax.Array,
  action_scale: float,
  max_motor_velocity: float,
  ctrl_dt: float,
) -> jax.Array:
  """Where the servos actually drive: the commanded targets, speed- and range-limited.

  The change of each target per control step is clipped to
  `max_motor_velocity * ctrl_dt`, as the STS3215 cannot move faster, and the
  result is clipped to the actuator control range.
  """
  targets = commanded_targets(ids, action, command, action_scale)
  max_delta = max_motor_velocity * ctrl_dt
  targets = jp.clip(targets, previous_targets - max_delta, previous_targets + max_delta)
  return jp.clip(targets, ids.ctrl_lower, ids.ctrl_upper)
