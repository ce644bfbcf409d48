"""Train the Open Duck Mini V2 (joystick or standing) with PPO on MuJoCo MJX.

    uv run playground/open_duck_mini_v2/runner.py --env joystick --task flat_terrain --preset quick

See `--help` and the README for all flags.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ml_collections import config_dict

from playground.common.runner import REPO_ROOT
from playground.common.runner import BaseRunner
from playground.common.runner import ResolvedConfig
from playground.open_duck_mini_v2 import constants as consts
from playground.open_duck_mini_v2 import presets as presets_lib
from playground.open_duck_mini_v2.envs import ENVS
from playground.open_duck_mini_v2.envs import command_ranges
from playground.open_duck_mini_v2.envs import env_class

if TYPE_CHECKING:
  from playground.common.session import Session


logger = logging.getLogger("playground")


def _positive_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a whole number of episodes per command, at least 1, got {text!r}")
  return value


def ppo_config(env_name: str, preset: str) -> config_dict.ConfigDict:
  """PPO settings of the Open Duck Mini V2 for a preset (`presets.PRESETS`)."""
  del env_name
  return presets_lib.ppo_config(preset)


class OpenDuckMiniV2Runner(BaseRunner):
  """Runner for the Open Duck Mini V2 joystick and standing tasks."""

  robot = "open_duck_mini_v2"
  presets = tuple(presets_lib.PRESETS)
  preset_summaries = {name: p.summary for name, p in presets_lib.PRESETS.items()}
  CHANGEABLE_EXTRA = ("score", "score_seeds")
  FLAG_ENV_KEYS = ("reference.path",)  # set from --reference in resolve_config
  default_env = "joystick"
  default_task = "flat_terrain"

  def env_names(self) -> Sequence[str]:
    return ENVS

  def task_names(self, env_name: str) -> Sequence[str]:
    del env_name
    return consts.TASKS

  def default_env_config(self, env_name: str) -> config_dict.ConfigDict:
    return env_class(env_name).default_config()

  def make_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict):
    return env_class(env_name)(task=task, config=env_config)

  def make_randomizer(self, env, env_config: config_dict.ConfigDict):
    from playground.common import randomize
    from playground.open_duck_mini_v2 import envs

    if not env_config.domain_randomization.enabled:
      return None
    return randomize.make_randomization_fn(env.mj_model, envs.randomization_targets(), env_config.domain_randomization)

  def ppo_config(self, env_name: str, preset: str) -> config_dict.ConfigDict:
    return ppo_config(env_name, preset)

  @classmethod
  def add_arguments(cls, parser) -> None:
    parser.add_argument(
      "--score",
      default="auto",
      choices=("auto", "on", "off"),
      help="score every joystick checkpoint on the walking scorecard (score.py) and log score/* to "
      "TensorBoard; auto: on except for the smoke preset",
    )
    parser.add_argument(
      "--score_seeds",
      type=_positive_int,
      help="episodes per command when scoring a checkpoint (default: 12 for the full and cpu presets, 2 otherwise)",
    )
    parser.add_argument(
      "--reference",
      help="reference gait for the imitation reward: a .npz table or the community's "
      "polynomial_coefficients.pkl (needs --allow_pickle)",
    )
    parser.add_argument(
      "--allow_pickle",
      action="store_true",
      help="allow loading a pickle --reference (pickles can run code: only for files you trust)",
    )

  def resolve_config(self) -> ResolvedConfig:
    cfg = super().resolve_config()
    path = self.args.extra.get("reference")
    if path:
      if self.args.env != "joystick":
        from playground.common.config import ConfigError

        raise ConfigError("--reference applies to --env joystick (the imitation reward)")
      from playground.open_duck_mini_v2 import references

      table = references.prepare(path, bool(self.args.extra.get("allow_pickle")), REPO_ROOT / ".tmp" / "references")
      cfg.env_config.reference.path = str(table)
    return cfg

  def named_files(self, cfg: ResolvedConfig) -> dict[str, Any]:
    """Adds the built-in reference table when the run reads it: its digest goes into the
    run's record, so that `--resume` refuses a run whose gait a project update changed."""
    files = super().named_files(cfg)
    if self.args.env == "joystick":
      from playground.open_duck_mini_v2 import references

      if references.uses_reference(cfg.env_config):
        files["reference_table"] = str(references.table_path(cfg.env_config))
    return files

  @classmethod
  def policy_metadata(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> dict[str, Any]:
    """What the robot runtime needs to feed and read the ONNX policy."""
    from playground.open_duck_mini_v2 import joystick
    from playground.open_duck_mini_v2 import observations
    from playground.open_duck_mini_v2 import robot_model

    ids = robot_model.RobotIndices.from_model(robot_model.load_model(task))
    frequency = env_class(env_name).gait_frequency_of(env_config)
    ctrl_dt = float(env_config.ctrl_dt)
    history = int(env_config.get("observation_history", 0))
    layout = observations.state_layout(history)
    phase_steps = 1.0 / (frequency * ctrl_dt)
    if abs(phase_steps - round(phase_steps)) > 1e-3:
      logger.warning(
        "one gait period is %.3f control steps at %.0f Hz, not a whole number: a robot runtime that counts "
        "whole steps per period (the Open Duck runtime does) will drift from the phase the policy was trained on",
        phase_steps,
        1.0 / ctrl_dt,
      )
    return {
      "observation_layout": layout.to_json(),
      "observation_size": layout.size,
      "observation_history": history,
      "joint_vel_scale": observations.JOINT_VEL_SCALE,
      "command_names": list(observations.COMMAND_NAMES),
      "action_names": list(consts.ACTUATOR_NAMES),
      "action_scale": float(env_config.action_scale),
      "home_pose": [float(x) for x in ids.home_ctrl],
      "max_motor_velocity": float(env_config.max_motor_velocity),
      "control_period_s": float(env_config.ctrl_dt),
      "gait_frequency_hz": frequency,
      "gait_period_steps": round(phase_steps, 6),
      "motor_targets": "home_pose + action_scale * action (+ head command); the servos limit speed and range",
      "command_range": {
        name: list(r) for name, r in zip(observations.COMMAND_NAMES, command_ranges(env_name, env_config))
      },
      "input_clamp": "commands outside command_range are clamped to it inside the file, as in training",
      "first_frame": "a (0, 0) phase, as the runtime observes before its first phase step, is phase 0 (cos 1, sin 0)",
      "feedforward": (
        "the output includes the reference gait at the observed command and phase (the network learned a residual)"
        if env_name == "joystick" and joystick.feedforward_on(env_config)
        else "none"
      ),
    }

  @classmethod
  def policy_input_bounds(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> Any:
    """The 7 commands clamped to the ranges the env trained with; other inputs unbounded."""
    del task
    import numpy as np

    from playground.open_duck_mini_v2 import observations

    size = observations.state_layout(int(env_config.get("observation_history", 0))).size
    low, high = np.full(size, -np.finfo(np.float32).max), np.full(size, np.finfo(np.float32).max)
    start = observations.STATE_LAYOUT.slices["command"].start
    for i, (lo, hi) in enumerate(command_ranges(env_name, env_config)):
      low[start + i], high[start + i] = lo, hi
    return low.astype(np.float32), high.astype(np.float32)

  @classmethod
  def policy_probe_observations(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> Any:
    """The Open Duck runtime's first frames (phase (0, 0), home pose at rest) at zero, edge and
    out-of-range commands: the export must give finite actions that match JAX on them."""
    import numpy as np

    from playground.open_duck_mini_v2 import robot_model
    from playground.open_duck_mini_v2 import runtime

    history = int(env_config.get("observation_history", 0))
    model = robot_model.load_model(task)
    ids = robot_model.RobotIndices.from_model(model)
    ranges = np.array(command_ranges(env_name, env_config))
    commands = np.stack([np.zeros(7), ranges[:, 1], ranges[:, 0], 3 * ranges[:, 1], np.r_[0.1, np.zeros(6)]])
    frames = runtime.first_frames(model, ids.home_ctrl, commands)
    if history:
      # The history block at zero: whatever a runtime starts its buffer with, the actions must be finite.
      frames = np.concatenate([frames, np.zeros((len(frames), history * 34), np.float32)], axis=1)
    return frames

  @classmethod
  def policy_mirror(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> Any:
    """The duck's left/right mirror (`mirror.policy_mirror`); the same for every env."""
    del env_name
    from playground.open_duck_mini_v2 import mirror

    return mirror.policy_mirror(task, env_config)

  @classmethod
  def policy_feedforward(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> Any:
    """The joystick env's reference feed-forward when `reference.feedforward` is on."""
    from playground.open_duck_mini_v2 import joystick
    from playground.open_duck_mini_v2 import robot_model

    if env_name != "joystick" or not joystick.feedforward_on(env_config):
      return None
    ids = robot_model.RobotIndices.from_model(robot_model.load_model(task))
    reference = joystick.load_reference(env_config)
    return joystick.make_feedforward(reference, ids.home_ctrl, float(env_config.action_scale))

  def score_seeds(self) -> int:
    """Episodes per command of the in-run scorecard: `--score_seeds`, else the preset's `score_seeds`."""
    return int(self.args.extra.get("score_seeds") or presets_lib.PRESETS[self.args.preset].score_seeds)

  def score_checkpoint(self, step_dir: Path, step: int, session: Session) -> dict[str, float]:
    """Plays the checkpoint's policy on the scorecard suite; writes score.json/png next to it.

    Plays it twice: observed by the env's functions (`score.json`, `score/*`)
    and as the robot runtime does (`score_runtime.json`, `score/runtime_*`).
    Also keeps the run's `best_policy.onnx` / `best_score.json` (`best_policy.update_best`).
    """
    mode = self.args.extra.get("score", "auto")
    if mode == "off" or (mode == "auto" and self.args.preset == "smoke") or session.env_name != "joystick":
      return {}
    policy = Path(step_dir) / "policy.onnx"
    if not policy.is_file():
      return {}
    from playground.open_duck_mini_v2 import best_policy
    from playground.open_duck_mini_v2 import score
    from playground.open_duck_mini_v2 import scorecard

    env_config = session.cfg.env_config.to_dict()
    card = score.score(policy, env_config, seeds=self.score_seeds(), task=session.task)
    scorecard.write(card, Path(step_dir))
    logger.info("%s (step %s, %.1f s)", scorecard.headline_line(card), f"{step:,}", card["wall_time_s"])
    # The same policy observed as the robot runtime does (runtime.py), with a
    # sixth of the seeds (at least 2; a card costs about 3 s per seed on 2
    # cores): its own card and score/runtime_* scalars.
    runtime_card = score.score(
      policy, env_config, seeds=max(2, self.score_seeds() // 6), task=session.task, source="runtime"
    )
    scorecard.write(runtime_card, Path(step_dir), "score_runtime")
    logger.info("%s (%.1f s)", scorecard.headline_line(runtime_card), runtime_card["wall_time_s"])
    run_dir = Path(step_dir).parent
    if best_policy.update_best(run_dir, Path(step_dir), card):
      logger.info(
        "best policy so far (walks on command, then fewest falls, then tracking error): %s",
        run_dir / best_policy.BEST_POLICY,
      )
    return {**scorecard.tensorboard_scalars(card), **scorecard.tensorboard_scalars(runtime_card, "score/runtime_")}

  def preset_env_overrides(self, env_name: str, preset: str) -> dict[str, Any]:
    return presets_lib.env_overrides(env_name, preset)


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  return OpenDuckMiniV2Runner.main(argv)


if __name__ == "__main__":
  sys.exit(main())
