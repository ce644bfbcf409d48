"""The JAX side of the Open Duck Mini V2 runner: what its hooks build once a run has been validated.

`runner.py` stays JAX-free (its command line checks flags, configs and run
directories before JAX loads) and reaches this module through one deferred
import. Each function here is the body of one `OpenDuckMiniV2Runner` hook;
see `playground.common.robot_spec.RobotSpec` for what each hook promises.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from ml_collections import config_dict

from playground.common.evaluation import best_policy
from playground.common.evaluation.scorecard import headline_line
from playground.common.evaluation.scorecard import tensorboard_scalars
from playground.common.evaluation.scorecard import write
from playground.common.export import contract
from playground.common.export.contract import PolicyContract
from playground.common.export.policy_file import POLICY_FILE
from playground.common.tasks import randomize
from playground.common.tasks.observation_layout import ObservationLayout
from playground.common.tasks.randomize import RandomizationFn
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation import scorecard
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import mirror
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.tasks import gait_tables
from playground.open_duck_mini_v2.tasks import joystick
from playground.open_duck_mini_v2.tasks.registry import randomization_targets

logger = logging.getLogger("playground")


def make_randomizer(env, env_config: config_dict.ConfigDict) -> RandomizationFn | None:
  """Domain randomization of the duck's floor, trunk and servos, or None when it is off."""
  if not env_config.domain_randomization.enabled:
    return None
  return randomize.make_randomization_fn(env.mj_model, randomization_targets(), servos.domain_randomization(env_config))


def policy_contract(env: Any, env_name: str, env_config: config_dict.ConfigDict) -> PolicyContract:
  """The duck's policy contract, from the env it trains (`RobotSpec.policy_contract`).

  Everything comes from the built env: its model (home pose, the runtime's
  first frames, the mirror), its gait frequency and the feed-forward it adds
  to the action (the joystick env's reference gait, when on; the file then
  embeds that table).
  """
  feedforward = getattr(env, "feedforward", None)
  return PolicyContract(
    metadata=policy_metadata(env, env_name, env_config),
    feedforward=feedforward,
    input_bounds=policy_input_bounds(env_config),
    probe_observations=policy_probe_observations(env, env_config),
    mirror=mirror.policy_mirror(env.mj_model, env_config),
    files=(gait_tables.table_path(env_config),) if feedforward is not None else (),
  )


def policy_metadata(env: Any, env_name: str, env_config: config_dict.ConfigDict) -> dict[str, Any]:
  """What the robot runtime needs to feed and read the ONNX policy."""
  frequency = env.gait_frequency
  ctrl_dt = float(env_config.ctrl_dt)
  history = int(env_config.get("observation_history", 0))
  layout = actor_layout(env_config)
  phase_steps = 1.0 / (frequency * ctrl_dt)
  if abs(phase_steps - round(phase_steps)) > 1e-3:
    logger.warning(
      "one gait period is %.3f control steps at %.0f Hz, not a whole number: a robot runtime that counts "
      "whole steps per period (the Open Duck runtime does) will drift from the phase the policy was trained on",
      phase_steps,
      1.0 / ctrl_dt,
    )
  diagnostic = {}
  if env_config.get("actor_kick", False):
    diagnostic["diagnostic"] = (
      "actor_kick: the last inputs are the privileged kick state (kick_velocity, since_kick, capture_point); "
      "no robot can feed them, and every player refuses this file"
    )
  return {
    **diagnostic,
    "observation_layout": layout.to_json(),
    "observation_size": layout.size,
    "observation_history": history,
    "joint_vel_scale": observations.JOINT_VEL_SCALE,
    # The runtime, walk script and commits the file is made for, and the four facts that tell
    # the runtime's variants apart (`runtime.RuntimeContract`); check_log.py compares a robot's log with them.
    "runtime_contract": runtime.contract_metadata(),
    "command_names": list(commands.NAMES),
    "action_names": list(constants.ACTUATOR_NAMES),
    "action_scale": float(env_config.action_scale),
    "home_pose": [float(x) for x in env.ids.home_ctrl],
    "servo_profile": servos.name_of(env_config),
    "max_motor_velocity": servos.speed_limit(env_config),
    # m, +-U per axis of the trunk's centre of mass the policy is judged at (its training
    # range less the training-only margin): a file scored alone is played with it.
    "trunk_offset_m": float(env_config.domain_randomization.com_offset),
    "trunk_offset_margin_m": float(env_config.domain_randomization.get("com_offset_margin", 0.0)),
    "control_period_s": float(env_config.ctrl_dt),
    "gait_frequency_hz": frequency,
    "gait_period_steps": round(phase_steps, 6),
    "motor_targets": "home_pose + action_scale * action (+ head command); the servos limit speed and range",
    "command_range": {name: list(r) for name, r in zip(commands.NAMES, commands.ranges(env_config.command_config))},
    "input_clamp": "commands outside command_range are clamped to it inside the file, as in training",
    "first_frame": "a (0, 0) phase, as the runtime observes before its first phase step, is phase 0 (cos 1, sin 0)",
    "feedforward": (
      "the output includes the reference gait at the observed command and phase (the network learned a residual)"
      + ("; at a zero command too: the duck steps in place" if joystick.step_in_place(env_config) else "")
      + (
        "; at a zero command it adds the standing stance (reward_config.stand_pose)"
        if joystick.stand_pose_in_feedforward(env_config)
        else ""
      )
      + (
        f"; the residual (tanh) is multiplied by {joystick.residual_gain(env_config):g} inside the file"
        if joystick.residual_gain(env_config) != 1.0
        else ""
      )
      if env_name == "joystick" and joystick.feedforward_on(env_config)
      else "none"
    ),
  }


