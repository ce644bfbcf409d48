"""The generic player: a policy drives a robot's own MJX env, many episodes in lockstep.

Any robot's task env (MuJoCo Playground's `MjxEnv`: `reset`, `step`) plays
here as it trains: its own physics, observation, action pipeline and
termination, every episode on its own randomized model (the robot's
`make_randomizer`, through `VecEnv`). The player:

- sets each episode's command from its `scorecard.Command` schedule before
  every step, in `state.info["command"]` and in the observation's `command`
  block (so the first observation and an env that resamples its command
  inside `step` both play the schedule);
- kicks the trunk for the command's `Pushes` (a change of the floating
  base's horizontal velocity in a random direction);
- ends an episode at the env's own termination (`fall_cause` "terminated")
  or at a non-finite action;
- measures from the floating base (the model's first joint, a free joint)
  what `scorecard.summarize` needs: commanded and achieved vx, vy (in the
  heading frame) and yaw rate after `SETTLE_S`, survival, distance, action
  change per step, joint speed, joints near a range end and mechanical power.

A robot with more to check (a robot runtime's own loop, foot slip, its sensor
pipeline in MuJoCo C) adds its own player and feeds the same scorecard; the
Open Duck Mini V2 does (`open_duck_mini_v2/evaluation/player.py`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from mujoco_playground import MjxEnv

from playground.common.evaluation.scorecard import SETTLE_S
from playground.common.evaluation.scorecard import TRACKING_WINDOW_S
from playground.common.evaluation.scorecard import Command
from playground.common.evaluation.scorecard import Suite
from playground.common.evaluation.scorecard import summarize
from playground.common.export import onnx_graph
from playground.common.tasks.observation_layout import ObservationLayout
from playground.common.tasks.randomize import RandomizationFn
from playground.common.train.vec_env import VecEnv

#: A joint closer than this to a limit of its range counts as a limit hit.
JOINT_LIMIT_MARGIN = 0.02
#: The command names whose achieved values the player measures, in the scorecard's order.
VELOCITY_NAMES = ("vx", "vy", "yaw_rate")


@dataclasses.dataclass
class StepView:
  """What `play`'s `on_step` sees after each control step (arrays over episodes)."""

  t: int
  time_s: float
  qpos: np.ndarray  # after the step
  seen: np.ndarray  # the observation the policy acted on
  action: np.ndarray
  command: np.ndarray
  running: np.ndarray


class EpisodeMeter:
  """A player's per-episode measurements over the steps it measures (after settling, while up).

  Each step, `log` keeps the commanded and achieved (vx, vy, yaw rate) and
  which episodes were measured; `add` sums per-episode values over the
  measured episodes (others count nothing, whatever their values) and which
  joints were within `JOINT_LIMIT_MARGIN` of a range end. `records()` is
  each episode's part of the player's result, the means NaN if it was never
  measured. Shared by the generic player and a robot's own.
  """

  def __init__(self, n: int, joint_names: Sequence[str], names: Sequence[str]):
    self.joint_names = tuple(joint_names)
    self.counted = np.zeros(n)
    self.sums = {name: np.zeros(n) for name in ("joint_limit_share", *names)}
    self.limit_by_joint = np.zeros((n, len(self.joint_names)))
    self._logs: tuple[list, list, list] = ([], [], [])

  def log(self, measured: np.ndarray, command_velocity: np.ndarray, velocity: np.ndarray) -> None:
    for log, value in zip(self._logs, (command_velocity, velocity, measured)):
      log.append(value)

  def add(self, measured: np.ndarray, near_limit: np.ndarray, **values: np.ndarray) -> None:
    """Sums `values` (each of `names` -> [n]) and the limit hits `near_limit` [n, joints] of the measured episodes."""
    w = measured.astype(float)
    self.sums["joint_limit_share"] += w * near_limit.any(axis=-1)
    self.limit_by_joint += w[:, None] * near_limit
    for name, value in values.items():
      self.sums[name] += np.where(measured, value, 0.0)
    self.counted += w

  def records(self) -> list[dict[str, Any]]:
    """Per episode: its commanded and achieved velocities (`cmd`, `vel` [T, 3] over its measured
    steps), its means (`joint_limit_share` and each of `names`) and `joint_limit_by_joint`."""
    cmd, vel, used = (np.array(log) for log in self._logs)
    out = []
    for i, counted in enumerate(self.counted):
      episode: dict[str, Any] = dict(cmd=cmd[used[:, i], i], vel=vel[used[:, i], i])
      episode.update({k: float(total[i] / counted) if counted else float("nan") for k, total in self.sums.items()})
      episode["joint_limit_by_joint"] = {
        name: round(float(self.limit_by_joint[i, j] / counted), 3)
        for j, name in enumerate(self.joint_names)
        if counted and self.limit_by_joint[i, j]
      }
      out.append(episode)
    return out


