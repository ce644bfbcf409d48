"""Which randomized servos a policy falls on: falls against each model's servo draws.

    uv run python -m benchmarks.servo_falls POLICY.onnx --servo c001 --seeds 64
    uv run python -m benchmarks.servo_falls POLICY.onnx --set domain_randomization.damping_scale="(0.8, 3.77)"

The file plays the scorecard's walking and turning entries (no pushes) in
runtime mode (`--env`: the env's observation functions), `--seeds` episodes
each, every episode on its own domain-randomized model (the profile's servo
ranges, `servos.domain_randomization`), with sensor noise and delays. Each
model's leg servos are then read back: kp, damping, torque limit and
armature against the nominal servo's, their no-load speed (torque /
damping) and kp / damping (how lively a servo is for its damping), and the
trunk's centre-of-mass offset (x forward, y left, z up). The
falls are reported by bins of the leg servos' mean kp / damping and by
quartiles of each quantity: a quantity the falls follow names the servos
the policy cannot walk on.
"""

from __future__ import annotations

import argparse
import logging

import jax
import mujoco
import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine

#: The scorecard entries played: walking and turning, no pushes, not standing.
ENTRIES = (
  "forward_0.15",
  "backward_0.1",
  "left_0.1",
  "right_0.1",
  "turn_left_0.5",
  "turn_right_0.5",
  "turn_left_1.0",
  "turn_right_1.0",
  "script",
)
#: Bin edges of the leg servos' mean kp / damping, relative to the nominal servo's.
RATIO_EDGES = (0.6, 0.7, 0.8, 0.9, 1.0)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("policy", help=".onnx policy file")
  parser.add_argument("--servo", default=None, help="servo profile to play with (default: the file's)")
  parser.add_argument("--seeds", type=int, default=64, help="episodes per entry")
  parser.add_argument("--seed", type=int, default=0, help="base seed of the models, noise and delays")
  parser.add_argument("--env", action="store_true", help="the env's observations instead of the runtime's loop")
  parser.add_argument(
    "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="env config override"
  )
  args = parser.parse_args()
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")

  from playground.common import configs
  from playground.common.evaluation.scorecard import HOLD_CAUSE
  from playground.open_duck_mini_v2.evaluation import player
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.evaluation import scorecard
  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.model import servos

  overrides = configs.parse_overrides(args.overrides)
  commands = [c for c in scorecard.suite() if c.name in ENTRIES]
  n = len(commands) * args.seeds
  keys = np.asarray(jax.random.split(jax.random.PRNGKey(args.seed), n))
  source = "env" if args.env else "runtime"
  card = scorecard.score(
    args.policy,
    None,
    seeds=args.seeds,
    seed=args.seed,
    commands=commands,
    model_keys=keys,
    source=source,
    servo=args.servo,
    overrides=overrides,
  )
  metadata = policy_io.read_metadata(args.policy)
  config = policy_io.play_config(
    metadata, None, noise=True, delays=True, randomization=True, overrides=overrides, servo=args.servo
  )
  nominal = player.env_steps(metadata["env"], card["task"], config).env.mj_model
  models = player.randomized_models(nominal, config, keys)
  legs = [constants.ACTUATOR_NAMES.index(name) for name in constants.LEG_JOINT_NAMES]
  dof = nominal.jnt_dofadr[nominal.actuator_trnid[legs, 0]]

  def ratios(m):
    kp = m.actuator_gainprm[legs, 0] / nominal.actuator_gainprm[legs, 0]
    damping = m.dof_damping[dof] / nominal.dof_damping[dof]
    torque = m.actuator_forcerange[legs, 1] / nominal.actuator_forcerange[legs, 1]
    armature = m.dof_armature[dof] / nominal.dof_armature[dof]
    return {
      "kp_per_damping": float(np.mean(kp / damping)),
      "kp": float(kp.mean()),
      "damping": float(damping.mean()),
      "torque": float(torque.mean()),
      "armature": float(armature.mean()),
      "min_no_load_speed_radps": float(np.min(m.actuator_forcerange[legs, 1] / m.dof_damping[dof])),
    }

  # The models read back must be those the card played: each episode's trunk offset names its model.
  root = mujoco.mj_name2id(nominal, mujoco.mjtObj.mjOBJ_BODY, constants.ROOT_BODY)
  for i, (m, e) in enumerate(zip(models, card["episodes"])):
    read_back = m.body_ipos[root] - nominal.body_ipos[root]
    if not np.allclose(read_back, e["trunk_com_offset_m"], atol=1e-4):
      raise SystemExit(f"error: model {i} read back is not the one the scorecard played (trunk offset differs)")
  features = [
    {**ratios(m), **dict(zip(("trunk_com_x_m", "trunk_com_y_m", "trunk_com_z_m"), e["trunk_com_offset_m"]))}
    for m, e in zip(models, card["episodes"])
  ]
  fell = np.array([e["fell"] for e in card["episodes"]])
  ratio = np.array([f["kp_per_damping"] for f in features])
  edges = (-np.inf, *RATIO_EDGES, np.inf)
  by_ratio = []
  for lo, hi in zip(edges[:-1], edges[1:]):
    rows = (ratio >= lo) & (ratio < hi)
    by_ratio.append(
      {
        "kp_per_damping": [None if np.isinf(lo) else lo, None if np.isinf(hi) else hi],
        "episodes": int(rows.sum()),
        "fall_share": round(float(fell[rows].mean()), 3) if rows.any() else None,
      }
    )
  by_quartile = {}
  for name in features[0]:
    x = np.array([f[name] for f in features])
    edges_q = np.quantile(x, [0.25, 0.5, 0.75])
    bins = np.digitize(x, edges_q)
    by_quartile[name] = {
      "quartile_edges": [round(float(q), 3) for q in edges_q],
      "fall_share": [round(float(fell[bins == b].mean()), 3) for b in range(4)],
      "mean_fell": round(float(x[fell].mean()), 3) if fell.any() else None,
      "mean_stood": round(float(x[~fell].mean()), 3),
    }
  emit(
    {
      "benchmark": "servo_falls",
      "policy": args.policy,
      "servo_profile": servos.name_of(config),
      "source": source,
      "overrides": args.overrides,
      "seeds": args.seeds,
      "entries": list(ENTRIES),
      "episodes": n,
      "falls": int(fell.sum()),
      # Of those, ducks already down when the runtime's start-up hold ended (no policy acted yet).
      "falls_in_hold": int(sum(e["fall_cause"] == HOLD_CAUSE for e in card["episodes"])),
      "falls_by_entry": {c.name: sum(e["fell"] for e in card["episodes"] if e["command"] == c.name) for c in commands},
      "conditions": "the scorecard's walking and turning entries, no pushes; randomized models, noise and delays",
      "machine": machine(),
      "by_kp_per_damping": by_ratio,
      "by_quartile": by_quartile,
    }
  )


if __name__ == "__main__":
  main()
