"""The scorecard's arithmetic, for any robot: commands, pushes, per-command means and the headline.

A robot's player (the generic one in `player.py`, or a robot's own, such as
the Open Duck Mini V2's MuJoCo C player with its runtime loop) plays
`Command`s and returns one dict per episode; `summarize` turns them into a
card (per-command means and the headline), and `table`, `headline_line`,
`plot`, `write` and `tensorboard_scalars` report it. What a card reports:
docs/scorecard.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Seconds of an entry without its own duration.
DURATION_S = 8.0
#: Seconds from the start of an episode before its velocities count.
SETTLE_S = 1.0
#: Why an episode ended early: the trunk tipped or sank, the state or the
#: action became non-finite, (the generic player) the env ended it, or (a
#: robot runtime's loop) the duck was already down when the runtime's start-up
#: hold ended, before the policy acted (`HOLD_CAUSE`).
HOLD_CAUSE = "start-up hold"
FALL_CAUSES = ("tipped", "sank", "non-finite state", "non-finite action", "terminated", HOLD_CAUSE)
#: Tracking errors compare velocities averaged over this trailing window: a
#: walking gait's velocity swings within each period, and that sway is not a
#: tracking error (instantaneous errors ranked standing above walking).
TRACKING_WINDOW_S = 1.0
#: The table names a joint that is at a limit for at least this share of a command's time.
LIMIT_REPORT_SHARE = 0.25
#: Entries named `forward_0.1_phase_x<factor>` play the 0.1 m/s walk with the
#: gait clock running <factor> times as fast (a robot runtime's phase button).
PHASE_BUTTON_PREFIX = "forward_0.1_phase_x"


@dataclasses.dataclass(frozen=True)
class Pushes:
  """Horizontal kicks of the trunk's velocity, in a random direction.

  Attributes:
    magnitude: (low, high) m/s of each kick, drawn uniformly.
    interval: (low, high) seconds between kicks (and before the first).
  """

  magnitude: tuple[float, float]
  interval: tuple[float, float]

  @classmethod
  def of_config(cls, push_config: Any) -> Pushes:
    """The training env's pushes (`push_config` with `magnitude_range` and `interval_range`)."""
    return cls(tuple(push_config.magnitude_range), tuple(push_config.interval_range))


@dataclasses.dataclass(frozen=True)
class Command:
  """One episode's command: a name and a schedule [(t_start, c_1, c_2, ...), ...].

  Each entry holds the first commands of the robot's command vector in its
  order (the Open Duck Mini V2: vx, vy, yaw rate, then four head offsets; a
  robot that only walks forward: vx); `at(t, size)` pads the rest with 0.

  Attributes:
    pushes: kicks during the episode, or None.
    phase_factor: for a robot with a gait clock, how much faster than
      trained the clock runs (a robot runtime's phase button); 1.0 otherwise.
  """

  name: str
  schedule: tuple[tuple[float, ...], ...]
  duration: float = DURATION_S
  pushes: Pushes | None = None
  phase_factor: float = 1.0

  def at(self, t: float, size: int | None = None) -> np.ndarray:
    """The command at time t: the schedule entry's values, padded with 0 to `size` values when given.

    Raises:
      ValueError: an entry with no values, or with more than `size`.
    """
    current = self.schedule[0]
    for entry in self.schedule:
      if t + 1e-9 >= entry[0]:
        current = entry
    values = tuple(current[1:])
    if not values or (size is not None and len(values) > size):
      raise ValueError(f"a schedule entry is (t, up to {size or 'all'} commands), got {current}")
    pad = (0.0,) * ((size or len(values)) - len(values))
    return np.array(values + pad, np.float32)


