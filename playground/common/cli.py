"""The training command line: flags, one-line errors, logging and `main`.

No JAX is imported here (nor by anything this module imports): a bad flag is
answered in a fraction of a second, before the heavy libraries load. It
reads a robot through `RobotSpec` (its flags, presets, `run`); the robot's
`runner.BaseRunner.main` calls `main`.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from playground.common import configs
from playground.common.configs import ConfigError
from playground.common.errors import NonFiniteError
from playground.common.errors import RunError
from playground.common.robot_spec import RobotSpec
from playground.common.runs import directories
from playground.common.runs.arguments import RunArgs
from playground.common.train import backend


class UsageError(Exception):
  """A command-line usage error (reported as one line)."""


class OneLineParser(argparse.ArgumentParser):
  """argparse that reports errors as one line naming the valid flags."""

  def error(self, message):
    if "unrecognized arguments" in message:
      flags = sorted(opt for action in self._actions for opt in action.option_strings if opt.startswith("--"))
      bad = message.split(":", 1)[1].strip().split()[0]
      message = f"unrecognized flag {bad}{configs.suggest(bad, flags)}; valid flags: {', '.join(flags)}"
    raise UsageError(message)


def build_parser(runner_cls: type[RobotSpec]) -> argparse.ArgumentParser:
  """The flags of a robot's runner: the shared ones plus `runner_cls.add_arguments`."""
  parser = OneLineParser(
    prog=f"{runner_cls.robot} runner",
    description=f"Train a PPO policy for {runner_cls.robot} in MuJoCo MJX.",
  )
  parser.add_argument("--env", default=runner_cls.default_env, help="environment name")
  parser.add_argument("--task", default=runner_cls.default_task, help="task / scene variant")
  summaries = getattr(runner_cls, "preset_summaries", {}) or {}
  parser.add_argument(
    "--preset",
    default="full",
    help="training preset: "
    + "; ".join(f"{name} ({summaries[name]})" if name in summaries else name for name in runner_cls.presets),
  )
  parser.add_argument("--num_timesteps", type=int, help="total env steps (overrides the preset)")
  parser.add_argument("--num_envs", type=int, help="parallel environments (overrides the preset)")
  parser.add_argument("--output_dir", default="checkpoints", help="parent of run directories")
  parser.add_argument("--exp_name", help="run directory name (default: robot_env_task_timestamp)")
  parser.add_argument("--seed", type=int, default=0)
  configs.add_override_argument(
    parser, help="config override, e.g. reward_config.scales.alive=10 or ppo.learning_rate=1e-4"
  )
  parser.add_argument(
    "--resume",
    action="store_true",
    help=f"continue the latest checkpoint of --exp_name with the flags recorded in its {directories.CONFIG_FILE}",
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
  parser.add_argument("--eval_every", type=int, help="env steps between evaluations (0: no evaluation)")
  parser.add_argument("--log_every", type=int, help="env steps between progress lines")
  parser.add_argument(
    "--compilation_cache_dir",
    help=f"JAX persistent cache (default ${backend.CACHE_ENV} or {backend.DEFAULT_CACHE_DIR})",
  )
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
  runner_cls.add_arguments(parser)
  return parser


def explicit_dests(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> set[str]:
  """The destinations of the flags `argv` actually gives (parsed again with no defaults)."""
  for action in parser._actions:
    action.default = argparse.SUPPRESS
  return set(vars(parser.parse_args(argv)))


def main(runner_cls: type[RobotSpec], argv: Sequence[str] | None = None) -> int:
  """Command-line entry point of a robot's runner; returns the exit status.

  Exit status: 0 done (or interrupted and saved), 2 a user error (one line
  on stderr), 3 training diverged.
  """
  # XLA's C++ logs (e.g. spurious CPU-feature notes when the persistent
  # cache is read) would drown the progress lines; Python errors still show.
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  setup_logging()
  try:
    ns = build_parser(runner_cls).parse_args(argv)
    explicit = explicit_dests(build_parser(runner_cls), argv)
  except UsageError as e:
    fail(str(e))
    return 2
  values = vars(ns)
  if values.pop("list"):
    return list_command(values["output_dir"])
  names = {f.name for f in dataclasses.fields(RunArgs)}
  args = RunArgs(**{k: v for k, v in values.items() if k in names})
  args.extra = {k: v for k, v in values.items() if k not in names}
  args.explicit = frozenset(explicit)
  try:
    return runner_cls(args).run()
  except (ConfigError, RunError) as e:
    fail(str(e))
    return 2
  except NonFiniteError as e:
    fail(str(e))
    return 3


def list_command(output_dir: str) -> int:
  """`--list`: prints one line per run under `output_dir` to stdout; returns the exit status."""
  try:
    runs = directories.list_runs(Path(output_dir))
  except directories.RunDirError as e:
    fail(str(e))
    return 2
  if not runs:
    sys.stdout.write(f"no runs under {output_dir}\n")
    return 0
  sys.stdout.write("".join(line + "\n" for line in directories.format_runs(runs)))
  return 0


def fail(message: str) -> None:
  """Prints a user error as one line on stderr (no traceback)."""
  sys.stderr.write(f"error: {message}\n")
  sys.stderr.flush()


def setup_logging() -> None:
  """INFO logs to stderr with a time stamp; quiets JAX's, Orbax's and absl's chatter."""
  if not logging.getLogger().handlers:
    logging.basicConfig(
      level=logging.INFO,
      format="%(asctime)s %(levelname)s %(message)s",
      datefmt="%H:%M:%S",
      stream=sys.stderr,
    )
  for noisy in ("absl", "jax._src", "orbax", "etils"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
