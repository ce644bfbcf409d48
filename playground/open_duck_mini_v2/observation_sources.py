"""Where the player's observations come from: the training env's functions, or the robot runtime's loop.

Both sources take the same calls from `player.play`: `start` (the first
observation), `act` (the servos' control for this period's actions) and
`observe` (the next observation after physics).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from flax import struct

from playground.open_duck_mini_v2 import envs
from playground.open_duck_mini_v2 import runtime as runtime_lib
from playground.open_duck_mini_v2 import sensing
from playground.open_duck_mini_v2 import servos


@struct.dataclass
class _ModelView:
  qpos0: jax.Array


class _EnvSteps:
  """An env's per-step functions, batched over episodes and jitted once per configuration."""

  def __init__(self, env):
    ids = env.ids
    self.env = env
    read = jax.vmap(lambda mv, view: sensing.read(ids, mv, view))
    step_angle = 2 * np.pi * env.gait_frequency * env.dt

    def start(key, model_views, views, command):
      k_info, k_obs = jax.random.split(key)
      n = command.shape[0]
      info = jax.vmap(env.initial_info)(jax.random.split(k_info, n), read(model_views, views))
      info["command"] = command
      obs, info = jax.vmap(env.observe)(read(model_views, views), info, jax.random.split(k_obs, n))
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
      obs, info = jax.vmap(env.observe)(readings, info, jax.random.split(key, action.shape[0]))
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
    _ENV_STEPS[key] = _EnvSteps(envs.env_class(env_name)(task=task, config=config))
  return _ENV_STEPS[key]


def _views(datas):
  return jax.tree_util.tree_map(lambda *x: np.stack(x), *[sensing.DataView.from_mjdata(d) for d in datas])


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
      options = dataclasses.replace(options, contract=runtime_lib.RuntimeContract.from_metadata(metadata))
    self.options = options
    self.home = np.asarray(metadata["home_pose"], np.float64)
    period = float(metadata.get("gait_period_steps") or 1.0 / (float(metadata["gait_frequency_hz"]) * dt))
    self.loop = runtime_lib.RuntimeLoop(
      len(models), self.home, float(metadata["action_scale"]), period, dt, options, phase_factor
    )
    self.hardware = runtime_lib.Hardware(
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
