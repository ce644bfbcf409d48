"""What makes a policy fall on the scorecard: one disturbance at a time turned off.

Scores one policy (a run, a checkpoint or an .onnx file, as `score.py` takes)
on the scorecard suite under the run's own conditions, then again with each
disturbance removed in turn (sensor noise, delays, all randomization, and each
randomization range) and with a sweep of trunk centre-of-mass offset ranges.
The same seeds draw the same models, noise and delays in every variant, so a
fall that disappears when one disturbance is removed is caused by it. Also
lists, for the run's own conditions, the trunk offset of every model that fell.

`--training_models` adds the variant `training_models`: the run's own
conditions on the randomized models the run trained on (environments 0, 1,
... of its seed, `vec_env.randomization_keys`) instead of fresh ones.
Falling there as often as on fresh models means the policy is not merely
specialized to the few hundred models it saw.

  uv run python -m benchmarks.fall_causes checkpoints/<run>/<step> --seeds 6
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import emit
from benchmarks.common import machine

#: Variant name -> `--set` overrides (on top of the run's env config).
VARIANTS: dict[str, tuple[tuple[str, str], ...]] = {
  "as_trained": (),
  "no_sensor_noise": (("noise_config.level", "0.0"),),
  "no_delays": (("delay.action_steps", "[0,0]"), ("delay.imu_steps", "[0,0]")),
  "no_randomization": (("domain_randomization.enabled", "false"),),
  "no_com_offset": (("domain_randomization.com_offset", "0.0"),),
  "no_joint_offset": (("domain_randomization.joint_offset", "0.0"),),
  "fixed_floor_friction": (("domain_randomization.floor_friction", "[1.0,1.0]"),),
  "fixed_kp": (("domain_randomization.kp_scale", "[1.0,1.0]"), ("domain_randomization.head_kp_scale", "[1.0,1.0]")),
  "fixed_masses": (
    ("domain_randomization.link_mass_scale", "[1.0,1.0]"),
    ("domain_randomization.trunk_extra_mass", "[0.0,0.0]"),
  ),
}
COM_SWEEP = (0.02, 0.03, 0.04, 0.05)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("path", help="run directory, checkpoint directory or .onnx file")
  parser.add_argument("--seeds", type=int, default=6, help="episodes per command")
  parser.add_argument("--no_sweep", action="store_true", help="skip the centre-of-mass range sweep")
  parser.add_argument("--training_models", action="store_true", help="also score on the run's own training models")
  parser.add_argument("--only", nargs="*", default=None, help="variants to run (default: all)")
  args = parser.parse_args()
  from playground.common.train import vec_env
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.evaluation import scorecard

  policy, env_config, where = policy_io.resolve_policy(Path(args.path))
  commands = scorecard.suite()  # without the training-pushes entry: a fixed count of episodes per model key
  trained_com = (env_config or {}).get("domain_randomization", {}).get("com_offset")
  variants = dict(VARIANTS)
  if not args.no_sweep:
    for com in COM_SWEEP:
      variants[f"com_offset_{com}"] = (("domain_randomization.com_offset", str(com)),)
  if args.training_models:
    variants["training_models"] = ()
  if args.only is not None:
    unknown = sorted(set(args.only) - set(variants))
    if unknown:
      raise SystemExit(f"error: unknown variants {unknown}; valid: {', '.join(variants)}")
    variants = {name: v for name, v in variants.items() if name in args.only}
  results, fallen, falls_on_training_models = {}, [], []
  for name, overrides in variants.items():
    keys = None
    if name == "training_models":
      episodes = len(commands) * args.seeds
      keys = vec_env.randomization_keys(run_seed(Path(where)), list(range(episodes)))
      # The training models include the trunk offset's training margin, which the scorecard drops.
      margin = (env_config or {}).get("domain_randomization", {}).get("com_offset_margin", 0.0)
      overrides = (("domain_randomization.com_offset_margin", str(margin)),) if margin else ()
    card = scorecard.score(
      policy, env_config, seeds=args.seeds, commands=commands, overrides=overrides, model_keys=keys
    )
    results[name] = card["headline"]
    if name == "as_trained":
      fallen = [e for e in card["episodes"] if e["fell"]]
    if name == "training_models":
      falls_on_training_models = [e for e in card["episodes"] if e["fell"]]
  emit(
    {
      "benchmark": "fall_causes",
      "machine": machine(),
      "policy": str(policy),
      "trained_com_offset": trained_com,
      "seeds": args.seeds,
      "variants": results,
      "falls_as_trained": fallen,
      "falls_on_training_models": falls_on_training_models,
    }
  )


def run_seed(where: Path) -> int:
  """The training seed of the run that `where` (a checkpoint or the run directory) belongs to."""
  for directory in (where, *where.parents):
    record = directory / "config.json"
    if record.is_file():
      return int(json.loads(record.read_text())["flags"]["seed"])
  raise SystemExit(f"error: no run config.json at or above {where}: --training_models needs the run's seed")


if __name__ == "__main__":
  main()
