"""Joystick task: track a base velocity command and a head pose command.

The command (vx, vy, yaw rate, neck_pitch, head_pitch, head_yaw, head_roll)
is resampled every few seconds; a configurable share of the velocity commands
is exactly zero so that the policy also learns to stand still.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
from ml_collections import config_dict

from playground.common import config as config_lib
from playground.common import reference as ref_lib
from playground.common import rewards
from playground.open_duck_mini_v2 import base
from playground.open_duck_mini_v2 import constants as consts
from playground.open_duck_mini_v2 import observations as obs_lib

IMITATED_JOINTS = tuple(consts.ACTUATOR_NAMES.index(n) for n in consts.LEG_JOINT_NAMES)


def default_config() -> config_dict.ConfigDict:
  """Default configuration of the joystick task."""
  config = base.base_config()
  config.command_config = config_dict.ConfigDict(
    dict(
      lin_vel_x=(-0.15, 0.15),  # m/s
      lin_vel_y=(-0.2, 0.2),  # m/s
      ang_vel_yaw=(-1.0, 1.0),  # rad/s
      neck_pitch=(-0.34, 1.1),  # rad, offsets added to the home pose
      head_pitch=(-0.78, 0.78),
      head_yaw=(-1.5, 1.5),
      head_roll=(-0.5, 0.5),
      zero_command_prob=0.2,  # share of zero velocity commands
      zero_head_prob=0.5,  # share of zero head commands
      resample_interval=(4.0, 8.0),  # s
    )
  )
  config.reward_config = config_dict.ConfigDict(
    dict(
      scales=dict(
        tracking_lin_vel=2.5,
        tracking_ang_vel=6.0,
        head_tracking=1.0,
        torques=-1.0e-3,
        action_rate=-0.5,
        stand_still=-0.2,
        alive=20.0,
        termination=0.0,
        orientation=-1.0,
        lin_vel_z=0.0,
        ang_vel_xy=-0.05,
        feet_air_time=1.0,
        feet_slip=-0.1,
        imitation=0.0,  # > 0 enables the reference-gait imitation reward
      ),
      tracking_sigma=0.01,
      head_tracking_sigma=0.1,
      feet_air_time_threshold=0.2,
      imitation=dict(
        # Component weights (each component is in [0, 1]); 0 skips one.
        weights=dict(joint_pos=1.0, joint_vel=0.2, foot_contacts=0.5, base_linvel=0.5, base_angvel=0.3),
        sigmas=dict(joint_pos=0.25, joint_vel=50.0, base_linvel=0.01, base_angvel=0.1),
      ),
    )
  )
  config.reference = config_dict.ConfigDict(
    dict(
      path="",  # .npz reference table; empty: the built-in generated gait
      clamp=False,  # True: commands outside the reference grid use its edge
    )
  )
  return config


class Joystick(base.OpenDuckMiniV2Env):
  """Velocity + head command tracking for the Open Duck Mini V2.

  With `reward_config.scales.imitation > 0` it also rewards following a
  reference gait (the built-in generated one, or `reference.path`) at the
  gait phase of the observation, which then advances at the reference's
  frequency.
  """

  def __init__(self, task="flat_terrain", config=None, config_overrides=None):
    super().__init__(task, config, config_overrides)
    self._reference = None
    if self._config.reward_config.scales.imitation != 0.0:
      self._reference = load_reference(self._config.reference.path)
      c = self._config.command_config
      uncovered = self._reference.uncovered({"vx": c.lin_vel_x, "vy": c.lin_vel_y, "yaw_rate": c.ang_vel_yaw})
      if uncovered and not self._config.reference.clamp:
        raise config_lib.ConfigError(
          f"the reference does not cover the commands: {uncovered}; narrow command_config or set reference.clamp=true"
        )
      self._lookup = self._reference.lookup_fn()

  @classmethod
  def default_config(cls) -> config_dict.ConfigDict:
    return default_config()

  @property
  def reference(self) -> ref_lib.ReferenceTable | None:
    return self._reference

  @property
  def gait_frequency(self) -> float:
    if self._reference is not None:
      return self._reference.frequency
    return super().gait_frequency

  def reward_scales(self) -> dict[str, float]:
    scales = super().reward_scales()
    imitation = scales.pop("imitation", 0.0)
    if imitation:
      for name, weight in self._config.reward_config.imitation.weights.items():
        if weight != 0.0:
          scales[f"imitation_{name}"] = imitation * float(weight)
    return scales

  def sample_command(self, rng: jax.Array) -> jax.Array:
    c = self._config.command_config
    keys = jax.random.split(rng, 9)
    ranges = (c.lin_vel_x, c.lin_vel_y, c.ang_vel_yaw, c.neck_pitch, c.head_pitch, c.head_yaw, c.head_roll)
    values = jp.array([jax.random.uniform(k, (), minval=lo, maxval=hi) for k, (lo, hi) in zip(keys[:7], ranges)])
    zero_vel = jax.random.bernoulli(keys[7], c.zero_command_prob)
    zero_head = jax.random.bernoulli(keys[8], c.zero_head_prob)
    mask = jp.concatenate([jp.full(3, ~zero_vel), jp.full(4, ~zero_head)])
    return values * mask

  def compute_rewards(
    self,
    readings: obs_lib.Readings,
    *,
    command: jax.Array,
    action: jax.Array,
    last_action: jax.Array,
    air_time: jax.Array,
    first_contact: jax.Array,
    terminated: jax.Array,
    phase: jax.Array,
  ) -> dict[str, jax.Array]:
    cfg = self._config.reward_config
    head = self._ids.head_act
    terms = {
      "tracking_lin_vel": lambda: rewards.tracking_lin_vel(command[:2], readings.local_linvel[:2], cfg.tracking_sigma),
      "tracking_ang_vel": lambda: rewards.tracking_ang_vel(command[2], readings.gyro[2], cfg.tracking_sigma),
      "head_tracking": lambda: rewards.head_tracking(command[3:7], readings.joint_pos[head], cfg.head_tracking_sigma),
      "torques": lambda: rewards.torques(readings.actuator_force),
      "action_rate": lambda: rewards.action_rate(action, last_action),
      "stand_still": lambda: rewards.stand_still(command[:3], readings.joint_pos),
      "alive": rewards.alive,
      "termination": lambda: rewards.termination(terminated),
      "orientation": lambda: rewards.orientation(readings.gravity),
      "lin_vel_z": lambda: rewards.lin_vel_z(readings.global_linvel),
      "ang_vel_xy": lambda: rewards.ang_vel_xy(readings.global_angvel),
      "feet_air_time": lambda: rewards.feet_air_time(air_time, first_contact, command[:3], cfg.feet_air_time_threshold),
      "feet_slip": lambda: rewards.feet_slip(readings.feet_contacts, readings.feet_vel.reshape(2, 3)[:, :2]),
    }
    active = self.active_reward_terms
    if self._reference is not None:
      frame = ref_lib.FRAME_LAYOUT.split(self._lookup(command[:3], phase / (2 * jp.pi)))
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
      for name, value in components.items():
        terms[f"imitation_{name}"] = lambda value=value: value
    unknown = set(active) - set(terms)
    if unknown:
      raise ValueError(f"reward_config.scales has unknown terms {sorted(unknown)}")
    return {name: terms[name]() for name in active}


def load_reference(path: str) -> ref_lib.ReferenceTable:
  """The reference table at `path`, or the built-in generated gait."""
  from playground.open_duck_mini_v2 import reference_motion  # pylint: disable=import-outside-toplevel

  if not path:
    return reference_motion.load_default()
  return ref_lib.ReferenceTable.load(path)
