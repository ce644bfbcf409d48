"""The Open Duck Mini V2's left/right mirror of its observations and actions.

The duck is symmetric about its sagittal (x-z) plane. Its mirror image swaps
the legs (joint signs from the MJCF's axes, `symmetry.joint_mirror`), flips
lateral and yaw quantities, swaps the feet and shifts the gait phase by half a
period (the right foot then does what the left one did: cos and sin change
sign). Every observation block is declared below by what it holds; a block
without a declaration is an error, so a new observation cannot be mirrored by
accident.
"""

from __future__ import annotations

import mujoco
from ml_collections import config_dict

from playground.common.tasks import symmetry
from playground.common.tasks.symmetry import AXIAL
from playground.common.tasks.symmetry import POLAR
from playground.common.tasks.symmetry import SignedPermutation
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations

FEET = SignedPermutation((1, 0), (1.0, 1.0))
PHASE_HALF_PERIOD = SignedPermutation((0, 1), (-1.0, -1.0))


def partner(name: str) -> str:
  """The mirror partner of a joint: left <-> right; a head joint is its own."""
  if name.startswith("left_"):
    return "right_" + name[len("left_") :]
  if name.startswith("right_"):
    return "left_" + name[len("right_") :]
  return name


def joint_map(model: mujoco.MjModel) -> SignedPermutation:
  """The mirror of per-actuator values (policy action order), from the duck's MuJoCo model."""
  return symmetry.joint_mirror(model, constants.ACTUATOR_NAMES, partner)


def leg_map(model: mujoco.MjModel) -> SignedPermutation:
  """The mirror of per-leg-joint values (`constants.LEG_JOINT_NAMES` order)."""
  return symmetry.joint_mirror(model, constants.LEG_JOINT_NAMES, partner)


def command_map(joints: SignedPermutation) -> SignedPermutation:
  """vx, vy, yaw rate, then the head joint offsets (with the head joints' own signs)."""
  head = [constants.ACTUATOR_NAMES.index(n) for n in constants.HEAD_JOINT_NAMES]
  head_sign = [joints.sign[i] for i in head]
  if any(constants.ACTUATOR_NAMES[joints.index[i]] != constants.ACTUATOR_NAMES[i] for i in head):
    raise ValueError("a head joint must be its own mirror partner")
  return SignedPermutation(tuple(range(commands.SIZE)), (1.0, -1.0, -1.0, *head_sign))


def block_maps(joints: SignedPermutation) -> dict[str, SignedPermutation]:
  """The mirror of every named observation block (actor, critic, history, dynamics)."""
  same = SignedPermutation.identity
  history_frame = SignedPermutation.concat(
    [
      {"gyro": AXIAL, "accelerometer": POLAR, "joint_pos": joints, "joint_vel": joints}[n]
      for n in observations.HISTORY_FRAME_LAYOUT.names
    ]
  )
  dynamics = {
    "trunk_com_offset": POLAR,
    "trunk_mass_delta": same(1),
    "floor_friction": same(1),
    "kp_scale": joints.unsigned(),
    "servo_offset": joints,
  }
  return {
    "gyro": AXIAL,
    "accelerometer": POLAR,
    "command": command_map(joints),
    "joint_pos": joints,
    "joint_vel": joints,
    "last_actions": joints.tile(observations.ACTION_HISTORY),
    # Absolute targets: their mirror is the joints' mirror because the home pose is symmetric.
    "motor_targets": joints,
    "feet_contacts": FEET,
    "phase": PHASE_HALF_PERIOD,
    "history": history_frame,
    "gyro_clean": AXIAL,
    "accelerometer_clean": POLAR,
    "gravity": POLAR,
    "local_linvel": POLAR,
    "global_angvel": AXIAL,
    "joint_pos_clean": joints,
    "joint_vel_clean": joints,
    "actuator_force": joints,
    "feet_vel": SignedPermutation((3, 4, 5, 0, 1, 2), (1.0, -1.0, 1.0) * 2),  # left, right; world frame
    "feet_air_time": FEET,
    "base_height": same(1),
    "dynamics": SignedPermutation.concat([dynamics[n] for n, _ in observations.DYNAMICS_FIELDS]),
    # Heading frame (x forward, y left): the mirror flips y.
    "kick_velocity": SignedPermutation((0, 1), (1.0, -1.0)),
    "since_kick": same(1),
    "capture_point": SignedPermutation((0, 1), (1.0, -1.0)),
  }


def layout_map(layout, blocks: dict[str, SignedPermutation]) -> SignedPermutation:
  """The mirror of a flat observation of `layout`, block by block."""
  parts = []
  for name, size in layout.fields:
    if name not in blocks:
      raise ValueError(f"observation block '{name}' has no declared mirror (add it to mirror.block_maps)")
    block = blocks[name]
    if size % block.size:
      raise ValueError(f"observation block '{name}' of size {size} is not a whole number of {block.size}-entry mirrors")
    parts.append(block.tile(size // block.size))
  return SignedPermutation.concat(parts)


def policy_mirror(model: mujoco.MjModel, env_config: config_dict.ConfigDict) -> symmetry.Mirror:
  """The duck's mirror for its model and an env config (actor `state`, critic `privileged_state`, action)."""
  joints = joint_map(model)
  history = int(env_config.get("observation_history", 0))
  blocks = block_maps(joints)
  state = layout_map(observations.state_layout(history, bool(env_config.get("actor_kick", False))), blocks)
  privileged = layout_map(
    observations.privileged_layout(
      history, bool(env_config.get("critic_dynamics", False)), bool(env_config.get("critic_kick", False))
    ),
    blocks,
  )
  return symmetry.Mirror(observation={"state": state, "privileged_state": privileged}, action=joints)
