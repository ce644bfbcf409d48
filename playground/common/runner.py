"""`BaseRunner`: configuration, run directories, the training loop and its CLI.

A robot package subclasses `BaseRunner` and provides its environments,
randomization and PPO settings (the abstract methods). Everything else is
shared: command-line flags, presets and `--set` overrides, the JAX persistent
compilation cache, run directories with exact resume, the jit-compiled PPO
step, evaluation, TensorBoard/console progress and atomic checkpoints.

The Python loop only calls the compiled step and two callbacks:
`progress_callback(step, metrics)` and `checkpoint_callback(step, ...)`.
"""

from __future__ import annotations

import abc
import argparse
import dataclasses
import datetime
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any
from typing import ClassVar

from ml_collections import config_dict

from playground.common import backend
from playground.common import config as config_lib
from playground.common import run_dirs
from playground.common.config import ConfigError

logger = logging.getLogger("playground")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE_DIR = REPO_ROOT / ".tmp" / "jax_cache"
RESTORE_MODES = ("all", "model", "except-critic")
STOP_TIMEOUT_S = 30.0
_PACKAGES = (
  "duck-playground",
  "jax",
  "jaxlib",
  "brax",
  "flax",
  "optax",
  "mujoco",
  "mujoco-mjx",
  "playground",
  "orbax-checkpoint",
  "onnx",
  "onnxruntime",
  "warp-lang",
)


class RunError(RuntimeError):
  """A user-facing error of a run (printed as one line, exit status 2)."""


class NonFiniteError(RuntimeError):
  """The loss or the parameters became NaN/inf."""


@dataclasses.dataclass
class RunArgs:
  """Command-line options of a training run (see `BaseRunner.parser`)."""

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


@dataclasses.dataclass
class Session:
  """What a run trains with: envs, learner, evaluator and its fingerprint."""

  cfg: ResolvedConfig
  env: Any
  venv: Any
  ppo: Any
  evaluator: Any
  compat: dict[str, Any]
  step_cache: Any = None


