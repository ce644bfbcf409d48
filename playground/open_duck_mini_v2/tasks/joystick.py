"""Joystick task: track a base velocity command and a head pose command.

The command (vx, vy, yaw rate, neck_pitch, head_pitch, head_yaw, head_roll)
is resampled every few seconds; a configurable share of the velocity commands
is exactly zero so that the policy also learns to stand still.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np
from ml_collections import config_dict
from mujoco_playground import State

from playground.common import configs
from playground.common.tasks import catch_reference
from playground.common.tasks import reference_motion
from playground.common.tasks import rewards
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import mirror
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.tasks import base
from playground.open_duck_mini_v2.tasks.gait_tables import FRAME_LAYOUT
from playground.open_duck_mini_v2.tasks.gait_tables import feedforward_on
from playground.open_duck_mini_v2.tasks.gait_tables import residual_gain
from playground.open_duck_mini_v2.tasks.gait_tables import stand_pose_in_feedforward
from playground.open_duck_mini_v2.tasks.gait_tables import step_in_place
from playground.open_duck_mini_v2.tasks.gait_tables import table_path
from playground.open_duck_mini_v2.tasks.gait_tables import uses_reference

IMITATED_JOINTS = tuple(constants.ACTUATOR_NAMES.index(n) for n in constants.LEG_JOINT_NAMES)


def default_config() -> config_dict.ConfigDict:
  """Default configuration of the joystick task."""
  config = base.base_config()
  config.command_config = config_dict.ConfigDict(
    dict(
      lin_vel_x=(-0.15, 0.15),  # m/s
      lin_vel_y=(-0.2, 0.2),  # m/s
      ang_vel_yaw=(-1.0, 1.0),  # rad/s
      **commands.HEAD_RANGES,  # rad, offsets added to the home pose
      zero_command_prob=0.2,  # share of zero velocity commands
      single_axis_prob=0.0,  # share of velocity commands on one axis only (pure walk, side step or turn)
      zero_head_prob=0.5,  # share of zero head commands
      resample_interval=(4.0, 8.0),  # s
    )
  )
  config.reward_config = config_dict.ConfigDict(
    dict(
      # Per second of simulated time. Walking must beat standing by a wide
      # margin at every command (README, "Why walking wins"): the alive bonus
      # is small, tracking and the imitation of the reference gait dominate.
      scales=dict(
        tracking_lin_vel=4.0,
        tracking_ang_vel=4.0,
        head_tracking=1.0,
        torques=-1.0e-3,
        action_rate=-0.5,
        stand_still=-0.2,
        alive=1.0,
        termination=0.0,
        orientation=-1.0,
        lin_vel_z=0.0,
        ang_vel_xy=-0.05,
        feet_air_time=1.0,
        feet_slip=-0.1,
        imitation=4.0,  # reference-gait imitation (0 turns it off); paid only for non-zero commands
        # Radians of leg joints beyond the middle soft_joint_limit_factor of
        # their range (a crouch resting on the knee stop pays it).
        dof_pos_limits=0.0,
        # Within push_config.recovery_s of a kick only: m by which the capture
        # point (centre of mass + trunk velocity / omega) lies beyond
        # capture_margin from the segment between the feet. Pays for the step
        # (or the brake) that catches a kick.
        capture_point=0.0,
        # Within push_config.recovery_s of a kick at a zero command only, with
        # push_config.catch_reference: exp(-|leg motor targets - the recovery
        # reference's|^2 / catch_sigma). Pays for the searched catching motion.
        catch_imitation=0.0,
      ),
      soft_joint_limit_factor=0.95,
      catch_sigma=0.05,  # rad^2 over the ten leg targets: 0.22 rad off on one joint earns exp(-1)
      capture_margin=0.03,  # m around the segment between the feet that capture_point leaves free
      # Rad from home of each leg joint that stand_still pulls to at a zero
      # command (all 0: the home pose). `benchmarks.stance_search` finds a
      # stance within the runtime's reach that catches kicks without a step.
      # Each within +-action_scale x reference.residual_gain.
      stand_pose={name: 0.0 for name in constants.LEG_JOINT_NAMES},
      tracking_sigma=0.01,  # (m/s)^2: an error of 0.1 m/s earns exp(-1) of tracking_lin_vel
      # s: the tracking terms judge the trunk's velocity and yaw rate through a
      # low-pass of this time constant (0: each step's own). The gait's own
      # swing (about 0.1 m/s rms sideways) otherwise outweighs the speed.
      tracking_filter_s=0.0,
      ang_tracking_sigma=0.1,  # (rad/s)^2: an error of 0.3 rad/s earns exp(-0.9) of tracking_ang_vel
      head_tracking_sigma=0.1,
      feet_air_time_threshold=0.2,
      imitation=dict(
        # Component weights (each component is in [0, 1]); 0 skips one.
        weights=dict(joint_pos=1.0, joint_vel=0.2, foot_contacts=0.5, base_linvel=0.5, base_angvel=0.3),
        # Sharp enough that standing in the home pose earns little of joint_pos
        # (0.2) and joint_vel (0.04) against a walking reference.
        sigmas=dict(joint_pos=0.1, joint_vel=10.0, base_linvel=0.01, base_angvel=0.1),
      ),
    )
  )
  config.reference = config_dict.ConfigDict(
    dict(
      path="",  # .npz reference table; empty: the built-in generated gait
      clamp=False,  # True: commands outside the reference grid use its edge
      # True: the policy's action is a residual around the reference gait. The
      # env adds (reference leg pose - home) / action_scale at the command and
      # phase of the observation while the command is non-zero, and the
      # exported ONNX adds the same (`Joystick.feedforward`).
      feedforward=False,
      # True: the duck steps in place at a zero velocity command instead of
      # standing still. The feed-forward then adds the reference's in-place
      # gait at a zero command too, imitation pays there as well, and
      # stand_still (legs at home) is not computed.
      step_in_place=False,
      # With the feed-forward: the policy's residual (a tanh in [-1, 1]) is
      # multiplied by this before the gait is added, inside the env and the
      # file alike, so each leg target reaches home +- action_scale x gain
      # around the gait; the runtime's action_scale is unchanged.
      residual_gain=1.0,
      # With the feed-forward: at a zero command it adds
      # reward_config.stand_pose ((pose) / action_scale), so the file stands in
      # that stance with a zero residual and the residual is centred on it.
      feedforward_stand_pose=False,
      # The gait servos slower than the default play (`servos.SERVO_GAITS`):
      # "builtin" (their speed limit clips its fastest moments) or "slowed"
      # (`gait_generator.fit_to_speed`, which does not lift the C001's feet).
      servo_gait="builtin",
    )
  )
  return config


def stand_pose(config: config_dict.ConfigDict) -> np.ndarray:
  """Offsets from home (rad, `IMITATED_JOINTS` order) that stand_still pulls the legs to.

  Raises `ConfigError` for an offset beyond the residual's reach (the policy
  could not hold it).
  """
  pose = config.reward_config.get("stand_pose", {}) or {}
  reach = float(config.action_scale) * residual_gain(config)
  for name, value in pose.items():
    if abs(float(value)) > reach + 1e-9:
      raise configs.ConfigError(
        f"reward_config.stand_pose.{name}={value} is beyond the residual's reach of {reach:g} rad from home"
        " (action_scale x reference.residual_gain)"
      )
  return np.array([float(pose.get(name, 0.0)) for name in constants.LEG_JOINT_NAMES], np.float32)


class Joystick(base.OpenDuckMiniV2Env):
  """Velocity + head command tracking for the Open Duck Mini V2.

  With `reward_config.scales.imitation > 0` it also rewards following a
  reference gait (the built-in generated one, or `reference.path`) at the
  gait phase of the observation, which then advances at the reference's
  frequency. With `reference.feedforward` the policy's action is a residual
  around that gait (see `feedforward`).
  """

  def __init__(self, task="flat_terrain", config=None):
    super().__init__(task, config)
    self._reference = None
    self._feedforward = None
    # First: residual_gain refuses a gain that is not positive, before stand_pose reads it.
    if residual_gain(self._config) != 1.0 and not feedforward_on(self._config):
      raise configs.ConfigError(
        "reference.residual_gain scales the residual around the feed-forward: set reference.feedforward=true"
      )
    if stand_pose_in_feedforward(self._config) and (not feedforward_on(self._config) or step_in_place(self._config)):
      raise configs.ConfigError(
        "reference.feedforward_stand_pose adds the stance where the feed-forward stands:"
        " set reference.feedforward=true and reference.step_in_place=false"
      )
    recovery_s = float(self._config.push_config.get("recovery_s", 0.0))
    if self._config.reward_config.scales.get("capture_point", 0.0) and not recovery_s > 0.0:
      raise configs.ConfigError(
        "reward_config.scales.capture_point is paid only after a kick: set push_config.recovery_s above 0"
      )
    self._catch = None
    catch_path = str(self._config.push_config.get("catch_reference", "") or "")
    catching = self._config.reward_config.scales.get("catch_imitation", 0.0)
    if catching and not (catch_path and recovery_s > 0.0):
      raise configs.ConfigError(
        "reward_config.scales.catch_imitation needs push_config.catch_reference (a catch_search --shared JSON)"
        " and push_config.recovery_s above 0"
      )
    if catching:
      self._catch = catch_reference.CatchReference.load(
        catch_path, constants.LEG_JOINT_NAMES, float(self._config.ctrl_dt), residual_gain(self._config)
      )
      self._catch_mirror = mirror.leg_map(self.mj_model)
    if uses_reference(self._config):
      self._reference = load_reference(self._config)
      c = self._config.command_config
      uncovered = self._reference.uncovered(commands.velocity_ranges(c))
      if uncovered and not self._config.reference.clamp:
        raise configs.ConfigError(
          f"the reference does not cover the commands: {uncovered}; narrow command_config or set reference.clamp=true"
        )
      self._lookup = self._reference.lookup_fn()
    self._stand_pose = stand_pose(self._config)
    if self._reference is not None and feedforward_on(self._config):
      self._feedforward = make_feedforward(
        self._reference,
        self._ids.home_ctrl,
        self._config.action_scale,
        step_in_place(self._config),
        residual_gain(self._config),
        self._stand_pose if stand_pose_in_feedforward(self._config) else None,
      )
      self._feedforward_fn = self._feedforward.jax_fn()

  @classmethod
  def default_config(cls) -> config_dict.ConfigDict:
    return default_config()

  @property
  def reference(self) -> reference_motion.ReferenceTable | None:
    return self._reference

  @property
  def feedforward(self) -> reference_motion.Feedforward | None:
    """The reference gait added to the policy's action, or None (`reference.feedforward`)."""
    return self._feedforward

  def step(self, state: State, action: jax.Array) -> State:
    """One control step; with a feed-forward, `action` is the policy's residual around the gait.

    The action that the robot runtime would receive (gain x residual + feed-forward
    at the observation's command and phase) is what the env applies, keeps
    in its action history and observes, as on the robot.
    """
    if self._feedforward is not None:
      gait = self._feedforward_fn(state.info["command"], state.info["phase"])
      action = self._feedforward.residual_gain * action + gait
    return super().step(state, action)

  @property
  def gait_frequency(self) -> float:
    if self._reference is not None:
      return self._reference.frequency
    return super().gait_frequency

  @classmethod
  def gait_frequency_of(cls, config: config_dict.ConfigDict) -> float:
    """Hz at which an env built from `config` advances its phase (without building it)."""
    if uses_reference(config):
      return load_reference(config).frequency
    return float(config.gait_frequency)

  def reward_scales(self) -> dict[str, float]:
    scales = super().reward_scales()
    if step_in_place(self._config):
      # Stepping in place is what a zero command asks for: legs at home is not.
      scales.pop("stand_still", None)
    imitation = scales.pop("imitation", 0.0)
    if imitation:
      for name, weight in self._config.reward_config.imitation.weights.items():
        if weight != 0.0:
          scales[f"imitation_{name}"] = imitation * float(weight)
    return scales

  def _soft_leg_limits(self) -> tuple[np.ndarray, np.ndarray]:
    """Soft (lower, upper) ranges of the leg joints (`reward_config.soft_joint_limit_factor`)."""
    legs = list(IMITATED_JOINTS)
    return rewards.soft_limits(
      self._ids.ctrl_lower[legs], self._ids.ctrl_upper[legs], float(self._config.reward_config.soft_joint_limit_factor)
    )

  def _catch_imitation(self, command: jax.Array, action: jax.Array, step: observations.StepContext) -> jax.Array:
    """The recovery reference's term: leg motor targets near the catching motion, after a kick while standing."""
    reach = float(self._config.action_scale) * residual_gain(self._config)
    stance = jp.asarray(self._stand_pose)
    legs = jp.array(IMITATED_JOINTS)
    standing = (jp.linalg.norm(command[commands.VELOCITY]) <= 0.01).astype(jp.float32)
    sigma = float(self._config.reward_config.get("catch_sigma", 0.05))
    targets = action[legs] * float(self._config.action_scale)
    # The motion or its mirror image, whichever is nearer (`catch_reference`).
    pose = jp.maximum(
      *(
        rewards.joint_tracking(jp.clip(target, stance - reach, stance + reach), targets, sigma)
        for target in (
          self._catch.targets(step.kick, step.since_kick, stance),
          self._catch.mirrored_targets(step.kick, step.since_kick, stance, self._catch_mirror),
        )
      )
    )
    return pose * standing * jp.asarray(step.recovering, jp.float32)

  def sample_command(self, rng: jax.Array) -> jax.Array:
    return commands.sample(rng, self._config.command_config)

  def compute_rewards(self, readings: observations.Readings, step: observations.StepContext) -> dict[str, jax.Array]:
    command, action, last_action, terminated = step.command, step.action, step.last_action, step.terminated
    cfg = self._config.reward_config
    head = self._ids.head_act
    legs = jp.array(IMITATED_JOINTS)
    velocity = step.velocity if step.velocity is not None else observations.instant_velocity(readings)
    terms = {
      "tracking_lin_vel": lambda: rewards.tracking_lin_vel(command[commands.PLANAR], velocity[:2], cfg.tracking_sigma),
      "tracking_ang_vel": lambda: rewards.tracking_ang_vel(
        command[commands.YAW_RATE], velocity[2], cfg.ang_tracking_sigma
      ),
      "head_tracking": lambda: rewards.joint_tracking(
        command[commands.HEAD], readings.joint_pos[head], cfg.head_tracking_sigma
      ),
      "torques": lambda: rewards.torques(readings.actuator_force),
      "action_rate": lambda: rewards.action_rate(action, last_action),
      # Legs only: the head follows its own command (head_tracking) even when
      # the velocity command is zero.
      "stand_still": lambda: rewards.stand_still(
        command[commands.VELOCITY], readings.joint_pos[legs] - self._stand_pose
      ),
      "alive": rewards.alive,
      "termination": lambda: rewards.termination(terminated),
      "orientation": lambda: rewards.orientation(readings.gravity),
      "lin_vel_z": lambda: rewards.lin_vel_z(readings.global_linvel),
      "ang_vel_xy": lambda: rewards.ang_vel_xy(readings.global_angvel),
      "feet_air_time": lambda: rewards.feet_air_time(
        step.air_time, step.first_contact, command[commands.VELOCITY], cfg.feet_air_time_threshold
      ),
      "feet_slip": lambda: rewards.feet_slip(readings.feet_contacts, readings.feet_vel.reshape(2, 3)[:, :2]),
      "dof_pos_limits": lambda: rewards.dof_pos_limits(
        (readings.joint_pos + self._ids.home_ctrl)[legs], *self._soft_leg_limits()
      ),
      "capture_point": lambda: (
        rewards.capture_point_excess(
          observations.capture_point(readings), readings.feet_pos[:, :2], float(cfg.get("capture_margin", 0.03))
        )
        * jp.asarray(step.recovering, jp.float32)
      ),
    }
    if self._catch is not None:
      # Without kicks (push_config.enable=false, as the scorecard plays) there is nothing to catch.
      terms["catch_imitation"] = (
        (lambda: self._catch_imitation(command, action, step)) if step.kick is not None else (lambda: jp.zeros(()))
      )
    # After a kick (`push_config.recovery_s`) the duck may step off its gait
    # and its home pose: the terms that pin it to them are waived.
    free = 1.0 - jp.asarray(step.recovering, jp.float32)
    for name in ("stand_still", "feet_air_time"):
      terms[name] = lambda term=terms[name]: term() * free
    active = self.active_reward_terms
    if self._reference is not None:
      frame = FRAME_LAYOUT.split(self._lookup(command[commands.VELOCITY], step.phase / (2 * jp.pi)))
      joints = jp.array(IMITATED_JOINTS)
      reference = dict(frame, joint_pos=frame["joint_pos"][joints], joint_vel=frame["joint_vel"][joints])
      components = rewards.imitation(
        joint_pos=(readings.joint_pos + self._ids.home_ctrl)[joints],
        joint_vel=readings.joint_vel[joints],
        foot_contacts=readings.feet_contacts,
        local_linvel=readings.local_linvel,
        yaw_rate=readings.gyro[2],
        reference=reference,
        sigmas=dict(self._config.reward_config.imitation.sigmas),
      )
      # The reference walks in place at a zero command; standing still is
      # stand_still's job there, so imitation pays only while moving (always
      # with `reference.step_in_place`).
      moving = (jp.linalg.norm(command[commands.VELOCITY]) > 0.01).astype(jp.float32)
      if step_in_place(self._config):
        moving = jp.ones(())
      for name, value in components.items():
        terms[f"imitation_{name}"] = lambda value=value: value * moving * free
    unknown = set(active) - set(terms)
    if unknown:
      raise ValueError(f"reward_config.scales has unknown terms {sorted(unknown)}")
    return {name: terms[name]() for name in active}


