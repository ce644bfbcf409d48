"""The scorecard: does the duck walk on command, and stay up when pushed?

The suite (`suite`): stand, forward 0.1 and 0.15 m/s, backward 0.1,
sideways +-0.1, turn +-0.5 and +-1.0 rad/s, a 20 s script that changes the
command every 4 s, forward 0.1 with the runtime's 1.3x phase button, and
pushes (standing and walking at 0.1 m/s with 0.5 m/s kicks every 3 s, and
walking with the training env's kicks). `score` plays it in MuJoCo's C
engine (`player.play`), every episode on its own domain-randomized model
with the training env's sensor noise and action/IMU delays (`clean` turns
all three off), observed by the env's functions or as the Open Duck runtime
does (`runtime.py`). The shared scorecard arithmetic
(`playground.common.evaluation.scorecard`: `summarize`, `table`,
`headline_line`, `plot`, `write`, `tensorboard_scalars`) turns the episodes
into a card and reports it. The command line is `score.py`; what the card
reports: docs/scorecard.md.

The policy's ONNX metadata (robot, observation layout, action order, home
pose, control period) must match the model, or it is refused in one line.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from playground.common.evaluation.scorecard import PHASE_BUTTON_PREFIX
from playground.common.evaluation.scorecard import TRACKING_WINDOW_S
from playground.common.evaluation.scorecard import Command
from playground.common.evaluation.scorecard import Pushes
from playground.common.evaluation.scorecard import summarize
from playground.open_duck_mini_v2.evaluation import player
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import robot_log
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation.policy_io import ScoreError
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.tasks import base

#: The speeds at which a policy walks on command (`best_policy.walks_on_command`):
#: at least 70% of the 0.1 m/s forward command, also with the robot runtime's
#: 1.3x phase button held, and 60% of the 0.5 rad/s turn (the CPU preset's target).
WALKING_SPEEDS = {"vx_at_0.1": 0.07, "yaw_rate_at_0.5": 0.3, "vx_at_0.1_phase_x1.3": 0.07}
#: The entry played with the runtime's phase button held (1.3x phase speed).
PHASE_BUTTON = f"{PHASE_BUTTON_PREFIX}{runtime.PHASE_BUTTON_FACTOR:g}"


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
  if env_config is not None:
    margin = float((env_config.get("domain_randomization") or {}).get("com_offset_margin", 0.0))
  else:
    margin = float(metadata.get("trunk_offset_margin_m", 0.0))
  if not clean:
    # A run's checkpoint gets its run's range, a file alone the one in its metadata (a file
    # exported before that key: the env's default, the upstream +-5 cm).
    card["conditions"] += f"; trunk offsets within +-{100 * config.domain_randomization.com_offset:.1f} cm"
    if margin and not config.domain_randomization.com_offset_margin:
      card["conditions"] += f" (trained with {100 * margin:.1f} cm more)"
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
