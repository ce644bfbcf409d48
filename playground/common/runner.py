"""`BaseRunner`: what a robot provides to be trained, and `RunArgs`, the flags of a run.

A robot package subclasses `BaseRunner`, sets `robot` and implements the
abstract methods (its environments, randomization and PPO settings); the
optional hooks below them have working defaults. Everything else is shared:

- `cli`: the command line (flags, one-line errors, `main`); no JAX.
- `run_record`: run directories, `config.json`, resume from it, checkpoint
  compatibility; no JAX.
- `trainer`: building the envs and the learner, restoring, the training loop
  with its evaluations, checkpoints and stop signals.

This module imports no JAX: the command line is checked before it loads.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import ClassVar

from ml_collections import config_dict

from playground.common import backend
from playground.common import config as config_lib
from playground.common import run_record
from playground.common.backend import DEFAULT_CACHE_DIR
from playground.common.backend import setup_compilation_cache
from playground.common.config import ConfigError
from playground.common.run_dirs import REPO_ROOT
from playground.common.run_record import NonFiniteError
from playground.common.run_record import RunError

if TYPE_CHECKING:
  import argparse

  from mujoco_playground import MjxEnv

  from playground.common.trainer import Session
  from playground.common.training_env import RandomizationFn

# Re-exported: robots, tests and benchmarks import these from here.
__all__ = [
  "DEFAULT_CACHE_DIR",
  "REPO_ROOT",
  "RESTORE_MODES",
  "BaseRunner",
  "NonFiniteError",
  "ResolvedConfig",
  "RunArgs",
  "RunError",
  "setup_compilation_cache",
]

RESTORE_MODES = ("all", "model", "except-critic")


@dataclasses.dataclass
class RunArgs:
  """Command-line options of a training run (see `cli.build_parser`)."""

  env: str
  task: str
  preset: str = "full"
  num_timesteps: int | None = None
  num_envs: int | None = None
  output_dir: str = "checkpoints"
  exp_name: str | None = None
  seed: int = 0
  overrides: Sequence[str] = ()
  resume: bool = False
  overwrite: bool = False
  restore_checkpoint_path: str | None = None
  restore_mode: str = "all"
  checkpoint_every: int | None = None
  keep_last: int | None = None
  eval_every: int | None = None
  log_every: int | None = None
  compilation_cache_dir: str | None = None
  step_cache: bool = True
  #: 'auto' (the command line's default: one CPU device per core), a count,
  #: or None (leave JAX's configuration alone: the default for library use).
  cpu_devices: str | int | None = None
  coordinator_address: str | None = None
  num_processes: int | None = None
  process_id: int | None = None
  #: --restore_mode all from a checkpoint of another seed (refused otherwise).
  allow_seed_change: bool = False
  extra: dict[str, Any] = dataclasses.field(default_factory=dict)
  #: Names of the fields (and `extra` keys) given on the command line; None
  #: (library use) counts every field that differs from its default, plus
  #: env and task. `--resume` refuses explicit values that differ from the record.
  explicit: frozenset[str] | None = None


@dataclasses.dataclass
class ResolvedConfig:
  """The effective configuration after presets, flags and overrides."""

  env_config: config_dict.ConfigDict
  ppo_config: config_dict.ConfigDict


class BaseRunner(abc.ABC):
  """Trains PPO policies for one robot's environments.

  Subclasses set `robot` and implement the abstract methods. Construct with
  `RunArgs` and call `run()`, or call `main(argv)` for the command line.
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
    #: The run's record (`config.json`) once `--resume` has read it (`run_record.apply_record`).
    self.resume_record: dict[str, Any] | None = None

  # ---- What a robot runner provides.

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
    """This robot's PPO hyper-parameters for a preset (`ppo_config.default_config()` updated)."""

  # ---- Optional hooks (defaults work for any robot).

  def preset_env_overrides(self, env_name: str, preset: str) -> dict[str, Any]:
    """Env config changes a preset makes (flattened keys); none by default."""
    del env_name, preset
    return {}

  def make_eval_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict) -> MjxEnv:
    """The evaluation environment; the training env by default."""
    return self.make_env(env_name, task, env_config)

  @classmethod
  def policy_metadata(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> dict[str, Any]:
    """Robot facts written into exported policy files (observation layout,
    action order, scales, home pose, control period); none by default."""
    del env_name, task, env_config
    return {}

  @classmethod
  def policy_feedforward(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> Any:
    """The `reference.Feedforward` the env adds to the policy's action (the exported
    policy adds it too), or None (the default: the network's action is the action)."""
    del env_name, task, env_config
    return None

  @classmethod
  def policy_input_bounds(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> Any:
    """(low, high) per policy input that the exported file clamps its input to
    (e.g. commands to the trained range), or None (the default: no clamp)."""
    del env_name, task, env_config
    return None

  @classmethod
  def policy_probe_observations(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> Any:
    """Observations [k, obs_size] the export must handle (e.g. a robot runtime's
    first frames): checked against JAX and for finite actions; None by default."""
    del env_name, task, env_config
    return None

  def score_checkpoint(self, step_dir: Path, step: int, session: Session) -> dict[str, float]:
    """Scores a just-written checkpoint; returns scalars for TensorBoard (none by default).

    Robots override this to measure what return cannot show (e.g. whether the
    policy walks on command). Called on process 0 only, after the checkpoint
    and its policy files are complete; an exception is logged, not raised.
    """
    del step_dir, step, session
    return {}

  def named_files(self, cfg: ResolvedConfig) -> dict[str, Any]:
    """What may name input files of a run (robot flags, env config); their digests go into the record."""
    return {"extra": self.args.extra, "env_config": cfg.env_config.to_dict()}

  @classmethod
  def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
    """Robot-specific flags; their values arrive in `RunArgs.extra`."""
    del parser

  # ---- Configuration.

  def resolve_config(self) -> ResolvedConfig:
    """Applies preset, flags and `--set` overrides; validates every choice.

    Raises:
      ConfigError: for an unknown env, task, preset or key, or a bad value.
    """
    a = self.args
    config_lib.check_choice("--env", a.env, self.env_names())
    config_lib.check_choice("--task", a.task, self.task_names(a.env))
    config_lib.check_choice("--preset", a.preset, self.presets)
    config_lib.check_choice("--restore_mode", a.restore_mode, RESTORE_MODES)
    if a.restore_mode != "all" and not a.restore_checkpoint_path:
      raise ConfigError(
        f"--restore_mode {a.restore_mode} needs --restore_checkpoint_path (a checkpoint to take weights from)"
      )
    if a.resume and a.overwrite:
      raise ConfigError("--resume and --overwrite exclude each other: pick one")
    if a.resume and a.restore_checkpoint_path:
      raise ConfigError("--resume continues this run's own checkpoints; drop --restore_checkpoint_path or --resume")
    env_config = self.default_env_config(a.env)
    preset_env = self.preset_env_overrides(a.env, a.preset)
    if preset_env:
      env_config = config_lib.apply_overrides(
        env_config, [(k, json.dumps(v) if not isinstance(v, str) else v) for k, v in preset_env.items()]
      )
    ppo = self.ppo_config(a.env, a.preset)
    for name in ("num_timesteps", "num_envs", "eval_every", "log_every", "checkpoint_every"):
      value = getattr(a, name)
      if value is not None:
        if value < 0 or (value == 0 and name != "eval_every"):
          allowed = "positive, or 0 for no evaluation" if name == "eval_every" else "positive"
          raise ConfigError(f"--{name} must be {allowed}, got {value}")
        ppo[name] = value
    if a.keep_last is not None:
      if a.keep_last < 0:
        raise ConfigError(f"--keep_last must be >= 0 (0 keeps all), got {a.keep_last}")
      ppo.keep_last = a.keep_last
    if a.num_envs is not None and (ppo.batch_size * ppo.num_minibatches) % a.num_envs:
      # Keep the batch a whole number of rollouts: one minibatch per env slice.
      ppo.batch_size = a.num_envs
    env_over, ppo_over = [], []
    for key, raw in config_lib.parse_overrides(a.overrides):
      (ppo_over if key.startswith("ppo.") else env_over).append((key.removeprefix("ppo."), raw))
    try:
      env_config = config_lib.apply_overrides(env_config, env_over)
    except ConfigError as e:
      valid = list(config_lib.flatten(env_config)) + [f"ppo.{k}" for k in config_lib.flatten(ppo)]
      if "unknown config key" in str(e):
        key = str(e).split("'")[1]
        raise ConfigError(config_lib.unknown_key_message(key, valid)) from None
      raise
    try:
      ppo = config_lib.apply_overrides(ppo, ppo_over)
    except ConfigError as e:
      if "unknown config key" in str(e):
        key = "ppo." + str(e).split("'")[1]
        raise ConfigError(config_lib.unknown_key_message(key, [f"ppo.{k}" for k in config_lib.flatten(ppo)])) from None
      raise
    if a.resume and self.resume_record is not None:
      env_config, ppo = run_record.recorded_configs(self, self.resume_record, env_config, ppo)
    if "impl" in env_config:
      backend.validate_impl(env_config.impl)
    config_lib.parse_cpu_devices(a.cpu_devices)
    return ResolvedConfig(env_config=env_config, ppo_config=ppo)

  def run_dir_path(self) -> Path:
    """`<output_dir>/<exp_name>` as named (symbolic links not resolved)."""
    name = self.args.exp_name
    if name is None:
      if self._default_exp_name is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self._default_exp_name = f"{self.robot}_{self.args.env}_{self.args.task}_{stamp}"
      name = self._default_exp_name
    return Path(self.args.output_dir).expanduser() / name

  # ---- Running.

  def run(self) -> int:
    """Checks the flags and the run directory, then trains; returns the process exit status.

    Raises:
      ConfigError, RunError: a one-line user error (nothing was created).
      NonFiniteError: training diverged (the last good checkpoint is kept).
    """
    run_record.check_paths(self.args)
    record = run_record.apply_record(self) if self.args.resume else None
    cfg = self.resolve_config()
    if record is not None:
      run_record.check_record_files(self, record, cfg)
    # Imported only now: the trainer loads JAX, and a bad command line is refused without it.
    from playground.common import trainer

    return trainer.run(self, cfg)

  @classmethod
  def main(cls, argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (see `cli.main`)."""
    # `cli` imports this module (for RunArgs and BaseRunner).
    from playground.common import cli

    return cli.main(cls, argv)
