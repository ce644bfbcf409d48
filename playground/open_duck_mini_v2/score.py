"""Policy scorecard: does the duck walk on command?

    uv run playground/open_duck_mini_v2/score.py checkpoints/<run>            # latest checkpoint
    uv run playground/open_duck_mini_v2/score.py checkpoints/<run>/<step>     # one checkpoint
    uv run playground/open_duck_mini_v2/score.py policy.onnx [--clean] [--seeds 3]
    uv run playground/open_duck_mini_v2/score.py checkpoints/<run> --set domain_randomization.com_offset=0.05

Plays the policy in MuJoCo's C engine on a fixed suite of commands (stand,
forward 0.1 and 0.15 m/s, backward 0.1, sideways +-0.1, turn +-0.5 rad/s, and
a 20 s script that changes the command every 4 s), several seeds each. Every
episode runs on its own domain-randomized model with the training env's
sensor noise and action/IMU delays (`--clean` turns all three off), and its
observations come from the training environment's own functions (`base.read`,
`apply_action`, `advance`, `observe`), as in playback and on the robot.
`--set KEY=VALUE` changes the run's env config before playing (e.g. wider
randomization ranges than the policy was trained with).

Per command it reports survival time and falls, the achieved vx / vy / yaw
rate in the heading frame (after a settling second) against the command,
tracking errors, distance, foot slip, joint-limit hits, action smoothness and
mechanical power; a table on stdout, a JSON file and a PNG. The headline:
falls, mean velocity-tracking error, forward speed at the 0.1 m/s command.
The JSON also lists every episode (command, seed, fell, survival time and its
model's trunk centre-of-mass offset), to tell what makes a policy fall.

The policy's ONNX metadata (robot, observation layout, action order, home
pose, control period) must match the model, or it is refused in one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("playground")

#: Seconds of each constant-command episode, and of the settling time excluded from the averages.
DURATION_S = 8.0
SETTLE_S = 1.0
SCRIPT_DURATION_S = 20.0
#: Tracking errors compare velocities averaged over this trailing window: a
#: walking gait's velocity swings within each 0.54 s period, and that sway is
#: not a tracking error (instantaneous errors ranked standing above walking).
TRACKING_WINDOW_S = 1.0
#: A joint closer than this to a limit of its range counts as a limit hit.
JOINT_LIMIT_MARGIN = 0.02
#: The table names a joint that is at a limit for at least this share of a command's time.
LIMIT_REPORT_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class Command:
  """One entry of the suite: a name and a schedule [(t_start, vx, vy, yaw_rate), ...].

  An entry may add the four head commands (neck pitch, head pitch, head yaw,
  head roll offsets, rad): (t_start, vx, vy, yaw_rate, neck, pitch, yaw, roll).
  Without them the head command is 0 (the home pose).
  """

  name: str
  schedule: tuple[tuple[float, ...], ...]
  duration: float = DURATION_S

  def at(self, t: float) -> np.ndarray:
    """The 7-dim command at time t."""
    current = self.schedule[0]
    for entry in self.schedule:
      if t + 1e-9 >= entry[0]:
        current = entry
    if len(current) not in (4, 8):
      raise ValueError(f"a schedule entry is (t, vx, vy, yaw_rate[, 4 head commands]), got {current}")
    head = tuple(current[4:8]) or (0.0, 0.0, 0.0, 0.0)
    return np.array([current[1], current[2], current[3], *head], np.float32)


def suite() -> tuple[Command, ...]:
  """The fixed command suite (see the module docstring)."""
  const = lambda name, vx=0.0, vy=0.0, wz=0.0: Command(name, ((0.0, vx, vy, wz),))  # noqa: E731
  script = Command(
    "script",
    ((0.0, 0.1, 0.0, 0.0), (4.0, 0.0, 0.0, 0.5), (8.0, 0.0, 0.1, 0.0), (12.0, -0.1, 0.0, 0.0), (16.0, 0.0, 0.0, 0.0)),
    SCRIPT_DURATION_S,
  )
  return (
    const("stand"),
    const("forward_0.1", vx=0.1),
    const("forward_0.15", vx=0.15),
    const("backward_0.1", vx=-0.1),
    const("left_0.1", vy=0.1),
    const("right_0.1", vy=-0.1),
    const("turn_left_0.5", wz=0.5),
    const("turn_right_0.5", wz=-0.5),
    script,
  )


def look_around(duration: float = SCRIPT_DURATION_S, every: float = 2.0, seed: int = 0) -> Command:
  """Standing still while the head jumps to a new random pose every `every` seconds.

  The poses are drawn uniformly from the joystick env's default head command
  ranges (`command_config`: neck pitch -0.34..1.1, head pitch +-0.78, yaw
  +-1.5, roll +-0.5 rad), with a fixed seed, so every policy sees the same
  sequence. Swinging
  the 4 head servos to their extremes shifts the duck's centre of mass: an
  untrained policy that holds the legs at home falls in about half the
  episodes even without pushes (see tests/test_learning.py).
  """
  from playground.open_duck_mini_v2 import joystick

  c = joystick.default_config().command_config
  low, high = zip(c.neck_pitch, c.head_pitch, c.head_yaw, c.head_roll)
  rng = np.random.default_rng(seed)
  count = int(np.ceil(duration / every))
  schedule = tuple((every * i, 0.0, 0.0, 0.0, *np.round(rng.uniform(low, high), 2).tolist()) for i in range(count))
  return Command("look_around", schedule, duration)


class ScoreError(ValueError):
  """The policy cannot be scored (missing file, mismatched contract)."""


# ---- Finding the policy and its configuration.


def resolve_policy(path: str | Path) -> tuple[Path, dict[str, Any] | None, Path]:
  """(ONNX file, the run's env config or None, default output directory) for PATH.

  PATH is an `.onnx` file, a checkpoint step directory or a run directory
  (its latest checkpoint). A checkpoint without `policy.onnx` is exported. An
  `.onnx` file next to a run's `config.json` (`best_policy.onnx`) takes the
  run's env config.
  """
  from playground.common import checkpointing

  path = Path(path).expanduser()
  if not path.exists():
    raise ScoreError(f"{path} does not exist (expected a run directory, a checkpoint directory or an .onnx file)")
  if path.is_file():
    if path.suffix != ".onnx":
      raise ScoreError(f"{path} is not an .onnx file, a checkpoint directory or a run directory")
    # A run's best_policy.onnx plays under its run's config.
    env_config = None
    record = path.parent / "config.json"
    if record.is_file():
      try:
        env_config = json.loads(record.read_text()).get("env_config")
      except (ValueError, AttributeError):  # not a run's record: play with the defaults
        env_config = None
    return path, env_config, path.parent
  step_dir = checkpointing.resolve(path)
  onnx_path = step_dir / "policy.onnx"
  if not onnx_path.is_file():
    from playground.export import export_checkpoint

    onnx_path, _ = export_checkpoint(step_dir)
  config_path = step_dir.parent / "config.json"
  env_config = json.loads(config_path.read_text())["env_config"] if config_path.is_file() else None
  return onnx_path, env_config, step_dir


def check_contract(metadata: dict[str, Any], ids: Any, ctrl_dt: float) -> None:
  """Refuses (ScoreError, one line) a policy whose contract differs from the model's."""
  from playground.open_duck_mini_v2 import constants as consts
  from playground.open_duck_mini_v2 import observations as obs_lib
  from playground.open_duck_mini_v2.runner import ENVS

  differences = []
  if metadata.get("robot") != "open_duck_mini_v2":
    differences.append(f"robot is '{metadata.get('robot')}', not 'open_duck_mini_v2'")
  if metadata.get("env") not in ENVS:
    differences.append(f"env '{metadata.get('env')}' is not one of {', '.join(ENVS)}")
  if obs_lib.history_of(metadata.get("observation_layout")) is None:
    differences.append(
      f"observation layout differs ({metadata.get('observation_size', '?')} inputs; "
      f"the model observes {obs_lib.STATE_LAYOUT.size}, plus "
      f"{obs_lib.HISTORY_FRAME_LAYOUT.size} per history frame)"
    )
  if list(metadata.get("action_names", [])) != list(consts.ACTUATOR_NAMES):
    differences.append("action order differs from the model's actuators")
  period = metadata.get("control_period_s")
  if period is None or abs(float(period) - ctrl_dt) > 1e-9:
    differences.append(f"control period is {period} s, the env runs at {ctrl_dt} s")
  home = metadata.get("home_pose")
  if home is None or len(home) != len(ids.home_ctrl) or not np.allclose(home, ids.home_ctrl, atol=1e-4):
    differences.append("home pose differs from the model's home keyframe")
  if differences:
    raise ScoreError("the policy does not match the Open Duck Mini V2 model: " + "; ".join(differences))


def score_config(
  metadata: dict[str, Any],
  env_config: dict[str, Any] | None,
  clean: bool,
  overrides: Sequence[tuple[str, str]] = (),
):
  """The env config to play with: the run's (or the env's default), as the policy was trained.

  The trunk offset's training margin is dropped (see `randomize.default_config`).
  `overrides` (`config.parse_overrides` pairs) change it first, as `--set`
  does for training; an unknown key raises `ConfigError`.
  """
  from ml_collections import config_dict

  from playground.common import config as config_lib
  from playground.open_duck_mini_v2 import base
  from playground.open_duck_mini_v2 import observations as obs_lib
  from playground.open_duck_mini_v2.runner import env_class

  config = env_class(metadata["env"]).default_config()
  if env_config is not None:
    config = config_dict.ConfigDict(env_config)
  # The scorecard judges at the randomization's nominal ranges: the trunk
  # offset's training margin (`com_offset_margin`) is left out, unless
  # `overrides` set it again.
  if config.domain_randomization.get("com_offset_margin", 0.0):
    config.domain_randomization.com_offset_margin = 0.0
  if overrides:
    config = config_lib.apply_overrides(config, overrides)
  config.action_scale = float(metadata.get("action_scale", config.action_scale))
  # The policy observes as many earlier frames as its layout holds (checked by
  # `check_contract`), whatever the run's config says.
  frames = obs_lib.history_of(metadata.get("observation_layout"))
  if frames is not None:
    with config.unlocked():  # a run's config from before the option has no such key
      config.observation_history = frames
  # The phase advances at the frequency the policy was trained with (written at
  # export); the reference itself is not needed to play.
  config.gait_frequency = float(metadata.get("gait_frequency_hz", config.gait_frequency))
  if "imitation" in config.reward_config.scales:
    config.reward_config.scales.imitation = 0.0
  if "reference" in config:
    # A residual policy's ONNX adds the reference gait itself; playback feeds
    # its output to `apply_action` as the runtime does (never `step`).
    config.reference.feedforward = False
  on = not clean
  return base.without_disturbances(config, noise=on, delays=on, randomization=on)


# ---- Lockstep playback of many episodes in MuJoCo C.


def _randomized_models(env, config, keys: np.ndarray) -> list:
  """One MuJoCo C model per key, randomized like the training env (or copies)."""
  import copy

  import jax
  from mujoco import mjx

  from playground.common import randomize
  from playground.open_duck_mini_v2 import constants as consts

  base_model = env.mj_model
  if not config.domain_randomization.enabled:
    return [copy.copy(base_model) for _ in keys]
  targets = randomize.RandomizationTargets(
    consts.FLOOR_GEOM, consts.ROOT_BODY, consts.ACTUATOR_NAMES, consts.HEAD_JOINT_NAMES
  )
  fn = randomize.make_randomization_fn(base_model, targets, config.domain_randomization)
  batched, _ = fn(mjx.put_model(base_model), jax.numpy.asarray(keys))
  models = []
  for i in range(len(keys)):
    m = copy.copy(base_model)
    for name in randomize.RANDOMIZED_FIELDS:
      getattr(m, name)[:] = np.asarray(getattr(batched, name)[i])
    models.append(m)
  return models


class _Stepper:
  """An env and its per-step functions, batched over episodes and jitted once.

  Built once per process and configuration (`_STEPPERS`), so that a runner
  scoring every checkpoint compiles them only once.
  """

  def __init__(self, env):
    import jax
    from flax import struct

    from playground.open_duck_mini_v2 import base

    ids = env.ids

    @struct.dataclass
    class ModelView:
      qpos0: jax.Array

    self.env = env
    self.ModelView = ModelView
    read = jax.vmap(lambda mv, view: base.read(ids, mv, view))

    def start(key, model_views, views, command):
      k_info, k_obs = jax.random.split(key)
      n = command.shape[0]
      readings = read(model_views, views)
      info = jax.vmap(env.initial_info)(jax.random.split(k_info, n), readings)
      info["command"] = command
      obs, info = jax.vmap(env.observe)(readings, info, jax.random.split(k_obs, n))
      return info, obs["state"]

    def act(key, info, action, command):
      info = dict(info, command=command)
      n = command.shape[0]
      info = jax.vmap(env.apply_action)(info, action, jax.random.split(key, n))
      return info, info["motor_targets"]

    def sense(key, info, model_views, views, action):
      n = action.shape[0]
      readings = read(model_views, views)
      info, _ = jax.vmap(env.advance)(info, readings, action)
      obs, info = jax.vmap(env.observe)(readings, info, jax.random.split(key, n))
      return info, obs["state"], readings

    self.start = jax.jit(start)
    self.act = jax.jit(act)
    self.sense = jax.jit(sense)


def play(
  policy: Callable[[np.ndarray], np.ndarray],
  stepper: _Stepper,
  config,
  commands: Sequence[Command],
  seeds: int,
  seed: int = 0,
  pushes: bool = False,
  model_keys: np.ndarray | None = None,
) -> list[dict[str, Any]]:
  """Plays every (command, seed) episode in lockstep; returns per-episode raw metrics.

  With `pushes`, the base gets the training env's velocity kicks
  (`push_config`: magnitude and interval ranges), drawn per episode from `seed`.
  `model_keys` (one per episode, command-major) replaces the randomized
  models' keys drawn from `seed`, e.g. by a run's own training models
  (`training_env.randomization_keys`); noise, delays and pushes stay.
  """
  import jax
  import jax.numpy as jp
  import mujoco

  from playground.open_duck_mini_v2 import base
  from playground.open_duck_mini_v2 import constants as consts

  env = stepper.env
  episodes = [(c, s) for c in commands for s in range(seeds)]
  n = len(episodes)
  key = jax.random.PRNGKey(seed)
  key, k_models = jax.random.split(key)
  if model_keys is None:
    model_keys = jax.random.split(k_models, n)
  elif len(model_keys) != n:
    raise ScoreError(f"{len(model_keys)} model keys for {n} episodes ({len(commands)} commands x {seeds} seeds)")
  models = _randomized_models(env, config, np.asarray(model_keys))
  datas = [mujoco.MjData(m) for m in models]
  home = models[0].key(consts.HOME_KEYFRAME).id
  for m, d in zip(models, datas):
    mujoco.mj_resetDataKeyframe(m, d, home)
    mujoco.mj_forward(m, d)
  ids = env.ids
  model_views = stepper.ModelView(qpos0=jp.asarray(np.stack([m.qpos0 for m in models]), jp.float32))

  def views():
    return jax.tree_util.tree_map(lambda *x: np.stack(x), *[base.DataView.from_mjdata(d) for d in datas])

  dt = env.dt
  steps = np.array([int(round(c.duration / dt)) for c, _ in episodes])
  total = int(steps.max())
  settle = int(round(SETTLE_S / dt))
  schedule = np.stack([[c.at(t * dt) for c, _ in episodes] for t in range(total)])  # [T, n, 7]
  keys = np.asarray(jax.random.split(key, 2 * total + 1))
  info, obs = stepper.start(keys[0], model_views, views(), jp.asarray(schedule[0]))

  jnt_range = np.stack([m.jnt_range[m.actuator_trnid[:, 0]] for m in models])
  jnt_qpos = np.stack([m.jnt_qposadr[m.actuator_trnid[:, 0]] for m in models])
  root = ids.root_body
  cfg_term = config.termination
  alive = np.ones(n, bool)
  survival = steps * dt
  start_xy = np.stack([d.xpos[root, :2].copy() for d in datas])
  end_xy = start_xy.copy()
  last_action = np.zeros((n, len(ids.home_ctrl)), np.float32)
  counted = np.zeros(n)
  push_rng = np.random.default_rng(seed)
  push_cfg = config.push_config

  def next_push(t0):
    return t0 + np.rint(push_rng.uniform(*push_cfg.interval_range, size=n) / dt).astype(int)

  push_at = next_push(np.zeros(n, int))
  sums = {k: np.zeros(n) for k in ("slip", "limit", "smooth", "power")}
  limit_by_joint = np.zeros((n, len(ids.home_ctrl)))
  cmd_log = np.zeros((total, n, 3))
  vel_log = np.zeros((total, n, 3))
  used = np.zeros((total, n), bool)
  for t in range(total):
    command = jp.asarray(schedule[t])
    action = np.asarray(policy(np.asarray(obs, np.float32)), np.float32)
    info, targets = stepper.act(keys[1 + 2 * t], info, jp.asarray(action), command)
    targets = np.asarray(targets)
    running = alive & (t < steps)
    if pushes:
      for i in np.flatnonzero(running & (push_at <= t)):
        angle = push_rng.uniform(0, 2 * np.pi)
        magnitude = push_rng.uniform(*push_cfg.magnitude_range)
        datas[i].qvel[0:2] += magnitude * np.array([np.cos(angle), np.sin(angle)])
      push_at = np.where(push_at <= t, next_push(np.full(n, t)), push_at)
    for i in np.flatnonzero(running):
      datas[i].ctrl[:] = targets[i]
      mujoco.mj_step(models[i], datas[i], nstep=env.n_substeps)
    info, obs, readings = stepper.sense(keys[2 + 2 * t], info, model_views, views(), jp.asarray(action))
    r = jax.tree_util.tree_map(np.asarray, readings)
    finite = np.array([np.isfinite(d.qpos).all() for d in datas])
    tipped = -r.gravity[:, 2] < cfg_term.min_up_z
    fell = running & (tipped | (r.base_height[:, 0] < cfg_term.min_base_height) | ~finite)
    survival = np.where(fell, (t + 1) * dt, survival)
    alive &= ~fell
    ok = running & ~fell
    xy = np.stack([d.xpos[root, :2] for d in datas])
    end_xy[running] = xy[running]
    measured = ok & (t + 1 > settle)
    if measured.any():
      x_axis = np.stack([d.xmat[root].reshape(3, 3)[:, 0] for d in datas])
      yaw = np.arctan2(x_axis[:, 1], x_axis[:, 0])
      c, s = np.cos(yaw), np.sin(yaw)
      v = r.global_linvel
      vel_log[t] = np.stack([c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1], r.global_angvel[:, 2]], -1)
      cmd_log[t] = schedule[t][:, :3]
      used[t] = measured
      feet_vel = r.feet_vel.reshape(n, 2, 3)
      slip = np.sum(np.linalg.norm(feet_vel[:, :, :2], axis=-1) * (r.feet_contacts > 0.5), axis=-1)
      # The true joint angles (not the encoders', which carry the servo offsets).
      q = np.stack([d.qpos[a] for d, a in zip(datas, jnt_qpos)])
      near = (q < jnt_range[:, :, 0] + JOINT_LIMIT_MARGIN) | (q > jnt_range[:, :, 1] - JOINT_LIMIT_MARGIN)
      w = measured.astype(float)
      sums["slip"] += w * slip
      sums["limit"] += w * near.any(axis=-1)
      limit_by_joint += w[:, None] * near
      sums["smooth"] += w * np.mean(np.abs(action - last_action), axis=-1)
      sums["power"] += w * np.sum(np.abs(r.actuator_force * r.joint_vel), axis=-1)
      counted += w
    last_action = np.where(ok[:, None], action, last_action)
  out = []
  for i, (command, s) in enumerate(episodes):
    mean = lambda k, i=i: float(sums[k][i] / counted[i]) if counted[i] else float("nan")  # noqa: E731
    out.append(
      dict(
        command=command.name,
        seed=s,
        duration_s=command.duration,
        survival_s=float(survival[i]),
        fell=bool(not alive[i]),
        trunk_com_offset_m=[round(float(v), 4) for v in models[i].body_ipos[root] - env.mj_model.body_ipos[root]],
        cmd=cmd_log[used[:, i], i],
        vel=vel_log[used[:, i], i],
        distance_m=float(np.linalg.norm(end_xy[i] - start_xy[i])),
        foot_slip_mps=mean("slip"),
        joint_limit_share=mean("limit"),
        joint_limit_by_joint={
          name: round(float(limit_by_joint[i, j] / counted[i]), 3)
          for j, name in enumerate(consts.ACTUATOR_NAMES)
          if counted[i] and limit_by_joint[i, j]
        },
        action_smoothness=mean("smooth"),
        power_w=mean("power"),
      )
    )
  return out


