"""One player: a policy drives many simulated ducks in MuJoCo C, in lockstep.

The scorecard (`score.py`) plays hundreds of episodes with it and playback
(`playback.py`) plays one; both get the same physics, command schedules,
pushes and fall check. Where the observation comes from is the player's
`source` (`EnvSource` or `RuntimeSource`, each with `start`, the first
observation; `act`, the servos' control for this period's actions; and
`observe`, the next observation after physics):

- `"env"`: the training env's own functions (`observations.read`, `apply_action`,
  `advance`, `observe`) on the C state;
- `"runtime"`: the Open Duck robot runtime's loop (`runtime.py`, written
  independently of the env): a 2 s hold at the home pose, the phase starting
  at (0, 0), the runtime's order and scales.

Two implementations of one contract: where they disagree on a policy's
card, one of them is wrong. An episode ends as a failure when the trunk
tips past `termination.min_up_z`, sinks below `termination.min_base_height`,
the state becomes non-finite, or the policy returns a non-finite action. In
the runtime's loop a duck that is already tipped or sunk when the start-up
hold ends is down before the policy acted: its cause is `HOLD_CAUSE` and its
survival 0 s, so a card tells the policy's falls from the hold's.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from flax import struct
from mujoco import mjx

from playground.common.evaluation.player import JOINT_LIMIT_MARGIN
from playground.common.evaluation.player import EpisodeMeter
from playground.common.evaluation.player import episode_records
from playground.common.evaluation.scorecard import HOLD_CAUSE
from playground.common.evaluation.scorecard import SETTLE_S
from playground.common.evaluation.scorecard import Command
from playground.common.tasks import randomize
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.tasks import registry


@struct.dataclass
class _ModelView:
  qpos0: jax.Array


class _EnvSteps:
  """An env's per-step functions, batched over episodes and jitted once per configuration."""

  def __init__(self, env):
    ids = env.ids
    self.env = env
    read = jax.vmap(lambda mv, view: observations.read(ids, mv, view))
    step_angle = 2 * np.pi * env.gait_frequency * env.dt

    def observe(readings, info, key):
      return jax.vmap(env.observe)(readings, info, jax.random.split(key, readings.heading.shape[0]))

    def start(key, model_views, views, command):
      k_info, k_obs = jax.random.split(key)
      n = command.shape[0]
      info = jax.vmap(env.initial_info)(jax.random.split(k_info, n), read(model_views, views))
      info["command"] = command
      obs, info = observe(read(model_views, views), info, k_obs)
      return info, obs["state"]

    def act(key, info, action, command):
      info = dict(info, command=command)
      info = jax.vmap(env.apply_action)(info, action, jax.random.split(key, command.shape[0]))
      return info, info["motor_targets"]

    def sense(key, info, model_views, views, action, phase_factor):
      readings = read(model_views, views)
      info, _ = jax.vmap(env.advance)(info, readings, action)
      # The runtime's phase button: the phase advances phase_factor times as fast.
      info["phase"] = jp.mod(info["phase"] + (phase_factor - 1.0) * step_angle, 2 * jp.pi)
      obs, info = observe(readings, info, key)
      return info, obs["state"]

    self.start, self.act, self.sense = jax.jit(start), jax.jit(act), jax.jit(sense)


_ENV_STEPS: dict[tuple[str, str, str], _EnvSteps] = {}


def env_steps(env_name: str, task: str, config: Any) -> _EnvSteps:
  """The jitted steps of an env built from `config`, built once per process and configuration
  (a runner scoring every checkpoint compiles them only once)."""
  key = (env_name, task, config.to_json(sort_keys=True))
  if key not in _ENV_STEPS:
    if len(_ENV_STEPS) >= 4:
      _ENV_STEPS.pop(next(iter(_ENV_STEPS)))
    _ENV_STEPS[key] = _EnvSteps(registry.env_class(env_name)(task=task, config=config))
  return _ENV_STEPS[key]


def _views(datas):
  return jax.tree_util.tree_map(lambda *x: np.stack(x), *[observations.DataView.from_mjdata(d) for d in datas])


class EnvSource:
  """Observations from the training env's own functions, applied to the C state."""

  name = "env"

  def __init__(self, steps: _EnvSteps, models, key: jax.Array, total_steps: int, phase_factor: np.ndarray):
    self.steps = steps
    self.model_views = _ModelView(qpos0=jp.asarray(np.stack([m.qpos0 for m in models]), jp.float32))
    self.keys = np.asarray(jax.random.split(key, 2 * total_steps + 1))
    self.phase_factor = jp.asarray(phase_factor, jp.float32)
    self.info = None
    self.t = 0

  def start(self, models, datas, commands) -> np.ndarray:
    self.info, obs = self.steps.start(self.keys[0], self.model_views, _views(datas), jp.asarray(commands))
    return np.asarray(obs)

  def act(self, actions, commands) -> np.ndarray:
    self.info, ctrl = self.steps.act(self.keys[1 + 2 * self.t], self.info, jp.asarray(actions), jp.asarray(commands))
    return np.asarray(ctrl)

  def observe(self, datas, actions) -> np.ndarray:
    key = self.keys[2 + 2 * self.t]
    self.info, obs = self.steps.sense(
      key, self.info, self.model_views, _views(datas), jp.asarray(actions), self.phase_factor
    )
    self.t += 1
    return np.asarray(obs)


