"""The scorecard: does the duck walk on command, and stay up when pushed?

The suite (`suite`): stand, forward 0.1 and 0.15 m/s, backward 0.1,
sideways +-0.1, turn +-0.5 and +-1.0 rad/s, a 20 s script that changes the
command every 4 s, forward 0.1 with the runtime's 1.3x phase button, and
pushes (standing and walking at 0.1 m/s with 0.5 m/s kicks every 3 s, and
walking with the training env's kicks). `score` plays it in MuJoCo's C
engine (`player.play`), every episode on its own domain-randomized model
with the training env's sensor noise and action/IMU delays (`clean` turns
all three off), observed by the env's functions or as the Open Duck runtime
does (`runtime.py`). `summarize` turns the episodes into a card: per-command
means and the headline; `table`, `headline_line`, `plot`, `write` and
`tensorboard_scalars` report it. The command line is `score.py`; what the
card reports: docs/scorecard.md.

The policy's ONNX metadata (robot, observation layout, action order, home
pose, control period) must match the model, or it is refused in one line.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from playground.open_duck_mini_v2.evaluation import player
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import robot_log
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation.player import Command
from playground.open_duck_mini_v2.evaluation.player import Pushes
from playground.open_duck_mini_v2.evaluation.policy_io import ScoreError
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.tasks import base

#: Tracking errors compare velocities averaged over this trailing window: a
#: walking gait's velocity swings within each 0.54 s period, and that sway is
#: not a tracking error (instantaneous errors ranked standing above walking).
TRACKING_WINDOW_S = 1.0
#: The table names a joint that is at a limit for at least this share of a command's time.
LIMIT_REPORT_SHARE = 0.25
#: The entry played with the runtime's phase button held (1.3x phase speed).
PHASE_BUTTON = "forward_0.1_phase_x1.3"


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
  """Mean of the finite values (an episode that fell before it was measured has NaN metrics); NaN if none."""
  finite = [v for v in values if not math.isnan(v)]
  return float(np.mean(finite)) if finite else float("nan")


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
      "fall_causes": {c: n for c in player.FALL_CAUSES if (n := sum(e.get("fall_cause") == c for e in eps))},
      "survival_s": _mean([e["survival_s"] for e in eps]),
      "pushes": int(sum(e.get("pushes", 0) for e in eps)),
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
      # Mean |joint velocity| of the leg joints, rad/s (earlier cards: none).
      "joint_speed_radps": _mean([e.get("joint_speed_radps", math.nan) for e in eps]),
      "power_w": _mean([e["power_w"] for e in eps]),
    }
    per_command[command.name] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in entry.items()}
  pushed = {c.name for c in commands if c.pushes is not None}
  walk = {name: c for name, c in per_command.items() if name not in pushed}
  moving = [c for c in walk.values() if not math.isnan(c["lin_vel_error_mps"])]
  headline = {
    "falls": int(sum(c["falls"] for c in walk.values())),
    "episodes": int(sum(c["episodes"] for c in walk.values())),
    "tracking_error_mps": round(_mean([c["lin_vel_error_mps"] for c in moving]), 4),
    "yaw_rate_error_radps": round(_mean([c["yaw_rate_error_radps"] for c in moving]), 4),
  }
  if pushed:
    under = [per_command[n] for n in per_command if n in pushed]
    headline["push_falls"] = int(sum(c["falls"] for c in under))
    headline["push_episodes"] = int(sum(c["episodes"] for c in under))
    headline["push_survival_share"] = round(
      _mean([e["survival_s"] / e["duration_s"] for e in episodes if e["command"] in pushed]), 4
    )
    # Each episode falls at most once: falls per kick delivered.
    kicks = sum(c["pushes"] for c in under)
    headline["push_falls_per_kick"] = round(headline["push_falls"] / kicks, 4) if kicks else math.nan
  nonfinite = sum(e.get("fall_cause") == "non-finite action" for e in episodes)
  if nonfinite:
    headline["non_finite_action_episodes"] = int(nonfinite)
  if "forward_0.1" in per_command:
    headline["vx_at_0.1"] = per_command["forward_0.1"]["achieved"]["vx"]
    # How calm the gait is at the 0.1 m/s command: leg joint speed and action change per step.
    headline["joint_speed_at_0.1"] = per_command["forward_0.1"]["joint_speed_radps"]
    headline["action_rate_at_0.1"] = per_command["forward_0.1"]["action_smoothness"]
  # Sideways speed and yaw rate in the commanded direction, both ways averaged.
  for key, (left, right, axis) in {
    "vy_at_0.1": ("left_0.1", "right_0.1", "vy"),
    "yaw_rate_at_0.5": ("turn_left_0.5", "turn_right_0.5", "yaw_rate"),
  }.items():
    if left in per_command and right in per_command:
      achieved = per_command[left]["achieved"][axis] - per_command[right]["achieved"][axis]
      headline[key] = round(achieved / 2, 4)
  for key, (left, right) in {"yaw_rate_at_1.0": ("turn_left_1.0", "turn_right_1.0")}.items():
    if left in per_command and right in per_command:
      achieved = per_command[left]["achieved"]["yaw_rate"] - per_command[right]["achieved"]["yaw_rate"]
      headline[key] = round(achieved / 2, 4)
  if PHASE_BUTTON in per_command:
    headline["vx_at_0.1_phase_x1.3"] = per_command[PHASE_BUTTON]["achieved"]["vx"]
  if "stand" in per_command:
    headline["stand_drift_mps"] = per_command["stand"]["lin_vel_error_mps"]
  return {"headline": headline, "commands": per_command}


def _round(values) -> list[float]:
  return [round(float(v), 4) for v in values]


def table(card: dict[str, Any]) -> str:
  """The scorecard as a fixed-width text table with the headline line."""
  header = (
    f"{'command':<26}{'falls':>6}{'surv s':>8}{'cmd vx':>8}{'vx':>8}{'cmd vy':>8}{'vy':>8}"
    f"{'cmd wz':>8}{'wz':>8}{'v err':>7}{'wz err':>7}{'dist m':>7}{'slip':>6}{'limit':>6}{'|da|':>6}{'W':>6}"
  )
  lines = [header]
  for name, c in card["commands"].items():
    cm, ac = c["commanded"], c["achieved"]
    lines.append(
      f"{name:<26}{c['falls']:>3}/{c['episodes']:<2}{c['survival_s']:>8.1f}{cm['vx']:>8.3f}{ac['vx']:>8.3f}"
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
  causes = [
    f"{name} ({', '.join(f'{n} {cause}' for cause, n in c['fall_causes'].items())})"
    for name, c in card["commands"].items()
    if c.get("fall_causes")
  ]
  if causes:
    lines.append("why episodes ended early: " + "; ".join(causes))
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
  if "push_falls" in h:
    per_kick = h.get("push_falls_per_kick", math.nan)
    parts.append(
      f"pushed: falls {h['push_falls']}/{h['push_episodes']}"
      + ("" if math.isnan(per_kick) else f" ({100 * per_kick:.0f}% of kicks)")
      + f", survival {100 * h['push_survival_share']:.0f}%"
    )
  if h.get("non_finite_action_episodes"):
    parts.append(f"NON-FINITE ACTIONS in {h['non_finite_action_episodes']} episodes")
  prefix = "score (runtime loop): " if card.get("source") == "runtime" else "score: "
  return prefix + ", ".join(parts)


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


def tensorboard_scalars(card: dict[str, Any], prefix: str = "score/") -> dict[str, float]:
  """The headline as `score/*` scalars (`score/runtime_*` for a runtime-loop card: `prefix`)."""
  h = card["headline"]
  out = {
    f"{prefix}falls": float(h["falls"]),
    f"{prefix}fall_share": float(h["falls"]) / max(h["episodes"], 1),
    f"{prefix}tracking_error_mps": float(h["tracking_error_mps"]),
    f"{prefix}yaw_rate_error_radps": float(h["yaw_rate_error_radps"]),
  }
  if "push_falls" in h:
    out[f"{prefix}push_fall_share"] = float(h["push_falls"]) / max(h["push_episodes"], 1)
    out[f"{prefix}push_survival_share"] = float(h["push_survival_share"])
  for key in (
    "vx_at_0.1",
    "vy_at_0.1",
    "yaw_rate_at_0.5",
    "yaw_rate_at_1.0",
    "vx_at_0.1_phase_x1.3",
    "stand_drift_mps",
  ):
    if key in h:
      out[f"{prefix}{key}"] = float(h[key])
  out[f"{prefix}non_finite_action_episodes"] = float(h.get("non_finite_action_episodes", 0))
  return out


logger = logging.getLogger("playground")

SCRIPT_DURATION_S = 20.0
#: Push entries: 10 s, kicks of 0.5 m/s every 3 s (at 3, 6 and 9 s).
PUSH_DURATION_S = 10.0
FIXED_PUSHES = Pushes(magnitude=(0.5, 0.5), interval=(3.0, 3.0))


def suite(training_pushes: Pushes | None = None) -> tuple[Command, ...]:
  """The fixed suite (see the module docstring); `training_pushes` adds the training env's kicks entry."""
  const = lambda name, vx=0.0, vy=0.0, wz=0.0, **kw: Command(name, ((0.0, vx, vy, wz),), **kw)  # noqa: E731
  script = Command(
    "script",
    ((0.0, 0.1, 0.0, 0.0), (4.0, 0.0, 0.0, 0.5), (8.0, 0.0, 0.1, 0.0), (12.0, -0.1, 0.0, 0.0), (16.0, 0.0, 0.0, 0.0)),
    SCRIPT_DURATION_S,
  )
  entries = (
    const("stand"),
    const("forward_0.1", vx=0.1),
    const("forward_0.15", vx=0.15),
    const("backward_0.1", vx=-0.1),
    const("left_0.1", vy=0.1),
    const("right_0.1", vy=-0.1),
    const("turn_left_0.5", wz=0.5),
    const("turn_right_0.5", wz=-0.5),
    const("turn_left_1.0", wz=1.0),
    const("turn_right_1.0", wz=-1.0),
    script,
    const(PHASE_BUTTON, vx=0.1, phase_factor=runtime.PHASE_BUTTON_FACTOR),
    const("push_stand_0.5", pushes=FIXED_PUSHES, duration=PUSH_DURATION_S),
    const("push_forward_0.1_0.5", vx=0.1, pushes=FIXED_PUSHES, duration=PUSH_DURATION_S),
  )
  if training_pushes is not None:
    entries += (const("push_forward_0.1_training", vx=0.1, pushes=training_pushes, duration=SCRIPT_DURATION_S),)
  return entries


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
  from playground.open_duck_mini_v2.tasks import joystick

  c = joystick.default_config().command_config
  low, high = zip(c.neck_pitch, c.head_pitch, c.head_yaw, c.head_roll)
  rng = np.random.default_rng(seed)
  count = int(np.ceil(duration / every))
  schedule = tuple((every * i, 0.0, 0.0, 0.0, *np.round(rng.uniform(low, high), 2).tolist()) for i in range(count))
  return Command("look_around", schedule, duration)


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
  source: str = "env",
  runtime_options: runtime.RuntimeOptions | None = None,
  servo: str | None = None,
  save_obs: str | Path | None = None,
) -> dict[str, Any]:
  """Scores an ONNX policy; returns the JSON-able scorecard.

  Args:
    policy_path: the `.onnx` file.
    env_config: the run's env config (`config.json`'s `env_config`), or None
      for the env's default config.
    seeds: episodes per command.
    clean: no randomization, noise or delays.
    seed: base seed of the randomized models, noise, delays and pushes.
    task: scene (default: the policy's own).
    commands: the suite (default: `suite()` with the training env's pushes entry).
    pushes: the training env's kicks (`push_config`) on every entry without its own.
    overrides: `(key, value)` changes of the env config (`--set`).
    model_keys: keys of the randomized models, one per episode, command-major
      (see `player.play`); default: drawn from `seed`.
    source: "env" (the env's observation functions) or "runtime" (the robot
      runtime's loop, `runtime.py`).
    runtime_options: the runtime loop's settings (`source="runtime"`).
    servo: play with the servos of this profile (`servos.PROFILES`) instead of
      those the policy trained with.
    save_obs: with `source="runtime"`, a directory: each entry's first
      episode's observations are written there as the robot runtime's log
      (`<entry>.pkl`, `robot_log.save`) until the episode ends, to compare
      with a robot's log (check_log.py).

  Raises:
    ScoreError: a policy whose contract does not match the model, or a
      history policy with `source="runtime"` (the runtime observes 101 floats).
  """
  started = time.monotonic()
  metadata = policy_io.read_metadata(policy_path)
  task = task or metadata.get("task") or "flat_terrain"
  if task not in constants.TASKS:
    raise ScoreError(f"unknown task '{task}'; valid: {', '.join(constants.TASKS)}")
  ids = robot_model.RobotIndices.from_model(robot_model.load_model(task))
  ctrl_dt = float((env_config or {}).get("ctrl_dt", base.base_config().ctrl_dt))
  policy_io.check_contract(metadata, ids.home_ctrl, ctrl_dt)
  if source not in player.SOURCES:
    raise ScoreError(f"unknown observation source '{source}'; valid: {', '.join(player.SOURCES)}")
  if source == "runtime" and int(metadata.get("observation_history", 0) or 0):
    raise ScoreError(
      "the Open Duck runtime observes 101 floats; this policy observes a history (score it without --runtime)"
    )
  on = not clean
  config = policy_io.play_config(
    metadata, env_config, noise=on, delays=on, randomization=on, overrides=overrides, servo=servo
  )
  training_pushes = Pushes.of_config(config.push_config)
  commands = tuple(commands or suite(training_pushes))
  if pushes:
    commands = tuple(c if c.pushes else dataclasses.replace(c, pushes=training_pushes) for c in commands)
  episodes = [(c, s) for c in commands for s in range(seeds)]
  if model_keys is not None and len(model_keys) != len(episodes):
    raise ScoreError(
      f"{len(model_keys)} model keys for {len(episodes)} episodes ({len(commands)} commands x {seeds} seeds)"
    )
  if save_obs is not None and source != "runtime":
    raise ScoreError("--save_obs writes the robot runtime's log: score with --runtime")
  recorder = robot_log.Recorder([k * seeds for k in range(len(commands))]) if save_obs is not None else None
  played = player.play(
    policy_io.onnx_policy(policy_path, batched=True),
    metadata["env"],
    task,
    config,
    metadata,
    episodes,
    seed,
    source,
    runtime_options,
    model_keys,
    on_step=recorder.on_step if recorder else None,
  )
  if recorder is not None:
    for k, command in enumerate(commands):
      robot_log.save(Path(save_obs) / f"{command.name}.pkl", recorder.log(k * seeds))
  card = summarize(played, commands, window=max(1, int(round(TRACKING_WINDOW_S / ctrl_dt))))
  # Which randomized model each episode ran on, to tell what makes a policy fall.
  card["episodes"] = [
    {k: e[k] for k in ("command", "seed", "fell", "fall_cause", "survival_s", "trunk_com_offset_m")} for e in played
  ]
  card["policy"] = str(policy_path)
  card["env"], card["task"] = metadata["env"], task
  card["training_step"] = metadata.get("training_step")
  card["seeds"] = seeds
  card["source"] = source
  card["conditions"] = (
    "clean: no randomization, noise or delays"
    if clean
    else "training domain randomization, sensor noise and action/IMU delays"
  ) + ("; training pushes on every entry" if pushes else "")
  if source == "runtime":
    opts = runtime_options or runtime.RuntimeOptions()
    card["runtime_options"] = dataclasses.asdict(opts)
    card["conditions"] += f"; observed as the Open Duck runtime does ({opts.hold_s:g} s hold, phase from (0, 0)"
    if opts.max_motor_velocity:
      card["conditions"] += f", targets clipped to {opts.max_motor_velocity:g} rad/s"
    if opts.cutoff_frequency:
      card["conditions"] += f", {opts.cutoff_frequency:g} Hz low-pass"
    contract = opts.contract or runtime.RuntimeContract.from_metadata(metadata)
    if contract != runtime.CONTRACT:
      card["conditions"] += f", another runtime contract: {dataclasses.asdict(contract)}"
    card["conditions"] += ")"
  margin = float(((env_config or {}).get("domain_randomization") or {}).get("com_offset_margin", 0.0))
  if margin and not clean and not config.domain_randomization.com_offset_margin:
    card["conditions"] += (
      f"; trunk offsets within +-{100 * config.domain_randomization.com_offset:.1f} cm"
      f" (trained with {100 * margin:.1f} cm more)"
    )
  card["servo_profile"] = servos.name_of(config)
  if servo is not None:
    trained = metadata.get("servo_profile", servos.DEFAULT)
    card["conditions"] += f"; {servo} servos ({servos.speed_limit(config):.3g} rad/s), trained with {trained}"
  if overrides:
    card["overrides"] = [f"{k}={v}" for k, v in overrides]
    card["conditions"] += "; set " + ", ".join(card["overrides"])
  if model_keys is not None:
    card["conditions"] += "; given models"
  if save_obs is not None:
    card["saved_obs"] = str(save_obs)
  card["wall_time_s"] = round(time.monotonic() - started, 2)
  return card
