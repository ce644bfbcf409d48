"""What the physics allows: does any leg motion within a reach catch a kick to the standing duck?

    uv run python -m benchmarks.catch_search --reach 1 2 4 --directions 180 0

No policy: the duck stands in its home pose (nominal model, no noise, no
delays; or, with `--models N`, each of N randomized models in turn) for
`--settle` seconds, then its trunk is kicked (`--kick` m/s, at each of
`--directions`, degrees from its heading). From that one kicked state, a
cross-entropy search looks for an open-loop motion of the ten leg servos
that keeps it up for `--after` seconds: each candidate is a piecewise-linear
path of motor targets through `--knots` knots over `--span` seconds (from
the home pose), held at its last knot afterwards, every target within
`--reach` action units of home (x `action_scale`, 0.25 rad by default; a
policy's tanh residual reaches 1 unit, or `reference.residual_gain` units).
The servos' speed limit and control range apply as in training. `--react`
holds the home pose for that long after the kick before the motion starts: a
policy sees the kick only through its IMU and acts a control step or more
later.

The fitness is the time survived, then the trunk's uprightness at the end.
Per direction and reach the result says whether the home pose alone
survives, the longest survival found, the share of the last population that
survives, and of the best motion: its knots and largest offset per joint
(rad), and each foot's longest time in the air (a step, or none). A kick that
no motion within a reach catches cannot be caught by a policy limited to
that reach either (up to the search's coverage: a catch it finds is a proof,
a miss is evidence).

With `--models N` the search runs on each of the first N models the `cpu`
preset's domain randomization draws (masses, the trunk's centre-of-mass
offset within the scorecard's +-3 cm, friction, servo gains and zero
offsets; noise and delays stay off), with the motion searched for that
model alone. A policy does not know its model, so the share of models on
which no motion catches a kick bounds from below the share of such kicks a
policy with that reach and reaction must fall on (up to the search's
coverage).

    uv run python -m benchmarks.catch_search --reach 2 --react 0.04 --directions 180 0 --models 12

`--shared` (with `--models N`) searches one motion per direction and reach
for all N models at once: each candidate's fitness is its mean over the
models (minus `--effort` times its mean excursion from the pose held, in
action units, so that of the motions that catch as many models the
smallest wins). The output then gives, per direction, the motion's knots
and on how many models it catches the kick. A catch that a single motion makes on
every model needs no knowledge of the model: the policy's recovery
reference (`push_config.catch_reference`) imitates such motions.

    uv run python -m benchmarks.catch_search --reach 1 --react 0.04 --models 8 --shared \
      --directions 0 45 90 135 180 225 270 315 --stance stance_search.json

`--stance FILE` starts from the best posture a `stance_search` found
(`best_posture.offset_rad` of its JSON) instead of the home pose: the duck
settles in it, the motions start from it, and the output's "home pose"
entries are that posture held.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from benchmarks.common import KICK_ONLY_OVERRIDES
from benchmarks.common import build_env
from benchmarks.common import emit
from benchmarks.common import hold_command
from benchmarks.common import kicked_qvel
from benchmarks.common import machine
from benchmarks.common import trunk_up_z
from playground.common.cli import setup_logging
from playground.common.tasks.catch_reference import knot_segment

logger = logging.getLogger("playground")


def knot_path(knots: np.ndarray, steps_per_knot: int, total_steps: int, origin: np.ndarray | None = None) -> np.ndarray:
  """[P, K, J] knots -> [total_steps, P, J] targets: linear from `origin` ([J], default 0) through each knot,
  then held."""
  population, n_knots, joints = knots.shape
  start = np.zeros(joints, knots.dtype) if origin is None else np.asarray(origin, knots.dtype)
  path = np.concatenate([np.broadcast_to(start, (population, 1, joints)), knots], axis=1)
  out = np.empty((total_steps, population, joints), knots.dtype)
  for t in range(total_steps):
    i, w = knot_segment(t, steps_per_knot, n_knots)
    out[t] = (1 - w) * path[:, i] + w * path[:, i + 1]
  return out


def stance_offsets(path: str) -> dict[str, float]:
  """The best posture of a `stance_search` JSON: leg joint name -> rad from home (JSON only, checked)."""
  import json

  from playground.open_duck_mini_v2.model import constants

  try:
    offsets = json.loads(Path(path).read_text())["best_posture"]["offset_rad"]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise SystemExit(f"error: {path} is no stance_search result ({type(e).__name__}: {e})") from None
  valid = (
    isinstance(offsets, dict)
    and offsets
    and set(offsets) <= set(constants.LEG_JOINT_NAMES)
    and all(isinstance(v, (int, float)) and np.isfinite(v) for v in offsets.values())
  )
  if not valid:
    raise SystemExit(f"error: {path}: best_posture.offset_rad must map leg joints {constants.LEG_JOINT_NAMES} to rad")
  return {str(name): float(rad) for name, rad in offsets.items()}


def shared_search(args, model_of, settle, rollout, origin, legs, total, steps_per_knot, react, action_scale) -> dict:
  """One motion per direction and reach for all `args.models` models: the cross-entropy search on the mean
  fitness over them. Per cell: the motion's knots (rad from home) and the models it (and the pose held) catches."""
  import jax
  import jax.numpy as jp

  from playground.open_duck_mini_v2.model import constants

  rng = np.random.default_rng(args.seed)
  population, n_act = args.population, len(origin)
  models = [model_of(i)[0] for i in range(args.models)]
  settled = [settle(m, jax.random.PRNGKey(args.seed)) for m in models]
  results = {}
  for direction in args.directions:
    kicked = []
    for s in settled:
      qvel = kicked_qvel(s.data.qpos, s.data.qvel, args.kick, direction)
      kicked.append(s.replace(data=s.data.replace(qvel=jp.asarray(qvel))))
    for reach in args.reach:
      mean = np.tile(origin[legs], (args.knots, 1))
      std = np.full_like(mean, reach / 2)
      best = (-np.inf, None, None, None)
      for iteration in range(args.iterations):
        knots = np.clip(rng.normal(mean, std, (population, *mean.shape)), -reach, reach)
        knots[0] = origin[legs]  # the pose held
        if best[1] is not None:
          knots[1] = best[1]  # the best so far, judged again on the same models (elitism)
        actions = np.broadcast_to(origin, (total, population, n_act)).copy()
        actions[react:, :, legs] = knot_path(knots.astype(np.float32), steps_per_knot, total - react, origin[legs])
        actions = jp.asarray(actions)
        caught = np.zeros((len(models), population), bool)
        fitness = np.zeros(population)
        for i, (model, start) in enumerate(zip(models, kicked, strict=True)):
          survived, up_z, _ = (np.asarray(x) for x in rollout(model, start, actions))
          caught[i] = survived >= total
          fitness += (survived + np.clip(up_z, -1, 1)) / len(models)
        # The effort: mean |knot - the pose held| in action units (0-2), so that of the motions that
        # catch as many models, the smallest wins.
        fitness -= args.effort * np.abs(knots - origin[legs]).mean(axis=(1, 2))
        order = np.argsort(-fitness)
        if fitness[order[0]] > best[0]:
          best = (float(fitness[order[0]]), knots[order[0]].copy(), caught[:, order[0]].copy(), caught[:, 0].copy())
        elite = knots[order[: args.elite]]
        mean, std = elite.mean(axis=0), np.maximum(elite.std(axis=0), reach / 20)
        logger.info(
          "kick %g deg, reach %g, iteration %d: best catches %d of %d models (held pose %d)",
          direction,
          reach,
          iteration,
          int(best[2].sum()),
          len(models),
          int(best[3].sum()),
        )
      offsets = np.abs(best[1] - origin[legs]).max(axis=0) * action_scale
      results[f"kick {direction:g} deg, reach {reach:g}"] = {
        "reach_rad": round(reach * action_scale, 3),
        "models": len(models),
        "held_pose_stands": int(best[3].sum()),
        "caught": int(best[2].sum()),
        "caught_by_model": [bool(c) for c in best[2]],
        "best_knots_rad": (best[1] * action_scale).round(3).tolist(),
        "best_largest_move_rad": {
          constants.ACTUATOR_NAMES[j]: round(float(o), 3) for j, o in zip(legs, offsets, strict=True)
        },
      }
  return results


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--kick", type=float, default=0.5, help="kick strength, m/s")
  parser.add_argument("--directions", type=float, nargs="+", default=[180.0, 0.0], help="degrees from the heading")
  parser.add_argument("--reach", type=float, nargs="+", default=[1.0, 2.0, 4.0], help="action units around home")
  parser.add_argument("--knots", type=int, default=4, help="knots of each motion")
  parser.add_argument("--span", type=float, default=0.48, help="s from the kick to the last knot")
  parser.add_argument("--after", type=float, default=2.0, help="s the duck must stay up after the kick")
  parser.add_argument("--settle", type=float, default=1.0, help="s standing before the kick")
  parser.add_argument("--react", type=float, default=0.0, help="s the home pose holds after the kick before moving")
  parser.add_argument("--population", type=int, default=128, help="candidates per iteration")
  parser.add_argument("--elite", type=int, default=16, help="candidates the next iteration is fitted to")
  parser.add_argument("--iterations", type=int, default=8, help="search iterations per direction and reach")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
    "--stance",
    help="a stance_search JSON: stand in its best posture (best_posture.offset_rad) instead of the home pose",
  )
  parser.add_argument(
    "--models", type=int, default=0, help="randomized models to search on, one after the other (0: the nominal model)"
  )
  parser.add_argument(
    "--effort",
    type=float,
    default=0.0,
    help="with --shared: fitness lost per action unit of mean excursion from the pose held (prefers small motions)",
  )
  parser.add_argument(
    "--shared", action="store_true", help="with --models: one motion for all models (fitness: the mean over them)"
  )
  args = parser.parse_args()
  setup_logging()
  if args.shared and not args.models:
    raise SystemExit("error: --shared searches one motion for several models: give --models N (N >= 1)")
  if args.elite >= args.population or args.knots < 1 or args.iterations < 1 or args.models < 0:
    raise SystemExit("error: need 1 <= knots, 1 <= iterations, elite < population and models >= 0")

  import jax
  import jax.numpy as jp

  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.tasks.joystick import IMITATED_JOINTS

  # The scorecard's trunk offsets (+-3 cm); training adds a margin.
  overrides = [*KICK_ONLY_OVERRIDES, "domain_randomization.com_offset_margin=0.0"]
  _, env, venv, cfg = build_env("joystick", "flat_terrain", overrides, preset="cpu", num_envs=args.population)
  dt = float(env.dt)
  action_scale = float(cfg.env_config.action_scale)
  legs = np.array(IMITATED_JOINTS)
  n_act = len(constants.ACTUATOR_NAMES)
  total = int(round(args.after / dt))
  steps_per_knot = max(1, int(round(args.span / dt / args.knots)))
  react = int(round(args.react / dt))
  if react >= total:
    raise SystemExit("error: --react must be shorter than --after")

  population = args.population
  # The pose held before the kick, in action units around home: home, or a stance.
  origin = np.zeros(n_act, np.float32)
  stance = stance_offsets(args.stance) if args.stance else None
  for name, rad in (stance or {}).items():
    origin[constants.ACTUATOR_NAMES.index(name)] = rad / action_scale
  if np.abs(origin).max() > min(args.reach):
    raise SystemExit(f"error: the stance leaves the smallest reach ({min(args.reach)} units of home)")
  # Every candidate of a search simulates the same model: model i's copies, or the nominal one.
  model_of = (lambda i: venv.models(jp.full((population,), i))) if args.models else (lambda i: (env.mjx_model, None))
  _, in_axes = model_of(0)

  @jax.jit
  def settle(model, key):
    models = (model, in_axes)
    state = hold_command(venv.reset(jp.repeat(key[None], population, axis=0), models).env, None)

    def body(s, _):
      return venv.step_envs(s, jp.broadcast_to(jp.asarray(origin), (population, n_act)), models), None

    return jax.lax.scan(body, state, None, length=int(round(args.settle / dt)))[0]

  @jax.jit
  def rollout(model, start, targets):
    """Survived steps, final trunk up-z and each foot's longest time in the air of each candidate
    ([T, P, 14] actions)."""
    models = (model, in_axes)

    def body(carry, action):
      s, alive = carry
      s = venv.step_envs(s, action, models)
      alive = alive * (1.0 - s.done)
      return (s, alive), (alive, s.info["feet_air_time"] * alive[:, None])

    (final, _), (alive, air) = jax.lax.scan(body, (start, jp.ones(population)), targets)
    return alive.sum(axis=0), trunk_up_z(final.data.qpos), air.max(axis=0)

  rng = np.random.default_rng(args.seed)
  results = {}
  if args.shared:
    results = shared_search(args, model_of, settle, rollout, origin, legs, total, steps_per_knot, react, action_scale)
  per_model = []
  offsets_cm = []  # each randomized model's trunk centre-of-mass offset, x (forward) and y
  for index in range(0 if args.shared else max(args.models, 1)):
    model, _ = model_of(index)
    settled = settle(model, jax.random.PRNGKey(args.seed))
    found = {}
    for direction in args.directions:
      qvel = kicked_qvel(settled.data.qpos, settled.data.qvel, args.kick, direction)
      kicked = settled.replace(data=settled.data.replace(qvel=jp.asarray(qvel)))
      for reach in args.reach:
        mean = np.tile(origin[legs], (args.knots, 1))
        std = np.full_like(mean, reach / 2)
        best = (-1.0, -2.0, None, None)
        for _ in range(args.iterations):
          knots = np.clip(rng.normal(mean, std, (population, *mean.shape)), -reach, reach)
          knots[0] = origin[legs]  # the pose held (home or the stance), for reference
          actions = np.broadcast_to(origin, (total, population, n_act)).copy()
          actions[react:, :, legs] = knot_path(knots.astype(np.float32), steps_per_knot, total - react, origin[legs])
          survived, up_z, air = (np.asarray(x) for x in rollout(model, kicked, jp.asarray(actions)))
          fitness = survived + np.clip(up_z, -1, 1)
          held_survived = float(survived[0]) * dt  # candidate 0: the pose held
          held_stood = bool(survived[0] >= total)
          order = np.argsort(-fitness)
          if fitness[order[0]] > best[0] + best[1]:
            best = (float(survived[order[0]]), float(up_z[order[0]]), knots[order[0]].copy(), air[order[0]])
          elite = knots[order[: args.elite]]
          mean, std = elite.mean(axis=0), np.maximum(elite.std(axis=0), reach / 20)
          if best[0] >= total and args.models:
            break  # with many models, a catch is all that is asked
        caught = best[0] >= total
        offsets = np.abs(best[2]).max(axis=0) * action_scale if best[2] is not None else np.zeros(len(legs))
        found[(direction, reach)] = (held_stood, bool(caught))
        if args.models:
          continue
        results[f"kick {direction:g} deg, reach {reach:g}"] = {
          "reach_rad": round(reach * action_scale, 3),
          "held_pose_survived_s": round(held_survived, 2),
          "best_survived_s": round(best[0] * dt, 2),
          "caught": bool(caught),
          "best_final_up_z": round(best[1], 3),
          "last_population_surviving": round(float(np.mean(survived >= total)), 3),
          # A foot in the air for more than a control step or two: the motion steps.
          "best_longest_air_s": {"left": round(float(best[3][0]), 2), "right": round(float(best[3][1]), 2)},
          "best_knots_rad": (best[2] * action_scale).round(3).tolist(),
          "best_largest_offset_rad": {
            constants.ACTUATOR_NAMES[j]: round(float(o), 3) for j, o in zip(legs, offsets, strict=True)
          },
        }
    per_model.append(found)
    if args.models:
      offset = np.asarray(model.body_ipos)[0, env.ids.root_body] - env.ids.root_ipos_nominal
      offsets_cm.append(np.round(100 * offset[:2], 1).tolist())
      logger.info("model %d (trunk offset x, y %s cm): %s", index, offsets_cm[-1], found)
  if args.models and not args.shared:
    for direction in args.directions:
      for reach in args.reach:
        cells = [m[(direction, reach)] for m in per_model]
        results[f"kick {direction:g} deg, reach {reach:g}"] = {
          "reach_rad": round(reach * action_scale, 3),
          "models": len(cells),
          "held_pose_stands": sum(held for held, _ in cells),
          "caught": sum(c for _, c in cells),
          "uncatchable_share": round(1.0 - sum(c for _, c in cells) / len(cells), 3),
          "caught_by_model": [c for _, c in cells],
          "trunk_offset_cm_by_model": offsets_cm,
        }
  emit(
    {
      "benchmark": "catch_search",
      "kick_mps": args.kick,
      "after_s": args.after,
      "react_s": round(react * dt, 3),
      "span_s": args.span,
      "knots": args.knots,
      "population": args.population,
      "iterations": args.iterations,
      "action_scale": action_scale,
      "models": args.models,
      "shared": bool(args.shared),
      "effort": args.effort,
      "start_pose": {"stance": args.stance, "offset_rad": stance} if stance else "home",
      "conditions": (
        ("the stance" if args.stance else "home pose")
        + (f", the first {args.models} randomized models" if args.models else ", nominal model")
        + (", one motion for all of them" if args.shared else "")
        + ", no noise, no delays, zero command; open-loop leg motions"
      ),
      "machine": machine(),
      "results": results,
    }
  )


if __name__ == "__main__":
  main()