class RuntimeSource:
  """Observations as the Open Duck runtime builds them (`runtime.RuntimeLoop` on `runtime.Hardware`)."""

  name = "runtime"

  def __init__(self, nominal, models, config, metadata, seed: int, phase_factor: np.ndarray, options):
    dt = float(config.ctrl_dt)
    if options.contract is None:  # the runtime variant the file is made for
      options = dataclasses.replace(options, contract=runtime.RuntimeContract.from_metadata(metadata))
    self.options = options
    self.home = np.asarray(metadata["home_pose"], np.float64)
    period = float(metadata.get("gait_period_steps") or 1.0 / (float(metadata["gait_frequency_hz"]) * dt))
    self.loop = runtime.RuntimeLoop(
      len(models), self.home, float(metadata["action_scale"]), period, dt, options, phase_factor
    )
    self.hardware = runtime.Hardware(
      nominal,
      models,
      config.noise_config,
      config.delay,
      servos.speed_limit(config),
      dt,
      np.random.default_rng([seed, 1]),
    )
    self.n_substeps = int(round(dt / float(config.sim_dt)))
    self.commands = None

  def start(self, models, datas, commands) -> np.ndarray:
    """Holds the home pose for `options.hold_s`, then observes the first frame."""
    ctrl = self.hardware.hold(np.tile(self.home, (len(datas), 1)))
    hold_steps = int(round(self.options.hold_s / self.loop.ctrl_dt))
    for m, d, c in zip(models, datas, ctrl):
      d.ctrl[:] = c
      mujoco.mj_step(m, d, nstep=hold_steps * self.n_substeps)
    self.commands = np.asarray(commands, np.float64)
    return self.loop.observe(commands=self.commands, **self.hardware.sense(datas))

  def act(self, actions, commands) -> np.ndarray:
    self.commands = np.asarray(commands, np.float64)
    return self.hardware.drive(self.loop.act(actions, self.commands))

  def observe(self, datas, actions) -> np.ndarray:
    del actions
    return self.loop.observe(commands=self.commands, **self.hardware.sense(datas))


SOURCES = ("env", "runtime")
_NEVER = 10**15  # control steps: no push


def randomized_models(nominal: mujoco.MjModel, config: Any, keys: np.ndarray) -> list[mujoco.MjModel]:
  """One MuJoCo C model per key, randomized like the training env (or copies)."""
  if not config.domain_randomization.enabled:
    return [copy.copy(nominal) for _ in keys]
  fn = randomize.make_randomization_fn(nominal, registry.randomization_targets(), servos.domain_randomization(config))
  batched, in_axes = fn(mjx.put_model(nominal), jp.asarray(keys))
  fields = [n for n in randomize.RANDOMIZED_FIELDS + randomize.SERVO_FIELDS if getattr(in_axes, n) == 0]
  models = []
  for i in range(len(keys)):
    m = copy.copy(nominal)
    for name in fields:
      getattr(m, name)[:] = np.asarray(getattr(batched, name)[i])
    models.append(m)
  return models


@dataclasses.dataclass
class StepView:
  """What `play`'s `on_step` sees after each control step (arrays over episodes)."""

  t: int
  time_s: float
  models: list
  datas: list
  seen: np.ndarray  # the observation the policy acted on
  obs: np.ndarray  # the next observation
  action: np.ndarray
  ctrl: np.ndarray
  command: np.ndarray
  running: np.ndarray

  def kick(self, i: int, angle_rad: float, strength: float) -> np.ndarray:
    """Kicks episode `i`'s trunk: its velocity changes by `strength` m/s horizontally, `angle_rad`
    from the trunk's heading (0: its front, pi/2: its left). Returns the trunk's x axis (world) at the kick."""
    data = self.datas[i]
    x_axis = data.xmat[self.models[i].body(constants.ROOT_BODY).id].reshape(3, 3)[:, 0].copy()
    world = angle_rad + np.arctan2(x_axis[1], x_axis[0])
    data.qvel[0:2] += strength * np.array([np.cos(world), np.sin(world)])
    return x_axis


