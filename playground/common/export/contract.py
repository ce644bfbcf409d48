"""A policy's contract: what exporting, scoring and playing a policy need, built once from the built env.

A robot's runner builds it (`RobotSpec.policy_contract`) from the env it
trains, right after building it: the trainer hands it to PPO (its mirror)
and to every export (`policy_file.export_contract`); exporting a checkpoint
builds the run's env once and asks for it the same way. Nothing in it is
rebuilt from names later: no model is loaded again to write a file.
Import-light (no JAX, no NumPy): a runner that names it loads nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
  import numpy as np

  from playground.common.tasks.reference_motion import Feedforward
  from playground.common.tasks.symmetry import Mirror


@dataclasses.dataclass(frozen=True)
class PolicyContract:
  """What a policy file carries and is checked against, for one env configuration.

  Attributes:
    metadata: robot facts written into the file (observation layout, action
      order, scales, home pose, control period, ...); JSON-able values.
    feedforward: what the env adds to the network's action (the file adds it
      too), or None: the network's action is the action.
    input_bounds: (low, high) per input that the file clamps its input to
      (e.g. commands to the trained range), or None: no clamp.
    probe_observations: observations [k, obs_size] the export must handle
      (e.g. a robot runtime's first frames): checked against JAX and for
      finite actions; or None.
    mirror: the left/right mirror of the env's observations and actions, for
      `ppo.symmetry_augmentation`; or None (no mirror).
    files: files whose contents the file embeds (e.g. the reference gait its
      feed-forward adds): an export refuses to write a policy when one of
      them differs from the digest the run recorded.
  """

  metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  feedforward: Feedforward | None = None
  input_bounds: tuple[np.ndarray, np.ndarray] | None = None
  probe_observations: np.ndarray | None = None
  mirror: Mirror | None = None
  files: tuple[Path, ...] = ()


def bounds_of_block(size: int, block: slice, ranges: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
  """`input_bounds` that clamp one block of an observation of `size` inputs (e.g. the commands)
  to `ranges`, one (low, high) per input of `block`, and leave every other input unbounded."""
  import numpy as np

  low, high = np.full(size, -np.finfo(np.float32).max), np.full(size, np.finfo(np.float32).max)
  values = np.asarray(ranges, float).reshape(-1, 2)
  if len(values) != block.stop - block.start:
    raise ValueError(f"{len(values)} ranges for a block of {block.stop - block.start} inputs")
  low[block], high[block] = values[:, 0], values[:, 1]
  return low.astype(np.float32), high.astype(np.float32)
