"""Resuming a run from its record: `--resume` reads the flags and configuration back from `config.json`.

`apply_record` restores the run's flags into the runner's `args` (refusing
given flags that conflict), `recorded_configs` keeps the configuration the
run recorded, `check_record_files` refuses input files changed since.
No JAX.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ml_collections import config_dict

from playground.common import configs
from playground.common import hyperparameters
from playground.common.errors import RunError
from playground.common.runs import directories

if TYPE_CHECKING:
  from playground.common.robot_spec import RobotSpec
  from playground.common.runs.arguments import ResolvedConfig
  from playground.common.runs.arguments import RunArgs

logger = logging.getLogger(__name__)

#: Flags `--resume` takes from the run's record (`config.json`) when they are
#: not given; a given value that differs from the record is refused. Every
#: robot flag (`RunArgs.extra`) is treated the same way.
RECORD_FLAGS = ("env", "task", "preset", "seed", "num_envs", "overrides")
#: Flags `--resume` takes from the record when not given, but that may be
#: changed: `--num_timesteps` extends a run, `--cpu_devices` re-splits the
#: checkpointed env batch over another device count, the rest do not change results.
RECORD_DEFAULTS = ("num_timesteps", "cpu_devices", "log_every", "eval_every", "checkpoint_every", "keep_last")


def apply_record(runner: RobotSpec) -> dict[str, Any]:
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
  if not directories.list_checkpoints(run_dir):
    raise RunError(f"--resume: {run_dir.resolve()} holds no complete checkpoint to resume from")
  try:
    record = directories.read_record(run_dir)
  except directories.RunDirError as e:
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
  runner: RobotSpec,
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
    now, then = configs.flatten(resolved), configs.flatten(recorded)
    base = configs.flatten(fallback) if fallback is not None else now
    merged = config_dict.ConfigDict(resolved.to_dict())
    for key, value in now.items():
      if key in keep:
        continue
      target = then[key] if key in then else base.get(key, value)
      if isinstance(value, tuple) and isinstance(target, list):
        target = tuple(target)
      if target != value:
        configs.set_leaf(merged, key, target)
        changed.append(f"{key}={target!r} (the preset now gives {value!r})")
    merged.lock()
    return merged

  env_config = merge(
    env_config, record.get("env_config"), runner.default_env_config(runner.args.env), set(runner.FLAG_ENV_KEYS)
  )
  keep = {name for name in RECORD_DEFAULTS if getattr(runner.args, name, None) is not None} | {"num_envs"}
  ppo_config = merge(ppo_config, record.get("ppo_config"), hyperparameters.default_config(), keep)
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
    f"{run_dir / directories.CONFIG_FILE}; drop {flag} to continue the run as recorded, or start a new run "
    "from its checkpoint with --restore_checkpoint_path"
  )


def check_record_files(runner: RobotSpec, record: dict[str, Any], cfg: ResolvedConfig) -> None:
  """Refuses to resume when a file the run read (e.g. `--reference`) has changed since."""
  recorded = record.get("file_digests") or {}
  if not recorded:
    return
  current = configs.named_file_digests(runner.named_files(cfg))
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