def trailing_mean(x: np.ndarray, window: int) -> np.ndarray:
  """Mean of each row of `x` [T, ...] and the `window - 1` before it (fewer at the start)."""
  if len(x) == 0:
    return x
  csum = np.cumsum(x, axis=0)
  out = csum.copy()
  out[window:] = csum[window:] - csum[:-window]
  counts = np.minimum(np.arange(1, len(x) + 1), window).reshape((-1,) + (1,) * (x.ndim - 1))
  return out / counts


def _mean(values) -> float:
  return float(np.mean(values)) if len(values) else float("nan")


def _limit_by_joint(episodes: list[dict[str, Any]]) -> dict[str, float]:
  """Mean over `episodes` of each joint's limit share, largest first; zeros left out."""
  names = {name for e in episodes for name in e.get("joint_limit_by_joint", {})}
  shares = {n: round(_mean([e.get("joint_limit_by_joint", {}).get(n, 0.0) for e in episodes]), 3) for n in names}
  return dict(sorted(((n, v) for n, v in shares.items() if v), key=lambda kv: (-kv[1], kv[0])))


def summarize(episodes: list[dict[str, Any]], commands: Sequence[Command], window: int) -> dict[str, Any]:
  """Per-command means over seeds, and the headline numbers.

  Tracking errors compare `window`-step trailing means of the commanded and
  achieved velocities (`TRACKING_WINDOW_S` at the control rate).
  """
  per_command = {}
  for command in commands:
    eps = [e for e in episodes if e["command"] == command.name]
    cmd = np.concatenate([e["cmd"] for e in eps]) if eps else np.zeros((0, 3))
    vel = np.concatenate([e["vel"] for e in eps]) if eps else np.zeros((0, 3))
    # Errors of the trailing means (per episode), means of the raw values.
    cmd_avg = np.concatenate([trailing_mean(e["cmd"], window) for e in eps]) if eps else np.zeros((0, 3))
    vel_avg = np.concatenate([trailing_mean(e["vel"], window) for e in eps]) if eps else np.zeros((0, 3))
    entry = {
      "episodes": len(eps),
      "falls": int(sum(e["fell"] for e in eps)),
      "survival_s": _mean([e["survival_s"] for e in eps]),
      "duration_s": command.duration,
      "commanded": dict(zip(("vx", "vy", "yaw_rate"), _round(np.mean(cmd, axis=0) if len(cmd) else [0.0] * 3))),
      "achieved": dict(zip(("vx", "vy", "yaw_rate"), _round(np.mean(vel, axis=0) if len(vel) else [math.nan] * 3))),
      "lin_vel_error_mps": _mean(np.linalg.norm(cmd_avg[:, :2] - vel_avg[:, :2], axis=1)) if len(vel) else math.nan,
      "yaw_rate_error_radps": _mean(np.abs(cmd_avg[:, 2] - vel_avg[:, 2])) if len(vel) else math.nan,
      "distance_m": _mean([e["distance_m"] for e in eps]),
      "foot_slip_mps": _mean([e["foot_slip_mps"] for e in eps]),
      "joint_limit_share": _mean([e["joint_limit_share"] for e in eps]),
      # Share of the time each joint is within JOINT_LIMIT_MARGIN of a range end
      # (joints that never are are left out).
      "joint_limit_by_joint": _limit_by_joint(eps),
      "action_smoothness": _mean([e["action_smoothness"] for e in eps]),
      "power_w": _mean([e["power_w"] for e in eps]),
    }
    per_command[command.name] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in entry.items()}
  moving = [c for c in per_command.values() if not math.isnan(c["lin_vel_error_mps"])]
  headline = {
    "falls": int(sum(c["falls"] for c in per_command.values())),
    "episodes": int(sum(c["episodes"] for c in per_command.values())),
    "tracking_error_mps": round(_mean([c["lin_vel_error_mps"] for c in moving]), 4),
    "yaw_rate_error_radps": round(_mean([c["yaw_rate_error_radps"] for c in moving]), 4),
  }
  if "forward_0.1" in per_command:
    headline["vx_at_0.1"] = per_command["forward_0.1"]["achieved"]["vx"]
  # Sideways speed and yaw rate in the commanded direction, both ways averaged.
  for key, (left, right, axis) in {
    "vy_at_0.1": ("left_0.1", "right_0.1", "vy"),
    "yaw_rate_at_0.5": ("turn_left_0.5", "turn_right_0.5", "yaw_rate"),
  }.items():
    if left in per_command and right in per_command:
      achieved = per_command[left]["achieved"][axis] - per_command[right]["achieved"][axis]
      headline[key] = round(achieved / 2, 4)
  if "stand" in per_command:
    headline["stand_drift_mps"] = per_command["stand"]["lin_vel_error_mps"]
  return {"headline": headline, "commands": per_command}


