"""What the Open Duck Mini V2 observes: its sensors' readings and noise, the observation layout and function.

This module is the single source of truth for what the policy sees. The MJX
training environments, the MuJoCo C playback, the robot runtime's loop and the
ONNX export all use the readings, layout and functions below; nothing else
assembles observation vectors. The sensors are read from a simulation state
(MJX or MuJoCo C) by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from flax import struct

from playground.common.tasks import kicks
from playground.common.tasks import rewards
from playground.common.tasks.observation_layout import ObservationLayout
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model.robot_model import RobotIndices

NUM_ACTIONS = 14
ACTION_HISTORY = 3

_STATE_FIELDS = (
  ("gyro", 3),
  ("accelerometer", 3),
  ("command", commands.SIZE),  # `commands.NAMES`
  ("joint_pos", NUM_ACTIONS),  # measured joint position minus home pose
  ("joint_vel", NUM_ACTIONS),  # measured joint velocity x 0.05
  ("last_actions", NUM_ACTIONS * ACTION_HISTORY),  # newest first
  ("motor_targets", NUM_ACTIONS),  # commanded: home + 0.25 * action (+ head command), unlimited
  ("feet_contacts", 2),  # left, right
  ("phase", 2),  # cos, sin of the gait phase
)

_PRIVILEGED_FIELDS = (
  ("gyro_clean", 3),
  ("accelerometer_clean", 3),
  ("gravity", 3),  # gravity direction in the IMU frame
  ("local_linvel", 3),
  ("global_angvel", 3),
  ("joint_pos_clean", NUM_ACTIONS),
  ("joint_vel_clean", NUM_ACTIONS),
  ("actuator_force", NUM_ACTIONS),
  ("feet_vel", 6),
  ("feet_air_time", 2),
  ("base_height", 1),
)

#: Optional critic block (`critic_dynamics`): the physical parameters domain
#: randomization drew for this env, as differences from the nominal model
#: (`dynamics_params`). The actor never sees it; the robot has no such
#: reading.
DYNAMICS_FIELDS = (
  ("trunk_com_offset", 3),  # m, trunk centre of mass minus nominal
  ("trunk_mass_delta", 1),  # kg, trunk mass minus nominal
  ("floor_friction", 1),  # sliding friction of the floor
  ("kp_scale", NUM_ACTIONS),  # servo position gain / nominal, minus 1
  ("servo_offset", NUM_ACTIONS),  # rad, servo zero offset
)
DYNAMICS_SIZE = sum(size for _, size in DYNAMICS_FIELDS)

#: Optional critic block (`critic_kick`): the balance state after a kick, in
#: the trunk's heading frame (x forward, y left). The reward's recovery window
#: and the kick curriculum depend on the time since a kick, which the rest of
#: the critic's view does not show. The actor never sees it.
KICK_FIELDS = (
  ("kick_velocity", 2),  # m/s, the last kick's velocity change while recent (zero after `KICK_MEMORY_S`)
  ("since_kick", 1),  # time since the last kick / `KICK_MEMORY_S`, saturating at 1 (1: none recent)
  ("capture_point", 2),  # m, the capture point minus the midpoint between the feet
)
KICK_SIZE = sum(size for _, size in KICK_FIELDS)
#: Seconds after a kick during which `kick_velocity` shows it.
KICK_MEMORY_S = 1.0

#: One frame of the optional observation history: the proprioceptive part of
#: `state` (gyro and accelerometer as the actor received them, joint position
#: and scaled velocity with their noise) of one earlier control step.
HISTORY_FRAME_LAYOUT = ObservationLayout(
  (("gyro", 3), ("accelerometer", 3), ("joint_pos", NUM_ACTIONS), ("joint_vel", NUM_ACTIONS))
)

#: Most history frames an env may observe (`observation_history`).
MAX_HISTORY = 10


def state_layout(history: int = 0, kick: bool = False) -> ObservationLayout:
  """Actor observation `state`: 101 floats, plus `history` earlier frames.

  With `history` = 0 (the default) this is the layout the Open Duck runtime
  builds on the robot. With `history` > 0 a block `history` of `history` x 34
  floats follows: the `HISTORY_FRAME_LAYOUT` of the previous control steps,
  newest first (a runtime must keep the same buffer). With `kick` (the
  `actor_kick` diagnostic) the `KICK_FIELDS` come last: privileged, so no
  robot can feed such a policy.
  """
  if not 0 <= history <= MAX_HISTORY:
    raise ValueError(f"observation history must be 0..{MAX_HISTORY} frames, got {history}")
  fields = _STATE_FIELDS + ((("history", history * HISTORY_FRAME_LAYOUT.size),) if history else ())
  return ObservationLayout(fields + (KICK_FIELDS if kick else ()))


def privileged_layout(history: int = 0, dynamics: bool = False, kick: bool = False) -> ObservationLayout:
  """Critic observation `privileged_state`: the actor's view plus noiseless truth.

  With `dynamics` a block `dynamics` (`DYNAMICS_SIZE` floats, `DYNAMICS_FIELDS`)
  follows: the env's randomized physical parameters. With `kick` the
  `KICK_FIELDS` come last: the balance state after a kick.
  """
  fields = _PRIVILEGED_FIELDS + ((("dynamics", DYNAMICS_SIZE),) if dynamics else ()) + (KICK_FIELDS if kick else ())
  return state_layout(history).extend(*fields)


def history_of(layout_json: Any) -> int | None:
  """Frames of history of a layout as written to metadata (`to_json`), or None if it is no `state_layout`."""
  for frames in range(MAX_HISTORY + 1):
    if layout_json == state_layout(frames).to_json():
      return frames
  return None


#: Actor observation `state` (101 floats) without history, in this order.
STATE_LAYOUT = state_layout(0)

#: Critic observation `privileged_state` without history.
PRIVILEGED_LAYOUT = privileged_layout(0)

JOINT_VEL_SCALE = 0.05


@struct.dataclass
class Readings:
  """Noiseless physical quantities read from a simulation state.

  Privileged truths (the centre of mass, the trunk's heading, velocities in
  the world frame) are for rewards and the critic; the actor's view is what
  `build` makes of the sensor fields. `joint_pos` is what the servo encoders
  report (true angle minus the servo's zero offset) minus the home pose.
  """

  gyro: jax.Array
  accelerometer: jax.Array
  gravity: jax.Array
  local_linvel: jax.Array
  global_linvel: jax.Array
  global_angvel: jax.Array
  joint_pos: jax.Array
  joint_vel: jax.Array
  actuator_force: jax.Array
  feet_contacts: jax.Array
  feet_pos: jax.Array
  feet_vel: jax.Array
  base_pos: jax.Array
  base_height: jax.Array
  com_pos: jax.Array  # the whole duck's centre of mass, world frame
  heading: jax.Array  # the trunk's yaw about the world's z axis (radians, scalar)


@struct.dataclass
class StepContext:
  """What a step's rewards depend on besides the readings.

  Attributes:
    command: the command the step was taken under.
    action: the policy action of this step.
    last_action: the previous policy action.
    air_time: seconds each foot had been in the air, this step included.
    first_contact: per foot, whether it touched down at this step.
    terminated: whether the robot fell at this step.
    phase: gait phase (radians) of the state reached by this step.
    recovering: 1 within `push_config.recovery_s` of a kick, else 0 (the
      reward may waive the gait's terms; privileged, never observed).
    velocity: the trunk's (vx, vy, yaw rate) that the tracking terms judge:
      the readings' local velocity and yaw rate averaged over
      `reward_config.tracking_filter_s` (`tracked_velocity`); None: this
      step's readings.
    kick: the last kick's (x, y) velocity change in the trunk's heading frame
      at the kick (privileged; None unless a recovery reference reads it).
    since_kick: control steps since that kick (0: this step's), or None.
  """

  command: jax.Array
  action: jax.Array
  last_action: jax.Array
  air_time: jax.Array
  first_contact: jax.Array
  terminated: jax.Array
  phase: jax.Array
  recovering: jax.Array | float = 0.0
  velocity: jax.Array | None = None
  kick: jax.Array | None = None
  since_kick: jax.Array | None = None

  @classmethod
  def idle(cls, command: jax.Array, phase: jax.Array | float = 0.0) -> StepContext:
    """A step with zero actions, no foot events and no fall (for reward arithmetic and tests)."""
    return cls(
      command=jp.asarray(command, jp.float32),
      action=jp.zeros(NUM_ACTIONS),
      last_action=jp.zeros(NUM_ACTIONS),
      air_time=jp.zeros(2),
      first_contact=jp.zeros(2),
      terminated=jp.array(False),
      phase=jp.asarray(phase, jp.float32),
    )


def instant_velocity(readings: Readings) -> jax.Array:
  """The trunk's (vx, vy) in its local frame and its yaw rate, as measured this step."""
  return jp.concatenate([readings.local_linvel[:2], readings.gyro[2:3]])


def tracked_velocity(previous: jax.Array, readings: Readings, dt: float, filter_s: float) -> jax.Array:
  """`previous` moved toward this step's `instant_velocity` by a first-order low-pass of time constant `filter_s`.

  A walking trunk's velocity swings within each step (the duck's weight
  shifts from foot to foot: about 0.1 m/s rms sideways at a 0.1 m/s walk);
  judged instantaneously, that swing outweighs the speed itself. Averaged
  over a fraction of a gait period, what is left is the speed. `filter_s`
  0 returns this step's velocity.
  """
  now = instant_velocity(readings)
  if filter_s <= 0.0:
    return now
  alpha = 1.0 - float(np.exp(-dt / filter_s))
  return previous + alpha * (now - previous)


def add_noise(readings: Readings, key: jax.Array, scales: Mapping[str, Any], level: float) -> Readings:
  """Uniform sensor noise: value + level * scale * U(-1, 1).

  Args:
    readings: noiseless readings.
    key: PRNG key.
    scales: gyro and accelerometer (scalars), joint_pos and joint_vel (one
      scale per joint, action order), e.g. from `noise_scales`.
    level: global multiplier; 0 disables noise.
  """
  if level == 0.0:
    return readings
  k = jax.random.split(key, 4)
  u = lambda key, shape: jax.random.uniform(key, shape, minval=-1.0, maxval=1.0)  # noqa: E731
  return readings.replace(
    gyro=readings.gyro + level * scales["gyro"] * u(k[0], (3,)),
    accelerometer=readings.accelerometer + level * scales["accelerometer"] * u(k[1], (3,)),
    joint_pos=readings.joint_pos + level * jp.asarray(scales["joint_pos"]) * u(k[2], (NUM_ACTIONS,)),
    joint_vel=readings.joint_vel + level * jp.asarray(scales["joint_vel"]) * u(k[3], (NUM_ACTIONS,)),
  )


def imu_push(buffer: jax.Array, gyro: jax.Array, accelerometer: jax.Array) -> jax.Array:
  """Pushes the newest IMU sample (gyro, accelerometer) at index 0."""
  sample = jp.concatenate([gyro, accelerometer])
  return jp.roll(buffer, 1, axis=0).at[0].set(sample)


def proprioception(imu_sample: jax.Array, noisy: Readings) -> dict[str, jax.Array]:
  """The actor's proprioceptive blocks (`HISTORY_FRAME_LAYOUT` names) as it observes them.

  The IMU sample it got (noisy, possibly delayed) and the noisy joints, joint
  velocity scaled by `JOINT_VEL_SCALE`: the one definition that both the
  `state` observation and the history frames use.
  """
  return dict(
    gyro=imu_sample[:3],
    accelerometer=imu_sample[3:],
    joint_pos=noisy.joint_pos,
    joint_vel=noisy.joint_vel * JOINT_VEL_SCALE,
  )


def history_frame(imu_sample: jax.Array, noisy: Readings) -> jax.Array:
  """One `HISTORY_FRAME_LAYOUT` frame: the IMU sample the actor got and the noisy joints."""
  return HISTORY_FRAME_LAYOUT.concat(proprioception(imu_sample, noisy))


def history_push(buffer: jax.Array, frame: jax.Array) -> jax.Array:
  """Pushes `frame` at index 0 of a (frames, 34) history buffer."""
  return jp.roll(buffer, 1, axis=0).at[0].set(frame)


def build(
  noisy: Readings,
  clean: Readings,
  imu_sample: jax.Array,
  command: jax.Array,
  last_actions: jax.Array,
  motor_targets: jax.Array,
  phase: jax.Array,
  feet_air_time: jax.Array,
  history: jax.Array | None = None,
  dynamics: jax.Array | None = None,
  kick: jax.Array | None = None,
  actor_kick: bool = False,
) -> dict[str, jax.Array]:
  """Assembles `state` and `privileged_state` from readings and env state.

  Args:
    noisy: readings with sensor noise (the actor's view).
    clean: the same readings without noise.
    imu_sample: (gyro, accelerometer) as the actor receives them, i.e. noisy
      and possibly delayed.
    command: the 7-dim command.
    last_actions: (3, 14) previous policy actions, newest first.
    motor_targets: the servo targets commanded at the last step, as the
      robot runtime sends them (home + scale * action + head command, no
      speed or range limit).
    phase: gait phase in radians.
    feet_air_time: seconds each foot has been off the ground.
    history: (frames, 34) earlier `history_frame`s, newest first; None or
      0 frames for the runtime's 101-float layout.
    dynamics: (`DYNAMICS_SIZE`,) randomized physical parameters for the
      critic only (`critic_dynamics`); None leaves them out.
    kick: (`KICK_SIZE`,) balance state after a kick (`kick_state`) for the
      critic only (`critic_kick`); None leaves it out.
    actor_kick: the actor's `state` ends with `kick` too (the `actor_kick`
      diagnostic; needs `kick`).
  """
  if actor_kick and kick is None:
    raise ValueError("the actor can observe the kick only with the critic's kick state (critic_kick)")
  frames = 0 if history is None else history.shape[0]
  blocks = dict(
    **proprioception(imu_sample, noisy),  # the same blocks as a history frame
    command=command,
    last_actions=last_actions,
    motor_targets=motor_targets,
    feet_contacts=noisy.feet_contacts,
    phase=jp.array([jp.cos(phase), jp.sin(phase)]),
  )
  if frames:
    blocks["history"] = history
  privileged = dict(
    gyro_clean=clean.gyro,
    accelerometer_clean=clean.accelerometer,
    gravity=clean.gravity,
    local_linvel=clean.local_linvel,
    global_angvel=clean.global_angvel,
    joint_pos_clean=clean.joint_pos,
    joint_vel_clean=clean.joint_vel,
    actuator_force=clean.actuator_force,
    feet_vel=clean.feet_vel,
    feet_air_time=feet_air_time,
    base_height=clean.base_height,
  )
  if dynamics is not None:
    privileged["dynamics"] = dynamics
  kick_blocks = {}
  if kick is not None:
    kick_blocks = dict(zip([n for n, _ in KICK_FIELDS], jp.split(kick, [2, 3]), strict=True))
    privileged.update(kick_blocks)
  return {
    "state": state_layout(frames, actor_kick).concat({**blocks, **(kick_blocks if actor_kick else {})}),
    "privileged_state": privileged_layout(frames, dynamics is not None, kick is not None).concat(
      {**blocks, **privileged}
    ),
  }


def capture_point(readings: Readings, gravity: float = 9.81) -> jax.Array:
  """World-frame (x, y) capture point: the centre of mass as a linear inverted pendulum over the lowest foot.

  `rewards.capture_point` of the whole duck's centre of mass, moving at the
  trunk's velocity, at its height above the lower foot. Where a foot must
  land to stop the duck; the reward (`capture_point`) and the critic's
  `KICK_FIELDS` both read it here.
  """
  height = readings.com_pos[2] - jp.min(readings.feet_pos[:, 2])
  return rewards.capture_point(readings.com_pos[:2], readings.global_linvel[:2], height, gravity)


def kick_state(kick: jax.Array, since_s: jax.Array, readings: Readings, gravity: float = 9.81) -> jax.Array:
  """The critic's `KICK_FIELDS` (`KICK_SIZE` floats), in the trunk's heading frame (`readings.heading`).

  Args:
    kick: (2,) world-frame velocity change of the last kick (m/s).
    since_s: seconds since that kick (large when there was none).
    readings: noiseless readings of the current state (heading, centre of
      mass, its velocity, the feet).
    gravity: m/s^2, for the capture point's pendulum frequency.
  """
  age = jp.clip(jp.reshape(since_s, ()) / KICK_MEMORY_S, 0.0, 1.0)
  recent = (age < 1.0).astype(jp.float32)
  point = capture_point(readings, gravity) - jp.mean(readings.feet_pos[:, :2], axis=0)  # from the feet's midpoint
  kick_local = kicks.in_heading_frame(kick, readings.heading)
  return jp.concatenate([kick_local * recent, age[None], kicks.in_heading_frame(point, readings.heading)])


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
  subtree_com: jax.Array

  @classmethod
  def from_mjdata(cls, data: mujoco.MjData) -> DataView:
    return cls(
      qpos=np.array(data.qpos, np.float32),
      qvel=np.array(data.qvel, np.float32),
      sensordata=np.array(data.sensordata, np.float32),
      site_xmat=np.array(data.site_xmat, np.float32).reshape(-1, 3, 3),
      xpos=np.array(data.xpos, np.float32),
      actuator_force=np.array(data.actuator_force, np.float32),
      subtree_com=np.array(data.subtree_com, np.float32),
    )


def read(ids: RobotIndices, model: Any, data: Any) -> Readings:
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
  feet_pos = jp.stack([ids.sensor(data, n) for n in constants.FEET_POS_SENSORS])
  base_pos = jp.asarray(data.xpos)[ids.root_body]
  return Readings(
    gyro=jp.asarray(ids.sensor(data, constants.GYRO_SENSOR)),
    accelerometer=jp.asarray(ids.sensor(data, constants.ACCELEROMETER_SENSOR)),
    gravity=imu_rot.T @ jp.array([0.0, 0.0, -1.0]),
    local_linvel=jp.asarray(ids.sensor(data, constants.LOCAL_LINVEL_SENSOR)),
    global_linvel=jp.asarray(ids.sensor(data, constants.GLOBAL_LINVEL_SENSOR)),
    global_angvel=jp.asarray(ids.sensor(data, constants.GLOBAL_ANGVEL_SENSOR)),
    joint_pos=encoder_q - offsets - ids.home_ctrl,
    joint_vel=encoder_qvel,
    actuator_force=jp.asarray(data.actuator_force),
    feet_contacts=jp.concatenate([ids.sensor(data, n) for n in constants.FEET_CONTACT_SENSORS])
    .astype(jp.float32)
    .clip(0.0, 1.0),
    feet_pos=feet_pos,
    feet_vel=jp.concatenate([ids.sensor(data, n) for n in constants.FEET_LINVEL_SENSORS]),
    base_pos=base_pos,
    base_height=jp.reshape(base_pos[2] - jp.min(feet_pos[:, 2]), (1,)),
    com_pos=jp.asarray(data.subtree_com)[ids.root_body],
    heading=kicks.heading(q[3:7]),  # the free root joint's quaternion
  )


def dynamics_params(ids: RobotIndices, model: Any) -> jax.Array:
  """The physical parameters domain randomization drew, relative to the nominal model.

  The `DYNAMICS_FIELDS` block of the critic's observation
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
    if name in constants.HEAD_JOINT_NAMES:
      return "head"
    return "hip" if "hip" in name else "knee" if "knee" in name else "ankle"

  return {
    "gyro": float(scales["gyro"]),
    "accelerometer": float(scales["accelerometer"]),
    "joint_pos": np.array([scales[f"joint_pos_{group(n)}"] for n in constants.ACTUATOR_NAMES], np.float32),
    "joint_vel": np.full(len(constants.ACTUATOR_NAMES), float(scales["joint_vel"]), np.float32),
  }
