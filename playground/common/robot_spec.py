"""`RobotSpec`: what a robot provides to be trained, and the hooks the trainer calls.

Robot authors subclass `runner.BaseRunner` (a `RobotSpec` that can also
resolve its configuration, train and parse its command line); this module
holds the part the shared machinery reads: names, environments, PPO
settings, optional hooks, and the callbacks `on_progress` and
`on_checkpoint`. No JAX: the command line reads a robot's flags before JAX loads.
"""

from __future__ import annotations

import abc
import datetime
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import ClassVar

from ml_collections import config_dict

from playground.common.runs import directories
from playground.common.runs.arguments import ResolvedConfig
from playground.common.runs.arguments import RunArgs

if TYPE_CHECKING:
  import argparse

  from mujoco_playground import MjxEnv

  from playground.common.evaluation.scorecard import Suite
  from playground.common.export.contract import PolicyContract
  from playground.common.tasks.randomize import RandomizationFn


logger = logging.getLogger("playground")


class RobotSpec(abc.ABC):
  """One robot's environments, PPO settings and training hooks.

  Subclasses set `robot` and implement the abstract methods; the optional
  hooks below them have working defaults.

  Attributes:
    args: the run's flags (restored from the record by `--resume`).
    resume_record: the run's record (`config.json`) once `--resume` has read it.
  """

  robot: ClassVar[str] = "robot"
  presets: ClassVar[tuple[str, ...]] = ("full", "quick", "smoke")
  #: One line per preset for `--help` (name -> summary); optional.
  preset_summaries: ClassVar[dict[str, str]] = {}
  default_env: ClassVar[str] = ""
  default_task: ClassVar[str] = ""
  #: Robot flags (`RunArgs.extra` keys) that do not change results: taken
  #: from the record when not given, free to change on a resume.
  CHANGEABLE_EXTRA: ClassVar[tuple[str, ...]] = ()
  #: Env config keys the runner sets from its own flags in `resolve_config`
  #: (e.g. a reference file's prepared path): `--resume` does not restore them
  #: from the record, the restored flags set them again.
  FLAG_ENV_KEYS: ClassVar[tuple[str, ...]] = ()

  def __init__(self, args: RunArgs):
    self.args = args
    self._default_exp_name: str | None = None
    self.resume_record: dict[str, Any] | None = None

  # ---- What a robot provides.

  @abc.abstractmethod
  def env_names(self) -> Sequence[str]:
    """Names accepted by --env."""

  @abc.abstractmethod
  def task_names(self, env_name: str) -> Sequence[str]:
    """Names accepted by --task for `env_name`."""

  @abc.abstractmethod
  def default_env_config(self, env_name: str) -> config_dict.ConfigDict:
    """The env's `default_config()`."""

  @abc.abstractmethod
  def make_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict) -> MjxEnv:
    """Builds the unbatched MJX environment."""

  @abc.abstractmethod
  def make_randomizer(self, env: MjxEnv, env_config: config_dict.ConfigDict) -> RandomizationFn | None:
    """Returns `fn(mjx_model, keys) -> (model, in_axes)` or None."""

  @abc.abstractmethod
  def ppo_config(self, env_name: str, preset: str) -> config_dict.ConfigDict:
    """This robot's PPO hyper-parameters for a preset (`hyperparameters.default_config()` updated)."""

  @abc.abstractmethod
  def run(self) -> int:
    """Trains with `args`; returns the process exit status (implemented by `runner.BaseRunner`)."""

  # ---- Optional hooks (defaults work for any robot).

  def preset_env_overrides(self, env_name: str, preset: str) -> dict[str, Any]:
    """Env config changes a preset makes (flattened keys); none by default."""
    del env_name, preset
    return {}

  def make_eval_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict) -> MjxEnv:
    """The evaluation environment; the training env by default."""
    return self.make_env(env_name, task, env_config)

  def policy_contract(self, env: MjxEnv, env_config: config_dict.ConfigDict) -> PolicyContract:
    """What a policy of `env` needs to be exported, scored and played, built once from the built env.

    Called right after the env is built (the trainer's, or the one an export
    of a checkpoint builds from the run's record); see `contract.PolicyContract`
    for its parts (metadata, feed-forward, input bounds, probe observations,
    mirror, embedded files). The default is an empty contract: no metadata
    beyond the run's own, the network's action is the action, no mirror.
    """
    del env, env_config
    from playground.common.export.contract import PolicyContract

    return PolicyContract()

  def cpu_warning(self, num_timesteps: int) -> str | None:
    """One line the trainer logs when this run trains on a CPU (e.g. that its preset is
    sized for a GPU, and which preset suits a CPU), or None (the default: nothing)."""
    del num_timesteps
    return None

  def on_progress(self, step: int, metrics: dict[str, float]) -> None:
    """Called on process 0 each time the trainer logs progress; does nothing by default.

    Args:
      step: the env step count the metrics belong to.
      metrics: the finite scalars just written to TensorBoard (a copy): once
        `perf/compile_time_s` after the training step compiles; then at every
        progress line the training metrics averaged since the last one
        (`train/*`, `episode/*`) with `perf/sps`; after an evaluation, `eval/*`.

    Runs in the training thread between steps: keep it short. An exception is
    logged, not raised (training goes on).
    """
    del step, metrics

  def on_checkpoint(self, step: int, step_dir: Path) -> dict[str, float]:
    """Called on process 0 once checkpoint `step` is complete; returns scalars for TensorBoard.

    When it runs, `step_dir` holds the Orbax state (`state/`), `meta.json`
    and `policy.onnx` (unless its export failed, which is logged), its run
    directory holds the run's record (`config.json`), and older checkpoints
    beyond `--keep_last` are pruned. The returned scalars (may be empty) are
    written to TensorBoard at `step`. An exception is logged, not raised
    (training goes on). The default calls `score_checkpoint`.

    Args:
      step: the env step count of the checkpoint.
      step_dir: the checkpoint's directory (`<run_dir>/<step, 12 digits>`).
    """
    return self.score_checkpoint(step_dir, step)

  def play_env_config(self, env_name: str, env_config: config_dict.ConfigDict) -> config_dict.ConfigDict:
    """The env config to play an exported policy file in (the generic player, the in-run
    scorecard): `env_config` without what the file does itself, e.g. without the feed-forward
    that a residual policy's file adds to the network's action. The default: `env_config`."""
    del env_name
    return env_config

  def score_suite(self, env_name: str) -> Suite | None:
    """What the generic scorecard plays every checkpoint's policy on
    (`evaluation.scorecard.Suite`: commands, the robot's command names, the
    speeds at which it walks on command, seeds), or None: no in-run scorecard
    (the default)."""
    del env_name
    return None

  def score_checkpoint(self, step_dir: Path, step: int) -> dict[str, float]:
    """Scores a just-written checkpoint; returns scalars for TensorBoard.

    Measures what return cannot show (whether the policy walks on command and
    stays up), from what is on disk: the checkpoint's `policy.onnx` and the
    run's record (env, task, env config), as a scorecard of a finished run
    would. By default, with the robot's `score_suite` (none: no scoring), the
    generic player (`evaluation.player.score`) plays it in the run's env
    (`play_env_config`) on randomized models and writes `score.json`/`score.png` next to it, and the
    run keeps `best_policy.onnx`/`best_score.json` (`evaluation.best_policy`).
    A robot with its own player overrides this. Called by the default
    `on_checkpoint`, with the same guarantees (process 0, a complete
    checkpoint, exceptions logged).
    """
    suite = self.score_suite(self.args.env)
    if suite is None:
      return {}
    from playground.common.evaluation import best_policy
    from playground.common.evaluation import player
    from playground.common.evaluation import scorecard
    from playground.common.export.policy_file import POLICY_FILE

    policy = Path(step_dir) / POLICY_FILE
    if not policy.is_file():
      return {}

    run_dir = Path(step_dir).parent
    record = directories.read_record(run_dir)
    env_config = self.play_env_config(record["env"], config_dict.ConfigDict(record["env_config"]))
    env = self.make_env(record["env"], record["task"], env_config)
    card = player.score(policy, env, suite, self.make_randomizer(env, env_config))
    scorecard.write(card, Path(step_dir))
    logger.info("%s (step %s, %.1f s)", scorecard.headline_line(card), f"{step:,}", card["wall_time_s"])
    if best_policy.update_best(run_dir, Path(step_dir), card, suite.walking_speeds):
      logger.info("best policy so far: %s", run_dir / best_policy.BEST_POLICY)
    return scorecard.tensorboard_scalars(card)

  def named_files(self, cfg: ResolvedConfig) -> dict[str, Any]:
    """What may name input files of a run (robot flags, env config); their digests go into the record."""
    return {"extra": self.args.extra, "env_config": cfg.env_config.to_dict()}

  @classmethod
  def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
    """Robot-specific flags; their values arrive in `RunArgs.extra`."""
    del parser

  def run_dir_path(self) -> Path:
    """`<output_dir>/<exp_name>` as named (symbolic links not resolved)."""
    name = self.args.exp_name
    if name is None:
      if self._default_exp_name is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self._default_exp_name = f"{self.robot}_{self.args.env}_{self.args.task}_{stamp}"
      name = self._default_exp_name
    return Path(self.args.output_dir).expanduser() / name