class BaseRunner(abc.ABC):
  """Trains PPO policies for one robot's environments.

  Subclasses set `robot` and implement the abstract methods. Construct with
  `RunArgs` and call `run()`, or call `main(argv)` for the command line.
  """

  robot: ClassVar[str] = "robot"
  presets: ClassVar[tuple[str, ...]] = ("full", "quick", "smoke")
  default_env: ClassVar[str] = ""
  default_task: ClassVar[str] = ""

  def __init__(self, args: RunArgs):
    self.args = args
    self._stop = threading.Event()
    self._stop_requested_at: float | None = None
    self.run_dir: Path | None = None
    self.reporter = None
    self._last_checkpoint_step: int | None = None
    self._default_exp_name: str | None = None

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
  def make_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict):
    """Builds the unbatched MJX environment."""

  @abc.abstractmethod
  def make_randomizer(self, env, env_config: config_dict.ConfigDict):
    """Returns `fn(mjx_model, keys) -> (model, in_axes)` or None."""

  @abc.abstractmethod
  def ppo_config(self, env_name: str, preset: str) -> config_dict.ConfigDict:
    """This robot's PPO hyper-parameters for a preset."""

  def preset_env_overrides(self, env_name: str, preset: str) -> dict[str, Any]:
    """Env config changes a preset makes (flattened keys); none by default."""
    del env_name, preset
    return {}

  def make_eval_env(self, env_name: str, task: str, env_config: config_dict.ConfigDict):
    """The evaluation environment; the training env by default."""
    return self.make_env(env_name, task, env_config)

  @classmethod
  def policy_metadata(cls, env_name: str, task: str, env_config: config_dict.ConfigDict) -> dict[str, Any]:
    """Robot facts written into exported policy files (observation layout,
    action order, scales, home pose, control period); none by default."""
    del env_name, task, env_config
    return {}

  def export_policy(self, directory: Path, step: int, ppo, training_state, ctx: dict) -> None:
    """Writes `policy.onnx` next to a checkpoint (called by `checkpoint_callback`).

    The export is verified against the JAX policy; a failure raises, and the
    checkpoint writer logs it without stopping training.
    """
    from playground.common import export  # pylint: disable=import-outside-toplevel

    normalizer, policy_params, _ = ppo.inference_params(training_state)
    obs_key = ppo.config.policy_obs_key if isinstance(ppo.obs_shapes, dict) else None
    metadata = export.policy_metadata(type(self), ctx["env_name"], ctx["task"], ctx["env_config"], step, obs_key)
    export.export(
      Path(directory) / export.POLICY_FILE,
      ppo.network,
      normalizer,
      policy_params,
      obs_key,
      ppo.venv.action_size,
      ppo.config.activation,
      metadata,
    )

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
    for name in ("num_timesteps", "num_envs", "eval_every", "log_every"):
      value = getattr(a, name)
      if value is not None:
        if value <= 0:
          raise ConfigError(f"--{name} must be positive, got {value}")
        ppo[name] = value
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
    if "impl" in env_config:
      backend.validate_impl(env_config.impl)
    if a.checkpoint_every is not None and a.checkpoint_every <= 0:
      raise ConfigError(f"--checkpoint_every must be positive, got {a.checkpoint_every}")
    if a.keep_last is not None and a.keep_last < 0:
      raise ConfigError(f"--keep_last must be >= 0 (0 keeps all), got {a.keep_last}")
    config_lib.parse_cpu_devices(a.cpu_devices)
    return ResolvedConfig(env_config=env_config, ppo_config=ppo)

  # ---- Run directory.

  def _exp_name(self) -> str:
    if self.args.exp_name is not None:
      return self.args.exp_name
    if self._default_exp_name is None:
      stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
      self._default_exp_name = f"{self.robot}_{self.args.env}_{self.args.task}_{stamp}"
    return self._default_exp_name

  def run_dir_path(self) -> Path:
    """`<output_dir>/<exp_name>` as named (symbolic links not resolved)."""
    return Path(self.args.output_dir).expanduser() / self._exp_name()

  def check_paths(self) -> None:
    """Refuses an --exp_name that is not one path component and an --output_dir that cannot hold runs.

    Raises:
      RunError: with a one-line message; nothing is created.
    """
    try:
      if self.args.exp_name is not None:
        run_dirs.check_exp_name(self.args.exp_name)
      run_dirs.check_writable_dir(Path(self.args.output_dir))
    except run_dirs.RunDirError as e:
      raise RunError(str(e)) from None

  def prepare_run_dir(self) -> tuple[Path, Path | None]:
    """Decides the run directory and the checkpoint to resume, touching nothing.

    Returns:
      (run_dir, checkpoint to restore or None); run_dir is resolved.

    Raises:
      RunError: existing directory without --resume/--overwrite, --overwrite
        of a directory that is not a run of this project inside --output_dir,
        or --resume without a checkpoint.
    """
    from playground.common import checkpointing  # pylint: disable=import-outside-toplevel

    a = self.args
    named = self.run_dir_path()
    if named.is_symlink() and not named.exists():
      raise RunError(f"run directory {named} is a broken symbolic link; remove it or choose another --exp_name")
    if named.exists() and not named.is_dir():
      raise RunError(f"{named} exists and is not a directory; choose another --exp_name")
    run_dir = named.resolve()
    restore = None
    if a.resume:
      if not run_dir.is_dir():
        raise RunError(f"--resume: run directory {run_dir} does not exist (check --output_dir and --exp_name)")
      restore = checkpointing.latest_checkpoint(run_dir)
      if restore is None:
        raise RunError(f"--resume: {run_dir} holds no complete checkpoint to resume from")
    elif named.exists():
      if not a.overwrite:
        raise RunError(
          f"FileExistsError: run directory {run_dir} already exists; pass --resume to continue it "
          "or --overwrite to delete it and start over"
        )
      try:
        run_dirs.deletable_run_dir(named, Path(a.output_dir))
      except run_dirs.RunDirError as e:
        raise RunError(str(e)) from None
    if a.restore_checkpoint_path:
      try:
        restore = checkpointing.resolve(a.restore_checkpoint_path)
      except checkpointing.CheckpointError as e:
        raise RunError(str(e)) from None
      if a.overwrite and run_dir.exists() and Path(restore).resolve().is_relative_to(run_dir):
        raise RunError(
          f"--overwrite would delete {run_dir}, which holds the checkpoint to restore; choose another --exp_name"
        )
    return run_dir, restore

  # ---- Resuming from the run's record.

  #: Flags `--resume` takes from the run's record (`config.json`) when they are
  #: not given; a given value that differs from the record is refused. Every
  #: robot flag (`RunArgs.extra`) is treated the same way.
  RECORD_FLAGS = ("env", "task", "preset", "seed", "num_envs", "overrides")
  #: Flags `--resume` takes from the record when not given, but that may be
  #: changed: `--num_timesteps` extends a run, `--cpu_devices` re-splits the
  #: checkpointed env batch over another device count, the rest do not change results.
  RECORD_DEFAULTS = ("num_timesteps", "cpu_devices", "log_every", "eval_every", "checkpoint_every", "keep_last")
  #: Robot flags (`RunArgs.extra` keys) that do not change results: taken
  #: from the record when not given, free to change on a resume.
  CHANGEABLE_EXTRA: tuple[str, ...] = ()

  def apply_record(self) -> dict[str, Any]:
    """For `--resume`: restores the run's flags and overrides from its `config.json`.

    Returns:
      The record.

    Raises:
      RunError: no run or record to resume, or a given flag that conflicts
        with the record (naming both values).
    """
    a = self.args
    run_dir = self.run_dir_path()
    if not run_dir.is_dir():
      raise RunError(f"--resume: run directory {run_dir} does not exist (check --output_dir and --exp_name)")
    if not run_dirs.list_checkpoints(run_dir):
      raise RunError(f"--resume: {run_dir.resolve()} holds no complete checkpoint to resume from")
    try:
      record = run_dirs.read_record(run_dir)
    except run_dirs.RunDirError as e:
      raise RunError(f"--resume: {e}") from None
    if record["robot"] != self.robot:
      raise RunError(f"--resume: {run_dir} is a run of {record['robot']}, not {self.robot}")
    flags, explicit = record["flags"], self._explicit_flags()
    changes: dict[str, Any] = {}
    for name in self.RECORD_FLAGS + self.RECORD_DEFAULTS:
      if name not in flags:
        continue
      if name in explicit and name in self.RECORD_FLAGS:
        if not _same_value(getattr(a, name), flags[name], record, name):
          raise self._conflict(name, getattr(a, name), flags[name], run_dir, record)
      elif name in explicit:
        continue
      changes[name] = tuple(flags[name]) if name == "overrides" else flags[name]
    extra = dict(a.extra)
    for name, recorded in (flags.get("extra") or {}).items():
      if name not in explicit:
        extra[name] = recorded
      elif name in self.CHANGEABLE_EXTRA:
        continue
      elif extra.get(name) != recorded:
        raise self._conflict(name, extra.get(name), recorded, run_dir, record)
    self.args = dataclasses.replace(a, extra=extra, **changes)
    return record

  def _explicit_flags(self) -> set[str]:
    a = self.args
    if a.explicit is not None:
      return set(a.explicit)
    defaults = RunArgs(env=a.env, task=a.task)
    names = {"env", "task"}
    for field in dataclasses.fields(RunArgs):
      value, default = getattr(a, field.name), getattr(defaults, field.name)
      if field.name not in ("extra", "explicit") and not _same_value(value, default):
        names.add(field.name)
    return names | {k for k, v in a.extra.items() if v not in (None, False)}

  @staticmethod
  def _conflict(name: str, given: Any, recorded: Any, run_dir: Path, record: dict[str, Any]) -> RunError:
    flag = {"overrides": "--set"}.get(name, f"--{name}")
    shown = _show(recorded)
    if recorded is None and name in record.get("ppo_config", {}):
      shown = f"unset ({record['ppo_config'][name]} from the preset)"
    return RunError(
      f"--resume: {flag} {_show(given)} conflicts with {flag} {shown} recorded in "
      f"{run_dir / run_dirs.CONFIG_FILE}; drop {flag} to continue the run as recorded, or start a new run "
      "from its checkpoint with --restore_checkpoint_path"
    )

  def named_files(self, cfg: ResolvedConfig) -> dict[str, Any]:
    """What may name input files of a run (robot flags, env config); their digests go into the record."""
    return {"extra": self.args.extra, "env_config": cfg.env_config.to_dict()}

  def check_record_files(self, record: dict[str, Any], cfg: ResolvedConfig) -> None:
    """Refuses to resume when a file the run read (e.g. `--reference`) has changed since."""
    from playground.common import step_cache  # pylint: disable=import-outside-toplevel

    recorded = record.get("file_digests") or {}
    if not recorded:
      return
    current = step_cache.named_file_digests(self.named_files(cfg))
    for path, digest in recorded.items():
      if path in current and current[path] != digest:
        raise RunError(
          f"--resume: {path} changed since the run started (sha256 {digest[:12]}... then, "
          f"{current[path][:12]}... now); restore the file or start a new run"
        )

  # ---- Callbacks.

  def progress_callback(self, step: int, metrics: dict[str, float]) -> None:
    """Writes `metrics` to TensorBoard and prints the progress line (process 0 only)."""
    from playground.common import distributed  # pylint: disable=import-outside-toplevel

    if self.reporter is None or not distributed.is_primary():
      return
    self.reporter.write(step, metrics)
    if "perf/sps" in metrics:
      self.reporter.console(step, metrics["perf/sps"])

  def checkpoint_callback(self, step: int, training_state, env_state, ctx: dict) -> Path:
    """Saves the complete training state (and policy files) as checkpoint `step`."""
    from playground.common import checkpointing  # pylint: disable=import-outside-toplevel
    from playground.common import distributed  # pylint: disable=import-outside-toplevel

    ppo = ctx["ppo"]
    # Every process joins the gather; only process 0 writes.
    tree = {
      "training_state": distributed.host_local(training_state),
      "env_state": distributed.gather(ctx["venv"].compact(env_state)),
    }
    self._last_checkpoint_step = int(step)
    if not distributed.is_primary():
      return self.run_dir / checkpointing.step_dir_name(step)
    meta = {
      "step": int(step),
      "compat": ctx["compat"],
      "versions": ctx["versions"],
      "created": datetime.datetime.now().isoformat(timespec="seconds"),
      "config_file": "../config.json",
    }
    path = checkpointing.save(
      self.run_dir,
      step,
      tree,
      meta,
      extra=lambda d: self.export_policy(d, step, ppo, training_state, ctx),
    )
    checkpointing.prune(self.run_dir, ctx["keep_last"])
    logger.info("checkpoint %s", path)
    try:
      scalars = self.score_checkpoint(path, int(step), ctx)
    except Exception as e:  # noqa: BLE001 - a scoring failure must not stop training
      logger.warning("scoring checkpoint %s failed: %s", path, str(e).splitlines()[0][:300] if str(e) else repr(e))
      scalars = {}
    if scalars and self.reporter is not None:
      self.reporter.write(step, scalars)
    return path

  def score_checkpoint(self, step_dir: Path, step: int, ctx: dict) -> dict[str, float]:
    """Scores a just-written checkpoint; returns scalars for TensorBoard (none by default).

    Robots override this to measure what return cannot show (e.g. whether the
    policy walks on command). Called on process 0 only, after the checkpoint
    and its policy files are complete; an exception is logged, not raised.
    """
    del step_dir, step, ctx
    return {}

  # ---- Running.

  #: Fingerprint keys that only a full resume (or --restore_mode all) must match.
  RUN_KEYS = ("robot", "env", "task", "num_envs", "gradient_clipping", "seed")

  def config_fingerprint(self, cfg: ResolvedConfig) -> dict[str, Any]:
    """The part of the compatibility fingerprint known before anything is built."""
    p = cfg.ppo_config
    return {
      "robot": self.robot,
      "env": self.args.env,
      "task": self.args.task,
      "policy_hidden_layer_sizes": list(p.policy_hidden_layer_sizes),
      "value_hidden_layer_sizes": list(p.value_hidden_layer_sizes),
      "activation": p.activation,
      "normalize_observations": bool(p.normalize_observations),
      "gradient_clipping": bool(p.max_grad_norm),
      "num_envs": int(p.num_envs),
      # Checkpoints written before the seed was recorded have no such key (compatible).
      "seed": int(self.args.seed),
    }

  def compat_fingerprint(self, cfg: ResolvedConfig, ppo, obs_shapes) -> dict[str, Any]:
    """What a checkpoint must agree on to be restored into this run."""
    return {
      **self.config_fingerprint(cfg),
      "observation_shapes": _jsonable(obs_shapes),
      "action_size": int(ppo.venv.action_size),
    }

  def _check_compat(self, saved: dict[str, Any], current: dict[str, Any], mode: str) -> None:
    """Raises RunError on the first key that differs (keys absent from `saved` pass)."""
    for key, value in current.items():
      if mode != "all" and key in self.RUN_KEYS:
        continue
      if key == "seed" and self.args.allow_seed_change:
        continue
      if key in saved and saved[key] != value:
        hint = (
          "; or use --restore_mode model to take only the weights"
          if key in ("env", "task", "num_envs") and not self.args.resume
          else ""
        )
        if key == "seed" and not self.args.resume:
          hint = f"; or pass --allow_seed_change to continue it with seed {value}"
        raise RunError(
          f"incompatible checkpoint: {key} is {saved[key]} in the checkpoint but {value} "
          f"in this run; use the checkpoint's value{hint}"
        )

  def run(self) -> int:
    """Runs training; returns the process exit status."""
    from playground.common import distributed  # pylint: disable=import-outside-toplevel

    self.check_paths()
    record = self.apply_record() if self.args.resume else None
    cfg = self.resolve_config()
    if record is not None:
      self.check_record_files(record, cfg)
    a = self.args
    try:
      multi = distributed.initialize(a.coordinator_address, a.num_processes, a.process_id)
      p, setting = cfg.ppo_config, config_lib.parse_cpu_devices(a.cpu_devices)
      if setting == "auto" and cfg.env_config.get("impl") == "warp":
        # warp-lang's CPU kernels do not overlap across devices: several CPU
        # devices train MuJoCo Warp about 2x slower than one (measured).
        setting = None
      distributed.configure_cpu_devices(setting, (p.num_envs, p.num_eval_envs), multi)
    except ValueError as e:
      raise ConfigError(str(e)) from None
    run_dir, restore_dir = self.prepare_run_dir()
    # Every process has checked the run directory before process 0 creates it.
    distributed.barrier("run_dir_checked")
    restore_meta = None
    if restore_dir is not None:
      from playground.common import checkpointing  # pylint: disable=import-outside-toplevel

      try:
        restore_meta = checkpointing.read_meta(restore_dir)
      except checkpointing.CheckpointError as e:
        raise RunError(str(e)) from None
      saved = restore_meta.get("compat", {})
      self._check_compat_early(saved, cfg)
    if a.overwrite and distributed.is_primary() and self.run_dir_path().exists():
      # Everything that can be checked without building has been: start over.
      try:
        deleted = run_dirs.delete_run_dir(self.run_dir_path(), Path(a.output_dir))
      except run_dirs.RunDirError as e:
        raise RunError(str(e)) from None
      logger.warning("--overwrite: deleted %s", deleted)
    setup_compilation_cache(self.args.compilation_cache_dir)
    return self._train(cfg, run_dir, restore_dir, restore_meta)

  def _check_compat_early(self, saved: dict[str, Any], cfg: ResolvedConfig) -> None:
    """Checks the config-level fingerprint before anything is compiled."""
    mode = "all" if self.args.resume else self.args.restore_mode
    self._check_compat(saved, self.config_fingerprint(cfg), mode)

  def build(self, cfg: ResolvedConfig) -> Session:
    """Builds the environments, the PPO learner and the evaluator (no compilation)."""
    from playground.common import evaluation  # pylint: disable=import-outside-toplevel
    from playground.common import ppo as ppo_lib  # pylint: disable=import-outside-toplevel
    from playground.common import training_env  # pylint: disable=import-outside-toplevel

    a, p = self.args, cfg.ppo_config
    env = self.make_env(a.env, a.task, cfg.env_config)
    episode_length = int(cfg.env_config.episode_length) if "episode_length" in cfg.env_config else 1000
    venv = training_env.VecEnv(
      env, episode_length, self.make_randomizer(env, cfg.env_config), randomization_seed=a.seed
    )
    try:
      ppo = ppo_lib.PPO(venv, p)
    except ValueError as e:
      raise RunError(str(e)) from None
    eval_env = self.make_eval_env(a.env, a.task, cfg.env_config)
    eval_venv = training_env.VecEnv(
      eval_env,
      episode_length,
      self.make_randomizer(eval_env, cfg.env_config),
      randomization_seed=a.seed + 1_000_003,
    )
    cache = self.make_step_cache(cfg)
    evaluator = evaluation.Evaluator(
      eval_venv, ppo.make_policy, p.num_eval_envs, seed=a.seed + 17, step_cache=cache, mesh=ppo.mesh
    )
    compat = self.compat_fingerprint(cfg, ppo, ppo.obs_shapes)
    return Session(cfg=cfg, env=env, venv=venv, ppo=ppo, evaluator=evaluator, compat=compat, step_cache=cache)

  #: PPO keys read only by the Python loop, never traced (left out of the step cache key).
  LOOP_ONLY_PPO_KEYS = ("num_timesteps", "eval_every", "log_every", "checkpoint_every", "keep_last")

  def make_step_cache(self, cfg: ResolvedConfig):
    """The cache of lowered steps (`step_cache.StepCache`) for this configuration.

    Entries live next to JAX's persistent compilation cache. Disabled with
    `--no_step_cache`, without a compilation cache, and in multi-process runs.
    """
    import jax  # pylint: disable=import-outside-toplevel

    from playground.common import distributed  # pylint: disable=import-outside-toplevel
    from playground.common import step_cache  # pylint: disable=import-outside-toplevel

    cache_dir = jax.config.jax_compilation_cache_dir
    if not self.args.step_cache or not cache_dir or distributed.multi_process():
      return step_cache.StepCache(None)
    ppo_config = cfg.ppo_config.to_dict()
    for key in self.LOOP_ONLY_PPO_KEYS:
      ppo_config.pop(key, None)
    env_config = cfg.env_config.to_dict()
    material = {
      "runner": f"{type(self).__module__}.{type(self).__qualname__}",
      "env": self.args.env,
      "task": self.args.task,
      "seed": self.args.seed,
      "env_config": env_config,
      "ppo_config": ppo_config,
      # Files named in the config (e.g. a reference motion) are baked into the trace.
      "files": step_cache.named_file_digests(env_config),
    }
    return step_cache.StepCache(Path(cache_dir) / "steps", material)

  def initial_state(self, session: Session, restore_dir: Path | None, mode: str):
    """(TrainingState, EnvState, start step): fresh from the seed, or restored."""
    ts = session.ppo.init_training_state(self.args.seed)
    env_state = session.ppo.init_env_state()
    if restore_dir is None:
      return ts, env_state, 0
    return self._restore(session.ppo, session.venv, ts, env_state, restore_dir, mode)

  def _train(self, cfg: ResolvedConfig, run_dir: Path, restore_dir, restore_meta) -> int:
    # Heavy imports only once the command line is known to be valid.
    import jax  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    from playground.common import checkpointing  # pylint: disable=import-outside-toplevel
    from playground.common import distributed  # pylint: disable=import-outside-toplevel
    from playground.common import progress  # pylint: disable=import-outside-toplevel

    a, p = self.args, cfg.ppo_config
    primary = distributed.is_primary()
    session = self.build(cfg)
    env, venv, ppo, compat = session.env, session.venv, session.ppo, session.compat
    if restore_meta is not None:
      self._check_compat(restore_meta.get("compat", {}), compat, "all" if a.resume else a.restore_mode)

    ts, env_state, start_step = self.initial_state(session, restore_dir, "all" if a.resume else a.restore_mode)

    # Create (or reuse) the run directory only now that everything is valid.
    # Only process 0 writes files.
    self.run_dir = run_dir
    versions = package_versions()
    if primary:
      try:
        run_dir.mkdir(parents=True, exist_ok=True)
      except OSError as e:
        raise RunError(f"cannot create the run directory {run_dir}: {e.strerror}") from None
      run_dirs.write_marker(run_dir, self.robot)
      checkpointing.cleanup_incomplete(run_dir)
      write_config(run_dir, self, cfg, versions, restore_dir, env)
    keep_last = a.keep_last if a.keep_last is not None else int(p.get("keep_last", 5))
    checkpoint_every = a.checkpoint_every or int(p.get("checkpoint_every", p.num_timesteps))
    total = int(p.num_timesteps)
    self._last_checkpoint_step = start_step if a.resume else None
    self.reporter = progress.ProgressReporter(
      run_dir if primary else None,
      total,
      start_step,
      steps_per_iteration=ppo.env_steps_per_iteration,
      eval_every=int(p.eval_every),
      checkpoint_every=checkpoint_every,
    )
    ctx = dict(
      ppo=ppo,
      venv=venv,
      compat=compat,
      versions=versions,
      keep_last=keep_last,
      env_config=cfg.env_config,
      env=env,
      env_name=a.env,
      task=a.task,
    )
    logger.info(
      "run %s: %s/%s (MJX %s) on %d %s device(s) in %d process(es), %d envs, %s steps (%d per iteration), start at %s",
      run_dir,
      a.env,
      a.task,
      getattr(env, "impl", "jax"),
      len(ppo.devices),
      jax.devices()[0].platform,
      jax.process_count(),
      p.num_envs,
      f"{total:,}",
      ppo.env_steps_per_iteration,
      f"{start_step:,}",
    )
    if start_step >= total:
      logger.info("nothing to do: the checkpoint is at step %s >= --num_timesteps %s", f"{start_step:,}", f"{total:,}")
      self.reporter.close()
      return 0

    result: dict[str, Any] = {}

    def worker():
      try:
        result["status"] = self._loop(session, ts, env_state, start_step, total, checkpoint_every, ctx, np)
      except BaseException as e:  # pylint: disable=broad-except
        result["error"] = e

    thread = threading.Thread(target=worker, name="training", daemon=True)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
      signal.signal(s, self._on_signal)
    try:
      thread.start()
      while thread.is_alive():
        thread.join(0.2)
        if self._stop_requested_at is not None and time.monotonic() - self._stop_requested_at > STOP_TIMEOUT_S:
          logger.error(
            "could not finish the current step and save within %.0f s; exiting without a new "
            "checkpoint (the last complete one is kept)",
            STOP_TIMEOUT_S,
          )
          self.reporter.close()
          os._exit(1)  # pylint: disable=protected-access
    finally:
      for s, handler in previous.items():
        signal.signal(s, handler)
    self.reporter.close()
    if "error" in result:
      raise result["error"]
    if result.get("status") == "interrupted":
      logger.info(
        "interrupted: saved checkpoint at step %s. Resume with: %s",
        f"{self._last_checkpoint_step:,}",
        resume_command(self.run_dir_path()),
      )
    return 0

  def _on_signal(self, signum, frame) -> None:
    del frame
    if self._stop.is_set():
      logger.warning("second signal: exiting immediately without saving")
      os._exit(130)  # pylint: disable=protected-access
    logger.warning(
      "%s received: finishing the current step and saving a checkpoint (press Ctrl-C again to exit without saving)",
      signal.Signals(signum).name,
    )
    self._stop_requested_at = time.monotonic()
    self._stop.set()

  def _restore(self, ppo, venv, ts, env_state, restore_dir, mode):
    import jax  # pylint: disable=import-outside-toplevel

    from playground.common import checkpointing  # pylint: disable=import-outside-toplevel
    from playground.common import distributed  # pylint: disable=import-outside-toplevel

    # Every process reads the whole checkpoint onto its first device, then
    # keeps the replicated training state and its own share of the envs.
    del env_state
    local_ts = distributed.host_local(ts)
    placeholder = ppo.env_state_template()
    template = {"training_state": local_ts, "env_state": venv.compact(placeholder)}
    try:
      tree = checkpointing.restore(restore_dir, checkpointing.abstract(template))
    except checkpointing.CheckpointError as e:
      raise RunError(str(e)) from None
    saved_ts = tree["training_state"]
    if mode == "all":
      full = venv.expand(tree["env_state"], placeholder)
      me, count = jax.process_index(), jax.process_count()
      local = jax.tree_util.tree_map(lambda x: x[x.shape[0] * me // count : x.shape[0] * (me + 1) // count], full)
      step = int(saved_ts.env_steps)
      logger.info("resumed everything from %s at step %s", restore_dir, f"{step:,}")
      return (
        distributed.to_global(saved_ts, ppo.replicated),
        distributed.to_global(local, ppo.sharded),
        step,
      )
    params = local_ts.params.replace(policy=saved_ts.params.policy)
    if mode == "model":
      params = params.replace(value=saved_ts.params.value)
    ts = local_ts.replace(
      params=params,
      normalizer_params=saved_ts.normalizer_params,
      optimizer_state=ppo.optimizer.init(params),
    )
    logger.info(
      "restored %s weights and normalizer from %s; step counter starts at 0",
      "policy+value" if mode == "model" else "policy",
      restore_dir,
    )
    return distributed.to_global(ts, ppo.replicated), ppo.init_env_state(), 0

  def _loop(self, session, ts, env_state, start_step, total, checkpoint_every, ctx, np):
    from playground.common import distributed  # pylint: disable=import-outside-toplevel

    ppo, evaluator, cache = session.ppo, session.evaluator, session.step_cache

    p = ppo.config
    spi = ppo.env_steps_per_iteration
    step = start_step
    t0 = time.monotonic()
    compiled = cache.compile("train_step", ppo.train_step, ts, env_state, donate=True)
    compile_time = time.monotonic() - t0
    how = {"hit": "loaded from the step cache and compiled"}.get(cache.last_outcome, "compiled")
    logger.info("training step %s in %.1f s", how, compile_time)
    self.progress_callback(step, {"perf/compile_time_s": compile_time})
    next_log = _next_multiple(step, p.log_every)
    next_eval = _next_multiple(step, p.eval_every)
    next_ckpt = _next_multiple(step, checkpoint_every)
    if step == 0:
      self._evaluate(evaluator, ppo, ts, step)
    sps_timer = (time.monotonic(), step)
    pending: list[dict] = []
    while step < total:
      # All processes stop at the same iteration (a collective when multi-process).
      if distributed.any_process(self._stop.is_set()):
        self._save(step, ts, env_state, ctx)
        return "interrupted"
      t_iteration = time.monotonic()
      ts, env_state, metrics = compiled(ts, env_state)
      step += spi
      finite = bool(distributed.host_local(metrics["train/finite"]))
      # Fetching `finite` waits for the step: this is the training time alone.
      self.reporter.record_iteration(spi, time.monotonic() - t_iteration)
      if not finite:
        raise NonFiniteError(
          f"training diverged at step {step:,}: the loss or the parameters are NaN/inf; "
          f"the last good checkpoint is kept (step {self._last_checkpoint_step})"
        )
      pending.append(metrics)
      if step >= next_log or step >= total:
        fetched = distributed.host_local(pending)
        pending = []
        merged = _merge_metrics(fetched, np)
        now = time.monotonic()
        merged["perf/sps"] = (step - sps_timer[1]) / max(now - sps_timer[0], 1e-9)
        sps_timer = (now, step)
        self.progress_callback(step, merged)
        next_log = _next_multiple(step, p.log_every)
      if step >= next_eval or step >= total:
        self._evaluate(evaluator, ppo, ts, step)
        next_eval = _next_multiple(step, p.eval_every)
        sps_timer = (time.monotonic(), step)
      if step >= next_ckpt and step < total:
        self._save(step, ts, env_state, ctx)
        next_ckpt = _next_multiple(step, checkpoint_every)
        sps_timer = (time.monotonic(), step)
    self._save(step, ts, env_state, ctx)
    return "done"

  def _evaluate(self, evaluator, ppo, ts, step: int) -> None:
    # Every process simulates its share of the episodes; process 0 logs them.
    t0 = time.monotonic()
    metrics = evaluator.run(ppo.inference_params(ts))
    metrics["perf/eval_time_s"] = time.monotonic() - t0
    self.reporter.record_evaluation(metrics["perf/eval_time_s"])
    self.progress_callback(step, metrics)

  def _save(self, step, ts, env_state, ctx) -> None:
    if self._last_checkpoint_step == step:
      return
    t0 = time.monotonic()
    self.checkpoint_callback(step, ts, env_state, ctx)
    self.reporter.record_checkpoint(time.monotonic() - t0)

  # ---- Command line.

  @classmethod
  def parser(cls) -> argparse.ArgumentParser:
    parser = _OneLineParser(
      prog=f"{cls.robot} runner",
      description=f"Train a PPO policy for {cls.robot} in MuJoCo MJX.",
    )
    parser.add_argument("--env", default=cls.default_env, help="environment name")
    parser.add_argument("--task", default=cls.default_task, help="task / scene variant")
    parser.add_argument("--preset", default="full", help="full (GPU), quick (CPU, ~10 min) or smoke (CPU, <3 min)")
    parser.add_argument("--num_timesteps", type=int, help="total env steps (overrides the preset)")
    parser.add_argument("--num_envs", type=int, help="parallel environments (overrides the preset)")
    parser.add_argument("--output_dir", default="checkpoints", help="parent of run directories")
    parser.add_argument("--exp_name", help="run directory name (default: robot_env_task_timestamp)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
      "--set",
      dest="overrides",
      action="append",
      default=[],
      metavar="KEY=VALUE",
      help="config override, e.g. reward_config.scales.alive=10 or ppo.learning_rate=1e-4",
    )
    parser.add_argument(
      "--resume",
      action="store_true",
      help="continue the latest checkpoint of --exp_name with the flags recorded in its config.json",
    )
    parser.add_argument(
      "--overwrite",
      action="store_true",
      help="delete an existing run directory of this project (inside --output_dir) first",
    )
    parser.add_argument("--restore_checkpoint_path", help="checkpoint step directory or run directory to start from")
    parser.add_argument("--restore_mode", default="all", help="all | model | except-critic")
    parser.add_argument(
      "--allow_seed_change",
      action="store_true",
      help="--restore_mode all from a checkpoint of a run with another --seed",
    )
    parser.add_argument(
      "--list",
      action="store_true",
      help="list the runs under --output_dir (steps, last checkpoint, last evaluation) and exit",
    )
    parser.add_argument("--checkpoint_every", type=int, help="env steps between checkpoints")
    parser.add_argument("--keep_last", type=int, help="checkpoints to keep (0 keeps all)")
    parser.add_argument("--eval_every", type=int, help="env steps between evaluations")
    parser.add_argument("--log_every", type=int, help="env steps between progress lines")
    parser.add_argument("--compilation_cache_dir", help=f"JAX persistent cache (default {DEFAULT_CACHE_DIR})")
    parser.add_argument(
      "--no_step_cache",
      dest="step_cache",
      action="store_false",
      help="trace the steps on every start instead of reusing their lowered form from the cache",
    )
    parser.add_argument(
      "--cpu_devices",
      default="auto",
      help="JAX devices on a CPU-only machine: auto (one per core, dividing num_envs) or a count; "
      "no effect when JAX runs on a GPU",
    )
    parser.add_argument("--coordinator_address", help="multi-host: host:port of process 0 ($JAX_COORDINATOR_ADDRESS)")
    parser.add_argument("--num_processes", type=int, help="multi-host: number of processes ($JAX_NUM_PROCESSES)")
    parser.add_argument("--process_id", type=int, help="multi-host: this process's id ($JAX_PROCESS_ID)")
    cls.add_arguments(parser)
    return parser

  @classmethod
  def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
    """Robot-specific flags; their values arrive in `RunArgs.extra`."""
    del parser

  @classmethod
  def main(cls, argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    # XLA's C++ logs (e.g. spurious CPU-feature notes when the persistent
    # cache is read) would drown the progress lines; Python errors still show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    setup_logging()
    try:
      ns = cls.parser().parse_args(argv)
      explicit = _explicit_dests(cls.parser(), argv)
    except _UsageError as e:
      _fail(str(e))
      return 2
    values = vars(ns)
    if values.pop("list"):
      return list_command(values["output_dir"])
    names = {f.name for f in dataclasses.fields(RunArgs)}
    args = RunArgs(**{k: v for k, v in values.items() if k in names})
    args.extra = {k: v for k, v in values.items() if k not in names}
    args.explicit = frozenset(explicit)
    runner = cls(args)
    try:
      return runner.run()
    except (ConfigError, RunError) as e:
      _fail(str(e))
      return 2
    except NonFiniteError as e:
      _fail(str(e))
      return 3


class _UsageError(Exception):
  pass


class _OneLineParser(argparse.ArgumentParser):
  """argparse that reports errors as one line naming the valid flags."""

  def error(self, message):
    if "unrecognized arguments" in message:
      flags = sorted(opt for action in self._actions for opt in action.option_strings if opt.startswith("--"))
      bad = message.split(":", 1)[1].strip().split()[0]
      message = f"unrecognized flag {bad}{config_lib.suggest(bad, flags)}; valid flags: {', '.join(flags)}"
    raise _UsageError(message)


def _explicit_dests(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> set[str]:
  """The destinations of the flags `argv` actually gives (parsed again with no defaults)."""
  for action in parser._actions:  # pylint: disable=protected-access
    action.default = argparse.SUPPRESS
  return set(vars(parser.parse_args(argv)))


def list_command(output_dir: str) -> int:
  """`--list`: prints one line per run under `output_dir` to stdout; returns the exit status."""
  try:
    runs = run_dirs.list_runs(Path(output_dir))
  except run_dirs.RunDirError as e:
    _fail(str(e))
    return 2
  if not runs:
    sys.stdout.write(f"no runs under {output_dir}\n")
    return 0
  sys.stdout.write("".join(line + "\n" for line in run_dirs.format_runs(runs)))
  return 0


def _same_value(given: Any, recorded: Any, record: dict[str, Any] | None = None, name: str = "") -> bool:
  """Whether a flag value equals the recorded one (None in the record: the preset's value)."""
  if isinstance(given, (list, tuple)) and isinstance(recorded, (list, tuple)):
    return list(given) == list(recorded)
  if given == recorded:
    return True
  if recorded is None and record is not None:
    return given is not None and record.get("ppo_config", {}).get(name) == given
  return False


def _show(value: Any) -> str:
  if isinstance(value, (list, tuple)):
    return "[" + " ".join(map(str, value)) + "]" if value else "(none)"
  return str(value)


def _fail(message: str) -> None:
  """Prints a user error as one line on stderr (no traceback)."""
  sys.stderr.write(f"error: {message}\n")
  sys.stderr.flush()


def _next_multiple(step: int, every: int) -> int:
  return (step // every + 1) * every


def _merge_metrics(batch: list[dict], np) -> dict[str, float]:
  """Averages per-iteration metrics; episode stats weighted by episode count."""
  out: dict[str, float] = {}
  counts = np.array([float(m.get("episode/count", 0.0)) for m in batch])
  for key in batch[0]:
    values = np.array([float(m[key]) for m in batch])
    if key == "episode/count":
      out[key] = float(values.sum())
    elif key.startswith("episode/"):
      out[key] = float((values * counts).sum() / counts.sum()) if counts.sum() > 0 else float("nan")
    elif key != "train/finite":
      out[key] = float(values.mean())
  return out


def _jsonable(value: Any) -> Any:
  if isinstance(value, dict):
    return {k: _jsonable(v) for k, v in value.items()}
  if isinstance(value, (tuple, list)):
    return [_jsonable(v) for v in value]
  if isinstance(value, (set, frozenset)):
    return sorted(value)
  return value


def setup_logging() -> None:
  if not logging.getLogger().handlers:
    logging.basicConfig(
      level=logging.INFO,
      format="%(asctime)s %(levelname)s %(message)s",
      datefmt="%H:%M:%S",
      stream=sys.stderr,
    )
  for noisy in ("absl", "jax._src", "orbax", "etils"):
    logging.getLogger(noisy).setLevel(logging.WARNING)


def setup_compilation_cache(cache_dir: str | None) -> Path:
  """Enables JAX's persistent compilation cache in `cache_dir` (or the default)."""
  import jax  # pylint: disable=import-outside-toplevel

  path = Path(cache_dir or os.environ.get("PLAYGROUND_JAX_CACHE", DEFAULT_CACHE_DIR)).expanduser()
  path.mkdir(parents=True, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", str(path))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


def package_versions() -> dict[str, str]:
  out = {}
  for name in _PACKAGES:
    try:
      out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      out[name] = "not installed"
  return out


def git_commit() -> str | None:
  try:
    out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    return out.stdout.strip() or None if out.returncode == 0 else None
  except (OSError, subprocess.SubprocessError):
    return None


def write_config(run_dir: Path, runner: BaseRunner, cfg: ResolvedConfig, versions, restore_dir, env=None) -> None:
  """Writes the run's effective configuration to `config.json` (the record `--resume` reads)."""
  import jax  # pylint: disable=import-outside-toplevel

  from playground.common import step_cache  # pylint: disable=import-outside-toplevel

  payload = {
    "robot": runner.robot,
    "env": runner.args.env,
    "task": runner.args.task,
    "preset": runner.args.preset,
    "env_config": cfg.env_config.to_dict(),
    "ppo_config": cfg.ppo_config.to_dict(),
    "flags": dataclasses.asdict(runner.args),
    "versions": versions,
    "physics_impl": getattr(env, "impl", None),
    "platform": jax.default_backend(),
    "device_count": jax.device_count(),
    "git_commit": git_commit(),
    "restored_from": str(restore_dir) if restore_dir else None,
    # Input files (e.g. --reference) by sha256: --resume refuses changed files.
    "file_digests": step_cache.named_file_digests(runner.named_files(cfg)),
    "written": datetime.datetime.now().isoformat(timespec="seconds"),
  }
  (run_dir / "config.json").write_text(json.dumps(_jsonable(payload), indent=2, default=str))


def resume_command(run_dir: Path) -> str:
  """The command that continues the run in `run_dir` (`<output_dir>/<exp_name>`) from its record."""
  script = " ".join(sys.argv[:1]) if sys.argv and sys.argv[0].endswith(".py") else "runner.py"
  return " ".join(
    [
      f"uv run {shlex.quote(script)}",
      f"--output_dir {shlex.quote(str(run_dir.parent))}",
      f"--exp_name {shlex.quote(run_dir.name)}",
      "--resume",
    ]
  )