def _round(values) -> list[float]:
  return [round(float(v), 4) for v in values]


_STEPPERS: dict[tuple[str, str, str], _Stepper] = {}


def score(
  policy_path: str | Path,
  env_config: dict[str, Any] | None = None,
  seeds: int = 3,
  clean: bool = False,
  seed: int = 0,
  task: str | None = None,
  commands: Sequence[Command] | None = None,
  pushes: bool = False,
  overrides: Sequence[tuple[str, str]] = (),
  model_keys: np.ndarray | None = None,
) -> dict[str, Any]:
  """Scores an ONNX policy; returns the JSON-able scorecard.

  Args:
    policy_path: the `.onnx` file.
    env_config: the run's env config (`config.json`'s `env_config`), or None
      for the env's default config.
    seeds: episodes per command.
    clean: no randomization, noise or delays.
    seed: base seed of the randomized models, noise and delays.
    task: scene (default: the policy's own).
    commands: the suite (default: `suite()`).
    pushes: the training env's random pushes (`push_config`) on top.
    model_keys: keys of the randomized models, one per episode (see `play`);
      default: drawn from `seed`.
    overrides: `(key, value)` changes of the env config (`--set`).

  Raises:
    ScoreError: a policy whose contract does not match the model.
  """
  from playground.common import onnx_export
  from playground.open_duck_mini_v2 import base
  from playground.open_duck_mini_v2 import constants as consts
  from playground.open_duck_mini_v2.mujoco_infer import onnx_policy
  from playground.open_duck_mini_v2.runner import env_class

  started = time.monotonic()
  metadata = onnx_export.read_metadata(policy_path)
  task = task or metadata.get("task") or "flat_terrain"
  if task not in consts.TASKS:
    raise ScoreError(f"unknown task '{task}'; valid: {', '.join(consts.TASKS)}")
  ids = base.RobotIndices.from_model(base.load_model(task))
  ctrl_dt = float((env_config or {}).get("ctrl_dt", base.base_config().ctrl_dt))
  check_contract(metadata, ids, ctrl_dt)
  config = score_config(metadata, env_config, clean, overrides)
  cache_key = (metadata["env"], task, json.dumps(config.to_dict(), sort_keys=True, default=str))
  if cache_key not in _STEPPERS:
    _STEPPERS[cache_key] = _Stepper(env_class(metadata["env"])(task=task, config=config))
  commands = tuple(commands or suite())
  session = onnx_policy(policy_path, batched=True)
  episodes = play(session, _STEPPERS[cache_key], config, commands, seeds, seed, pushes, model_keys)
  dt = _STEPPERS[cache_key].env.dt
  card = summarize(episodes, commands, window=max(1, int(round(TRACKING_WINDOW_S / dt))))
  # Which randomized model each episode ran on, to tell what makes a policy fall.
  card["episodes"] = [
    {k: e[k] for k in ("command", "seed", "fell", "survival_s", "trunk_com_offset_m")} for e in episodes
  ]
  card["policy"] = str(policy_path)
  card["env"], card["task"] = metadata["env"], task
  card["training_step"] = metadata.get("training_step")
  card["seeds"] = seeds
  card["conditions"] = (
    "clean: no randomization, noise or delays"
    if clean
    else "training domain randomization, sensor noise and action/IMU delays"
  ) + ("; training pushes" if pushes else "; no pushes")
  margin = float(((env_config or {}).get("domain_randomization") or {}).get("com_offset_margin", 0.0))
  if margin and not clean and not config.domain_randomization.com_offset_margin:
    card["conditions"] += (
      f"; trunk offsets within +-{100 * config.domain_randomization.com_offset:.1f} cm"
      f" (trained with {100 * margin:.1f} cm more)"
    )
  if overrides:
    card["overrides"] = [f"{k}={v}" for k, v in overrides]
    card["conditions"] += "; set " + ", ".join(card["overrides"])
  if model_keys is not None:
    card["conditions"] += "; given models"
  card["wall_time_s"] = round(time.monotonic() - started, 2)
  return card


