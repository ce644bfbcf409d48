"""The run's record: where a run lives, what it was started with, and what may resume it.

A run directory holds `config.json`, the effective configuration and every
flag of the run. `--resume` reads the flags back from it (`apply_record`);
checkpoints carry a compatibility fingerprint (`config_fingerprint`,
`compat_fingerprint`) that a restore must match (`check_compat`).

Import-light on purpose (no JAX): the command line is checked with it before
anything heavy is loaded.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ml_collections import config_dict

from playground.common import config as config_lib
from playground.common import ppo_config as ppo_defaults
from playground.common import run_dirs

if TYPE_CHECKING:
  from playground.common.runner import BaseRunner
  from playground.common.runner import ResolvedConfig
  from playground.common.runner import RunArgs

logger = logging.getLogger(__name__)

#: Flags `--resume` takes from the run's record (`config.json`) when they are
#: not given; a given value that differs from the record is refused. Every
#: robot flag (`RunArgs.extra`) is treated the same way.
RECORD_FLAGS = ("env", "task", "preset", "seed", "num_envs", "overrides")
#: Flags `--resume` takes from the record when not given, but that may be
#: changed: `--num_timesteps` extends a run, `--cpu_devices` re-splits the
#: checkpointed env batch over another device count, the rest do not change results.
RECORD_DEFAULTS = ("num_timesteps", "cpu_devices", "log_every", "eval_every", "checkpoint_every", "keep_last")
#: Fingerprint keys that only a full resume (or --restore_mode all) must match.
RUN_KEYS = ("robot", "env", "task", "num_envs", "gradient_clipping", "seed")

PACKAGES = (
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
  """The loss or the parameters became NaN/inf (exit status 3)."""


# ---- Where the run lives.


def check_paths(args: RunArgs) -> None:
  """Refuses an --exp_name that is not one path component and an --output_dir that cannot hold runs.

  Raises:
    RunError: with a one-line message; nothing is created.
  """
  try:
    if args.exp_name is not None:
      run_dirs.check_exp_name(args.exp_name)
    run_dirs.check_writable_dir(Path(args.output_dir))
  except run_dirs.RunDirError as e:
    raise RunError(str(e)) from None


def prepare_run_dir(args: RunArgs, named: Path) -> tuple[Path, Path | None]:
  """Decides the run directory and the checkpoint to resume, touching nothing.

  Args:
    args: the run's flags.
    named: `<output_dir>/<exp_name>` as named (`BaseRunner.run_dir_path`).

  Returns:
    (run_dir, checkpoint to restore or None); run_dir is resolved.

  Raises:
    RunError: existing directory without --resume/--overwrite, --overwrite
      of a directory that is not a run of this project inside --output_dir,
      or --resume without a checkpoint.
  """
  if named.is_symlink() and not named.exists():
    raise RunError(f"run directory {named} is a broken symbolic link; remove it or choose another --exp_name")
  if named.exists() and not named.is_dir():
    raise RunError(f"{named} exists and is not a directory; choose another --exp_name")
  run_dir = named.resolve()
  restore = None
  if args.resume:
    if not run_dir.is_dir():
      raise RunError(f"--resume: run directory {run_dir} does not exist (check --output_dir and --exp_name)")
    restore = run_dirs.latest_checkpoint(run_dir)
    if restore is None:
      raise RunError(f"--resume: {run_dir} holds no complete checkpoint to resume from")
  elif named.exists():
    if not args.overwrite:
      raise RunError(
        f"FileExistsError: run directory {run_dir} already exists; pass --resume to continue it "
        "or --overwrite to delete it and start over"
      )
    try:
      run_dirs.deletable_run_dir(named, Path(args.output_dir))
    except run_dirs.RunDirError as e:
      raise RunError(str(e)) from None
  if args.restore_checkpoint_path:
    try:
      restore = run_dirs.resolve(args.restore_checkpoint_path)
    except run_dirs.CheckpointError as e:
      raise RunError(str(e)) from None
    if args.overwrite and run_dir.exists() and Path(restore).resolve().is_relative_to(run_dir):
      raise RunError(
        f"--overwrite would delete {run_dir}, which holds the checkpoint to restore; choose another --exp_name"
      )
  return run_dir, restore


def read_restore_meta(restore_dir: Path) -> dict[str, Any]:
  """The `meta.json` of the checkpoint to restore; RunError if unreadable."""
  try:
    return run_dirs.read_meta(restore_dir)
  except run_dirs.CheckpointError as e:
    raise RunError(str(e)) from None


def delete_for_overwrite(args: RunArgs, named: Path) -> Path:
  """`--overwrite`: deletes the run directory once everything else was checked; returns what was deleted."""
  try:
    return run_dirs.delete_run_dir(named, Path(args.output_dir))
  except run_dirs.RunDirError as e:
    raise RunError(str(e)) from None


# ---- Resuming from the record.


def apply_record(runner: BaseRunner) -> dict[str, Any]:
  """For `--resume`: restores the run's flags and overrides from its `config.json` into `runner.args`.

  Returns:
    The record.

  Raises:
    RunError: no run or record to resume, or a given flag that conflicts
      with the record (naming both values).
  """
  a = runner.args
  run_dir = runner.run_dir_path()
  if not run_dir.is_dir():
    raise RunError(f"--resume: run directory {run_dir} does not exist (check --output_dir and --exp_name)")
  if not run_dirs.list_checkpoints(run_dir):
    raise RunError(f"--resume: {run_dir.resolve()} holds no complete checkpoint to resume from")
  try:
    record = run_dirs.read_record(run_dir)
  except run_dirs.RunDirError as e:
    raise RunError(f"--resume: {e}") from None
  if record["robot"] != runner.robot:
    raise RunError(f"--resume: {run_dir} is a run of {record['robot']}, not {runner.robot}")
  flags, explicit = record["flags"], explicit_flags(a)
  changes: dict[str, Any] = {}
  for name in RECORD_FLAGS + RECORD_DEFAULTS:
    if name not in flags:
      continue
    if name in explicit and name in RECORD_FLAGS:
      if not same_value(getattr(a, name), flags[name], record, name):
        raise _conflict(name, getattr(a, name), flags[name], run_dir, record)
    elif name in explicit:
      continue
    changes[name] = tuple(flags[name]) if name == "overrides" else flags[name]
  extra = dict(a.extra)
  for name, recorded in (flags.get("extra") or {}).items():
    if name not in explicit:
      extra[name] = recorded
    elif name in runner.CHANGEABLE_EXTRA:
      continue
    elif extra.get(name) != recorded:
      raise _conflict(name, extra.get(name), recorded, run_dir, record)
  runner.args = dataclasses.replace(a, extra=extra, **changes)
  runner.resume_record = record
  return record


def recorded_configs(
  runner: BaseRunner,
  record: dict[str, Any],
  env_config: config_dict.ConfigDict,
  ppo_config: config_dict.ConfigDict,
) -> tuple[config_dict.ConfigDict, config_dict.ConfigDict]:
  """For `--resume`: the run's configuration as recorded, not as this version's presets resolve it.

  A preset or default that changed since the run started (e.g. a preset that
  turns on a feature) must not change what a resumed network's actions and
  rewards mean. So every env key the record holds takes the recorded value;
  an env key the record lacks (added since) takes the env's *default* value,
  not the preset's, since new features default to the behaviour before them.
  PPO keys take the recorded values, except those set by the flags a resume
  may change (`--num_timesteps`, `--eval_every`, ...); a PPO key the record
  lacks takes the PPO default (e.g. a constant learning rate for a run
  recorded before the schedule existed). Differences are logged.
  A record without an env config (or without a PPO config) leaves that part as resolved.

  Args:
    runner: the runner (its `args` already restored by `apply_record`).
    record: the run's `config.json`.
    env_config, ppo_config: the configuration as resolved from the preset and flags.

  Returns:
    (env_config, ppo_config) as the run recorded them.
  """
  changed: list[str] = []

  def merge(resolved, recorded, fallback, keep=()):
    if not recorded:
      return resolved
    now, then = config_lib.flatten(resolved), config_lib.flatten(recorded)
    base = config_lib.flatten(fallback) if fallback is not None else now
    merged = config_dict.ConfigDict(resolved.to_dict())
    for key, value in now.items():
      if key in keep:
        continue
      target = then[key] if key in then else base.get(key, value)
      if isinstance(value, tuple) and isinstance(target, list):
        target = tuple(target)
      if target != value:
        config_lib.set_leaf(merged, key, target)
        changed.append(f"{key}={target!r} (the preset now gives {value!r})")
    merged.lock()
    return merged

  env_config = merge(
    env_config, record.get("env_config"), runner.default_env_config(runner.args.env), set(runner.FLAG_ENV_KEYS)
  )
  keep = {name for name in RECORD_DEFAULTS if getattr(runner.args, name, None) is not None} | {"num_envs"}
  ppo_config = merge(ppo_config, record.get("ppo_config"), ppo_defaults.default_config(), keep)
  if changed:
    logger.warning("--resume keeps the run's recorded configuration: %s", ", ".join(changed))
  return env_config, ppo_config


def explicit_flags(args: RunArgs) -> set[str]:
  """Names of the flags (and `extra` keys) the user gave; see `RunArgs.explicit`."""
  if args.explicit is not None:
    return set(args.explicit)
  defaults = type(args)(env=args.env, task=args.task)
  names = {"env", "task"}
  for field in dataclasses.fields(args):
    value, default = getattr(args, field.name), getattr(defaults, field.name)
    if field.name not in ("extra", "explicit") and not same_value(value, default):
      names.add(field.name)
  return names | {k for k, v in args.extra.items() if v not in (None, False)}


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


def check_record_files(runner: BaseRunner, record: dict[str, Any], cfg: ResolvedConfig) -> None:
  """Refuses to resume when a file the run read (e.g. `--reference`) has changed since."""
  recorded = record.get("file_digests") or {}
  if not recorded:
    return
  current = config_lib.named_file_digests(runner.named_files(cfg))
  for path, digest in recorded.items():
    if path in current and current[path] != digest:
      raise RunError(
        f"--resume: {path} changed since the run started (sha256 {digest[:12]}... then, "
        f"{current[path][:12]}... now); restore the file, or start a new run "
        "(--restore_checkpoint_path starts it from this run's weights)"
      )


def same_value(given: Any, recorded: Any, record: dict[str, Any] | None = None, name: str = "") -> bool:
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


# ---- Compatibility of checkpoints.


def config_fingerprint(runner: BaseRunner, cfg: ResolvedConfig) -> dict[str, Any]:
  """The part of the compatibility fingerprint known before anything is built."""
  p = cfg.ppo_config
  return {
    "robot": runner.robot,
    "env": runner.args.env,
    "task": runner.args.task,
    "policy_hidden_layer_sizes": list(p.policy_hidden_layer_sizes),
    "value_hidden_layer_sizes": list(p.value_hidden_layer_sizes),
    "activation": p.activation,
    "normalize_observations": bool(p.normalize_observations),
    "gradient_clipping": bool(p.max_grad_norm),
    "num_envs": int(p.num_envs),
    # Checkpoints written before the seed was recorded have no such key (compatible).
    "seed": int(runner.args.seed),
  }


def compat_fingerprint(runner: BaseRunner, cfg: ResolvedConfig, obs_shapes: Any, action_size: int) -> dict[str, Any]:
  """What a checkpoint must agree on to be restored into this run."""
  return {
    **config_fingerprint(runner, cfg),
    "observation_shapes": jsonable(obs_shapes),
    "action_size": int(action_size),
  }


def restore_mode(args: RunArgs) -> str:
  """What a restore takes: everything for `--resume`, else `--restore_mode`."""
  return "all" if args.resume else args.restore_mode


def check_compat(saved: dict[str, Any], current: dict[str, Any], args: RunArgs) -> None:
  """Raises RunError on the first fingerprint key that differs (keys absent from `saved` pass).

  Args:
    saved: the checkpoint's fingerprint (`meta.json` "compat").
    current: this run's fingerprint.
    args: the run's flags (`--resume`, `--restore_mode`, `--allow_seed_change`).
  """
  mode = restore_mode(args)
  for key, value in current.items():
    if mode != "all" and key in RUN_KEYS:
      continue
    if key == "seed" and args.allow_seed_change:
      continue
    if key in saved and saved[key] != value:
      hint = (
        "; or use --restore_mode model to take only the weights"
        if key in ("env", "task", "num_envs") and not args.resume
        else ""
      )
      if key == "seed" and not args.resume:
        hint = f"; or pass --allow_seed_change to continue it with seed {value}"
      raise RunError(
        f"incompatible checkpoint: {key} is {saved[key]} in the checkpoint but {value} "
        f"in this run; use the checkpoint's value{hint}"
      )


# ---- Writing the record.


def package_versions() -> dict[str, str]:
  """Installed versions of the packages a run's results depend on."""
  out = {}
  for name in PACKAGES:
    try:
      out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      out[name] = "not installed"
  return out


