"""`Session`: what a run trains with (envs, learner, evaluator), built by `trainer.build`.

Import-light: the types are needed only by type checkers, so a robot's hooks
can name `Session` without loading JAX.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
  from mujoco_playground import MjxEnv

  from playground.common.export.contract import PolicyContract
  from playground.common.runs.arguments import ResolvedConfig
  from playground.common.train import vec_env
  from playground.common.train.evaluator import Evaluator
  from playground.common.train.ppo import PPO
  from playground.common.train.step_cache import StepCache


@dataclasses.dataclass
class Session:
  """What a run trains with: envs, learner, evaluator and its fingerprint."""

  cfg: ResolvedConfig
  env_name: str
  task: str
  env: MjxEnv
  venv: vec_env.VecEnv
  #: What the policy needs to be exported, scored and played (`RobotSpec.policy_contract`).
  contract: PolicyContract
  ppo: PPO
  evaluator: Evaluator
  #: The compatibility fingerprint written into every checkpoint.
  compat: dict[str, Any]
  step_cache: StepCache
  #: Package versions written into the record and every checkpoint.
  versions: dict[str, str]
