"""The robot against the simulation: each observation slot's range on the robot and in MuJoCo.

`compare` plays the policy file in simulation as the runtime runs it
(`robot_log.simulate`: the runtime contract the file is made for, randomized
models, the training env's noise and delays) for the commands of the robot's
log, and names the slots where the robot leaves the simulated range; `plot`
draws them side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from playground.open_duck_mini_v2.evaluation import robot_log
from playground.open_duck_mini_v2.evaluation.robot_log import Finding
from playground.open_duck_mini_v2.evaluation.robot_log import Reference
from playground.open_duck_mini_v2.model import constants

#: A robot component outside the simulated range (p1-p99, widened by 10%) in more than this share of frames.
OUTSIDE_SHARE = 0.10
#: Slots compared (the commands are the same by construction; the feet and the phase have their own checks).
COMPARED_SLOTS = ("gyro", "accelerometer", "joint_pos", "joint_vel", "last_actions", "motor_targets")


@dataclasses.dataclass(frozen=True)
class SlotRange:
  """One observation component on the robot against the simulation.

  Attributes:
    slot: the slot's name (`observations.STATE_LAYOUT`).
    component: the name of its component (a joint, an axis).
    robot: (p1, median, p99) on the robot.
    sim: (p1, median, p99) in simulation.
    outside: the share of robot frames outside the simulated p1-p99, widened by 10% of its width.
  """

  slot: str
  component: str
  robot: tuple[float, float, float]
  sim: tuple[float, float, float]
  outside: float


def _components(size: int) -> list[str]:
  """The names of a slot's components: x, y, z, or the joints."""
  if size == 3:
    return ["x", "y", "z"]
  return list(constants.ACTUATOR_NAMES[:size])


def slot_ranges(robot: np.ndarray, sim: np.ndarray) -> list[SlotRange]:
  """Each compared component's range on the robot and in simulation (`COMPARED_SLOTS`; the newest action only)."""
  out = []
  for slot in COMPARED_SLOTS:
    r, s = robot_log.slot(robot, slot), robot_log.slot(sim, slot)
    if slot == "last_actions":
      r, s = r[:, :14], s[:, :14]
    for k, component in enumerate(_components(r.shape[1])):
      rq = np.percentile(r[:, k], [1, 50, 99])
      sq = np.percentile(s[:, k], [1, 50, 99])
      margin = 0.1 * (sq[2] - sq[0]) + 1e-3
      outside = float(np.mean((r[:, k] < sq[0] - margin) | (r[:, k] > sq[2] + margin)))
      out.append(SlotRange(slot, component, tuple(map(float, rq)), tuple(map(float, sq)), outside))
  return out


def finding(ranges: Sequence[SlotRange], robots: int, plot_path: Path | None) -> Finding:
  """Names the slots where the robot leaves the simulated range in more than 10% of its frames."""
  away = [r for r in ranges if r.outside > OUTSIDE_SHARE]
  drawn = f"; plot: {plot_path}" if plot_path else ""
  if not away:
    return Finding(
      "sim", "ok", f"every slot stays within the simulated range ({robots} simulated robots, same commands){drawn}"
    )
  by_slot: dict[str, list[SlotRange]] = {}
  for r in away:
    by_slot.setdefault(r.slot, []).append(r)
  counts = {slot: sum(r.slot == slot for r in ranges) for slot in by_slot}
  parts = []
  for slot, items in by_slot.items():
    worst = max(items, key=lambda r: r.outside)
    parts.append(
      f"{slot} ({len(items)} of {counts[slot]}; worst {worst.component}: {100 * worst.outside:.0f}% of frames)"
    )
  return Finding(
    "sim",
    "warn",
    f"the robot leaves the simulated range ({robots} simulated robots, same commands) in: {'; '.join(parts)}{drawn}",
  )


def plot(ranges: Sequence[SlotRange], path: str | Path, title: str = "") -> Path:
  """Draws each compared slot's components, the simulation's p1-p99 range beside the robot's, to a PNG."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  slots = list(dict.fromkeys(r.slot for r in ranges))
  fig, axes = plt.subplots(len(slots), 1, figsize=(12, 2.4 * len(slots)), squeeze=False)
  for row, (ax, slot) in enumerate(zip(axes[:, 0], slots)):
    items = [r for r in ranges if r.slot == slot]
    x = np.arange(len(items))
    for offset, key, color, label in ((-0.15, "sim", "0.6", "simulation"), (0.15, "robot", "tab:red", "robot")):
      lo, mid, hi = np.array([getattr(r, key) for r in items]).T
      ax.vlines(x + offset, lo, hi, color=color, linewidth=5, label=label)
      ax.plot(x + offset, mid, "o", color="k", markersize=3)
    ax.set_xticks(x, [r.component for r in items], rotation=30, ha="right", fontsize=7)
    away = sum(r.outside > OUTSIDE_SHARE for r in items)
    ax.set_title(
      f"{slot}" + (f": the robot leaves the simulated range in {away} of {len(items)}" if away else ""),
      fontsize=9,
      color="tab:red" if away else "k",
    )
    if row == 0:
      ax.legend(fontsize=7, loc="upper right")
  if title:
    fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=80)
  plt.close(fig)
  return path


def compare(
  obs: np.ndarray,
  policy_path: str | Path,
  ref: Reference,
  env_config: dict[str, Any] | None = None,
  robots: int = 2,
  seed: int = 0,
  plot_path: str | Path | None = None,
) -> tuple[Finding, list[SlotRange]]:
  """The robot's log against the same file played in simulation for the log's commands (`simulate`).

  The simulated robots run the runtime contract the file is made for, on
  randomized models with the training env's noise and delays. Draws the
  comparison to `plot_path` when given.
  """
  logs = robot_log.simulate(
    policy_path, robot_log.commands_of(obs, ref.ctrl_dt), robots=robots, seed=seed, env_config=env_config
  )
  if not any(len(log) for log in logs):
    return Finding("sim", "info", "the simulated robots fell at once: nothing to compare with"), []
  ranges = slot_ranges(obs, np.concatenate([log for log in logs if len(log)]))
  drawn = plot(ranges, plot_path, f"robot log against {Path(policy_path).name} in simulation") if plot_path else None
  return finding(ranges, robots, drawn), ranges