def git_commit() -> str | None:
  """The repository's commit, or None outside a git checkout."""
  try:
    command = ["git", "-C", str(run_dirs.REPO_ROOT), "rev-parse", "HEAD"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=5)
    return out.stdout.strip() or None if out.returncode == 0 else None
  except (OSError, subprocess.SubprocessError):
    return None


def write_config(
  run_dir: Path,
  runner: BaseRunner,
  cfg: ResolvedConfig,
  versions: dict[str, str],
  restore_dir: Path | None,
  *,
  physics_impl: str | None,
  platform: str,
  device_count: int,
) -> None:
  """Writes the run's effective configuration to `config.json` (the record `--resume` reads)."""
  payload = {
    "robot": runner.robot,
    "env": runner.args.env,
    "task": runner.args.task,
    "preset": runner.args.preset,
    "env_config": cfg.env_config.to_dict(),
    "ppo_config": cfg.ppo_config.to_dict(),
    "flags": dataclasses.asdict(runner.args),
    "versions": versions,
    "physics_impl": physics_impl,
    "platform": platform,
    "device_count": device_count,
    "git_commit": git_commit(),
    "restored_from": str(restore_dir) if restore_dir else None,
    # Input files (e.g. --reference) by sha256: --resume refuses changed files.
    "file_digests": config_lib.named_file_digests(runner.named_files(cfg)),
    "written": datetime.datetime.now().isoformat(timespec="seconds"),
  }
  (run_dir / run_dirs.CONFIG_FILE).write_text(json.dumps(jsonable(payload), indent=2, default=str))


def jsonable(value: Any) -> Any:
  """`value` with tuples as lists and sets as sorted lists (for JSON)."""
  if isinstance(value, dict):
    return {k: jsonable(v) for k, v in value.items()}
  if isinstance(value, (tuple, list)):
    return [jsonable(v) for v in value]
  if isinstance(value, (set, frozenset)):
    return sorted(value)
  return value
