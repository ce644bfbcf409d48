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

from playground.common.configs import ConfigError
from playground.common.runner import REPO_ROOT
from playground.common.runner import BaseRunner
from playground.common.runner import ResolvedConfig
from playground.common.runs import directories
from playground.open_duck_mini_v2 import presets
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.presets import PRESETS
from playground.open_duck_mini_v2.tasks.registry import ENVS
from playground.open_duck_mini_v2.tasks.registry import env_class

if TYPE_CHECKING:
  from playground.common.export.contract import PolicyContract


logger = logging.getLogger("playground")

#: Training env steps/s of the duck on a 2-core CPU, one device per core
#: (docs/results.md, 7,244 to 7,556): the estimate without doctor's probe.
CPU_TRAINING_SPS = 7_000.0


def _positive_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a whole number of episodes per command, at least 1, got {text!r}")
  return value


def _hooks():
  """`runner_hooks`, imported on first use: it loads JAX and MuJoCo, which the command line defers."""
  from playground.open_duck_mini_v2 import runner_hooks

  return runner_hooks


def ppo_config(env_name: str, preset: str) -> config_dict.ConfigDict:
  """PPO settings of the Open Duck Mini V2 for a preset (`presets.PRESETS`)."""
  del env_name
  return presets.ppo_config(preset)


class OpenDuckMiniV2Runner(BaseRunner):
  """Runner for the Open Duck Mini V2 joystick and standing tasks."""

  robot = "open_duck_mini_v2"
  presets = tuple(PRESETS)
  preset_summaries = {name: p.summary for name, p in PRESETS.items()}
  CHANGEABLE_EXTRA = ("score", "score_seeds")
  FLAG_ENV_KEYS = ("reference.path",)  # set from --reference in resolve_config
  default_env = "joystick"
  default_task = "flat_terrain"

  def env_names(self) -> Sequence[str]:
    return ENVS

  def task_names(self, env_name: str) -> Sequence[str]:
    del env_name
    return constants.TASKS

  def default_env_config(self, env_name: str) -> config_dict.ConfigDict:
    return env_class(env_name).default_config()

  def make_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict):
    return env_class(env_name)(task=task, config=env_config)

  def make_randomizer(self, env, env_config: config_dict.ConfigDict):
    return _hooks().make_randomizer(env, env_config)

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
    servos.of_config(cfg.env_config)  # a wrong `--set servo_profile=` is one line, before JAX loads
    servos.gait_of(cfg.env_config)  # and so is a wrong `--set reference.servo_gait=`
    path = self.args.extra.get("reference")
    if path:
      if self.args.env != "joystick":
        raise ConfigError("--reference applies to --env joystick (the imitation reward)")
      from playground.open_duck_mini_v2.tasks import gait_tables  # its table layout loads JAX

      table = gait_tables.prepare(path, bool(self.args.extra.get("allow_pickle")), REPO_ROOT / ".tmp" / "references")
      cfg.env_config.reference.path = str(table)
    return cfg

  def named_files(self, cfg: ResolvedConfig) -> dict[str, Any]:
    """Adds the built-in reference table when the run reads it: its digest goes into the
    run's record, so that `--resume` refuses a run whose gait a project update changed."""
    files = super().named_files(cfg)
    if self.args.env == "joystick":
      from playground.open_duck_mini_v2.tasks import gait_tables  # its table layout loads JAX

      if gait_tables.uses_reference(cfg.env_config):
        files["reference_table"] = str(gait_tables.table_path(cfg.env_config))
    return files

  def policy_contract(self, env, env_config: config_dict.ConfigDict) -> PolicyContract:
    """The duck's contract, from the built env (`runner_hooks.policy_contract`): the runtime's
    metadata, the commands clamped to their trained ranges, the runtime's first frames as probes,
    the left/right mirror, and the reference gait when the joystick env adds it to the action."""
    return _hooks().policy_contract(env, self.args.env, env_config)

  def play_env_config(self, env_name: str, env_config: config_dict.ConfigDict) -> config_dict.ConfigDict:
    """The env config the scorecard plays a file in (`policy_io.play_config`): the reference
    gait's feed-forward off (the file adds it), no imitation, no env pushes (the player's own)."""
    from playground.open_duck_mini_v2.evaluation import policy_io

    return policy_io.play_config({"env": env_name}, env_config.to_dict(), noise=True, delays=True, randomization=True)

  def score_seeds(self) -> int:
    """Episodes per command of the in-run scorecard: `--score_seeds`, else the preset's `score_seeds`."""
    return int(self.args.extra.get("score_seeds") or PRESETS[self.args.preset].score_seeds)

  def score_checkpoint(self, step_dir: Path, step: int) -> dict[str, float]:
    """Plays the checkpoint's policy on the scorecard suite; writes score.json/png next to it.

    Plays it twice, with the run's recorded env config and task: observed by
    the env's functions (`score.json`, `score/*`) and as the robot runtime
    does (`score_runtime.json`, `score/runtime_*`). Also keeps the run's
    `best_policy.onnx` / `best_score.json` (`best_policy.update_best`).
    """
    mode = self.args.extra.get("score", "auto")
    if mode == "off" or (mode == "auto" and self.args.preset == "smoke") or self.args.env != "joystick":
      return {}
    record = directories.read_record(Path(step_dir).parent)
    return _hooks().score_checkpoint(Path(step_dir), step, record["env_config"], record["task"], self.score_seeds())

  def cpu_warning(self, num_timesteps: int) -> str | None:
    """For `--preset full` on a CPU: its estimated time here, and the CPU preset."""
    if self.args.preset != "full":
      return None
    from playground.common.train import backend

    sps, source = backend.cpu_training_estimate(CPU_TRAINING_SPS)
    return (
      f"--preset full is sized for a GPU: {num_timesteps:,} steps on this CPU would take about "
      f"{backend.duration_text(num_timesteps / sps)} (estimate at {sps:,.0f} training steps/s, {source}); "
      "--preset cpu trains a walking policy in 1-1.5 h on 2 cores"
    )

  def preset_env_overrides(self, env_name: str, preset: str) -> dict[str, Any]:
    return presets.env_overrides(env_name, preset)


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  return OpenDuckMiniV2Runner.main(argv)


if __name__ == "__main__":
  sys.exit(main())
