"""Reward terms as pure functions of arrays.

Every function takes plain arrays (one environment, no batch dimension) and
returns a scalar. The environments weight them with the `reward_config.scales`
of their task config and log each term as a metric. Positive terms are
rewards, terms that are meant to be penalties return a non-negative cost that
the config weights with a negative scale.
"""

from __future__ import annotations

import jax.numpy as jp


def tracking_lin_vel(command_xy: jp.ndarray, local_linvel_xy: jp.ndarray, sigma: float) -> jp.ndarray:
  """exp(-|v_cmd - v|^2 / sigma) for the planar base velocity."""
  error = jp.sum(jp.square(command_xy - local_linvel_xy))
  return jp.exp(-error / sigma)


def tracking_ang_vel(command_yaw: jp.ndarray, yaw_rate: jp.ndarray, sigma: float) -> jp.ndarray:
  """exp(-(w_cmd - w)^2 / sigma) for the yaw rate."""
  return jp.exp(-jp.square(command_yaw - yaw_rate) / sigma)


def joint_tracking(target_qpos: jp.ndarray, qpos: jp.ndarray, sigma: float) -> jp.ndarray:
  """exp(-|q_target - q|^2 / sigma) for a set of commanded joints (e.g. a head's)."""
  return jp.exp(-jp.sum(jp.square(target_qpos - qpos)) / sigma)


def torques(actuator_force: jp.ndarray) -> jp.ndarray:
  """Cost: sum of squared actuator torques."""
  return jp.sum(jp.square(actuator_force))


def action_rate(action: jp.ndarray, last_action: jp.ndarray) -> jp.ndarray:
  """Cost: squared change of the policy action between control steps."""
  return jp.sum(jp.square(action - last_action))


def stand_still(command: jp.ndarray, qpos_error: jp.ndarray, threshold: float = 0.01) -> jp.ndarray:
  """Cost: |q - q_home|_1 while the velocity command is (near) zero."""
  idle = jp.linalg.norm(command) < threshold
  return jp.sum(jp.abs(qpos_error)) * idle


def alive() -> jp.ndarray:
  """Reward of 1 for every step the robot has not fallen."""
  return jp.ones((), jp.float32)


def termination(terminated: jp.ndarray) -> jp.ndarray:
  """Cost: 1 on the step the episode terminates by a fall (not a time-out)."""
  return terminated.astype(jp.float32)


def orientation(gravity_local: jp.ndarray) -> jp.ndarray:
  """Cost: squared horizontal part of gravity seen from the trunk (tilt)."""
  return jp.sum(jp.square(gravity_local[:2]))


def lin_vel_z(global_linvel: jp.ndarray) -> jp.ndarray:
  """Cost: squared vertical base velocity."""
  return jp.square(global_linvel[2])


def ang_vel_xy(global_angvel: jp.ndarray) -> jp.ndarray:
  """Cost: squared roll/pitch rates of the base."""
  return jp.sum(jp.square(global_angvel[:2]))


def base_height(height: jp.ndarray, target: float) -> jp.ndarray:
  """Cost: squared deviation of the base height from `target`."""
  return jp.square(height - target)


def dof_pos_limits(qpos: jp.ndarray, lower: jp.ndarray, upper: jp.ndarray) -> jp.ndarray:
  """Cost: radians by which joints are outside their soft range [lower, upper] (MuJoCo Playground's term)."""
  return jp.sum(jp.clip(lower - qpos, 0.0) + jp.clip(qpos - upper, 0.0))


def soft_limits(lower, upper, factor: float):
  """The middle `factor` of each joint range [lower, upper], as (soft lower, soft upper)."""
  mid, half = (lower + upper) / 2, (upper - lower) / 2
  return mid - factor * half, mid + factor * half