@dataclasses.dataclass(frozen=True)
class Suite:
  """What a robot's scorecard plays, for the generic player (`player.score`).

  Attributes:
    commands: the entries, each played `seeds` times; names by the
      conventions `summarize` reads (`stand`, `forward_0.1`, `left_0.1`/
      `right_0.1`, `turn_left_0.5`/`turn_right_0.5`, `push_*` ...).
    command_names: the robot's command vector, in order (e.g. ("vx",)).
    walking_speeds: headline floors at which a policy walks on command
      (`best_policy.walks_on_command`), e.g. {"vx_at_0.1": 0.07}.
    seeds: episodes per entry.
  """

  commands: tuple[Command, ...]
  command_names: tuple[str, ...]
  walking_speeds: dict[str, float] = dataclasses.field(default_factory=dict)
  seeds: int = 2


def trailing_mean(x: np.ndarray, window: int) -> np.ndarray:
  """Mean of each row of `x` [T, ...] and the `window - 1` before it (fewer at the start)."""
  if len(x) == 0:
    return x
  csum = np.cumsum(x, axis=0)
  out = csum.copy()
  out[window:] = csum[window:] - csum[:-window]
  counts = np.minimum(np.arange(1, len(x) + 1), window).reshape((-1,) + (1,) * (x.ndim - 1))
  return out / counts


def _mean(values) -> float:
  """Mean of the finite values (an episode that fell before it was measured has NaN metrics); NaN if none."""
  finite = [v for v in values if not math.isnan(v)]
  return float(np.mean(finite)) if finite else float("nan")


def _limit_by_joint(episodes: list[dict[str, Any]]) -> dict[str, float]:
  """Mean over `episodes` of each joint's limit share, largest first; zeros left out."""
  names = {name for e in episodes for name in e.get("joint_limit_by_joint", {})}
  shares = {n: round(_mean([e.get("joint_limit_by_joint", {}).get(n, 0.0) for e in episodes]), 3) for n in names}
  return dict(sorted(((n, v) for n, v in shares.items() if v), key=lambda kv: (-kv[1], kv[0])))