def play(
  policy: Callable[[np.ndarray], np.ndarray],
  env_name: str,
  task: str,
  config: Any,
  metadata: dict[str, Any],
  episodes: Sequence[tuple[Command, int]],
  seed: int = 0,
  source: str = "env",
  runtime_options: runtime.RuntimeOptions | None = None,
  model_keys: np.ndarray | None = None,
  on_step: Callable[[StepView], bool | None] | None = None,
) -> list[dict[str, Any]]:
  """Plays every (command, seed) episode in lockstep; returns per-episode raw metrics.

  Args:
    policy: batched obs [n, size] -> actions [n, 14] (e.g. `policy_io.onnx_policy(path, batched=True)`).
    env_name, task: the policy's env and scene.
    config: the env config to play with (`policy_io.play_config`).
    metadata: the policy file's metadata (action scale, home pose, gait).
    episodes: (command, episode seed) pairs.
    seed: base seed of the randomized models, noise, delays and pushes.
    source: "env" or "runtime" (see the module docstring).
    runtime_options: the runtime's loop settings (`source="runtime"`).
    model_keys: keys of the randomized models, one per episode; default:
      drawn from `seed` (e.g. a run's own training models instead).
    on_step: called after every control step with a `StepView`; returning
      False stops the play.
  """
  if source not in SOURCES:
    raise ValueError(f"unknown observation source '{source}'; valid: {', '.join(SOURCES)}")
  steps = env_steps(env_name, task, config)
  env = steps.env
  n = len(episodes)
  # Models from one half of the seed's key, the env source's noise and delays from the other.
  key, k_models = jax.random.split(jax.random.PRNGKey(seed))
  if model_keys is None:
    model_keys = jax.random.split(k_models, n)
  elif len(model_keys) != n:
    raise ValueError(f"{len(model_keys)} model keys for {n} episodes")
  models = randomized_models(env.mj_model, config, np.asarray(model_keys))
  datas = [mujoco.MjData(m) for m in models]
  home = models[0].key(constants.HOME_KEYFRAME).id
  for m, d in zip(models, datas):
    mujoco.mj_resetDataKeyframe(m, d, home)
    mujoco.mj_forward(m, d)
  dt = env.dt
  durations = np.array([c.duration for c, _ in episodes], float)
  steps_of = np.round(durations / dt).astype(np.int64)
  total = int(steps_of.max())
  phase_factor = np.array([c.phase_factor for c, _ in episodes], np.float32)
  if source == "env":
    src = EnvSource(steps, models, key, total, phase_factor)
  else:
    src = RuntimeSource(
      env.mj_model, models, config, metadata, seed, phase_factor, runtime_options or runtime.RuntimeOptions()
    )
  ids = env.ids
  obs = src.start(models, datas, np.stack([c.at(0.0, commands.SIZE) for c, _ in episodes]))

  root, imu = ids.root_body, ids.imu_site
  sensor = lambda d, name: d.sensordata[slice(ids.sensors[name][0], sum(ids.sensors[name]))]  # noqa: E731
  jnt_range = np.stack([m.jnt_range[m.actuator_trnid[:, 0]] for m in models])
  jnt_qpos = np.stack([m.jnt_qposadr[m.actuator_trnid[:, 0]] for m in models])
  legs = [constants.ACTUATOR_NAMES.index(name) for name in constants.LEG_JOINT_NAMES]  # the gait's joints
  term = config.termination

  def down() -> tuple[np.ndarray, np.ndarray]:
    """(tipped, sank) of every duck now."""
    up_z = np.array([d.site_xmat[imu].reshape(3, 3)[2, 2] for d in datas])
    feet_z = np.array([min(sensor(d, s)[2] for s in constants.FEET_POS_SENSORS) for d in datas])
    height = np.array([d.xpos[root, 2] for d in datas]) - feet_z
    return up_z < term.min_up_z, height < term.min_base_height

  # Ducks already down when the runtime's start-up hold ends never meet the policy.
  alive = ~np.logical_or(*down()) if source == "runtime" else np.ones(n, bool)
  cause = ["" if a else HOLD_CAUSE for a in alive]
  survival = np.where(alive, steps_of * dt, 0.0)
  start_xy = np.stack([d.xpos[root, :2].copy() for d in datas])
  end_xy = start_xy.copy()
  last_action = np.zeros((n, len(ids.home_ctrl)), np.float32)
  push_rng = np.random.default_rng(seed)
  pushes = [c.pushes for c, _ in episodes]
  push_lo = np.array([p.interval[0] if p else np.inf for p in pushes])
  push_hi = np.array([p.interval[1] if p else np.inf for p in pushes])

  def next_push(t0):
    has = np.isfinite(push_lo)
    draw = push_rng.uniform(np.where(has, push_lo, 0.0), np.where(has, push_hi, 0.0))
    return np.where(has, t0 + np.rint(draw / dt), _NEVER).astype(np.int64)

  push_at = next_push(np.zeros(n, np.int64))
  kicks = np.zeros(n, int)
  meter = EpisodeMeter(
    n, constants.ACTUATOR_NAMES, ("foot_slip_mps", "action_smoothness", "joint_speed_radps", "power_w")
  )
  settle = int(round(SETTLE_S / dt))
  for t in range(total):
    command = np.stack([c.at(t * dt, commands.SIZE) for c, _ in episodes])
    running = alive & (t < steps_of)
    seen = np.asarray(obs, np.float32)
    action = np.asarray(policy(seen), np.float32)
    bad = running & ~np.all(np.isfinite(action), axis=1)
    action = np.where(np.isfinite(action), action, 0.0).astype(np.float32)
    ctrl = src.act(action, command)
    for i in np.flatnonzero(running & (push_at <= t)):
      angle = push_rng.uniform(0, 2 * np.pi)
      magnitude = push_rng.uniform(*pushes[i].magnitude)
      datas[i].qvel[0:2] += magnitude * np.array([np.cos(angle), np.sin(angle)])
      kicks[i] += 1
    push_at = np.where(push_at <= t, next_push(np.full(n, t)), push_at)
    for i in np.flatnonzero(running & ~bad):
      datas[i].ctrl[:] = ctrl[i]
      mujoco.mj_step(models[i], datas[i], nstep=env.n_substeps)
    obs = src.observe(datas, action)
    finite = np.array([np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all() for d in datas])
    tipped, sank = down()
    reasons = {"non-finite action": bad, "non-finite state": ~finite, "tipped": tipped, "sank": sank}
    fell = np.zeros(n, bool)
    for name, hit in reasons.items():
      for i in np.flatnonzero(running & hit & ~fell):
        cause[i] = name
      fell |= running & hit
    survival = np.where(fell, (t + 1) * dt, survival)
    alive &= ~fell
    ok = running & ~fell
    xy = np.stack([d.xpos[root, :2] for d in datas])
    end_xy[running & ~bad] = xy[running & ~bad]
    measured = ok & (t + 1 > settle)
    vel = np.zeros((n, 3))
    if measured.any():
      x_axis = np.stack([d.xmat[root].reshape(3, 3)[:, 0] for d in datas])
      yaw = np.arctan2(x_axis[:, 1], x_axis[:, 0])
      c, s = np.cos(yaw), np.sin(yaw)
      v = np.stack([sensor(d, constants.GLOBAL_LINVEL_SENSOR) for d in datas])
      wz = np.array([sensor(d, constants.GLOBAL_ANGVEL_SENSOR)[2] for d in datas])
      vel = np.stack([c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1], wz], -1)
      feet_vel = np.stack([[sensor(d, f)[:2] for f in constants.FEET_LINVEL_SENSORS] for d in datas])
      contacts = np.stack([[sensor(d, f)[0] > 0 for f in constants.FEET_CONTACT_SENSORS] for d in datas])
      slip = np.sum(np.linalg.norm(feet_vel, axis=-1) * contacts, axis=-1)
      q = np.stack([d.qpos[a] for d, a in zip(datas, jnt_qpos)])
      near = (q < jnt_range[:, :, 0] + JOINT_LIMIT_MARGIN) | (q > jnt_range[:, :, 1] - JOINT_LIMIT_MARGIN)
      force = np.stack([d.actuator_force for d in datas])
      qvel = np.stack([d.qvel[ids.act_dof] for d in datas])
      meter.add(
        measured,
        near,
        foot_slip_mps=slip,
        action_smoothness=np.mean(np.abs(action - last_action), axis=-1),
        joint_speed_radps=np.mean(np.abs(qvel[:, legs]), axis=-1),
        power_w=np.sum(np.abs(force * qvel), axis=-1),
      )
    meter.log(measured, command[:, :3], vel)
    last_action = np.where(ok[:, None], action, last_action)
    if on_step is not None:
      view = StepView(t, (t + 1) * dt, models, datas, seen, obs, action, ctrl, command, running)
      if on_step(view) is False:
        survival = np.minimum(survival, (t + 1) * dt)
        break
    if not (alive & (t + 1 < steps_of)).any():
      break
  offsets = [models[i].body_ipos[root] - env.mj_model.body_ipos[root] for i in range(n)]
  return episode_records(
    episodes,
    meter,
    source=src.name,
    survival=survival,
    alive=alive,
    cause=cause,
    kicks=kicks,
    start_xy=start_xy,
    end_xy=end_xy,
    extra=[{"trunk_com_offset_m": [round(float(v), 4) for v in offset]} for offset in offsets],
  )