# ---- Reporting.


def table(card: dict[str, Any]) -> str:
  """The scorecard as a fixed-width text table with the headline line."""
  header = (
    f"{'command':<15}{'falls':>6}{'surv s':>8}{'cmd vx':>8}{'vx':>8}{'cmd vy':>8}{'vy':>8}"
    f"{'cmd wz':>8}{'wz':>8}{'v err':>7}{'wz err':>7}{'dist m':>7}{'slip':>6}{'limit':>6}{'|da|':>6}{'W':>6}"
  )
  lines = [header]
  for name, c in card["commands"].items():
    cm, ac = c["commanded"], c["achieved"]
    lines.append(
      f"{name:<15}{c['falls']:>3}/{c['episodes']:<2}{c['survival_s']:>8.1f}{cm['vx']:>8.3f}{ac['vx']:>8.3f}"
      f"{cm['vy']:>8.3f}{ac['vy']:>8.3f}{cm['yaw_rate']:>8.2f}{ac['yaw_rate']:>8.2f}"
      f"{c['lin_vel_error_mps']:>7.3f}{c['yaw_rate_error_radps']:>7.2f}{c['distance_m']:>7.2f}"
      f"{c['foot_slip_mps']:>6.3f}{c['joint_limit_share']:>6.2f}{c['action_smoothness']:>6.3f}{c['power_w']:>6.2f}"
    )
  held = [
    f"{name} ({', '.join(f'{j} {v:.2f}' for j, v in c['joint_limit_by_joint'].items() if v >= LIMIT_REPORT_SHARE)})"
    for name, c in card["commands"].items()
    if any(v >= LIMIT_REPORT_SHARE for v in c.get("joint_limit_by_joint", {}).values())
  ]
  if held:
    lines.append("joints at a range end for at least a quarter of the time: " + "; ".join(held))
  lines.append(headline_line(card))
  return "\n".join(lines)