def summarize(episodes: list[dict[str, Any]], commands: Sequence[Command], window: int) -> dict[str, Any]:
  """Per-command means over seeds, and the headline numbers.

  `episodes` are a player's per-episode dicts: `command` (the entry's name),
  `fell`, `survival_s`, `duration_s`, and `cmd`/`vel` [T, 3] (commanded and
  achieved vx, vy, yaw rate over the measured steps); `fall_cause`, `pushes`,
  `distance_m`, `foot_slip_mps`, `joint_limit_share`, `joint_limit_by_joint`,
  `action_smoothness`, `joint_speed_radps` and `power_w` where the player
  measures them (NaN where not). Tracking errors compare `window`-step
  trailing means of the commanded and achieved velocities
  (`TRACKING_WINDOW_S` at the control rate). The headline names entries by
  `suite`'s conventions: `vx_at_0.1` from `forward_0.1`, `vy_at_0.1` from
  `left_0.1`/`right_0.1`, `yaw_rate_at_0.5` and `yaw_rate_at_1.0` from the
  `turn_left_*`/`turn_right_*` pairs, `stand_drift_mps` from `stand`; entries
  with pushes count apart (`push_*`).
  """
  per_command = {}
  for command in commands:
    eps = [e for e in episodes if e["command"] == command.name]
    cmd = np.concatenate([e["cmd"] for e in eps]) if eps else np.zeros((0, 3))
    vel = np.concatenate([e["vel"] for e in eps]) if eps else np.zeros((0, 3))
    # Errors of the trailing means (per episode), means of the raw values.
    cmd_avg = np.concatenate([trailing_mean(e["cmd"], window) for e in eps]) if eps else np.zeros((0, 3))
    vel_avg = np.concatenate([trailing_mean(e["vel"], window) for e in eps]) if eps else np.zeros((0, 3))
    entry = {
      "episodes": len(eps),
      "falls": int(sum(e["fell"] for e in eps)),
      "fall_causes": {c: n for c in FALL_CAUSES if (n := sum(e.get("fall_cause") == c for e in eps))},
      "survival_s": _mean([e["survival_s"] for e in eps]),
      "pushes": int(sum(e.get("pushes", 0) for e in eps)),
      "duration_s": command.duration,
      "commanded": dict(zip(("vx", "vy", "yaw_rate"), _round(np.mean(cmd, axis=0) if len(cmd) else [0.0] * 3))),
      "achieved": dict(zip(("vx", "vy", "yaw_rate"), _round(np.mean(vel, axis=0) if len(vel) else [math.nan] * 3))),
      "lin_vel_error_mps": _mean(np.linalg.norm(cmd_avg[:, :2] - vel_avg[:, :2], axis=1)) if len(vel) else math.nan,
      "yaw_rate_error_radps": _mean(np.abs(cmd_avg[:, 2] - vel_avg[:, 2])) if len(vel) else math.nan,
      "distance_m": _mean([e.get("distance_m", math.nan) for e in eps]),
      "foot_slip_mps": _mean([e.get("foot_slip_mps", math.nan) for e in eps]),
      "joint_limit_share": _mean([e.get("joint_limit_share", math.nan) for e in eps]),
      # Share of the time each joint is within JOINT_LIMIT_MARGIN of a range end
      # (joints that never are are left out).
      "joint_limit_by_joint": _limit_by_joint(eps),
      "action_smoothness": _mean([e.get("action_smoothness", math.nan) for e in eps]),
      # Mean |joint velocity| of the leg joints, rad/s (earlier cards: none).
      "joint_speed_radps": _mean([e.get("joint_speed_radps", math.nan) for e in eps]),
      "power_w": _mean([e.get("power_w", math.nan) for e in eps]),
    }
    per_command[command.name] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in entry.items()}
  pushed = {c.name for c in commands if c.pushes is not None}
  walk = {name: c for name, c in per_command.items() if name not in pushed}
  moving = [c for c in walk.values() if not math.isnan(c["lin_vel_error_mps"])]
  headline = {
    "falls": int(sum(c["falls"] for c in walk.values())),
    "episodes": int(sum(c["episodes"] for c in walk.values())),
    # Of those, the ducks already down before the policy acted (no policy can catch them).
    "falls_in_hold": int(sum(c["fall_causes"].get(HOLD_CAUSE, 0) for c in walk.values())),
    "tracking_error_mps": round(_mean([c["lin_vel_error_mps"] for c in moving]), 4),
    "yaw_rate_error_radps": round(_mean([c["yaw_rate_error_radps"] for c in moving]), 4),
  }
  if pushed:
    under = [per_command[n] for n in per_command if n in pushed]
    headline["push_falls"] = int(sum(c["falls"] for c in under))
    headline["push_episodes"] = int(sum(c["episodes"] for c in under))
    headline["push_survival_share"] = round(
      _mean([e["survival_s"] / e["duration_s"] for e in episodes if e["command"] in pushed]), 4
    )
    # Each episode falls at most once: falls per kick delivered.
    kicks = sum(c["pushes"] for c in under)
    headline["push_falls_per_kick"] = round(headline["push_falls"] / kicks, 4) if kicks else math.nan
  nonfinite = sum(e.get("fall_cause") == "non-finite action" for e in episodes)
  if nonfinite:
    headline["non_finite_action_episodes"] = int(nonfinite)
  if "forward_0.1" in per_command:
    headline["vx_at_0.1"] = per_command["forward_0.1"]["achieved"]["vx"]
    # How calm the gait is at the 0.1 m/s command: leg joint speed and action change per step.
    headline["joint_speed_at_0.1"] = per_command["forward_0.1"]["joint_speed_radps"]
    headline["action_rate_at_0.1"] = per_command["forward_0.1"]["action_smoothness"]
  # Sideways speed and yaw rate in the commanded direction, both ways averaged.
  for key, (left, right, axis) in {
    "vy_at_0.1": ("left_0.1", "right_0.1", "vy"),
    "yaw_rate_at_0.5": ("turn_left_0.5", "turn_right_0.5", "yaw_rate"),
  }.items():
    if left in per_command and right in per_command:
      achieved = per_command[left]["achieved"][axis] - per_command[right]["achieved"][axis]
      headline[key] = round(achieved / 2, 4)
  for key, (left, right) in {"yaw_rate_at_1.0": ("turn_left_1.0", "turn_right_1.0")}.items():
    if left in per_command and right in per_command:
      achieved = per_command[left]["achieved"]["yaw_rate"] - per_command[right]["achieved"]["yaw_rate"]
      headline[key] = round(achieved / 2, 4)
  for name in per_command:
    if name.startswith(PHASE_BUTTON_PREFIX):  # e.g. "forward_0.1_phase_x1.3" -> "vx_at_0.1_phase_x1.3"
      headline["vx_at_0.1" + name[len("forward_0.1") :]] = per_command[name]["achieved"]["vx"]
  if "stand" in per_command:
    headline["stand_drift_mps"] = per_command["stand"]["lin_vel_error_mps"]
  return {"headline": headline, "commands": per_command}