def feet_air_time(air_time: jp.ndarray, first_contact: jp.ndarray, command: jp.ndarray, threshold: float) -> jp.ndarray:
  """Reward for steps: sum over feet of (air_time - threshold) at touch-down.

  Args:
    air_time: seconds each foot has been in the air, before this step's contact.
    first_contact: 1 for a foot that touches down at this step.
    command: velocity command; the term is zero when the command is zero.
    threshold: air time that earns no reward; shorter steps are penalized.
  """
  moving = jp.linalg.norm(command) > 0.01
  return jp.sum((air_time - threshold) * first_contact) * moving


def capture_point(com_xy: jp.ndarray, com_vel_xy: jp.ndarray, height: jp.ndarray, gravity: float = 9.81) -> jp.ndarray:
  """The linear inverted pendulum's capture point, com + v / omega with omega = sqrt(g / height).

  It is where a foot must land to stop a walker whose centre of mass moves at
  v. `height` is the centre of mass above the feet (floored at 5 cm).
  """
  omega = jp.sqrt(gravity / jp.maximum(jp.reshape(height, ()), 0.05))
  return com_xy + com_vel_xy / omega


def capture_point_excess(point_xy: jp.ndarray, feet_xy: jp.ndarray, margin: float) -> jp.ndarray:
  """Cost: m by which a capture point (`capture_point`) lies farther than `margin` from the segment between the feet.

  A kicked walker brings its capture point back between its feet by stepping
  towards it or by braking. The segment joining the two feet (`feet_xy`,
  (2, 2)) stands for the support: a capture point between the feet (a
  sideways kick within the stance, a walking gait's sway) costs nothing.
  """
  a, b = feet_xy[0], feet_xy[1]
  along = jp.clip(jp.dot(point_xy - a, b - a) / jp.maximum(jp.dot(b - a, b - a), 1e-9), 0.0, 1.0)
  return jp.maximum(jp.linalg.norm(point_xy - (a + along * (b - a))) - margin, 0.0)


def feet_slip(contact: jp.ndarray, feet_linvel_xy: jp.ndarray) -> jp.ndarray:
  """Cost: squared planar speed of feet that are in contact."""
  return jp.sum(jp.sum(jp.square(feet_linvel_xy), axis=-1) * contact)


def imitation(
  joint_pos: jp.ndarray,
  joint_vel: jp.ndarray,
  foot_contacts: jp.ndarray,
  local_linvel: jp.ndarray,
  yaw_rate: jp.ndarray,
  reference: dict[str, jp.ndarray],
  sigmas: dict[str, float],
) -> dict[str, jp.ndarray]:
  """Components (each in [0, 1]) of the imitation reward against a reference frame.

  Args:
    joint_pos, joint_vel: the imitated joints (e.g. the legs), absolute angles.
    foot_contacts: measured contacts (0/1), left and right.
    local_linvel: base linear velocity in the base frame.
    yaw_rate: base yaw rate.
    reference: the reference frame, with the same joints selected, keys
      joint_pos, joint_vel, foot_contacts, base_linvel, base_angvel.
    sigmas: kernel widths for joint_pos, joint_vel, base_linvel, base_angvel.

  Returns:
    joint_pos, joint_vel, base_linvel, base_angvel: exp(-|error|^2 / sigma);
    foot_contacts: share of feet whose contact state matches the reference.
  """
  ref_contacts = reference["foot_contacts"] > 0.5
  return {
    "joint_pos": jp.exp(-jp.sum(jp.square(joint_pos - reference["joint_pos"])) / sigmas["joint_pos"]),
    "joint_vel": jp.exp(-jp.sum(jp.square(joint_vel - reference["joint_vel"])) / sigmas["joint_vel"]),
    "foot_contacts": jp.mean((foot_contacts > 0.5) == ref_contacts),
    "base_linvel": jp.exp(-jp.sum(jp.square(local_linvel[:2] - reference["base_linvel"][:2])) / sigmas["base_linvel"]),
    "base_angvel": jp.exp(-jp.square(yaw_rate - reference["base_angvel"][2]) / sigmas["base_angvel"]),
  }