def headline_line(card: dict[str, Any]) -> str:
  """One line: falls, mean tracking error, speed at the 0.1 m/s command."""
  h = card["headline"]
  parts = [
    f"falls {h['falls']}/{h['episodes']}",
    f"velocity tracking error {h['tracking_error_mps']:.3f} m/s",
    f"yaw-rate error {h['yaw_rate_error_radps']:.2f} rad/s",
  ]
  if "vx_at_0.1" in h:
    parts.append(f"vx at 0.1 m/s command {h['vx_at_0.1']:.3f} m/s")
  if "vy_at_0.1" in h:
    parts.append(f"sideways at 0.1 m/s command {h['vy_at_0.1']:.3f} m/s")
  if "yaw_rate_at_0.5" in h:
    parts.append(f"yaw rate at 0.5 rad/s command {h['yaw_rate_at_0.5']:.2f} rad/s")
  return "score: " + ", ".join(parts)


def plot(card: dict[str, Any], path: str | Path) -> Path:
  """One PNG: commanded vs achieved vx, vy and yaw rate per command, falls marked."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  names = list(card["commands"])
  x = np.arange(len(names))
  fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True)
  for ax, key, unit in zip(axes, ("vx", "vy", "yaw_rate"), ("m/s", "m/s", "rad/s")):
    commanded = [card["commands"][n]["commanded"][key] for n in names]
    achieved = [card["commands"][n]["achieved"][key] for n in names]
    ax.bar(x - 0.2, commanded, 0.4, label="commanded", color="#bbbbbb")
    ax.bar(x + 0.2, achieved, 0.4, label="achieved", color="#e69f00")
    ax.axhline(0.0, color="black", linewidth=0.5)
    ax.set_ylabel(f"{key} ({unit})")
  for i, n in enumerate(names):
    falls = card["commands"][n]["falls"]
    if falls:
      axes[0].annotate(f"{falls} fall(s)", (i, 0), ha="center", va="bottom", color="red", fontsize=8)
  axes[0].legend(loc="upper right")
  axes[-1].set_xticks(x, names, rotation=30, ha="right")
  step = card.get("training_step")
  fig.suptitle(f"{Path(card['policy']).name} (step {step}): {headline_line(card)[7:]}", fontsize=8)
  fig.tight_layout()
  path = Path(path)
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


def write(card: dict[str, Any], out_dir: Path, stem: str = "score") -> tuple[Path, Path]:
  """Writes `<stem>.json` and `<stem>.png` into `out_dir`."""
  out_dir.mkdir(parents=True, exist_ok=True)
  json_path = out_dir / f"{stem}.json"
  json_path.write_text(json.dumps(card, indent=2) + "\n")
  return json_path, plot(card, out_dir / f"{stem}.png")


#: Files a training run keeps next to its checkpoints: the best scored policy and its scorecard.
BEST_POLICY = "best_policy.onnx"
BEST_SCORE = "best_score.json"


#: The speeds at which a policy walks on command: at least 70% of the 0.1 m/s
#: forward command and 60% of the 0.5 rad/s turn (the CPU preset's target).
WALKING_SPEEDS = {"vx_at_0.1": 0.07, "yaw_rate_at_0.5": 0.3}


def walks_on_command(headline: dict[str, Any]) -> bool:
  """True when the headline's forward speed and yaw rate reach `WALKING_SPEEDS` (falls aside)."""
  return all(float(headline.get(key, 0.0)) >= floor for key, floor in WALKING_SPEEDS.items())


