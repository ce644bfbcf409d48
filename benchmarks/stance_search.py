"""What a stance allows: does any fixed leg posture within a reach stand a kick without a step?

    uv run python -m benchmarks.stance_search --kick 0.5 --directions 8 [--write_policy stance.onnx]

No policy and no step: the duck starts in its home pose (nominal model, no
noise, no delays, zero command), moves its leg servos to a fixed posture and
holds it (a statue in that posture); after `--settle` seconds its trunk is
kicked (`--kick` m/s) in each of `--directions` evenly spaced directions,
and it must stay up for `--after` seconds. Every candidate is tried from
`--starts` initial states (the env's spawn noise and heading): a posture
tuned to one start can ride a transient that another start does not have. A cross-entropy search looks for
the left/right-symmetric posture (five leg offsets, the right leg the
mirror of the left) within `--reach` action units of home (x
`action_scale`: the runtime's reach is 1 unit, a policy's tanh never
quite gets there) that survives the most directions, then the longest,
then stays the most upright.

It reports the kicks the home pose catches, per direction (the share of
starts and the mean time survived), the best posture's offsets (rad), its
catches per direction, and the trunk's pitch in each.
A posture that stands every kick shows that the standing kicks need no
step, only a stance; one that does not is evidence (up to the search's
coverage) that they need a step. `--write_policy FILE` writes the best
posture as a policy file that outputs it whatever it observes (the statue
in that stance), with the default joystick env's metadata, so that
`benchmarks.push_directions FILE` judges it with randomization, noise and
delays in env and runtime mode, as it judges any policy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks import statue
from benchmarks.common import KICK_ONLY_OVERRIDES
from benchmarks.common import build_env
from benchmarks.common import emit
from benchmarks.common import hold_command
from benchmarks.common import kicked_qvel
from benchmarks.common import machine
from benchmarks.common import trunk_pitch_deg
from benchmarks.common import trunk_up_z

#: Largest |tanh| a written policy outputs (its bias is the arctanh of the offset).
MAX_TANH = 0.98


def symmetric_actions(left: np.ndarray, left_index: np.ndarray, mirror_index, mirror_sign, n_act: int) -> np.ndarray:
  """[P, 5] left-leg actions -> [P, n_act] actions with the right leg their mirror and the head at home.

  `mirror_index` and `mirror_sign` are the joints' `SignedPermutation`
  (y[i] = sign[i] x[index[i]]); a posture is symmetric when it is its own
  mirror image.
  """
  out = np.zeros((left.shape[0], n_act), left.dtype)
  out[:, left_index] = left
  mirrored = out[:, mirror_index] * np.asarray(mirror_sign, left.dtype)
  right = [i for i in range(n_act) if mirror_index[i] in left_index and i not in left_index]
  out[:, right] = mirrored[:, right]
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--kick", type=float, default=0.5, help="kick strength, m/s")
  parser.add_argument("--directions", type=int, default=8, help="kick directions, evenly spaced from straight ahead")
  parser.add_argument("--reach", type=float, default=MAX_TANH, help="action units around home")
  parser.add_argument("--settle", type=float, default=2.0, help="s in the posture before the kick")
  parser.add_argument("--after", type=float, default=3.0, help="s the duck must stay up after the kick")
  parser.add_argument("--starts", type=int, default=3, help="initial states (spawn noise, heading) per candidate")
  parser.add_argument("--population", type=int, default=32, help="candidates per iteration")
  parser.add_argument("--elite", type=int, default=6, help="candidates the next iteration is fitted to")
  parser.add_argument("--iterations", type=int, default=8, help="search iterations")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--write_policy", type=Path, help="write the best posture as a policy file here")
  args = parser.parse_args()
  if args.elite >= args.population or min(args.iterations, args.directions, args.starts) < 1:
    raise SystemExit("error: need 1 <= iterations, 1 <= directions, 1 <= starts and elite < population")
  if args.write_policy is not None and not args.write_policy.parent.is_dir():
    raise SystemExit(f"error: --write_policy: no directory {args.write_policy.parent}")

  import jax
  import jax.numpy as jp

  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.model import mirror

  _, env, _, cfg = build_env("joystick", "flat_terrain", list(KICK_ONLY_OVERRIDES), preset="cpu")
  dt = float(env.dt)
  action_scale = float(cfg.env_config.action_scale)
  names = constants.ACTUATOR_NAMES
  n_act = len(names)
  left = np.array([names.index(n) for n in constants.LEG_JOINT_NAMES if n.startswith("left_")])
  joints = mirror.joint_map(env.mj_model)
  index, sign = np.array(joints.index), np.array(joints.sign)
  settle, total = int(round(args.settle / dt)), int(round(args.after / dt))
  angles = np.arange(args.directions) * 360.0 / args.directions

  step = jax.jit(jax.vmap(env.step))
  n_starts = args.starts
  start = hold_command(jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(args.seed), n_starts)), None)

  @jax.jit
  def settle_in(actions):
    """Each candidate ([P x starts, 14] actions, candidate-major) held from each start until the
    kick: the state, its trunk pitch (deg) and whether it stood."""
    batch = jax.tree_util.tree_map(lambda x: jp.tile(x, (actions.shape[0] // n_starts,) + (1,) * (x.ndim - 1)), start)

    def hold(s, _):
      s = step(s, actions)
      return s, s.done

    settled, fell = jax.lax.scan(hold, batch, None, length=settle)
    pitch = trunk_pitch_deg(settled.data.qpos, jp)
    return settled, pitch, fell.max(axis=0) < 0.5

  @jax.jit
  def ride_out(kicked, held):
    """Survived steps and the final trunk up-z of each kicked state holding its posture."""

    def after(carry, _):
      s, alive = carry
      s = step(s, held)
      alive = alive * (1.0 - s.done)
      return (s, alive), alive

    (final, _), alive = jax.lax.scan(after, (kicked, jp.ones(held.shape[0])), None, length=total)
    return alive.sum(axis=0), trunk_up_z(final.data.qpos)

  def evaluate(actions):
    """Per candidate ([P, 14]), start and direction: steps survived after the kick and the final
    up-z; per candidate: the mean trunk pitch in its posture and whether it stood until every kick."""
    population = actions.shape[0]
    per_start = np.repeat(actions, n_starts, axis=0)
    settled, pitch, stood = settle_in(jp.asarray(per_start))
    kicked = jax.tree_util.tree_map(lambda x: jp.repeat(x, len(angles), axis=0), settled)
    qvel = kicked_qvel(kicked.data.qpos, kicked.data.qvel, args.kick, np.tile(angles, population * n_starts))
    kicked = kicked.replace(data=kicked.data.replace(qvel=jp.asarray(qvel)))
    survived, up_z = ride_out(kicked, jp.repeat(jp.asarray(per_start), len(angles), axis=0))
    shape = (population, n_starts, len(angles))
    stood = np.asarray(stood).reshape(population, n_starts).all(axis=1)
    pitch = np.asarray(pitch).reshape(population, n_starts).mean(axis=1)
    return np.asarray(survived).reshape(shape), np.asarray(up_z).reshape(shape), pitch, stood

  rng = np.random.default_rng(args.seed)
  mean = np.zeros(len(left))
  std = np.full(len(left), args.reach / 2)
  best, home = None, None
  for _ in range(args.iterations):
    candidates = np.clip(rng.normal(mean, std, (args.population, len(left))), -args.reach, args.reach)
    candidates[0] = 0.0 if home is None else best["left"]  # the home pose first, then the best so far
    actions = symmetric_actions(candidates.astype(np.float32), left, index, sign, n_act)
    survived, up_z, pitch, stood = evaluate(actions)
    caught = (survived >= total) & stood[:, None, None]
    fitness = (
      caught.sum(axis=(1, 2)) * 10.0
      + (survived * stood[:, None, None]).mean(axis=(1, 2)) / total
      + up_z.min(axis=(1, 2)) * 0.01
    )
    if home is None:
      home = {"survived": survived[0], "pitch": float(pitch[0])}
    order = np.argsort(-fitness)
    if best is None or fitness[order[0]] > best["fitness"]:
      i = order[0]
      best = {
        "fitness": float(fitness[i]),
        "left": candidates[i].copy(),
        "actions": actions[i],
        "survived": survived[i],
        "pitch": float(pitch[i]),
        "stood": bool(stood[i]),
      }
    elite = candidates[order[: args.elite]]
    mean, std = elite.mean(axis=0), np.maximum(elite.std(axis=0), args.reach / 20)

  def per_direction(survived):
    """[starts, directions] steps survived -> per direction: the share of starts that stayed up and
    the mean seconds survived."""
    return {
      f"{a:g} deg": {
        "caught": round(float(np.mean(col >= total)), 3),
        "mean_survived_s": round(float(col.mean() * dt), 2),
      }
      for a, col in zip(angles, survived.T, strict=True)
    }

  if args.write_policy is not None:
    pre_tanh = np.arctanh(np.clip(np.asarray(best["actions"]), -MAX_TANH, MAX_TANH))
    statue.write_statue(args.write_policy, pre_tanh)
  emit(
    {
      "benchmark": "stance_search",
      "kick_mps": args.kick,
      "directions": args.directions,
      "after_s": args.after,
      "settle_s": args.settle,
      "reach_rad": round(args.reach * action_scale, 3),
      "starts": n_starts,
      "population": args.population,
      "iterations": args.iterations,
      "action_scale": action_scale,
      "conditions": "nominal model, no noise, no delays, zero command; a fixed symmetric leg posture, no step",
      "machine": machine(),
      "home_pose": {
        "kicks_caught": f"{int(np.sum(home['survived'] >= total))}/{home['survived'].size}",
        "by_direction": per_direction(home["survived"]),
        "trunk_pitch_deg": round(home["pitch"], 2),
      },
      "best_posture": {
        "kicks_caught": f"{int(np.sum(best['survived'] >= total)) if best['stood'] else 0}/{best['survived'].size}",
        "stood_until_the_kick": best["stood"],
        "by_direction": per_direction(best["survived"]),
        "trunk_pitch_deg": round(best["pitch"], 2),
        "offset_rad": {
          names[j]: round(float(a) * action_scale, 3) for j, a in enumerate(best["actions"]) if abs(a) > 0 or j in left
        },
      },
      "policy_file": str(args.write_policy) if args.write_policy is not None else None,
    }
  )


if __name__ == "__main__":
  main()
