"""A policy file that holds one posture whatever it observes: the Open Duck's statue (benchmarks and tests).

The home statue is the baseline a trained policy must beat (a kicked duck
that keeps its home pose, with no policy at all); `benchmarks.stance_search`
writes the stance it finds the same way. The file has the joystick env's
real metadata, so the scorecard, `push_directions` and the runtime player
play it as any policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from playground.common.export import policy_file
from playground.common.runs.arguments import RunArgs
from playground.open_duck_mini_v2.model import observations


def write_statue(
  path: Path,
  pre_tanh: np.ndarray | float | None = None,
  history: int = 0,
  metadata_changes: Mapping[str, Any] | None = None,
) -> Path:
  """Writes a joystick policy file whose action is tanh(`pre_tanh`) ([14] or one for all; None: home).

  A posture `a` (action units, |a| < 1) is `pre_tanh = arctanh(a)`. With
  `history`, the file observes that many earlier frames
  (`observation_history`); `metadata_changes` overwrite entries of its
  metadata (tests of what a player refuses).
  """
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  runner = OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain"))
  config = runner.default_env_config("joystick")
  config.observation_history = history
  contract = runner.policy_contract(runner.make_env("joystick", "flat_terrain", config), config)
  meta = policy_file.policy_metadata(
    OpenDuckMiniV2Runner.robot, "joystick", "flat_terrain", 0, "state", contract.metadata
  )
  meta.update(metadata_changes or {})
  pre_tanh = np.broadcast_to(np.asarray(0.0 if pre_tanh is None else pre_tanh, np.float32), (observations.NUM_ACTIONS,))
  return policy_file.write_constant_policy(path, pre_tanh, observations.state_layout(history).size, meta)