def make_feedforward(
  reference: reference_motion.ReferenceTable,
  home: np.ndarray,
  action_scale: float,
  in_place: bool = False,
  gain: float = 1.0,
  stand_pose: np.ndarray | None = None,
) -> reference_motion.Feedforward:
  """The reference's leg poses as action offsets: (pose - home) / action_scale; 0 for the head.

  Gated off at a zero command unless `in_place` (`reference.step_in_place`);
  the policy's residual is multiplied by `gain` (`reference.residual_gain`).
  With `stand_pose` (rad from home, `IMITATED_JOINTS` order), that stance is
  added instead of nothing at a zero command (`reference.feedforward_stand_pose`).
  """
  if not gain > 0.0:
    raise configs.ConfigError(f"reference.residual_gain must be positive, got {gain}")
  frames = FRAME_LAYOUT.split(reference.frames)
  legs = np.zeros(len(home), bool)
  legs[list(IMITATED_JOINTS)] = True
  offsets = np.where(legs, (frames["joint_pos"] - np.asarray(home)) / action_scale, 0.0).astype(np.float32)
  standing = None
  if stand_pose is not None:
    standing = np.zeros(len(home), np.float32)
    standing[list(IMITATED_JOINTS)] = np.asarray(stand_pose, np.float32) / action_scale
  return reference_motion.Feedforward(
    axes=reference.axes,
    offsets=offsets,
    command_index=observations.STATE_LAYOUT.slices["command"].start,
    phase_index=observations.STATE_LAYOUT.slices["phase"].start,
    gate_threshold=None if in_place else 0.01,
    residual_gain=float(gain),
    standing=standing,
  )


