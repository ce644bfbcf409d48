"""The Open Duck robot runtime's control loop, for playing a policy as the robot does.

The public Open Duck Mini runtime (`scripts/v2_rl_walk_mujoco.py`) feeds the
ONNX policy at 50 Hz. This module follows its loop, written from its
description and not from the training env: it shares no code with
`observations.py` or the env's `observe`, so that a policy played through
it checks the env's observation code instead of repeating it.

The loop, per control step:
  1. before the loop: the servos hold `init_pos` (the home pose) for 2 s;
  2. observe: gyro, raw accelerometer, the 7 commands, joint positions minus
     `init_pos`, joint velocities x 0.05, the last 3 actions (newest first),
     the `motor_targets` it sent last, 2 foot contacts, then the phase
     (cos, sin). The phase starts at (0, 0);
  3. advance the phase: `i += phase_frequency_factor + offset` (1.0; 1.3
     while the gamepad's LB button is held), `i %= nb_steps_in_period`,
     phase = (cos, sin)(2 pi i / nb_steps_in_period);
  4. `action = policy(obs)`; `motor_targets = init_pos + action_scale *
     action`, optionally clipped to `max_motor_velocity` per step and
     low-pass filtered (`--cutoff_frequency`, applied after the first
     second); then the head commands are added in place, so the next
     observation includes them.

`Hardware` is the simulated robot under that loop: its sensors (by MJCF
name, with the training env's noise levels and IMU delay) and its servos
(the training env's action delay, speed limit and range).

`RuntimeContract` names what tells the runtime's variants apart (the IMU
slot, the joint-velocity scale, the phase rule and the head mix): `CONTRACT`
is the one every dated runtime version since April 2025 speaks and this
project's files are made for (written into their metadata by
`contract_metadata`); `UNDATED_CONTRACT` is the other, an undated variant of
the walk script. The loop plays either (`RuntimeOptions.contract`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import robot_model

#: The runtime's phase button's factor.
PHASE_BUTTON_FACTOR = 1.3
#: The runtime's phase rule "held": the phase stays at 0 while |(vx, vy, yaw rate)| <= this.
PHASE_HOLD_BELOW = 0.1
#: The values of `RuntimeContract`'s facts.
IMU_SLOTS = ("accelerometer", "gravity")
PHASE_RULES = ("free-running", "held")

#: The runtime this project's policy files are made for, its walk scripts and the commits
#: that speak `CONTRACT` (read from the runtime's history; see docs/on-the-robot.md).
RUNTIME = "Open_Duck_Mini_Runtime (github.com/apirrone/Open_Duck_Mini_Runtime)"
WALK_SCRIPTS = (
  "src/open_duck_mini_runtime/walk.py (`uv run walk`, `uv run walk-keyboard`); "
  "before the package: scripts/v2_rl_walk_mujoco.py"
)
COMMITS = "6faec97 (2025-04-07, head mix added) and every later dated version"


@dataclasses.dataclass(frozen=True)
class RuntimeContract:
  """The four facts that tell the runtime's variants apart.

  Attributes:
    imu_slot: what the observation holds after the gyro: "accelerometer" (the
      raw accelerometer, m/s^2) or "gravity" (the IMU's orientation applied
      to (0, 0, -1): a unit vector).
    joint_vel_scale: the joint velocities are observed times this.
    phase_rule: "free-running" (the phase advances every step) or "held" (it
      stays at 0 while |(vx, vy, yaw rate)| <= `PHASE_HOLD_BELOW`).
    head_mix: the 4 head commands are added to the head servos' targets.
  """

  imu_slot: str = "accelerometer"
  joint_vel_scale: float = 0.05
  phase_rule: str = "free-running"
  head_mix: bool = True

  def __post_init__(self):
    if self.imu_slot not in IMU_SLOTS:
      raise ValueError(f"unknown IMU slot '{self.imu_slot}'; valid: {', '.join(IMU_SLOTS)}")
    if self.phase_rule not in PHASE_RULES:
      raise ValueError(f"unknown phase rule '{self.phase_rule}'; valid: {', '.join(PHASE_RULES)}")

  @classmethod
  def from_metadata(cls, metadata: Mapping[str, Any]) -> RuntimeContract:
    """The contract a policy file's metadata names (`runtime_contract`); files from before the
    key: `CONTRACT`, with the file's `joint_vel_scale` if it has one."""
    named = dict(metadata.get("runtime_contract") or {})
    scale = named.get("joint_vel_scale", metadata.get("joint_vel_scale", cls.joint_vel_scale))
    return cls(
      imu_slot=str(named.get("imu_slot", cls.imu_slot)),
      joint_vel_scale=float(scale),
      phase_rule=str(named.get("phase_rule", cls.phase_rule)),
      head_mix=bool(named.get("head_mix", cls.head_mix)),
    )