def policy_input_bounds(env_config: config_dict.ConfigDict) -> tuple[np.ndarray, np.ndarray]:
  """(low, high) of the policy's inputs: the commands clamped to their training ranges, the rest unbounded."""
  size = actor_layout(env_config).size
  block = observations.STATE_LAYOUT.slices["command"]
  return contract.bounds_of_block(size, block, commands.ranges(env_config.command_config))


def policy_probe_observations(env: Any, env_config: config_dict.ConfigDict) -> np.ndarray:
  """The Open Duck runtime's first frames (phase (0, 0), home pose at rest) at zero, edge and
  out-of-range commands: the export must give finite actions that match JAX on them."""
  history = int(env_config.get("observation_history", 0))
  ranges = np.array(commands.ranges(env_config.command_config))
  forward = np.zeros(commands.SIZE)
  forward[0] = 0.1
  probes = np.stack([np.zeros(commands.SIZE), ranges[:, 1], ranges[:, 0], 3 * ranges[:, 1], forward])
  frames = runtime.first_frames(env.mj_model, env.ids.home_ctrl, probes)
  if history:
    # The history block at zero: whatever a runtime starts its buffer with, the actions must be finite.
    frames = np.concatenate(
      [frames, np.zeros((len(frames), history * observations.HISTORY_FRAME_LAYOUT.size), np.float32)], axis=1
    )
  if env_config.get("actor_kick", False):
    # The `actor_kick` diagnostic's kick state: no kick recent (`since_kick` 1).
    kick = np.zeros((len(frames), observations.KICK_SIZE), np.float32)
    kick[:, ObservationLayout(observations.KICK_FIELDS).slices["since_kick"]] = 1.0
    frames = np.concatenate([frames, kick], axis=1)
  return frames


def actor_layout(env_config: config_dict.ConfigDict) -> ObservationLayout:
  """The actor observation's layout for an env config (history frames, the `actor_kick` diagnostic)."""
  return observations.state_layout(
    int(env_config.get("observation_history", 0)), bool(env_config.get("actor_kick", False))
  )


def score_checkpoint(step_dir: Path, step: int, env_config: dict[str, Any], task: str, seeds: int) -> dict[str, float]:
  """Plays a checkpoint's `policy.onnx` on the scorecard suite, twice, and keeps the run's best policy.

  Observed by the env's functions (`score.json`, `score/*`) with `seeds`
  episodes per command, then as the robot runtime does (`score_runtime.json`,
  `score/runtime_*`) with a sixth of them (at least 2; a card costs about 3 s
  per seed on 2 cores), drawn anew at each checkpoint: the same few models at
  every checkpoint would bias the whole run's runtime curve. Updates
  `best_policy.onnx` / `best_score.json` (`best_policy.update_best`). Returns
  the TensorBoard scalars of both cards.
  """
  policy = Path(step_dir) / POLICY_FILE
  if not policy.is_file():
    return {}
  card = scorecard.score(policy, env_config, seeds=seeds, task=task)
  write(card, Path(step_dir))
  logger.info("%s (step %s, %.1f s)", headline_line(card), f"{step:,}", card["wall_time_s"])
  runtime_card = scorecard.score(policy, env_config, seeds=max(2, seeds // 6), task=task, source="runtime", seed=step)
  write(runtime_card, Path(step_dir), "score_runtime")
  logger.info("%s (%.1f s)", headline_line(runtime_card), runtime_card["wall_time_s"])
  run_dir = Path(step_dir).parent
  if best_policy.update_best(run_dir, Path(step_dir), card, scorecard.WALKING_SPEEDS):
    logger.info(
      "best policy so far (walks on command, then fewest falls, then tracking error): %s",
      run_dir / best_policy.BEST_POLICY,
    )
  return {**tensorboard_scalars(card), **tensorboard_scalars(runtime_card, "score/runtime_")}
