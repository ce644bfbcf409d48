"""The run's best policy: which scored checkpoint a user should copy to the robot.

`rank` orders scorecards (walking on command first, then falls, falls under
pushes, tracking errors); `update_best` keeps `best_policy.onnx` and
`best_score.json` at the top of a run directory. What "walking on command"
means is the robot's: a floor per headline number (`walking_speeds`, e.g.
the Open Duck Mini V2's `{"vx_at_0.1": 0.07, "yaw_rate_at_0.5": 0.3, ...}`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from playground.common.export import policy_file
from playground.common.runs import directories

logger = logging.getLogger("playground")

#: Files a training run keeps next to its checkpoints: the best scored policy and its scorecard.
BEST_POLICY = "best_policy.onnx"
BEST_SCORE = "best_score.json"


def walks_on_command(headline: Mapping[str, Any], walking_speeds: Mapping[str, float]) -> bool:
  """True when every headline number named in `walking_speeds` reaches its floor (falls aside);
  a number the card does not have counts as 0."""
  return all(float(headline.get(key, 0.0)) >= floor for key, floor in walking_speeds.items())


def rank(headline: Mapping[str, Any], walking_speeds: Mapping[str, float]) -> tuple[float, ...]:
  """Sort key of a scorecard, best first.

  A policy that walks on command (`walks_on_command`) ranks above one that
  does not, whatever their falls: a robot that stands still falls less and
  has not learned the task. Then the share of falls without pushes, the
  share of falls under pushes, then the velocity and yaw-rate tracking errors.
  """
  share = headline["falls"] / max(int(headline["episodes"]), 1)
  pushed = headline.get("push_falls", 0) / max(int(headline.get("push_episodes", 0)), 1)
  walks = walks_on_command(headline, walking_speeds)
  return (
    0.0 if walks else 1.0,
    share,
    pushed,
    float(headline["tracking_error_mps"]),
    float(headline["yaw_rate_error_radps"]),
  )


def update_best(run_dir: Path, step_dir: Path, card: dict[str, Any], walking_speeds: Mapping[str, float]) -> bool:
  """Keeps `run_dir/best_policy.onnx` the scored checkpoint with the best `rank` (walking first, then fewest falls).

  Copies `step_dir/policy.onnx` and writes `best_score.json` (the card, with
  the checkpoint's name) when `card` ranks better than the recorded best, or
  none is recorded; a tie keeps the earlier one. The copy survives checkpoint
  pruning (`keep_last`). Returns True when the best changed.
  """
  run_dir, step_dir = Path(run_dir), Path(step_dir)
  best_score = run_dir / BEST_SCORE
  if best_score.is_file():
    try:
      previous = json.loads(best_score.read_text())
      if rank(previous["headline"], walking_speeds) <= rank(card["headline"], walking_speeds):
        return False
    except (ValueError, KeyError, TypeError):
      logger.warning("%s is unreadable; replacing it", best_score)
  directories.write_atomic(run_dir / BEST_POLICY, (step_dir / policy_file.POLICY_FILE).read_bytes())
  directories.write_atomic(best_score, (json.dumps(dict(card, checkpoint=step_dir.name), indent=2) + "\n").encode())
  return True
