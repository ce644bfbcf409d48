"""`BaseRunner`: the class a robot's runner subclasses, to be configured, trained and run from the command line.

A robot package subclasses `BaseRunner`, sets `robot` and implements the
abstract methods of `RobotSpec` (its environments, randomization and PPO
settings); the optional hooks and the callbacks `on_progress` and
`on_checkpoint` have working defaults. Everything else is shared, in rooms
that import only from the rooms below them:

- `errors`, `configs`, `hyperparameters`: one-line errors, configs and
  `--set` overrides, PPO settings, as plain data and checks.
- `runs/`: the flags (`RunArgs`, `ResolvedConfig`), run directories, the
  record (`config.json`), `--resume` from it, checkpoint compatibility and
  the checkpoints themselves.
- `tasks/`, `export/`: what robots build their tasks from; the policy file.
- `train/`: building the envs and the learner (`session`), restoring, the
  training loop with its evaluations, checkpoints, callbacks and stop signals.
- on top: `robot_spec` (what a robot provides), `cli` (flags, one-line
  errors, `main`) and this module (`BaseRunner.resolve_config`, `run`, `main`).

The foundation, `runs/` and the top import no JAX (`tests/test_layers.py`),
and this module imports the trainer only when `run` trains: the command line
is checked before JAX loads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from playground.common import cli
from playground.common import configs
from playground.common.configs import ConfigError
from playground.common.errors import NonFiniteError
from playground.common.errors import RunError
from playground.common.robot_spec import RobotSpec
from playground.common.runs import record
from playground.common.runs import resume
from playground.common.runs.arguments import RESTORE_MODES
from playground.common.runs.arguments import ResolvedConfig
from playground.common.runs.arguments import RunArgs
from playground.common.runs.directories import REPO_ROOT
from playground.common.train import backend
from playground.common.train.backend import DEFAULT_CACHE_DIR
from playground.common.train.backend import setup_compilation_cache

# Re-exported: robots, tests and benchmarks import these from here.
__all__ = [
  "DEFAULT_CACHE_DIR",
  "REPO_ROOT",
  "RESTORE_MODES",
  "BaseRunner",
  "NonFiniteError",
  "ResolvedConfig",
  "RobotSpec",
  "RunArgs",
  "RunError",
  "setup_compilation_cache",
]


class BaseRunner(RobotSpec):
  """Trains PPO policies for one robot's environments.

  Subclasses set `robot` and implement the abstract methods of `RobotSpec`.
  Construct with `RunArgs` and call `run()`, or call `main(argv)` for the
  command line.
  """

  # ---- Configuration.

  def resolve_config(self) -> ResolvedConfig:
    """Applies preset, flags and `--set` overrides; validates every choice.

    Raises:
      ConfigError: for an unknown env, task, preset or key, or a bad value.
    """
    a = self.args
    configs.check_choice("--env", a.env, self.env_names())
    configs.check_choice("--task", a.task, self.task_names(a.env))
    configs.check_choice("--preset", a.preset, self.presets)
    configs.check_choice("--restore_mode", a.restore_mode, RESTORE_MODES)
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
      env_config = configs.apply_overrides(
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
    for key, raw in configs.parse_overrides(a.overrides):
      (ppo_over if key.startswith("ppo.") else env_over).append((key.removeprefix("ppo."), raw))
    try:
      env_config = configs.apply_overrides(env_config, env_over)
    except ConfigError as e:
      valid = list(configs.flatten(env_config)) + [f"ppo.{k}" for k in configs.flatten(ppo)]
      if "unknown config key" in str(e):
        key = str(e).split("'")[1]
        raise ConfigError(configs.unknown_key_message(key, valid)) from None
      raise
    try:
      ppo = configs.apply_overrides(ppo, ppo_over)
    except ConfigError as e:
      if "unknown config key" in str(e):
        key = "ppo." + str(e).split("'")[1]
        raise ConfigError(configs.unknown_key_message(key, [f"ppo.{k}" for k in configs.flatten(ppo)])) from None
      raise
    if a.resume and self.resume_record is not None:
      env_config, ppo = resume.recorded_configs(self, self.resume_record, env_config, ppo)
    if "impl" in env_config:
      backend.validate_impl(env_config.impl)
    configs.parse_cpu_devices(a.cpu_devices)
    return ResolvedConfig(env_config=env_config, ppo_config=ppo)

  # ---- Running.

  def run(self) -> int:
    """Checks the flags and the run directory, then trains; returns the process exit status.

    Raises:
      ConfigError, RunError: a one-line user error (nothing was created).
      NonFiniteError: training diverged (the last good checkpoint is kept).
    """
    record.check_paths(self.args)
    recorded = resume.apply_record(self) if self.args.resume else None
    cfg = self.resolve_config()
    if recorded is not None:
      resume.check_record_files(self, recorded, cfg)
    # Imported only now: the trainer loads JAX, and a bad command line is refused without it.
    from playground.common.train import trainer

    return trainer.run(self, cfg)

  @classmethod
  def main(cls, argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (see `cli.main`)."""
    return cli.main(cls, argv)