def episode_records(
  episodes: Sequence[tuple[Command, int]],
  meter: EpisodeMeter,
  *,
  source: str,
  survival: np.ndarray,
  alive: np.ndarray,
  cause: Sequence[str | None],
  kicks: np.ndarray,
  start_xy: np.ndarray,
  end_xy: np.ndarray,
  extra: Sequence[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
  """A player's result, one dict per episode: what was played, how it ended and `meter`'s measurements.

  `cause` is each fall's cause (empty or None where it did not fall); `extra`
  adds a player's own entries per episode. Shared by the generic player and
  a robot's own, so their records have the same keys.
  """
  out = []
  for i, ((command, seed), measured) in enumerate(zip(episodes, meter.records(), strict=True)):
    out.append(
      dict(
        command=command.name,
        seed=seed,
        source=source,
        duration_s=command.duration,
        survival_s=float(survival[i]),
        fell=bool(not alive[i]),
        fall_cause=cause[i] or None,
        pushes=int(kicks[i]),
        distance_m=float(np.linalg.norm(end_xy[i] - start_xy[i])),
        **(extra[i] if extra is not None else {}),
        **measured,
      )
    )
  return out


def _policy_input(obs: Any) -> np.ndarray:
  """The policy's observation: the env's array, or its `state` entry (MuJoCo Playground's
  asymmetric actor-critic observations)."""
  return np.asarray(obs["state"] if isinstance(obs, dict) else obs, np.float32)


def heading_velocity(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
  """[n, 3] vx, vy in the trunk's heading frame and the yaw rate, from a free joint's qpos/qvel."""
  w, x, y, z = qpos[:, 3], qpos[:, 4], qpos[:, 5], qpos[:, 6]
  yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
  c, s = np.cos(yaw), np.sin(yaw)
  vx, vy = qvel[:, 0], qvel[:, 1]
  # MuJoCo's free joint: linear velocity in the world frame, angular velocity in the body frame.
  row_z = np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1)
  wz = np.sum(row_z * qvel[:, 3:6], axis=-1)
  return np.stack([c * vx + s * vy, -s * vx + c * vy, wz], axis=-1)


_COMPILED: dict[tuple[int, int, int, int], tuple[Any, ...]] = {}


def _compiled(env: MjxEnv, randomizer: RandomizationFn | None, seed: int, n: int) -> tuple[Callable, Callable]:
  """The jitted reset and step of `n` episodes of `env` on its randomized models, built once per
  (env, randomizer, seed, n) in a process (the last 4 kept)."""
  key = (id(env), id(randomizer), seed, n)
  if key not in _COMPILED:
    venv = VecEnv(env, episode_length=2**30, randomization_fn=randomizer, randomization_seed=seed)
    index = jp.arange(n)

    @jax.jit
    def start(keys):
      return venv.reset(keys, venv.models(index)).env

    @jax.jit
    def advance(env_state, action, command, kick):
      data = env_state.data.replace(qvel=env_state.data.qvel.at[:, 0:2].add(kick))
      env_state = env_state.replace(data=data, info=dict(env_state.info, command=command))
      return venv.step_envs(env_state, action, venv.models(index))

    if len(_COMPILED) >= 4:
      _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = (env, randomizer, start, advance)  # holding env and randomizer keeps their ids unique
  return _COMPILED[key][2:]


def play(
  policy: Callable[[np.ndarray], np.ndarray],
  env: MjxEnv,
  episodes: Sequence[tuple[Command, int]],
  command_names: Sequence[str],
  observation_layout: ObservationLayout | None = None,
  randomizer: RandomizationFn | None = None,
  seed: int = 0,
  on_step: Callable[[StepView], bool | None] | None = None,
) -> list[dict[str, Any]]:
  """Plays every (command, episode seed) pair in lockstep in `env`; returns per-episode raw metrics.

  Args:
    policy: batched obs [n, size] -> actions [n, action size] (e.g.
      `onnx_graph.batched_policy(path)`).
    env: the robot's task env, as its runner builds it (`make_env` or `make_eval_env`).
    episodes: (command, episode seed) pairs; a command's schedule holds the
      first of `command_names` (the rest are 0).
    command_names: the robot's commands in order; "vx", "vy" and "yaw_rate"
      among them are compared with what the trunk achieves (absent: 0).
    observation_layout: the policy observation's layout; its `command` block,
      if any, is set to the played command.
    randomizer: the robot's `make_randomizer(env, env_config)`, or None for
      the nominal model.
    seed: seed of the randomized models and the resets and pushes.
    on_step: called after every control step with a `StepView`; returning
      False stops the play.

  Raises:
    ValueError: a model whose first joint is not a free joint, a command with
      a gait-clock `phase_factor`, or a schedule entry longer than `command_names`.
  """
  model = env.mj_model
  if model.njnt == 0 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
    raise ValueError("the generic player measures a floating base: the model's first joint must be a free joint")
  if any(c.phase_factor != 1.0 for c, _ in episodes):
    raise ValueError("the generic player has no gait clock to speed up: play phase_factor 1.0")
  n, size = len(episodes), len(command_names)
  velocity_index = [command_names.index(v) if v in command_names else None for v in VELOCITY_NAMES]
  command_block = (observation_layout.slices.get("command") if observation_layout else None) or None
  joints = model.actuator_trnid[:, 0]
  act_dof, act_qpos = model.jnt_dofadr[joints], model.jnt_qposadr[joints]
  limited = model.jnt_limited[joints].astype(bool)
  jnt_range = model.jnt_range[joints]

  start, advance = _compiled(env, randomizer, seed, n)
  k_reset, k_push = jax.random.split(jax.random.PRNGKey(seed))
  state = start(jax.random.split(k_reset, n))
  dt = float(env.dt)
  steps_of = np.round(np.array([c.duration for c, _ in episodes]) / dt).astype(np.int64)
  total = int(steps_of.max())
  settle = int(round(SETTLE_S / dt))
  rng = np.random.default_rng(np.asarray(jax.random.key_data(k_push)).ravel().tolist())
  push_at = np.full(n, np.iinfo(np.int64).max)
  for i, (command, _) in enumerate(episodes):
    if command.pushes is not None:
      push_at[i] = int(round(rng.uniform(*command.pushes.interval) / dt))

  qpos0 = np.asarray(state.data.qpos)
  start_xy, end_xy = qpos0[:, 0:2].copy(), qpos0[:, 0:2].copy()
  alive = np.ones(n, bool)
  cause: list[str | None] = [None] * n
  survival = steps_of * dt
  kicks = np.zeros(n, int)
  last_action = np.zeros((n, env.action_size), np.float32)
  meter = EpisodeMeter(
    n, [model.actuator(i).name for i in range(model.nu)], ("action_smoothness", "joint_speed_radps", "power_w")
  )
  for t in range(total):
    command = np.stack([c.at(t * dt, size) for c, _ in episodes])
    running = alive & (t < steps_of)
    seen = _policy_input(state.obs).copy()
    if command_block is not None:
      seen[:, command_block] = command
    action = np.asarray(policy(seen), np.float32)
    bad = running & ~np.all(np.isfinite(action), axis=1)
    action = np.where(np.isfinite(action), action, 0.0).astype(np.float32)
    kick = np.zeros((n, 2), np.float32)
    for i in np.flatnonzero(running & (push_at <= t)):
      angle, magnitude = rng.uniform(0, 2 * np.pi), rng.uniform(*episodes[i][0].pushes.magnitude)
      kick[i] = magnitude * np.array([np.cos(angle), np.sin(angle)])
      kicks[i] += 1
      push_at[i] = t + int(round(rng.uniform(*episodes[i][0].pushes.interval) / dt))
    state = advance(state, jp.asarray(action), jp.asarray(command), jp.asarray(kick))
    qpos, qvel, force = (np.asarray(x) for x in (state.data.qpos, state.data.qvel, state.data.actuator_force))
    terminated = (np.asarray(state.done) > 0.5) | ~np.isfinite(qpos).all(axis=1) | ~np.isfinite(qvel).all(axis=1)
    fell = running & (terminated | bad)
    for i in np.flatnonzero(fell):
      cause[i] = "non-finite action" if bad[i] else "terminated"
    survival = np.where(fell, (t + 1) * dt, survival)
    alive &= ~fell
    ok = running & ~fell
    end_xy[ok] = qpos[ok, 0:2]
    measured = ok & (t + 1 > settle)
    vel = heading_velocity(qpos, qvel)
    q, dq = qpos[:, act_qpos], qvel[:, act_dof]
    near = limited & ((q < jnt_range[:, 0] + JOINT_LIMIT_MARGIN) | (q > jnt_range[:, 1] - JOINT_LIMIT_MARGIN))
    meter.add(
      measured,
      near,
      action_smoothness=np.mean(np.abs(action - last_action), axis=-1),
      joint_speed_radps=np.mean(np.abs(dq), axis=-1),
      power_w=np.sum(np.abs(force * dq), axis=-1),
    )
    velocity_command = np.stack(
      [command[:, k] if k is not None else np.zeros(n, np.float32) for k in velocity_index], axis=-1
    )
    meter.log(measured, velocity_command, vel)
    last_action = np.where(ok[:, None], action, last_action)
    if on_step is not None and on_step(StepView(t, (t + 1) * dt, qpos, seen, action, command, running)) is False:
      survival = np.minimum(survival, (t + 1) * dt)
      break
    if not (alive & (t + 1 < steps_of)).any():
      break
  return episode_records(
    episodes,
    meter,
    source="mjx",
    survival=survival,
    alive=alive,
    cause=cause,
    kicks=kicks,
    start_xy=start_xy,
    end_xy=end_xy,
  )


def score(
  policy_path: str | Path,
  env: MjxEnv,
  suite: Suite,
  randomizer: RandomizationFn | None = None,
  seed: int = 0,
) -> dict[str, Any]:
  """Plays an ONNX policy on `suite` in `env` (`play`); returns the JSON-able scorecard.

  The file's metadata names its observation layout (`observation_layout`),
  whose `command` block the player sets. Randomization is the robot's
  (`randomizer`: its `make_randomizer(env, env_config)`), or none.
  """
  started = time.monotonic()
  metadata = onnx_graph.read_metadata(policy_path)
  layout = metadata.get("observation_layout")
  episodes = [(c, s) for c in suite.commands for s in range(suite.seeds)]
  played = play(
    onnx_graph.batched_policy(policy_path),
    env,
    episodes,
    suite.command_names,
    ObservationLayout.from_json(layout) if layout else None,
    randomizer,
    seed,
  )
  card = summarize(played, suite.commands, window=max(1, int(round(TRACKING_WINDOW_S / float(env.dt)))))
  card["episodes"] = [{k: e[k] for k in ("command", "seed", "fell", "fall_cause", "survival_s")} for e in played]
  card.update(
    policy=str(policy_path),
    env=metadata.get("env"),
    task=metadata.get("task"),
    training_step=metadata.get("training_step"),
    seeds=suite.seeds,
    source="mjx",
    conditions="the robot's MJX env" + (", randomized models" if randomizer is not None else ", nominal model"),
    wall_time_s=round(time.monotonic() - started, 2),
  )
  return card