def rank(headline: dict[str, Any]) -> tuple[float, ...]:
  """Sort key of a scorecard, best first.

  A policy that walks on command (`walks_on_command`) ranks above one that
  does not, whatever their falls: a duck that stands still falls less and
  has not learned the task. Then the share of falls, then the velocity and
  yaw-rate tracking errors.
  """
  share = headline["falls"] / max(int(headline["episodes"]), 1)
  walks = walks_on_command(headline)
  return (0.0 if walks else 1.0, share, float(headline["tracking_error_mps"]), float(headline["yaw_rate_error_radps"]))


def update_best(run_dir: Path, step_dir: Path, card: dict[str, Any]) -> bool:
  """Keeps `run_dir/best_policy.onnx` the scored checkpoint with the best `rank` (walking first, then fewest falls).

  Copies `step_dir/policy.onnx` and writes `best_score.json` (the card, with
  the checkpoint's name) when `card` ranks better than the recorded best, or
  none is recorded; a tie keeps the earlier one. The copy survives checkpoint
  pruning (`keep_last`). Returns True when the best changed.
  """
  from playground.common import run_dirs

  run_dir, step_dir = Path(run_dir), Path(step_dir)
  best_score = run_dir / BEST_SCORE
  if best_score.is_file():
    try:
      previous = json.loads(best_score.read_text())
      if rank(previous["headline"]) <= rank(card["headline"]):
        return False
    except (ValueError, KeyError, TypeError):
      logger.warning("%s is unreadable; replacing it", best_score)
  run_dirs.write_atomic(run_dir / BEST_POLICY, (step_dir / "policy.onnx").read_bytes())
  run_dirs.write_atomic(best_score, (json.dumps(dict(card, checkpoint=step_dir.name), indent=2) + "\n").encode())
  return True