#: The contract of every dated runtime version since April 2025; this project's files are made for it.
CONTRACT = RuntimeContract()
#: An undated variant of the walk script: projected gravity, velocities x 0.1, the phase held
#: at small commands, no head commands in the targets. A file made for one walks badly on the other.
UNDATED_CONTRACT = RuntimeContract(imu_slot="gravity", joint_vel_scale=0.1, phase_rule="held", head_mix=False)
#: The runtime's joint-velocity scale (`CONTRACT`'s).
JOINT_VEL_SCALE = CONTRACT.joint_vel_scale


def contract_metadata(contract: RuntimeContract = CONTRACT) -> dict[str, Any]:
  """The policy metadata `runtime_contract`: the runtime, its walk scripts, the commits and the four facts."""
  return {"runtime": RUNTIME, "walk_script": WALK_SCRIPTS, "commits": COMMITS, **dataclasses.asdict(contract)}


#: The head servos' places in the action (the runtime adds the head commands there).
_HEAD = [constants.ACTUATOR_NAMES.index(n) for n in constants.HEAD_JOINT_NAMES]
#: The runtime's observation size (no history).
OBSERVATION_SIZE = 3 + 3 + 7 + 14 + 14 + 3 * 14 + 14 + 2 + 2


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
  """Settings of the runtime's loop.

  Attributes:
    hold_s: seconds the servos hold `init_pos` before the policy starts.
    phase_offset: the runtime's `phase_frequency_factor_offset` (d-pad).
    max_motor_velocity: rad/s; clip each target's change per step to it (the
      runtime's optional clip); None: no clip (its default).
    cutoff_frequency: Hz of the runtime's first-order low-pass filter on the
      targets; None: no filter (its default).
    filter_after_s: the filter's output is used after this many seconds.
    contract: the runtime variant to play (`CONTRACT`, the one this project's
      files are made for, or `UNDATED_CONTRACT`); None: the one the policy
      file's metadata names (the player's runtime source), else `CONTRACT`.
  """

  hold_s: float = 2.0
  phase_offset: float = 0.0
  max_motor_velocity: float | None = None
  cutoff_frequency: float | None = None
  filter_after_s: float = 1.0
  contract: RuntimeContract | None = None


class RuntimeLoop:
  """The runtime's per-robot state for `n` robots at once (numpy).

  Args:
    n: robots.
    init_pos: (14,) home pose, action order.
    action_scale: the runtime's `action_scale`.
    period_steps: `nb_steps_in_period`, control steps per gait period.
    ctrl_dt: control period (s).
    options: `RuntimeOptions`.
    phase_factor: (n,) or scalar `phase_frequency_factor` (1.0, or 1.3 with LB held).
  """

  def __init__(
    self,
    n: int,
    init_pos: np.ndarray,
    action_scale: float,
    period_steps: float,
    ctrl_dt: float,
    options: RuntimeOptions = RuntimeOptions(),
    phase_factor: float | np.ndarray = 1.0,
  ):
    self.n = n
    self.init_pos = np.asarray(init_pos, np.float64)
    self.action_scale = float(action_scale)
    self.period_steps = float(period_steps)
    self.ctrl_dt = float(ctrl_dt)
    self.options = options
    self.contract = options.contract or CONTRACT
    self.phase_factor = np.broadcast_to(np.asarray(phase_factor, np.float64), (n,)).copy()
    nj = len(self.init_pos)
    self.last_actions = np.zeros((3, n, nj))  # last, last_last, last_last_last
    self.motor_targets = np.tile(self.init_pos, (n, 1))
    self.prev_motor_targets = self.motor_targets.copy()
    self.imitation_i = np.zeros(n)
    self.imitation_phase = np.zeros((n, 2))
    self.filter_state = np.zeros((n, nj))
    self.loop_time = 0.0
    fc = options.cutoff_frequency
    self.alpha = None if fc is None else (1.0 / fc) / (ctrl_dt + 1.0 / fc)

  def observe(
    self,
    gyro: np.ndarray,
    accelerometer: np.ndarray,
    commands: np.ndarray,
    dof_pos: np.ndarray,
    dof_vel: np.ndarray,
    feet_contacts: np.ndarray,
    gravity: np.ndarray | None = None,
  ) -> np.ndarray:
    """The observation [n, 101] in the runtime's order; then advances the phase.

    `gravity` (the IMU's orientation applied to (0, 0, -1)) takes the
    accelerometer's slot when the contract's `imu_slot` is "gravity".
    """
    contract = self.contract
    imu = accelerometer
    if contract.imu_slot == "gravity":
      if gravity is None:
        raise ValueError("the contract observes gravity: pass the IMU's gravity direction")
      imu = gravity
    obs = np.concatenate(
      [
        gyro,
        imu,
        commands,
        dof_pos - self.init_pos,
        dof_vel * contract.joint_vel_scale,
        self.last_actions[0],
        self.last_actions[1],
        self.last_actions[2],
        self.motor_targets,
        feet_contacts,
        self.imitation_phase,
      ],
      axis=1,
    ).astype(np.float32)
    self.imitation_i = (self.imitation_i + self.phase_factor + self.options.phase_offset) % self.period_steps
    if contract.phase_rule == "held":
      moving = np.linalg.norm(np.asarray(commands, np.float64)[:, :3], axis=1) > PHASE_HOLD_BELOW
      self.imitation_i = np.where(moving, self.imitation_i, 0.0)
    angle = self.imitation_i / self.period_steps * 2 * np.pi
    self.imitation_phase = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return obs

  def act(self, action: np.ndarray, commands: np.ndarray) -> np.ndarray:
    """The targets the runtime sends for `action` [n, 14]; updates its state."""
    action = np.asarray(action, np.float64)
    self.last_actions = np.stack([action, self.last_actions[0], self.last_actions[1]])
    targets = self.init_pos + action * self.action_scale
    if self.options.max_motor_velocity is not None:
      step = self.options.max_motor_velocity * self.ctrl_dt
      targets = np.clip(targets, self.prev_motor_targets - step, self.prev_motor_targets + step)
    if self.alpha is not None:
      self.filter_state = self.alpha * self.filter_state + (1.0 - self.alpha) * targets
      if self.loop_time > self.options.filter_after_s:
        targets = self.filter_state.copy()
    self.prev_motor_targets = targets.copy()
    if self.contract.head_mix:
      targets[:, _HEAD] = targets[:, _HEAD] + np.asarray(commands, np.float64)[:, 3:7]
    self.motor_targets = targets
    self.loop_time += self.ctrl_dt
    return targets


