"""The base of the Open Duck Mini V2's MJX environments: the settings every task shares, and the env class.

`base_config` holds the settings the tasks share (with copies that keep only
some disturbances, for playback and checks). `OpenDuckMiniV2Env` holds what
the tasks do alike: the action pipeline (delay, scaling, servo speed limit),
sensor noise and IMU delay, pushes, termination and the observation, on the
model (`robot_model`), readings (`observations.read`) and servo targets
(`actuation`) of the robot. A task subclass provides commands and rewards.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jp
import mujoco
from ml_collections import config_dict
from mujoco import mjx
from mujoco_playground import MjxEnv
from mujoco_playground import State

from playground.common import configs
from playground.common.tasks import kicks
from playground.common.tasks import randomize
from playground.common.tasks.observation_layout import ObservationLayout
from playground.common.train import backend
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.model.actuation import commanded_targets
from playground.open_duck_mini_v2.model.actuation import motor_targets
from playground.open_duck_mini_v2.model.observations import dynamics_params
from playground.open_duck_mini_v2.model.observations import noise_scales
from playground.open_duck_mini_v2.model.observations import read
from playground.open_duck_mini_v2.model.robot_model import RobotIndices
from playground.open_duck_mini_v2.model.robot_model import load_model
from playground.open_duck_mini_v2.model.robot_model import quiet_warp

MIN_NACONMAX = 64


def warp_contact_buffer(per_env: int, batch_size: int) -> int:
  """Size of MuJoCo Warp's contact buffer, which one vmapped batch shares."""
  return max(int(per_env) * int(batch_size), MIN_NACONMAX)


def base_config() -> config_dict.ConfigDict:
  """Settings shared by all Open Duck Mini V2 tasks."""
  return config_dict.ConfigDict(
    dict(
      ctrl_dt=0.02,
      sim_dt=0.002,
      episode_length=1000,
      impl="auto",  # auto | jax | warp (auto: warp on NVIDIA GPUs, jax elsewhere)
      # Warp only: contacts per env in the batch's shared contact buffer (the
      # buffer holds naconmax_per_env x envs per device, at least 64). Measured
      # with random actions: at most 3.0 (flat) and 4.4 (rough) per env.
      naconmax_per_env=12,
      njmax=96,  # warp only: constraint rows per env
      action_scale=0.25,
      # The servos (`servos.PROFILES`, docs/servos.md): gains, limits, their randomization, the reference gait.
      servo_profile=servos.DEFAULT,
      max_motor_velocity=None,  # rad/s; None: the servo profile's (`servos.speed_limit`)
      gait_frequency=1.0 / 0.54,  # Hz, advances the phase observation
      # Training only: each episode's clock runs at gait_frequency x U(1 - s,
      # 1 + s), so that the policy is not locked to one step timing (0: off).
      # Players and the exported file keep the runtime's fixed clock.
      gait_frequency_spread=0.0,
      # Earlier control steps of gyro, accelerometer and joint position and
      # velocity appended to the actor's observation (observations.state_layout).
      # 0 keeps the 101-float layout that the Open Duck runtime builds; more
      # needs a runtime that keeps the same history.
      observation_history=0,
      # True: the critic also observes the physical parameters domain
      # randomization drew for its env (`dynamics_params`), an asymmetric
      # actor-critic as in rsl_rl/Isaac Lab. The actor's observation and the
      # exported policy do not change.
      critic_dynamics=False,
      # True: the critic also observes the balance state after a kick
      # (`observations.KICK_FIELDS`: the kick, the time since it and the
      # capture point), on which the recovery window and the kick curriculum
      # depend. The actor's observation and the exported policy do not change.
      critic_kick=False,
      # Diagnostic only: the actor observes that balance state too. It tells
      # whether a policy that knows of the kick learns to catch it; the robot
      # has no such input, so every player refuses the exported file.
      actor_kick=False,
      reset=dict(
        xy_range=0.5,  # m, +-U spawn position
        joint_noise=0.05,  # rad, +-U around the home pose
        base_vel_noise=0.05,  # m/s and rad/s, +-U
      ),
      # Sensor noise: value + level * scale * U(-1, 1). The joint levels are the
      # upstream Open Duck Playground's (hip 0.03, knee 0.05, ankle 0.08 rad,
      # joint velocity 2.5 rad/s, gyro 0.1 rad/s, accelerometer 0.05 g-units):
      # at least what the robot's STS3215 encoders and IMU show.
      noise_config=dict(
        level=1.0,
        scales=dict(
          gyro=0.1,
          accelerometer=0.05,
          joint_pos_hip=0.03,
          joint_pos_knee=0.05,
          joint_pos_ankle=0.08,
          joint_pos_head=0.03,
          joint_vel=2.5,
        ),
      ),
      delay=dict(
        # Action delay in control steps, redrawn at every step (<= 3): the
        # upstream project's 0-2 steps of servo-bus and inference latency.
        action_steps=(0, 2),
        imu_steps=(0, 1),  # min, max control steps of IMU delay, per episode (<= 3)
      ),
      push_config=dict(
        enable=True,
        interval_range=(5.0, 10.0),  # s between pushes
        # m/s velocity kick of the base: the upstream project's 0.1-1.0 m/s.
        magnitude_range=(0.1, 1.0),
        # Seconds after each kick during which the reward lets the duck step
        # off its gait: imitation, stand_still and feet_air_time are waived
        # (`StepContext.recovering`). 0: off. The actor observes nothing of it.
        recovery_s=0.0,
        # Relative share of kicks toward the trunk's front, left, back and
        # right (`kicks.SECTORS`, 90 degrees each); equal weights: any direction.
        direction_weights=(1.0, 1.0, 1.0, 1.0),
        # Share of episodes kicked at their first control step (a perturbed
        # start); the others wait `interval_range` for their first kick.
        kicked_start_share=0.0,
        # An adaptive kick strength per environment (`kicks.next_level`): a
        # kick survived for `judge_s` multiplies it by `grow`, a fall within
        # `judge_s` by `shrink`, within `magnitude_range`; each kick is drawn
        # in [level * (1 - spread), level]. Off: kicks uniform in `magnitude_range`.
        curriculum=dict(enable=False, start=0.5, grow=1.05, shrink=0.8, spread=0.25, judge_s=1.0),
        # A recovery reference: a `benchmarks.catch_search --shared` JSON of
        # searched catching motions per kick direction. Within recovery_s of a
        # kick at a zero command, reward_config.scales.catch_imitation pays for
        # motor targets near the motion for that kick (`catch_reference`).
        # Empty: none.
        catch_reference="",
      ),
      termination=dict(
        min_base_height=0.08,  # m of trunk above the lowest foot
        min_up_z=0.5,  # trunk z axis must stay within 60 deg of vertical
      ),
      domain_randomization=randomize.default_config(),
    )
  )