def _round(values) -> list[float]:
  return [round(float(v), 4) for v in values]


def table(card: dict[str, Any]) -> str:
  """The scorecard as a fixed-width text table with the headline line."""
  header = (
    f"{'command':<26}{'falls':>6}{'surv s':>8}{'cmd vx':>8}{'vx':>8}{'cmd vy':>8}{'vy':>8}"
    f"{'cmd wz':>8}{'wz':>8}{'v err':>7}{'wz err':>7}{'dist m':>7}{'slip':>6}{'limit':>6}{'|da|':>6}{'W':>6}"
  )
  lines = [header]
  for name, c in card["commands"].items():
    cm, ac = c["commanded"], c["achieved"]
    lines.append(
      f"{name:<26}{c['falls']:>3}/{c['episodes']:<2}{c['survival_s']:>8.1f}{cm['vx']:>8.3f}{ac['vx']:>8.3f}"
      f"{cm['vy']:>8.3f}{ac['vy']:>8.3f}{cm['yaw_rate']:>8.2f}{ac['yaw_rate']:>8.2f}"
      f"{c['lin_vel_error_mps']:>7.3f}{c['yaw_rate_error_radps']:>7.2f}{c['distance_m']:>7.2f}"
      f"{c['foot_slip_mps']:>6.3f}{c['joint_limit_share']:>6.2f}{c['action_smoothness']:>6.3f}{c['power_w']:>6.2f}"
    )
  held = [
    f"{name} ({', '.join(f'{j} {v:.2f}' for j, v in c['joint_limit_by_joint'].items() if v >= LIMIT_REPORT_SHARE)})"
    for name, c in card["commands"].items()
    if any(v >= LIMIT_REPORT_SHARE for v in c.get("joint_limit_by_joint", {}).values())
  ]
  if held:
    lines.append("joints at a range end for at least a quarter of the time: " + "; ".join(held))
  causes = [
    f"{name} ({', '.join(f'{n} {cause}' for cause, n in c['fall_causes'].items())})"
    for name, c in card["commands"].items()
    if c.get("fall_causes")
  ]
  if causes:
    lines.append("why episodes ended early: " + "; ".join(causes))
  lines.append(headline_line(card))
  return "\n".join(lines)


def headline_line(card: dict[str, Any]) -> str:
  """One line: falls, mean tracking error, speed at the 0.1 m/s command."""
  h = card["headline"]
  held = h.get("falls_in_hold", 0)  # cards written before the key have none
  in_hold = f" ({held} down in the start-up hold, before the policy acted)" if held else ""
  parts = [
    f"falls {h['falls']}/{h['episodes']}{in_hold}",
    f"velocity tracking error {h['tracking_error_mps']:.3f} m/s",
    f"yaw-rate error {h['yaw_rate_error_radps']:.2f} rad/s",
  ]
  if "vx_at_0.1" in h:
    parts.append(f"vx at 0.1 m/s command {h['vx_at_0.1']:.3f} m/s")
  if "vy_at_0.1" in h:
    parts.append(f"sideways at 0.1 m/s command {h['vy_at_0.1']:.3f} m/s")
  if "yaw_rate_at_0.5" in h:
    parts.append(f"yaw rate at 0.5 rad/s command {h['yaw_rate_at_0.5']:.2f} rad/s")
  if "push_falls" in h:
    per_kick = h.get("push_falls_per_kick", math.nan)
    parts.append(
      f"pushed: falls {h['push_falls']}/{h['push_episodes']}"
      + ("" if math.isnan(per_kick) else f" ({100 * per_kick:.0f}% of kicks)")
      + f", survival {100 * h['push_survival_share']:.0f}%"
    )
  if h.get("non_finite_action_episodes"):
    parts.append(f"NON-FINITE ACTIONS in {h['non_finite_action_episodes']} episodes")
  prefix = "score (runtime loop): " if card.get("source") == "runtime" else "score: "
  return prefix + ", ".join(parts)


