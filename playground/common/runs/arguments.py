"""`RunArgs`, the flags of a training run, and `ResolvedConfig`, the configuration they resolve to.

Plain data, no JAX: the command line fills `RunArgs` (see `cli.build_parser`)
and library users construct it directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ml_collections import config_dict

#: Values of `--restore_mode`: what a restore takes from a checkpoint.
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
