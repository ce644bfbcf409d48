"""The run's record: where a run lives and what it was started with (`config.json`).

A run directory holds `config.json`, the effective configuration and every
flag of the run (`write_config`). Reading it back for `--resume` is
`resume`; what a checkpoint must agree on to be restored is `compatibility`.

Import-light on purpose (no JAX): the command line is checked with it before
anything heavy is loaded.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import subprocess
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from playground.common import configs
from playground.common.configs import jsonable
from playground.common.errors import RunError
from playground.common.runs import directories

if TYPE_CHECKING:
  from playground.common.robot_spec import RobotSpec
  from playground.common.runs.arguments import ResolvedConfig
  from playground.common.runs.arguments import RunArgs

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


# ---- Where the run lives.


def check_paths(args: RunArgs) -> None:
  """Refuses an --exp_name that is not one path component and an --output_dir that cannot hold runs.

  Raises:
    RunError: with a one-line message; nothing is created.
  """
  try:
    if args.exp_name is not None:
      directories.check_exp_name(args.exp_name)
    directories.check_writable_dir(Path(args.output_dir))
  except directories.RunDirError as e:
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
    restore = directories.latest_checkpoint(run_dir)
    if restore is None:
      raise RunError(f"--resume: {run_dir} holds no complete checkpoint to resume from")
  elif named.exists():
    if not args.overwrite:
      raise RunError(
        f"FileExistsError: run directory {run_dir} already exists; pass --resume to continue it "
        "or --overwrite to delete it and start over"
      )
    try:
      directories.deletable_run_dir(named, Path(args.output_dir))
    except directories.RunDirError as e:
      raise RunError(str(e)) from None
  if args.restore_checkpoint_path:
    try:
      restore = directories.resolve(args.restore_checkpoint_path)
    except directories.CheckpointError as e:
      raise RunError(str(e)) from None
    if args.overwrite and run_dir.exists() and Path(restore).resolve().is_relative_to(run_dir):
      raise RunError(
        f"--overwrite would delete {run_dir}, which holds the checkpoint to restore; choose another --exp_name"
      )
  return run_dir, restore


def read_restore_meta(restore_dir: Path) -> dict[str, Any]:
  """The `meta.json` of the checkpoint to restore; RunError if unreadable."""
  try:
    return directories.read_meta(restore_dir)
  except directories.CheckpointError as e:
    raise RunError(str(e)) from None


def delete_for_overwrite(args: RunArgs, named: Path) -> Path:
  """`--overwrite`: deletes the run directory once everything else was checked; returns what was deleted."""
  try:
    return directories.delete_run_dir(named, Path(args.output_dir))
  except directories.RunDirError as e:
    raise RunError(str(e)) from None


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
    command = ["git", "-C", str(directories.REPO_ROOT), "rev-parse", "HEAD"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=5)
    return out.stdout.strip() or None if out.returncode == 0 else None
  except (OSError, subprocess.SubprocessError):
    return None


def write_config(
  run_dir: Path,
  runner: RobotSpec,
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
    "file_digests": configs.named_file_digests(runner.named_files(cfg)),
    "written": datetime.datetime.now().isoformat(timespec="seconds"),
  }
  (run_dir / directories.CONFIG_FILE).write_text(json.dumps(jsonable(payload), indent=2, default=str))