def tensorboard_scalars(card: dict[str, Any]) -> dict[str, float]:
  """The headline as `score/*` scalars."""
  h = card["headline"]
  out = {
    "score/falls": float(h["falls"]),
    "score/fall_share": float(h["falls"]) / max(h["episodes"], 1),
    "score/tracking_error_mps": float(h["tracking_error_mps"]),
    "score/yaw_rate_error_radps": float(h["yaw_rate_error_radps"]),
  }
  for key in ("vx_at_0.1", "vy_at_0.1", "yaw_rate_at_0.5", "stand_drift_mps"):
    if key in h:
      out[f"score/{key}"] = float(h[key])
  return out


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  from playground.common import config as config_lib

  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
  parser = argparse.ArgumentParser(description="Score an Open Duck Mini V2 policy on a fixed command suite.")
  parser.add_argument("path", help="run directory (latest checkpoint), checkpoint directory, or .onnx file")
  parser.add_argument("--seeds", type=int, default=3, help="episodes per command (default 3)")
  parser.add_argument("--seed", type=int, default=0, help="base seed of randomization, noise and delays")
  parser.add_argument("--clean", action="store_true", help="no domain randomization, sensor noise or delays")
  parser.add_argument("--pushes", action="store_true", help="add the training env's random pushes")
  parser.add_argument("--task", help="scene (default: the policy's own)")
  config_lib.add_override_argument(
    parser, help="change the run's env config before playing, e.g. domain_randomization.com_offset=0.05 (repeatable)"
  )
  parser.add_argument("--output", help="directory for score.json and score.png (default: next to the policy)")
  args = parser.parse_args(argv)
  from playground.common import checkpointing
  from playground.common import onnx_export
  from playground.common.runner import setup_compilation_cache

  setup_compilation_cache(None)
  try:
    if args.seeds < 1:
      raise ScoreError(f"--seeds must be at least 1, got {args.seeds}")
    overrides = config_lib.parse_overrides(args.overrides)
    policy_path, env_config, out_dir = resolve_policy(args.path)
    card = score(
      policy_path, env_config, args.seeds, args.clean, args.seed, args.task, pushes=args.pushes, overrides=overrides
    )
  except (ScoreError, checkpointing.CheckpointError, onnx_export.ExportError, config_lib.ConfigError) as e:
    sys.stderr.write(f"error: {e}\n")
    return 2
  except Exception as e:  # noqa: BLE001 - an unreadable file is one line, not a traceback
    if "onnx" in type(e).__module__ or "protobuf" in str(type(e)).lower() or "DecodeError" in type(e).__name__:
      sys.stderr.write(f"error: {args.path} is not a readable ONNX policy: {str(e).splitlines()[0][:200]}\n")
      return 2
    raise
  # Other conditions than the training ones never overwrite the run's own score.json.
  conditions = (("_clean", args.clean), ("_pushes", args.pushes), ("_set", bool(overrides)))
  stem = ("score" if Path(args.path).is_dir() else f"{policy_path.stem}_score") + "".join(
    suffix for suffix, on in conditions if on
  )
  json_path, png_path = write(card, Path(args.output) if args.output else out_dir, stem)
  print(table(card))
  logger.info("wrote %s and %s (%.1f s)", json_path, png_path, card["wall_time_s"])
  return 0


if __name__ == "__main__":
  sys.exit(main())
