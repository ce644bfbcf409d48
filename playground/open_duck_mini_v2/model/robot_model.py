"""The Open Duck Mini V2's MuJoCo model: scenes by task, and indices resolved by name.

`load_model(task)` builds every scene from the project's MJCF: the rough
terrain gets its procedural heightfield and the `_backlash` tasks get a
passive backlash joint in series with every actuated joint. `RobotIndices`
resolves every body, joint, sensor and site the code uses by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import mujoco
import numpy as np
from mujoco import mjx

from playground.common import configs
from playground.common.tasks import mjcf
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import servos


def load_spec(
  task: str, terrain_seed: int = constants.TERRAIN_SEED, servo_profile: str = servos.DEFAULT
) -> mujoco.MjSpec:
  """The MjSpec of a task's scene (see `constants.TASKS`) with the servos of `servo_profile`."""
  configs.check_choice("--task", task, constants.TASKS)
  servo = servos.profile(servo_profile)
  terrain = task.removesuffix("_backlash")
  spec = mujoco.MjSpec.from_file(str(constants.XML_DIR / f"scene_{terrain}.xml"))
  apply_servo(spec, servo)
  if terrain == "rough_terrain":
    hfield = spec.hfield("terrain")
    hfield.userdata = mjcf.procedural_heightfield(hfield.nrow, hfield.ncol, terrain_seed).ravel()
  if task.endswith("_backlash"):
    mjcf.add_backlash(
      spec,
      constants.JOINT_NAMES,
      half_range=servo.backlash,
      damping=constants.BACKLASH_DAMPING,
      armature=constants.BACKLASH_ARMATURE,
    )
  return spec


def load_model(
  task: str, terrain_seed: int = constants.TERRAIN_SEED, servo_profile: str = servos.DEFAULT
) -> mujoco.MjModel:
  """Compiles the MuJoCo model of a task's scene with the servos of `servo_profile` (`servos.PROFILES`)."""
  return load_spec(task, terrain_seed, servo_profile).compile()


def apply_servo(spec: mujoco.MjSpec, servo: servos.ServoProfile) -> mujoco.MjSpec:
  """Gives every actuated joint the servo's gain, force limit, damping, armature and friction.

  Gains are scaled by `servo.kp` over the MJCF's leg gain, so the head servos
  keep the MJCF's head/leg ratio, and the MJCF's own servo (the default
  profile) compiles to exactly the MJCF's numbers. Modifies `spec` in place.
  """
  leg_kp = float(spec.actuator(constants.LEG_JOINT_NAMES[0]).gainprm[0])
  for name in constants.ACTUATOR_NAMES:
    actuator = spec.actuator(name)
    kp = float(actuator.gainprm[0]) * (servo.kp / leg_kp)
    actuator.gainprm[0] = kp
    actuator.biasprm[1] = -kp
    actuator.forcerange = [-servo.max_torque, servo.max_torque]
    joint = spec.joint(actuator.target)
    joint.damping[0] = servo.damping
    joint.armature = servo.armature
    joint.frictionloss = servo.frictionloss
  return spec