def keeping_disturbances(
  config: config_dict.ConfigDict,
  *,
  noise: bool = False,
  delays: bool = False,
  randomization: bool = False,
  pushes: bool = False,
) -> config_dict.ConfigDict:
  """A copy of a task config keeping only the disturbances named True; the others are off.

  `keeping_disturbances(config)` is the clean env; `keeping_disturbances(config,
  noise=True)` keeps the sensor noise only. For playback, scoring and checks
  that must see the policy or the physics without (some of) sensor noise,
  action/IMU delays, domain randomization and random pushes.
  """
  config = copy.deepcopy(config)
  if not noise:
    config.noise_config.level = 0.0
  if not delays:
    config.delay.action_steps = (0, 0)
    config.delay.imu_steps = (0, 0)
  if not randomization:
    config.domain_randomization.enabled = False
  if not pushes:
    config.push_config.enable = False
  return config


@dataclasses.dataclass(frozen=True)
class KickSettings:
  """The training kicks of `push_config`, checked (configs from before an option read its default).

  Attributes:
    weights: relative share of kicks per heading sector (`kicks.SECTORS`),
      or None for a direction uniform over the circle.
    kicked_start_share: share of episodes kicked at their first control step
      (0 with pushes off).
    curriculum: whether each env adapts its own kick strength
      (`kicks.next_level`; False with pushes off).
    start, grow, shrink, spread, judge_s: the curriculum's settings.
    bounds: (low, high) m/s, `magnitude_range`.
  """

  weights: tuple[float, ...] | None
  kicked_start_share: float
  curriculum: bool
  start: float
  grow: float
  shrink: float
  spread: float
  judge_s: float
  bounds: tuple[float, float]

  @classmethod
  def of_config(cls, push_config: config_dict.ConfigDict) -> KickSettings:
    """Raises `ConfigError` (one line naming the valid values) for a bad setting."""
    try:
      weights = kicks.check_direction_weights(push_config.get("direction_weights", (1.0,) * len(kicks.SECTORS)))
    except ValueError as e:
      raise configs.ConfigError(f"push_config.direction_weights {e}") from None
    share = push_config.get("kicked_start_share", 0.0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
      raise configs.ConfigError(f"push_config.kicked_start_share must be a fraction in [0, 1], got {share!r}")
    lo, hi = (float(v) for v in push_config.magnitude_range)
    cur = push_config.get("curriculum", None)
    cur = dict(cur) if cur is not None else {}
    enabled = cur.get("enable", False)
    if not isinstance(enabled, bool):
      raise configs.ConfigError(f"push_config.curriculum.enable must be true or false, got {enabled!r}")
    kicking = bool(push_config.enable)
    settings = cls(
      weights=None if len(set(weights)) == 1 else weights,
      kicked_start_share=float(share) if kicking else 0.0,
      curriculum=enabled and kicking,
      start=float(cur.get("start", 0.5)),
      grow=float(cur.get("grow", 1.05)),
      shrink=float(cur.get("shrink", 0.8)),
      spread=float(cur.get("spread", 0.25)),
      judge_s=float(cur.get("judge_s", 1.0)),
      bounds=(lo, hi),
    )
    if enabled:
      checks = (
        (0.0 <= lo <= settings.start <= hi, f"start must lie in magnitude_range {(lo, hi)}, got {settings.start}"),
        (settings.grow >= 1.0, f"grow must be at least 1, got {settings.grow}"),
        (0.0 < settings.shrink <= 1.0, f"shrink must lie in (0, 1], got {settings.shrink}"),
        (0.0 <= settings.spread <= 1.0, f"spread must lie in [0, 1], got {settings.spread}"),
        (settings.judge_s > 0.0, f"judge_s must be above 0 s, got {settings.judge_s}"),
      )
      for ok, message in checks:
        if not ok:
          raise configs.ConfigError(f"push_config.curriculum.{message}")
    return settings


MAX_DELAY_STEPS = 3
#: `since_push` of an episode that has not been kicked yet (steps; saturates there).
_NO_KICK_YET = 1_000_000


class OpenDuckMiniV2Env(MjxEnv):
  """Shared MJX environment logic of the Open Duck Mini V2 tasks.

  Subclasses implement `sample_command(rng, info)`, `compute_rewards(...)`
  and `default_config()`.
  """

  #: Environments in the vmapped batch being traced (set by `VecEnv`; 1 for a
  #: single env). Sizes MuJoCo Warp's contact buffer, which the batch shares.
  batch_size: int = 1

  def __init__(
    self,
    task: str = "flat_terrain",
    config: config_dict.ConfigDict | None = None,
  ):
    config = config if config is not None else self.default_config()
    for name in ("action_steps", "imu_steps"):
      lo, hi = config.delay[name]
      if not 0 <= lo <= hi <= MAX_DELAY_STEPS:
        raise configs.ConfigError(f"delay.{name} must satisfy 0 <= min <= max <= {MAX_DELAY_STEPS}, got {(lo, hi)}")
    history = config.get("observation_history", 0)
    bad_history = configs.ConfigError(
      f"observation_history must be a whole number of frames in 0..{observations.MAX_HISTORY}, got {history!r}"
    )
    if not isinstance(history, int) or isinstance(history, bool):
      raise bad_history
    try:
      observations.state_layout(history)  # the layout's own bound
    except ValueError as e:
      raise bad_history from e
    spread = config.get("gait_frequency_spread", 0.0)
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not 0.0 <= spread < 1.0:
      raise configs.ConfigError(f"gait_frequency_spread must be a fraction in [0, 1), got {spread!r}")
    if not isinstance(config.get("critic_dynamics", False), bool):
      raise configs.ConfigError(f"critic_dynamics must be true or false, got {config.critic_dynamics!r}")
    if not isinstance(config.get("critic_kick", False), bool):
      raise configs.ConfigError(f"critic_kick must be true or false, got {config.critic_kick!r}")
    if not isinstance(config.get("actor_kick", False), bool):
      raise configs.ConfigError(f"actor_kick must be true or false, got {config.actor_kick!r}")
    if config.get("actor_kick", False) and not config.get("critic_kick", False):
      raise configs.ConfigError("actor_kick=true needs critic_kick=true (the kick state the actor would observe)")
    self._kicks = KickSettings.of_config(config.push_config)
    if commands.walks(config.command_config):
      commands.single_axis_prob(config.command_config)  # refuses a share outside [0, 1]
    filter_s = config.reward_config.get("tracking_filter_s", 0.0)
    if isinstance(filter_s, bool) or not isinstance(filter_s, int | float) or filter_s < 0.0:
      raise configs.ConfigError(
        f"reward_config.tracking_filter_s must be 0 (off) or positive seconds, got {filter_s!r}"
      )
    super().__init__(config)
    self._task = task
    self._mj_model = load_model(task, servo_profile=servos.name_of(self._config))
    self._max_motor_velocity = servos.speed_limit(self._config)  # rad/s, the servo profile's unless set
    self._mj_model.opt.timestep = self._config.sim_dt
    # This process's own device: MJX would default to jax.devices()[0], which
    # belongs to process 0 in a multi-host run.
    self._device = jax.local_devices()[0]
    self._impl = backend.resolve_impl(self._config.impl)
    self._mjx_model = quiet_warp(mjx.put_model(self._mj_model, impl=self._impl, device=self._device))
    self._ids = RobotIndices.from_model(self._mj_model)
    self._noise_scales = noise_scales(self._config.noise_config.scales)
    self._xml_path = str(constants.XML_DIR / f"scene_{task.removesuffix('_backlash')}.xml")

  @classmethod
  def default_config(cls) -> config_dict.ConfigDict:
    raise NotImplementedError

  @property
  def gait_frequency(self) -> float:
    """Hz at which the phase observation advances."""
    return float(self._config.gait_frequency)

  @classmethod
  def gait_frequency_of(cls, config: config_dict.ConfigDict) -> float:
    """Hz at which an env built from `config` advances its phase (without building it)."""
    return float(config.gait_frequency)

  @property
  def observation_history(self) -> int:
    """Earlier frames appended to the actor's observation (0: the runtime's layout)."""
    return int(self._config.get("observation_history", 0))

  @property
  def state_layout(self) -> ObservationLayout:
    """Layout of the actor observation `state` of this env."""
    return observations.state_layout(self.observation_history, bool(self._config.get("actor_kick", False)))

  # ---- Accessors required by MjxEnv.

  @property
  def xml_path(self) -> str:
    return self._xml_path

  @property
  def action_size(self) -> int:
    return observations.NUM_ACTIONS

  @property
  def mj_model(self) -> mujoco.MjModel:
    return self._mj_model

  @property
  def mjx_model(self) -> mjx.Model:
    return self._mjx_model

  @property
  def ids(self) -> RobotIndices:
    return self._ids

  @property
  def config(self) -> config_dict.ConfigDict:
    return self._config

  @property
  def task(self) -> str:
    return self._task

  @property
  def impl(self) -> str:
    """The MJX implementation this env runs on ("jax" or "warp"; `auto` resolved)."""
    return self._impl

  # ---- Task hooks.

  def sample_command(self, rng: jax.Array) -> jax.Array:
    """A new 7-dim command (vx, vy, yaw rate, neck/head offsets)."""
    raise NotImplementedError

  def compute_rewards(self, readings: observations.Readings, step: observations.StepContext) -> dict[str, jax.Array]:
    """Unweighted reward terms, for the terms with a non-zero scale only.

    Args:
      readings: noiseless readings after the physics step.
      step: what else the step's rewards depend on (command, actions, feet,
        termination, phase); see `observations.StepContext`.
    """
    raise NotImplementedError

  # ---- Shared pieces, used by training and playback alike.

  def make_data(self, qpos: jax.Array, qvel: jax.Array, ctrl: jax.Array) -> mjx.Data:
    data = mjx.make_data(
      self._mj_model,
      impl=self._impl,
      naconmax=warp_contact_buffer(self._config.naconmax_per_env, self.batch_size),
      njmax=self._config.njmax,
      device=self._device,
    )
    return data.replace(qpos=qpos, qvel=qvel, ctrl=ctrl)

  def initial_info(self, rng: jax.Array, readings: observations.Readings) -> dict[str, Any]:
    """Per-episode state after a reset, given the readings of the first state."""
    cfg = self._config
    rng, k_cmd, k_adelay, k_idelay, k_push, k_timer = jax.random.split(rng, 6)
    imu = jp.concatenate([readings.gyro, readings.accelerometer])
    info = {
      "rng": rng,
      "command": self.sample_command(k_cmd),
      "command_timer": self._command_interval(k_timer),
      "last_actions": jp.zeros((observations.ACTION_HISTORY, observations.NUM_ACTIONS)),
      "motor_targets": jp.asarray(self._ids.home_ctrl, dtype=jp.float32),
      "commanded_targets": jp.asarray(self._ids.home_ctrl, dtype=jp.float32),
      "action_buffer": jp.zeros((MAX_DELAY_STEPS + 1, observations.NUM_ACTIONS)),
      "action_delay": jax.random.randint(k_adelay, (), cfg.delay.action_steps[0], cfg.delay.action_steps[1] + 1),
      "imu_buffer": jp.tile(imu, (MAX_DELAY_STEPS + 1, 1)),
      "imu_delay": jax.random.randint(k_idelay, (), cfg.delay.imu_steps[0], cfg.delay.imu_steps[1] + 1),
      "phase": jp.zeros(()),
      "feet_air_time": jp.zeros(2),
      "push_timer": self._push_interval(k_push),
      "step": jp.zeros((), dtype=jp.int32),
    }
    spread = float(cfg.get("gait_frequency_spread", 0.0))
    if spread:
      # This episode's clock rate, a factor of `gait_frequency` (`advance`).
      info["gait_rate"] = jax.random.uniform(jax.random.fold_in(rng, 1), (), minval=1.0 - spread, maxval=1.0 + spread)
    if self._tracks_kicks:
      # Steps since the last kick; an episode starts long after one.
      info["since_push"] = jp.asarray(_NO_KICK_YET, dtype=jp.int32)
    if self._critic_kick:
      # The last kick's world-frame velocity change (the critic's `kick_velocity`).
      info["last_kick"] = jp.zeros(2)
    if self._catch_kick:
      # The last kick's velocity change in the trunk's heading frame at the kick (the recovery reference's).
      info["kick_heading"] = jp.zeros(2)
    if self._tracking_filter_s:
      # The trunk's filtered (vx, vy, yaw rate) that the tracking terms judge; at rest at a reset.
      info["tracked_velocity"] = jp.zeros(3)
    if self._kicks.kicked_start_share:
      # A perturbed start: kicked at the first control step.
      kicked = jax.random.uniform(jax.random.fold_in(rng, 2), ()) < self._kicks.kicked_start_share
      info["push_timer"] = jp.where(kicked, 1, info["push_timer"])
    if self._curriculum:
      # This env's kick strength (m/s); it outlives the episode (`persistent_info_keys`).
      info["push_level"] = jp.asarray(self._kicks.start, dtype=jp.float32)
    if self.observation_history:
      # Only with a history: a checkpoint holds no empty arrays (Orbax refuses
      # them) and keeps the same tree as before the option.
      info["obs_history"] = jp.tile(observations.history_frame(imu, readings), (self.observation_history, 1))
    return info

  def observe(
    self,
    readings: observations.Readings,
    info: Mapping[str, Any],
    key: jax.Array,
  ) -> tuple[dict[str, jax.Array], dict[str, Any]]:
    """Observation dict and the info with updated sensor buffers.

    Args:
      readings: noiseless readings of the current state.
      info: episode state (command, action history, delays, phase, ...).
      key: PRNG key for the sensor noise.

    Returns:
      (obs, info): `info` is a new dict whose `imu_buffer` holds this step's
      IMU sample and whose `obs_history` (with `observation_history` > 0)
      holds this step's frame, for the next observation.
    """
    cfg = self._config.noise_config
    noisy = observations.add_noise(readings, key, self._noise_scales, cfg.level)
    imu_buffer = observations.imu_push(info["imu_buffer"], noisy.gyro, noisy.accelerometer)
    imu_sample = imu_buffer[info["imu_delay"]]
    obs = observations.build(
      noisy=noisy,
      clean=readings,
      imu_sample=imu_sample,
      command=info["command"],
      last_actions=info["last_actions"].ravel(),
      motor_targets=info["commanded_targets"],
      phase=info["phase"],
      feet_air_time=info["feet_air_time"],
      history=info.get("obs_history"),
      dynamics=dynamics_params(self._ids, self.mjx_model) if self._config.get("critic_dynamics", False) else None,
      kick=self._kick_state(readings, info) if self._critic_kick else None,
      actor_kick=bool(self._config.get("actor_kick", False)),
    )
    info = {**info, "imu_buffer": imu_buffer}
    if "obs_history" in info:
      info["obs_history"] = observations.history_push(
        info["obs_history"], observations.history_frame(imu_sample, noisy)
      )
    return obs, info

  def _kick_state(self, readings: observations.Readings, info: Mapping[str, Any]) -> jax.Array:
    """The critic's `observations.KICK_FIELDS` (`critic_kick`)."""
    since_s = info["since_push"].astype(jp.float32) * self.dt
    return observations.kick_state(info["last_kick"], since_s, readings)

  def apply_action(self, info: dict[str, Any], action: jax.Array, key: jax.Array) -> dict[str, Any]:
    """Delays the action and turns it into speed-limited motor targets.

    The delay (in control steps) is redrawn from `delay.action_steps` at
    every step with `key`. `commanded_targets` (observed by the policy, as on
    the robot) come from the newest action; `motor_targets` (where the servos
    drive) from the delayed one, limited in speed and range.
    """
    cfg = self._config
    lo, hi = cfg.delay.action_steps
    delay = jax.random.randint(key, (), lo, hi + 1)
    action_buffer = jp.roll(info["action_buffer"], 1, axis=0).at[0].set(action)
    delayed = action_buffer[delay]
    targets = motor_targets(
      self._ids,
      delayed,
      info["command"],
      info["motor_targets"],
      cfg.action_scale,
      self._max_motor_velocity,
      cfg.ctrl_dt,
    )
    return {
      **info,
      "action_buffer": action_buffer,
      "action_delay": delay,
      "motor_targets": targets,
      "commanded_targets": commanded_targets(self._ids, action, info["command"], cfg.action_scale),
    }

  def physics(self, data: mjx.Data, ctrl: jax.Array) -> mjx.Data:
    """Holds `ctrl` for one control period (n_substeps MJX steps)."""
    model = self.mjx_model
    data = data.replace(ctrl=ctrl)

    def substep(d, _):
      return mjx.step(model, d), None

    return jax.lax.scan(substep, data, None, length=self.n_substeps)[0]

  # ---- MjxEnv API.

  def reset(self, rng: jax.Array) -> State:
    cfg = self._config.reset
    ids = self._ids
    rng, k_xy, k_yaw, k_q, k_v, k_obs, k_info = jax.random.split(rng, 7)
    qpos = jp.asarray(ids.home_qpos, dtype=jp.float32)
    xy = jax.random.uniform(k_xy, (2,), minval=-cfg.xy_range, maxval=cfg.xy_range)
    yaw = jax.random.uniform(k_yaw, (), minval=-jp.pi, maxval=jp.pi)
    qpos = qpos.at[0:2].add(xy)
    qpos = qpos.at[3:7].set(jp.array([jp.cos(yaw / 2), 0.0, 0.0, jp.sin(yaw / 2)]))
    qpos = qpos.at[ids.act_qpos].add(
      jax.random.uniform(k_q, (len(ids.act_qpos),), minval=-cfg.joint_noise, maxval=cfg.joint_noise)
    )
    qvel = jp.zeros(self._mj_model.nv)
    qvel = qvel.at[0:6].set(jax.random.uniform(k_v, (6,), minval=-cfg.base_vel_noise, maxval=cfg.base_vel_noise))
    ctrl = jp.asarray(ids.home_ctrl, dtype=jp.float32)
    data = mjx.forward(self.mjx_model, self.make_data(qpos, qvel, ctrl))
    readings = read(ids, self.mjx_model, data)
    info = self.initial_info(k_info, readings)
    obs, info = self.observe(readings, info, k_obs)
    metrics = {f"reward/{name}": jp.zeros(()) for name in self.active_reward_terms}
    if self._curriculum:
      metrics.update({"kick/count": jp.zeros(()), "kick/strength": jp.zeros(())})
    return State(data, obs, jp.zeros(()), jp.zeros(()), metrics, info)

  def reward_scales(self) -> dict[str, float]:
    """Scale of every reward term that is computed (non-zero scale only)."""
    return {k: float(v) for k, v in self._config.reward_config.scales.items() if v != 0.0}

  @property
  def active_reward_terms(self) -> tuple[str, ...]:
    """Names of the reward terms with a non-zero scale (the only ones computed)."""
    return tuple(self.reward_scales())

  def step(self, state: State, action: jax.Array) -> State:
    cfg = self._config
    info = dict(state.info)
    rng, k_push, k_obs, k_cmd, k_timer, k_push_timer, k_delay = jax.random.split(info["rng"], 7)
    info["rng"] = rng
    data = state.data

    # Random pushes: a horizontal velocity kick of the base every few seconds.
    if cfg.push_config.enable:
      info["push_timer"] = info["push_timer"] - 1
      push = info["push_timer"] <= 0
      k_angle, k_mag = jax.random.split(k_push)
      if self._kicks.weights is None:
        angle = jax.random.uniform(k_angle, (), maxval=2 * jp.pi)
      else:
        angle = kicks.direction(k_angle, kicks.heading(data.qpos[3:7]), self._kicks.weights)
      if self._curriculum:
        magnitude = kicks.magnitude_below(k_mag, info["push_level"], self._kicks.spread)
      else:
        magnitude = jax.random.uniform(k_mag, (), minval=self._kicks.bounds[0], maxval=self._kicks.bounds[1])
      kick = kicks.velocity_change(angle, magnitude) * push
      data = data.replace(qvel=data.qvel.at[0:2].add(kick))
      info["push_timer"] = jp.where(push, self._push_interval(k_push_timer), info["push_timer"])
      if self._tracks_kicks:
        info["since_push"] = jp.where(push, 0, jp.minimum(info["since_push"] + 1, _NO_KICK_YET))
      if self._critic_kick:
        info["last_kick"] = jp.where(push, kick, info["last_kick"])
      if self._catch_kick:
        local = kicks.in_heading_frame(kick, kicks.heading(data.qpos[3:7]))
        info["kick_heading"] = jp.where(push, local, info["kick_heading"])

    info = self.apply_action(info, action, k_delay)
    data = self.physics(data, info["motor_targets"])
    readings = read(self._ids, self.mjx_model, data)
    previous = info
    info, first_contact = self.advance(info, readings, action)

    up_z = -readings.gravity[2]
    nan = jp.isnan(data.qpos).any() | jp.isnan(data.qvel).any()
    fell = (up_z < cfg.termination.min_up_z) | (readings.base_height[0] < cfg.termination.min_base_height)
    terminated = fell | nan
    if self._curriculum:
      # The kick's verdict: up at the end of the judging window, or down within it.
      judge = self._judge_steps
      since = info["since_push"]
      info["push_level"] = kicks.next_level(
        info["push_level"],
        (since == judge) & ~terminated,
        terminated & (since <= judge),
        grow=self._kicks.grow,
        shrink=self._kicks.shrink,
        bounds=self._kicks.bounds,
      )

    step = observations.StepContext(
      command=previous["command"],
      action=action,
      last_action=previous["last_actions"][0],
      air_time=previous["feet_air_time"] + self.dt,
      first_contact=first_contact,
      terminated=terminated,
      phase=info["phase"],
      recovering=(info["since_push"] < self._recovery_steps).astype(jp.float32) if self._recovery_steps else 0.0,
      velocity=info.get("tracked_velocity"),
      kick=info.get("kick_heading"),
      since_kick=info.get("since_push") if self._catch_kick else None,
    )
    terms = self.compute_rewards(readings, step)
    scales = self.reward_scales()
    weighted = {name: scales[name] * value * self.dt for name, value in terms.items()}
    reward = sum(weighted.values()) if weighted else jp.zeros(())
    reward = jp.where(jp.isfinite(reward), reward, 0.0)

    info["command_timer"] = info["command_timer"] - 1
    resample = info["command_timer"] <= 0
    info["command"] = jp.where(resample, self.sample_command(k_cmd), info["command"])
    info["command_timer"] = jp.where(resample, self._command_interval(k_timer), info["command_timer"])
    obs, info = self.observe(readings, info, k_obs)
    obs = jax.tree_util.tree_map(lambda x: jp.where(jp.isfinite(x), x, 0.0), obs)

    # Keep keys that wrappers (e.g. Brax's EpisodeWrapper) added to the metrics.
    metrics = dict(state.metrics)
    metrics.update({f"reward/{name}": jp.where(jp.isfinite(v), v, 0.0) for name, v in weighted.items()})
    if self._curriculum:
      # Summed per episode: kicks, and their strengths (mean kick = strength / count).
      metrics["kick/count"] = push.astype(jp.float32)
      metrics["kick/strength"] = magnitude * push
    return state.replace(
      data=data,
      obs=obs,
      reward=reward,
      done=terminated.astype(jp.float32),
      metrics=metrics,
      info=info,
    )

  def advance(
    self, info: dict[str, Any], readings: observations.Readings, action: jax.Array
  ) -> tuple[dict[str, Any], jax.Array]:
    """Per-step bookkeeping after physics (shared by training and playback).

    Updates foot air times, the action history, the gait phase and the step
    counter. Returns the new info and, per foot, whether it touched down.
    """
    info = dict(info)
    contact = readings.feet_contacts > 0.5
    first_contact = (info["feet_air_time"] > 0.0) & contact
    air_time = info["feet_air_time"] + self.dt
    info["feet_air_time"] = jp.where(contact, 0.0, air_time)
    info["last_actions"] = jp.roll(info["last_actions"], 1, axis=0).at[0].set(action)
    rate = info.get("gait_rate", 1.0)  # this episode's clock (`gait_frequency_spread`)
    info["phase"] = jp.mod(info["phase"] + 2 * jp.pi * self.gait_frequency * rate * self.dt, 2 * jp.pi)
    info["step"] = info["step"] + 1
    if "tracked_velocity" in info:
      info["tracked_velocity"] = observations.tracked_velocity(
        info["tracked_velocity"], readings, self.dt, self._tracking_filter_s
      )
    return info, first_contact

  # ---- Helpers.

  def _command_interval(self, rng: jax.Array) -> jax.Array:
    lo, hi = self._config.command_config.resample_interval
    return jp.round(jax.random.uniform(rng, (), minval=lo, maxval=hi) / self.dt).astype(jp.int32)

  @property
  def _tracking_filter_s(self) -> float:
    """Time constant (s) of the trunk velocity the tracking terms judge (0: each step's own)."""
    return float(self._config.reward_config.get("tracking_filter_s", 0.0))

  @property
  def _recovery_steps(self) -> int:
    """Control steps after a kick with the gait's reward terms waived (0: off or no pushes)."""
    pushes = self._config.push_config
    if not pushes.enable:
      return 0
    return int(round(float(pushes.get("recovery_s", 0.0)) / self._config.ctrl_dt))

  @property
  def _curriculum(self) -> bool:
    """Whether each env adapts its own kick strength (`push_config.curriculum`)."""
    return self._kicks.curriculum

  @property
  def _judge_steps(self) -> int:
    """Control steps after a kick at which the curriculum judges it."""
    return max(1, int(round(self._kicks.judge_s / self._config.ctrl_dt)))

  @property
  def _tracks_kicks(self) -> bool:
    """Whether the episode state counts the steps since the last kick."""
    return bool(self._recovery_steps or self._curriculum or self._critic_kick or self._catch_kick)

  @property
  def _catch_kick(self) -> bool:
    """Whether the episode state keeps the last kick for a recovery reference (`push_config.catch_reference`
    with `reward_config.scales.catch_imitation`)."""
    cfg = self._config
    paid = cfg.reward_config.scales.get("catch_imitation", 0.0)
    return bool(cfg.push_config.enable and cfg.push_config.get("catch_reference", "") and paid)

  @property
  def _critic_kick(self) -> bool:
    """Whether the critic observes the balance state after a kick (`critic_kick`)."""
    return bool(self._config.get("critic_kick", False))

  @property
  def persistent_info_keys(self) -> tuple[str, ...]:
    """Episode-state keys that carry over into the next episode at an auto-reset (`VecEnv`)."""
    return ("push_level",) if self._curriculum else ()

  def _push_interval(self, rng: jax.Array) -> jax.Array:
    lo, hi = self._config.push_config.interval_range
    return jp.round(jax.random.uniform(rng, (), minval=lo, maxval=hi) / self.dt).astype(jp.int32)
