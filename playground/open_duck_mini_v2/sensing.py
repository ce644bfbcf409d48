"""What the duck's sensors read from a simulation state (MJX or MuJoCo C), and their noise scales."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from flax import struct

from playground.open_duck_mini_v2 import constants as consts
from playground.open_duck_mini_v2 import observations as obs_lib
from playground.open_duck_mini_v2.robot_model import RobotIndices


@struct.dataclass
class DataView:
  """The simulation fields `read` uses, as a pytree (for MuJoCo C states).

  `read` accepts an `mjx.Data` directly; playback wraps a `mujoco.MjData`
  in a `DataView` so that the same jitted function reads both.
  """

  qpos: jax.Array
  qvel: jax.Array
  sensordata: jax.Array
  site_xmat: jax.Array
  xpos: jax.Array
  actuator_force: jax.Array

  @classmethod
  def from_mjdata(cls, data: mujoco.MjData) -> DataView:
    return cls(
      qpos=np.array(data.qpos, np.float32),
      qvel=np.array(data.qvel, np.float32),
      sensordata=np.array(data.sensordata, np.float32),
      site_xmat=np.array(data.site_xmat, np.float32).reshape(-1, 3, 3),
      xpos=np.array(data.xpos, np.float32),
      actuator_force=np.array(data.actuator_force, np.float32),
    )


def read(ids: RobotIndices, model: Any, data: Any) -> obs_lib.Readings:
  """Noiseless readings from an `mjx.Data` or a `mujoco.MjData`.

  Args:
    ids: indices of the model.
    model: the (possibly randomized) model; its qpos0 holds the servo zero
      offsets set by domain randomization.
    data: the simulation state after `mj_forward`/`mjx.step`.
  """
  q = jp.asarray(data.qpos)
  qvel = jp.asarray(data.qvel)
  offsets = jp.asarray(model.qpos0)[ids.act_qpos] - ids.qpos0_nominal
  # The servo's encoder reads its output shaft, i.e. the link: the actuated
  # joint plus the backlash play behind it (backlash scenes only).
  mask = jp.asarray(ids.encoder_backlash_mask)
  encoder_q = q[ids.act_qpos] + mask * q[ids.encoder_backlash_qpos]
  encoder_qvel = qvel[ids.act_dof] + mask * qvel[ids.encoder_backlash_dof]
  imu_rot = jp.asarray(data.site_xmat)[ids.imu_site].reshape(3, 3)
  feet_pos = jp.stack([ids.sensor(data, n) for n in consts.FEET_POS_SENSORS])
  base_pos = jp.asarray(data.xpos)[ids.root_body]
  return obs_lib.Readings(
    gyro=jp.asarray(ids.sensor(data, consts.GYRO_SENSOR)),
    accelerometer=jp.asarray(ids.sensor(data, consts.ACCELEROMETER_SENSOR)),
    gravity=imu_rot.T @ jp.array([0.0, 0.0, -1.0]),
    local_linvel=jp.asarray(ids.sensor(data, consts.LOCAL_LINVEL_SENSOR)),
    global_linvel=jp.asarray(ids.sensor(data, consts.GLOBAL_LINVEL_SENSOR)),
    global_angvel=jp.asarray(ids.sensor(data, consts.GLOBAL_ANGVEL_SENSOR)),
    joint_pos=encoder_q - offsets - ids.home_ctrl,
    joint_vel=encoder_qvel,
    actuator_force=jp.asarray(data.actuator_force),
    feet_contacts=jp.concatenate([ids.sensor(data, n) for n in consts.FEET_CONTACT_SENSORS])
    .astype(jp.float32)
    .clip(0.0, 1.0),
    feet_pos=feet_pos,
    feet_vel=jp.concatenate([ids.sensor(data, n) for n in consts.FEET_LINVEL_SENSORS]),
    base_pos=base_pos,
    base_height=jp.reshape(base_pos[2] - jp.min(feet_pos[:, 2]), (1,)),
  )


def dynamics_params(ids: RobotIndices, model: Any) -> jax.Array:
  """The physical parameters domain randomization drew, relative to the nominal model.

  The `observations.DYNAMICS_FIELDS` block of the critic's observation
  (`critic_dynamics`): trunk centre-of-mass offset (m) and mass difference
  (kg), floor friction, servo kp / nominal - 1 and servo zero offsets (rad),
  read from `model` (the env's own randomized copy inside a `VecEnv`). All
  zeros but the friction on the nominal model.
  """
  return jp.concatenate(
    [
      jp.asarray(model.body_ipos)[ids.root_body] - ids.root_ipos_nominal,
      jp.reshape(jp.asarray(model.body_mass)[ids.root_body] - ids.root_mass_nominal, (1,)),
      jp.reshape(jp.asarray(model.geom_friction)[ids.floor_geom, 0], (1,)),
      jp.asarray(model.actuator_gainprm)[: len(ids.kp_nominal), 0] / ids.kp_nominal - 1.0,
      jp.asarray(model.qpos0)[ids.act_qpos] - ids.qpos0_nominal,
    ]
  )


def noise_scales(scales: Mapping[str, float]) -> dict[str, Any]:
  """Per-sensor noise scales from `noise_config.scales`, per joint in action order.

  Args:
    scales: gyro, accelerometer, joint_pos_hip / knee / ankle / head (rad)
      and joint_vel (rad/s).
  """

  def group(name: str) -> str:
    if name in consts.HEAD_JOINT_NAMES:
      return "head"
    return "hip" if "hip" in name else "knee" if "knee" in name else "ankle"

  return {
    "gyro": float(scales["gyro"]),
    "accelerometer": float(scales["accelerometer"]),
    "joint_pos": np.array([scales[f"joint_pos_{group(n)}"] for n in consts.ACTUATOR_NAMES], np.float32),
    "joint_vel": np.full(len(consts.ACTUATOR_NAMES), float(scales["joint_vel"]), np.float32),
  }