@dataclasses.dataclass(frozen=True)
class RobotIndices:
  """Indices resolved by name from a compiled model (numpy, static)."""

  act_qpos: np.ndarray
  act_dof: np.ndarray
  backlash_qpos: np.ndarray
  backlash_dof: np.ndarray
  #: Per actuated joint: 1 where a backlash joint follows it (its qpos/dof at
  #: `encoder_backlash_qpos/dof`), 0 otherwise (index 0 then, masked out).
  encoder_backlash_mask: np.ndarray
  encoder_backlash_qpos: np.ndarray
  encoder_backlash_dof: np.ndarray
  head_act: np.ndarray
  imu_site: int
  root_body: int
  home_qpos: np.ndarray
  home_ctrl: np.ndarray
  ctrl_lower: np.ndarray
  ctrl_upper: np.ndarray
  qpos0_nominal: np.ndarray
  sensors: Mapping[str, tuple[int, int]]
  floor_geom: int
  root_ipos_nominal: np.ndarray
  root_mass_nominal: float
  kp_nominal: np.ndarray

  @classmethod
  def from_model(cls, m: mujoco.MjModel) -> RobotIndices:
    def find(objtype, name):
      idx = mujoco.mj_name2id(m, objtype, name)
      if idx < 0:
        raise ValueError(f"the Open Duck Mini V2 model has no {objtype.name[6:].lower()} named '{name}'")
      return idx

    actuators = [find(mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in constants.ACTUATOR_NAMES]
    if actuators != list(range(len(constants.ACTUATOR_NAMES))):
      raise ValueError("actuators must be declared in constants.ACTUATOR_NAMES order")
    joints = [find(mujoco.mjtObj.mjOBJ_JOINT, n) for n in constants.JOINT_NAMES]
    per_joint = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, f"{n}_backlash") for n in constants.JOINT_NAMES]
    backlash = [j for j in per_joint if j >= 0]
    present = np.array([j >= 0 for j in per_joint])
    safe = np.array([max(j, 0) for j in per_joint])
    key = find(mujoco.mjtObj.mjOBJ_KEY, constants.HOME_KEYFRAME)
    sensors = {}
    for name in (
      constants.GYRO_SENSOR,
      constants.ACCELEROMETER_SENSOR,
      constants.LOCAL_LINVEL_SENSOR,
      constants.GLOBAL_LINVEL_SENSOR,
      constants.GLOBAL_ANGVEL_SENSOR,
      *constants.FEET_POS_SENSORS,
      *constants.FEET_LINVEL_SENSORS,
      *constants.FEET_CONTACT_SENSORS,
    ):
      s = find(mujoco.mjtObj.mjOBJ_SENSOR, name)
      sensors[name] = (int(m.sensor_adr[s]), int(m.sensor_dim[s]))
    act_qpos = m.jnt_qposadr[joints]
    root = find(mujoco.mjtObj.mjOBJ_BODY, constants.ROOT_BODY)
    return cls(
      act_qpos=act_qpos,
      act_dof=m.jnt_dofadr[joints],
      backlash_qpos=m.jnt_qposadr[backlash].astype(int),
      backlash_dof=m.jnt_dofadr[backlash].astype(int),
      encoder_backlash_mask=present.astype(np.float32),
      encoder_backlash_qpos=np.where(present, m.jnt_qposadr[safe], 0).astype(int),
      encoder_backlash_dof=np.where(present, m.jnt_dofadr[safe], 0).astype(int),
      head_act=np.array([constants.ACTUATOR_NAMES.index(n) for n in constants.HEAD_JOINT_NAMES]),
      imu_site=find(mujoco.mjtObj.mjOBJ_SITE, constants.IMU_SITE),
      root_body=root,
      home_qpos=np.array(m.key_qpos[key]),
      home_ctrl=np.array(m.key_ctrl[key]),
      ctrl_lower=np.array(m.actuator_ctrlrange[:, 0]),
      ctrl_upper=np.array(m.actuator_ctrlrange[:, 1]),
      qpos0_nominal=np.array(m.qpos0[act_qpos]),
      sensors=sensors,
      floor_geom=find(mujoco.mjtObj.mjOBJ_GEOM, constants.FLOOR_GEOM),
      root_ipos_nominal=np.array(m.body_ipos[root]),
      root_mass_nominal=float(m.body_mass[root]),
      kp_nominal=np.array(m.actuator_gainprm[:, 0]),
    )

  def sensor(self, data: Any, name: str) -> jax.Array:
    adr, dim = self.sensors[name]
    return data.sensordata[adr : adr + dim]


def warp_warnings() -> int:
  """The MuJoCo Warp overflow warnings the duck keeps (a bitmask).

  Every buffer overflow (contacts, constraint rows, broadphase, ...) stays on:
  it means lost contacts, i.e. wrong physics. Only the solver and line-search
  iteration limits are silenced: the model deliberately runs one Newton
  iteration per step (as MJX training setups do), so they would print at
  every step.
  """
  from mujoco.mjx.third_party.mujoco_warp._src.types import OverflowType  # noqa: PLC0415

  return int(OverflowType.ALL & ~(OverflowType.ITERATIONS | OverflowType.LS_ITERATIONS))


def quiet_warp(model: mjx.Model) -> mjx.Model:
  """Silences MuJoCo Warp's iteration-limit printouts, keeping overflow warnings.

  See `warp_warnings`. A model without Warp options is returned unchanged.
  """
  impl = getattr(model.opt, "_impl", None)
  if impl is None or not hasattr(impl, "warn_overflow"):
    return model
  return model.replace(opt=model.opt.replace(_impl=impl.replace(warn_overflow=warp_warnings())))
