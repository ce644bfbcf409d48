"""A second robot for the tests: a small biped described through duck-playground's extension points.

Everything the library needs of it is here and in `runner.py` beside it: its
MJCF (`biped.xml`), names resolved from the model, its commands, one task
(walk forward at a commanded speed), its observation layout, and its
left/right mirror. Nothing in `playground/` knows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jp
import mujoco
from ml_collections import config_dict
from mujoco import mjx
from mujoco_playground import MjxEnv
from mujoco_playground import State

from playground.common.export import contract
from playground.common.tasks import randomize
from playground.common.tasks import rewards
from playground.common.tasks import symmetry
from playground.common.tasks.observation_layout import ObservationLayout

XML = Path(__file__).resolve().parent / "biped.xml"
ACTUATOR_NAMES = ("left_hip", "left_knee", "right_hip", "right_knee")
TRUNK_BODY = "trunk"
FLOOR_GEOM = "floor"

#: The commands: forward speed only (m/s), in this order.
COMMAND_NAMES = ("vx",)
COMMAND_RANGE = (0.0, 0.3)

LAYOUT = ObservationLayout(
  (
    ("gyro", 3),
    ("upvector", 3),
    ("command", len(COMMAND_NAMES)),
    ("joint_pos", len(ACTUATOR_NAMES)),
    ("joint_vel", len(ACTUATOR_NAMES)),
    ("last_action", len(ACTUATOR_NAMES)),
  )
)


def partner(name: str) -> str:
  """The mirror partner of a joint or actuator: left <-> right."""
  if name.startswith("left_"):
    return "right_" + name[len("left_") :]
  return "left_" + name[len("right_") :]


def mirror(model: mujoco.MjModel) -> symmetry.Mirror:
  """The biped's left/right mirror, from its model's joint axes: the gyro is an axial vector,
  the up vector a polar one, the forward command is its own mirror image, the legs swap."""
  joints = symmetry.joint_mirror(model, ACTUATOR_NAMES, partner)
  blocks = {
    "gyro": symmetry.AXIAL,
    "upvector": symmetry.POLAR,
    "command": symmetry.SignedPermutation.identity(len(COMMAND_NAMES)),
    "joint_pos": joints,
    "joint_vel": joints,
    "last_action": joints,
  }
  observation = symmetry.SignedPermutation.concat([blocks[name] for name, _ in LAYOUT.fields])
  return symmetry.Mirror(observation=observation, action=joints)


def default_config() -> config_dict.ConfigDict:
  """The walk task's settings."""
  return config_dict.create(
    ctrl_dt=0.02,
    sim_dt=0.005,
    episode_length=300,
    action_scale=0.5,
    min_trunk_height=0.18,
    command_range=COMMAND_RANGE,
    reward_scales=config_dict.create(tracking=2.0, alive=0.5, action_rate=-0.05),
    tracking_sigma=0.05,
    domain_randomization=randomize.default_config(),
  )


class Walk(MjxEnv):
  """Walk forward at the commanded speed; an episode ends when the trunk sinks."""

  def __init__(self, config: config_dict.ConfigDict | None = None):
    super().__init__(config or default_config())
    self._mj_model = mujoco.MjModel.from_xml_path(str(XML))
    self._mj_model.opt.timestep = self._config.sim_dt
    self._mjx_model = mjx.put_model(self._mj_model, impl="jax")
    home = self._mj_model.keyframe("home")
    self._home_qpos = jp.array(home.qpos)
    self._home_ctrl = jp.array(home.ctrl)
    act = [self._mj_model.actuator(n).id for n in ACTUATOR_NAMES]
    joints = self._mj_model.actuator_trnid[act, 0]
    self._qpos_ids = jp.array(self._mj_model.jnt_qposadr[joints])
    self._dof_ids = jp.array(self._mj_model.jnt_dofadr[joints])
    self._trunk = self._mj_model.body(TRUNK_BODY).id
    self._sensor = {
      name: slice(self._mj_model.sensor(name).adr[0], self._mj_model.sensor(name).adr[0] + 3)
      for name in ("gyro", "local_linvel", "upvector")
    }

  @property
  def xml_path(self) -> str:
    return str(XML)

  @property
  def action_size(self) -> int:
    return len(ACTUATOR_NAMES)

  @property
  def mj_model(self) -> mujoco.MjModel:
    return self._mj_model

  @property
  def mjx_model(self) -> mjx.Model:
    return self._mjx_model

  def observe(self, data: mjx.Data, command: jax.Array, last_action: jax.Array) -> jax.Array:
    """The policy's observation (`LAYOUT`)."""
    return LAYOUT.concat(
      {
        "gyro": data.sensordata[self._sensor["gyro"]],
        "upvector": data.sensordata[self._sensor["upvector"]],
        "command": command,
        "joint_pos": data.qpos[self._qpos_ids] - self._home_qpos[self._qpos_ids],
        "joint_vel": data.qvel[self._dof_ids] * 0.1,
        "last_action": last_action,
      }
    )

  def reset(self, rng: jax.Array) -> State:
    rng, k_cmd = jax.random.split(rng)
    data = mjx.make_data(self._mjx_model).replace(qpos=self._home_qpos, ctrl=self._home_ctrl)
    data = mjx.forward(self._mjx_model, data)
    lo, hi = self._config.command_range
    command = jax.random.uniform(k_cmd, (len(COMMAND_NAMES),), minval=lo, maxval=hi)
    last_action = jp.zeros(self.action_size)
    info = {"rng": rng, "command": command, "last_action": last_action}
    metrics = {"tracking": jp.zeros(()), "alive": jp.zeros(()), "action_rate": jp.zeros(())}
    obs = self.observe(data, command, last_action)
    return State(data, obs, jp.zeros(()), jp.zeros(()), metrics, info)

  def step(self, state: State, action: jax.Array) -> State:
    ctrl = self._home_ctrl + self._config.action_scale * action

    def substep(data, _):
      return mjx.step(self._mjx_model, data.replace(ctrl=ctrl)), None

    data, _ = jax.lax.scan(substep, state.data, None, length=self.n_substeps)
    command = state.info["command"]
    vx = data.sensordata[self._sensor["local_linvel"]][0]
    terms = {
      "tracking": rewards.tracking_lin_vel(command[:1], jp.array([vx]), self._config.tracking_sigma),
      "alive": jp.ones(()),
      "action_rate": rewards.action_rate(action, state.info["last_action"]),
    }
    scales = self._config.reward_scales
    reward = sum(scales[name] * value for name, value in terms.items()) * self.dt
    done = (data.xpos[self._trunk, 2] < self._config.min_trunk_height) | ~jp.all(jp.isfinite(data.qpos))
    info = {**state.info, "last_action": action}
    obs = self.observe(data, command, action)
    return state.replace(data=data, obs=obs, reward=reward, done=done.astype(jp.float32), metrics=terms, info=info)


def observation_bounds(config: Any) -> tuple[Any, Any]:
  """(low, high) per input: the command clamped to its trained range, the rest unbounded."""
  return contract.bounds_of_block(LAYOUT.size, LAYOUT.slices["command"], [config.command_range])