class Hardware:
  """The simulated robot under the runtime: its sensors and servos, `n` at once.

  Sensors are read from MuJoCo C data by name (`RobotIndices`): the IMU's gyro,
  accelerometer and orientation (as the gravity direction), the servo encoders
  (joint angle, plus the backlash play on backlash scenes, minus the servo's
  zero offset that randomization put in `qpos0`), their velocities and the
  foot switches. Noise is uniform,
  `level * scale * U(-1, 1)` with the training env's per-joint scales
  (`observations.noise_scales`); the IMU lags `imu_steps` control steps (drawn
  per robot). The servos receive the sent targets `action_steps` late
  (redrawn every step), move at most `max_motor_velocity` per second and
  stay in their range.

  Args:
    nominal: the task's nominal model (names, ranges, nominal `qpos0`).
    models: one (possibly randomized) model per robot.
    noise: `noise_config` (level, scales).
    delay: `delay` (action_steps, imu_steps).
    max_motor_velocity: the servo's speed (rad/s).
    ctrl_dt: control period (s).
    rng: numpy generator for noise and delays.
  """

  def __init__(
    self,
    nominal: mujoco.MjModel,
    models: Sequence[mujoco.MjModel],
    noise: Mapping[str, Any],
    delay: Mapping[str, Any],
    max_motor_velocity: float,
    ctrl_dt: float,
    rng: np.random.Generator,
  ):
    self.n = len(models)
    self.rng = rng
    self.ids = ids = robot_model.RobotIndices.from_model(nominal)
    self.zero_offsets = np.stack([m.qpos0[ids.act_qpos] - ids.qpos0_nominal for m in models])
    self.ctrl_range = np.stack([ids.ctrl_lower, ids.ctrl_upper], axis=1)
    level = float(noise["level"])
    scales = observations.noise_scales(noise["scales"])
    self.noise = {
      "gyro": level * scales["gyro"],
      "accel": level * scales["accelerometer"],
      "pos": level * scales["joint_pos"],
      "vel": level * scales["joint_vel"],
    }
    self.action_steps = tuple(int(x) for x in delay["action_steps"])
    lo, hi = (int(x) for x in delay["imu_steps"])
    self.imu_delay = rng.integers(lo, hi + 1, size=self.n)
    self.imu_buffer: np.ndarray | None = None
    self.sent_buffer: np.ndarray | None = None
    self.ctrl: np.ndarray | None = None
    self.max_step = float(max_motor_velocity) * float(ctrl_dt)

  def _uniform(self, scale, shape):
    return scale * self.rng.uniform(-1.0, 1.0, shape)

  def sense(self, datas: Sequence[mujoco.MjData]) -> dict[str, np.ndarray]:
    """Noisy sensor readings [n, ...] as the runtime receives them."""
    n = self.n
    ids = self.ids
    # The encoder reads the servo's output shaft: the joint plus the backlash play behind it (backlash scenes).
    mask = ids.encoder_backlash_mask
    q = np.stack([d.qpos[ids.act_qpos] + mask * d.qpos[ids.encoder_backlash_qpos] for d in datas])
    qd = np.stack([d.qvel[ids.act_dof] + mask * d.qvel[ids.encoder_backlash_dof] for d in datas])
    imu = np.stack(
      [
        np.concatenate(
          [
            ids.sensor(d, constants.GYRO_SENSOR),
            ids.sensor(d, constants.ACCELEROMETER_SENSOR),
            d.site_xmat[ids.imu_site].reshape(3, 3).T @ np.array([0.0, 0.0, -1.0]),
          ]
        )
        for d in datas
      ]
    )
    # The orientation (gravity) is the IMU's fused estimate: no noise of its own, the same delay.
    imu = imu + np.concatenate(
      [self._uniform(self.noise["gyro"], (n, 3)), self._uniform(self.noise["accel"], (n, 3)), np.zeros((n, 3))], 1
    )
    if self.imu_buffer is None:
      self.imu_buffer = np.repeat(imu[None], 4, axis=0)
    self.imu_buffer = np.concatenate([imu[None], self.imu_buffer[:-1]])
    imu = self.imu_buffer[self.imu_delay, np.arange(n)]
    contacts = np.stack([[float(ids.sensor(d, f)[0] > 0) for f in constants.FEET_CONTACT_SENSORS] for d in datas])
    return {
      "gyro": imu[:, :3],
      "accelerometer": imu[:, 3:6],
      "gravity": imu[:, 6:],
      "dof_pos": q - self.zero_offsets + self._uniform(self.noise["pos"], q.shape),
      "dof_vel": qd + self._uniform(self.noise["vel"], qd.shape),
      "feet_contacts": contacts,
    }

  def hold(self, targets: np.ndarray) -> np.ndarray:
    """Servos driven straight to `targets` (the runtime's start-up hold); returns the control."""
    self.ctrl = np.clip(targets, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
    self.sent_buffer = np.repeat(np.asarray(targets, np.float64)[None], 4, axis=0)
    return self.ctrl

  def drive(self, sent: np.ndarray) -> np.ndarray:
    """The control the servos apply this period for the `sent` targets [n, 14]."""
    assert self.sent_buffer is not None and self.ctrl is not None, "hold() first"
    self.sent_buffer = np.concatenate([np.asarray(sent, np.float64)[None], self.sent_buffer[:-1]])
    lo, hi = self.action_steps
    delayed = self.sent_buffer[self.rng.integers(lo, hi + 1)]
    ctrl = np.clip(delayed, self.ctrl - self.max_step, self.ctrl + self.max_step)
    self.ctrl = np.clip(ctrl, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
    return self.ctrl


def first_frames(task_model: mujoco.MjModel, init_pos: np.ndarray, commands: np.ndarray) -> np.ndarray:
  """The runtime's first observation [k, 101] at the home pose, one per command [k, 7].

  Noiseless sensors of the home keyframe at rest, no actions yet, the sent
  targets at `init_pos` and the phase (0, 0): what the policy file receives
  on the robot's first control step.
  """
  data = mujoco.MjData(task_model)
  mujoco.mj_resetDataKeyframe(task_model, data, task_model.key(constants.HOME_KEYFRAME).id)
  mujoco.mj_forward(task_model, data)
  commands = np.atleast_2d(np.asarray(commands, np.float64))
  k = len(commands)
  loop = RuntimeLoop(k, init_pos, 1.0, 1.0, 0.02)
  sensors = Hardware(
    task_model, [task_model] * k, {"level": 0.0, "scales": _ZERO_NOISE}, _NO_DELAY, 1.0, 0.02, np.random.default_rng(0)
  ).sense([data] * k)
  return loop.observe(commands=commands, **sensors)


_ZERO_NOISE = dict(
  gyro=0.0,
  accelerometer=0.0,
  joint_pos_hip=0.0,
  joint_pos_knee=0.0,
  joint_pos_ankle=0.0,
  joint_pos_head=0.0,
  joint_vel=0.0,
)
_NO_DELAY = {"action_steps": (0, 0), "imu_steps": (0, 0)}
