"""Which kicks topple the policy: one kick per episode, by direction and strength.

The scorecard's push entries kick every 3 s in random directions, so an
episode falls if any of its kicks does. This plays one kick per episode
instead, at `--kick_at` seconds plus seed / seeds of one gait period (so
the seeds of a cell meet the gait at evenly spread phases: which foot is on
the ground decides a walking duck's sideways recovery), in a fixed direction
relative to the trunk's heading at that moment (0 deg: forward, 90: to the
left), and counts the episodes that fall within `--after` seconds.
Randomization, noise and delays
are on (the scorecard's conditions); every episode draws its own randomized
model. Prints, per command, the fall share by
direction and strength, by strength and gait phase at the kick (the fraction
of a gait period since the episode's start, pooled over directions), the
fall causes, the mean time from kick to fall, and how far the trunk leans
forward (nose down, degrees) as it is kicked: a stance that leans uses up
the margin on one side.

It also prints, per direction, the largest kick the nominal model standing
in its home pose can absorb without a step, by the linear inverted
pendulum: (distance from the centre of mass to the edge of the soles'
support polygon along the kick) x sqrt(g / centre-of-mass height). A kick
above it needs a recovery step (or a hip motion the pendulum leaves out).

It also splits the falls by where the randomized trunk centre of mass sits
along the kick (ahead of nominal: toward the side the kick pushes to), and
`--without` turns one disturbance off (`--set` changes any env value), to
find which of them the falls come from.

  uv run python -m benchmarks.push_directions tests/fixtures/walker/policy.onnx --seeds 3
  uv run python -m benchmarks.push_directions tests/fixtures/walker/policy.onnx --without randomization
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine

#: Commands played: name -> (vx, vy, yaw_rate).
COMMANDS = {"stand": (0.0, 0.0, 0.0), "forward_0.1": (0.1, 0.0, 0.0)}
#: What `--without` can turn off.
DISTURBANCES = ("noise", "delays", "randomization")
#: cm: bins of the trunk centre of mass's randomized offset along the kick.
OFFSET_BINS_CM = (-1.0, 1.0)
OFFSET_EDGES_CM = (-np.inf, *OFFSET_BINS_CM, np.inf)


def offset_along_kick(offsets_m: np.ndarray, heading_rad: np.ndarray) -> np.ndarray:
  """cm of each trunk centre-of-mass offset (trunk frame) along its kick (rad from the heading)."""
  return 100.0 * (offsets_m[:, 0] * np.cos(heading_rad) + offsets_m[:, 1] * np.sin(heading_rad))


def capture_limits(angles_deg: np.ndarray) -> dict[str, float]:
  """Per direction (deg from the trunk's heading), the kick in m/s the home pose absorbs without a step."""
  import mujoco
  from scipy.spatial import ConvexHull

  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.model import robot_model

  model = robot_model.load_model("flat_terrain")
  data = mujoco.MjData(model)
  mujoco.mj_resetDataKeyframe(model, data, model.key(constants.HOME_KEYFRAME).id)
  mujoco.mj_forward(model, data)
  corners = []
  for name in constants.FEET_GEOMS:
    g = model.geom(name).id
    half = model.geom_size[g]
    for signs in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3):
      corners.append(data.geom_xpos[g] + data.geom_xmat[g].reshape(3, 3) @ (signs * half))
  corners = np.array(corners)
  hull = ConvexHull(corners[:, :2])
  root = model.body(constants.ROOT_BODY).id
  com = data.subtree_com[root]
  omega = np.sqrt(-model.opt.gravity[2] / (com[2] - corners[:, 2].min()))
  x_axis = data.xmat[root].reshape(3, 3)[:, 0]
  heading = np.arctan2(x_axis[1], x_axis[0])
  out = {}
  for a in angles_deg:
    u = np.array([np.cos(heading + np.radians(a)), np.sin(heading + np.radians(a))])
    # Ray from the centre of mass to the hull: the nearest facet crossing (normals n, offsets b: n.x + b <= 0 inside).
    n, b = hull.equations[:, :2], hull.equations[:, 2]
    along = n @ u
    t = np.where(along > 1e-9, -(n @ com[:2] + b) / np.where(along > 1e-9, along, 1.0), np.inf)
    out[f"{a:.0f}"] = round(float(t.min() * omega), 3)
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("path", help="run directory, checkpoint directory or .onnx file")
  parser.add_argument("--seeds", type=int, default=3, help="episodes per command, direction and strength")
  parser.add_argument("--directions", type=int, default=8, help="kick directions, evenly spaced")
  parser.add_argument("--magnitudes", type=float, nargs="+", default=[0.3, 0.5, 0.7], help="kick strengths, m/s")
  parser.add_argument("--kick_at", type=float, default=2.0, help="s into the episode")
  parser.add_argument("--after", type=float, default=3.0, help="s played after the kick")
  parser.add_argument("--runtime", action="store_true", help="observe as the robot runtime does")
  parser.add_argument(
    "--without", nargs="+", default=[], choices=DISTURBANCES, help="disturbances to turn off (default: all on)"
  )
  parser.add_argument(
    "--set",
    dest="overrides",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="change the env config before playing, e.g. domain_randomization.com_offset=0.0",
  )
  args = parser.parse_args()
  from playground.common import configs
  from playground.common.evaluation.scorecard import Command
  from playground.open_duck_mini_v2.evaluation import player
  from playground.open_duck_mini_v2.evaluation import policy_io

  policy_path, env_config, _ = policy_io.resolve_policy(Path(args.path))
  metadata = policy_io.read_metadata(policy_path)
  on = {name: name not in args.without for name in DISTURBANCES}
  try:
    config = policy_io.play_config(metadata, env_config, **on, overrides=configs.parse_overrides(args.overrides))
  except configs.ConfigError as e:
    raise SystemExit(f"error: {e}") from None
  policy = policy_io.onnx_policy(policy_path, batched=True)
  angles = np.arange(args.directions) * 360.0 / args.directions
  period = 1.0 / float(metadata.get("gait_frequency_hz") or config.get("gait_frequency", 1.0))
  duration = args.kick_at + period + args.after
  cells = [(c, a, m) for c in COMMANDS for a in angles for m in args.magnitudes]
  episodes = []
  for name, a, m in cells:
    command = Command(f"{name}_{a:.0f}deg_{m}", ((0.0, *COMMANDS[name]),), duration=duration)
    episodes += [(command, s) for s in range(args.seeds)]
  heading_angle = np.repeat(np.radians([a for _, a, _ in cells]), args.seeds)
  kick_time = args.kick_at + np.tile(np.arange(args.seeds) / args.seeds * period, len(cells))
  kick_step = np.rint(kick_time / config.ctrl_dt).astype(int)  # the kick lands after control step kick_step - 1
  strength = np.repeat([m for _, _, m in cells], args.seeds)
  kicked = np.zeros(len(episodes), bool)
  lean = np.zeros(len(episodes))  # deg the trunk leans forward (nose down) as it is kicked

  def on_step(view) -> None:
    now = view.running & (kick_step == view.t + 1)
    if not now.any():
      return
    for i in np.flatnonzero(now):
      x_axis = view.kick(i, heading_angle[i], strength[i])
      lean[i] = np.degrees(np.arcsin(np.clip(-x_axis[2], -1.0, 1.0)))
      kicked[i] = True

  played = player.play(policy, metadata["env"], metadata.get("task") or "flat_terrain", config, metadata, episodes,
                       source="runtime" if args.runtime else "env", on_step=on_step)  # fmt: skip
  fell = np.array([e["fell"] for e in played])
  survival = np.array([e["survival_s"] for e in played])
  toppled = fell & (survival > kick_time)  # fell after its kick
  offsets = np.array([e["trunk_com_offset_m"] for e in played])
  unkicked = np.flatnonzero(~kicked & ~(fell & ~toppled))
  if unkicked.size:
    raise SystemExit(f"error: {unkicked.size} episodes were never kicked (first: {episodes[unkicked[0]][0].name})")
  grid = toppled.reshape(len(cells), args.seeds)  # cell x seed; seed s of every cell kicks at the same gait phase
  result = {
    "policy": str(policy_path),
    "source": "runtime" if args.runtime else "env",
    "seeds": args.seeds,
    "kick_at_s": args.kick_at,
    "after_s": args.after,
    "machine": machine(),
    "no_step_capture_limit_mps_by_direction_deg": capture_limits(angles),
    "gait_period_s": round(period, 4),
    "without": sorted(args.without),
    "overrides": args.overrides,
    "falls_before_kick": int((fell & ~toppled).sum()),
    "commands": {},
  }
  command_of = np.repeat([c for c, _, _ in cells], args.seeds)
  for name in COMMANDS:
    table, by_phase, by_offset, fall_times, causes = {}, {}, {}, [], {}
    for m in args.magnitudes:
      rows = [cells.index((name, a, m)) for a in angles]
      ks = np.array([c * args.seeds + s for c in rows for s in range(args.seeds)])  # the episodes of these cells
      bins = np.digitize(offset_along_kick(offsets[ks], heading_angle[ks]), OFFSET_BINS_CM)
      by_offset[f"{m}"] = {
        f"{lo:g} to {hi:g}": f"{int(toppled[ks][bins == b].sum())}/{int((bins == b).sum())}"
        for b, (lo, hi) in enumerate(zip(OFFSET_EDGES_CM[:-1], OFFSET_EDGES_CM[1:], strict=True))
      }
      table[f"{m}"] = {f"{a:.0f}": round(float(grid[c].mean()), 3) for a, c in zip(angles, rows)}
      # Pooled over directions.
      by_phase[f"{m}"] = {
        f"{(kick_time[s] / period) % 1.0:.3f}": round(float(grid[rows, s].mean()), 3) for s in range(args.seeds)
      }
      for k in ks:
        if toppled[k]:
          fall_times.append(survival[k] - kick_time[k])
          causes[played[k]["fall_cause"]] = causes.get(played[k]["fall_cause"], 0) + 1
    result["commands"][name] = {
      "fall_share_by_strength_and_direction_deg": table,
      "fall_share_by_strength_and_gait_phase": by_phase,
      "fall_share_by_strength": {k: round(float(np.mean(list(v.values()))), 3) for k, v in table.items()},
      "fall_causes": causes,
      "fall_share_by_strength_and_trunk_offset_along_kick_cm": by_offset,
      "mean_s_kick_to_fall": round(float(np.mean(fall_times)), 2) if fall_times else None,
      "mean_trunk_lean_forward_deg_at_kick": round(float(lean[command_of == name].mean()), 2),
    }
  emit(result)


if __name__ == "__main__":
  main()