def load_reference(config: config_dict.ConfigDict) -> reference_motion.ReferenceTable:
  """The reference table an env built from `config` reads (`gait_tables.table_path`).

  The same path is the one a run records the digest of, so the table the env
  reads and the one `--resume` checks cannot differ.
  """
  return reference_motion.ReferenceTable.load(table_path(config))


def ideal_reward_per_second(env: Joystick, command: jax.Array, walking: bool, phases: int = 27) -> float:
  """Mean weighted reward per second over one gait period, for an idealized duck.

  The arithmetic behind the reward design: `walking=False` is a duck standing
  still in the home pose whatever the command; `walking=True` follows the
  command exactly with the reference gait's legs, velocities and contacts.
  Both are upright and pay no torque or action-rate costs. Needs the
  imitation reward on (the reference gives the walking motion).
  """
  if env.reference is None:
    raise ValueError("ideal_reward_per_second needs the imitation reward (a reference gait)")
  home = jp.asarray(env.ids.home_ctrl)
  head = jp.asarray(env.ids.head_act)
  lookup = env.reference.lookup_fn()
  scales = env.reward_scales()
  command = jp.asarray(command, jp.float32)

  def one(phase):
    frame = FRAME_LAYOUT.split(lookup(command[commands.VELOCITY], phase))
    if walking:
      joint_pos = frame["joint_pos"].at[head].set(home[head] + command[commands.HEAD])
      joint_vel, contacts = frame["joint_vel"], frame["foot_contacts"]
      linvel, yaw_rate = jp.array([command[0], command[1], 0.0]), command[2]
    else:
      joint_pos, joint_vel, contacts = home.at[head].add(command[commands.HEAD]), jp.zeros(14), jp.ones(2)
      linvel, yaw_rate = jp.zeros(3), 0.0
    readings = observations.Readings(
      gyro=jp.array([0.0, 0.0, yaw_rate]),
      accelerometer=jp.array([0.0, 0.0, 9.81]),
      gravity=jp.array([0.0, 0.0, -1.0]),
      local_linvel=linvel,
      global_linvel=linvel,
      global_angvel=jp.array([0.0, 0.0, yaw_rate]),
      joint_pos=joint_pos - home,
      joint_vel=joint_vel,
      actuator_force=jp.zeros(14),
      feet_contacts=contacts,
      feet_pos=jp.zeros((2, 3)),
      feet_vel=jp.zeros(6),
      base_pos=jp.zeros(3),
      base_height=jp.array([0.17]),
      com_pos=jp.array([0.0, 0.0, 0.21]),
      heading=jp.zeros(()),
    )
    terms = env.compute_rewards(readings, observations.StepContext.idle(command, phase * 2 * jp.pi))
    return sum(scales[k] * v for k, v in terms.items())

  return float(jp.mean(jax.jit(jax.vmap(one))(jp.arange(phases) / phases)))