def plot(card: dict[str, Any], path: str | Path) -> Path:
  """One PNG: commanded vs achieved vx, vy and yaw rate per command, falls marked."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  names = list(card["commands"])
  x = np.arange(len(names))
  fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True)
  for ax, key, unit in zip(axes, ("vx", "vy", "yaw_rate"), ("m/s", "m/s", "rad/s")):
    commanded = [card["commands"][n]["commanded"][key] for n in names]
    achieved = [card["commands"][n]["achieved"][key] for n in names]
    ax.bar(x - 0.2, commanded, 0.4, label="commanded", color="#bbbbbb")
    ax.bar(x + 0.2, achieved, 0.4, label="achieved", color="#e69f00")
    ax.axhline(0.0, color="black", linewidth=0.5)
    ax.set_ylabel(f"{key} ({unit})")
  for i, n in enumerate(names):
    falls = card["commands"][n]["falls"]
    if falls:
      axes[0].annotate(f"{falls} fall(s)", (i, 0), ha="center", va="bottom", color="red", fontsize=8)
  axes[0].legend(loc="upper right")
  axes[-1].set_xticks(x, names, rotation=30, ha="right")
  step = card.get("training_step")
  fig.suptitle(f"{Path(card['policy']).name} (step {step}): {headline_line(card)[7:]}", fontsize=8)
  fig.tight_layout()
  path = Path(path)
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


def write(card: dict[str, Any], out_dir: Path, stem: str = "score") -> tuple[Path, Path]:
  """Writes `<stem>.json` and `<stem>.png` into `out_dir`."""
  out_dir.mkdir(parents=True, exist_ok=True)
  json_path = out_dir / f"{stem}.json"
  json_path.write_text(json.dumps(card, indent=2) + "\n")
  return json_path, plot(card, out_dir / f"{stem}.png")


def tensorboard_scalars(card: dict[str, Any], prefix: str = "score/") -> dict[str, float]:
  """The headline as `score/*` scalars (`score/runtime_*` for a runtime-loop card: `prefix`)."""
  h = card["headline"]
  out = {
    f"{prefix}falls": float(h["falls"]),
    f"{prefix}fall_share": float(h["falls"]) / max(h["episodes"], 1),
    f"{prefix}tracking_error_mps": float(h["tracking_error_mps"]),
    f"{prefix}yaw_rate_error_radps": float(h["yaw_rate_error_radps"]),
  }
  if "push_falls" in h:
    out[f"{prefix}push_fall_share"] = float(h["push_falls"]) / max(h["push_episodes"], 1)
    out[f"{prefix}push_survival_share"] = float(h["push_survival_share"])
  for key in (
    "vx_at_0.1",
    "vy_at_0.1",
    "yaw_rate_at_0.5",
    "yaw_rate_at_1.0",
    "vx_at_0.1_phase_x1.3",
    "stand_drift_mps",
    "falls_in_hold",
    "push_falls_per_kick",
    "joint_speed_at_0.1",
    "action_rate_at_0.1",
  ):
    if key in h:
      out[f"{prefix}{key}"] = float(h[key])
  out[f"{prefix}non_finite_action_episodes"] = float(h.get("non_finite_action_episodes", 0))
  return out
