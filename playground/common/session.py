"""`Session`: what a run trains with (envs, learner, evaluator), built by `session_setup.build`.

Import-light: the types are needed only by type checkers, so a robot's hooks
can name `Session` without loading JAX.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
  from mujoco_playground import MjxEnv

  from playground.common import evaluation
  from playground.common import ppo as ppo_lib
  from playground.common import step_cache as step_cache_lib
  from playground.common import training_env
  from playground.common.run_args import ResolvedConfig


@dataclasses.dataclass
class Session:
  """What a run trains with: envs, learner, evaluator and its fingerprint."""

  cfg: ResolvedConfig
  env_name: str
  task: str
  env: MjxEnv
  venv: training_env.VecEnv
  ppo: ppo_lib.PPO
  evaluator: evaluation.Evaluator
  #: The compatibility fingerprint written into every checkpoint.
  compat: dict[str, Any]
  step_cache: step_cache_lib.StepCache
  #: Package versions written into the record and every checkpoint.
  versions: dict[str, str]
