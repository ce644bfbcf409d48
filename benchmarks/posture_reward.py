"""What the reward pays for standing postures: each term per control step, for policy files held at a zero command.

    uv run python -m benchmarks.posture_reward stance.onnx home.onnx checkpoints/RUN/STEP/policy.onnx
    uv run python -m benchmarks.posture_reward stance.onnx --set reward_config.soft_joint_limit_factor=0.98

Each file plays a zero command in the joystick env of the `cpu` preset (its
reward, with `--set` overrides such as `reward_config.stand_pose.*`; nominal
model, no noise, no delays, no pushes) from `--envs` starts. After
`--settle` seconds, every weighted reward term is averaged per control step
over `--seconds` more. The file is played as the robot runtime plays it:
its output is the action (a residual policy's file adds its own
feed-forward), so the env adds nothing.

A posture that the reward ranks below another one cannot be learned
instead of it: the stance that `stance_search` finds, for example, paid
more joint-limit cost than `stand_still` saved it under the preset's soft
limit (docs/results.md, "The stance in the file, and the limit cost that
forbade it"). The JSON gives per file the mean of each term, their sum,
whether any start fell and the posture held (leg and head motor targets,
rad from home, and the trunk's pitch, nose-down positive). `--statues DIR`
writes a statue holding each file's mean posture: `push_directions` on it
kicks the posture alone, without the policy's reaction. A policy that falls
where its posture held still stands loses the catch by what it does; one
whose posture falls too loses it by where it stands.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import KICK_ONLY_OVERRIDES
from benchmarks.common import batched
from benchmarks.common import build_env
from benchmarks.common import emit
from benchmarks.common import hold_command
from benchmarks.common import machine
from benchmarks.common import trunk_pitch_deg


def posture_env(overrides: list[str]):
  """The `cpu` preset's joystick env with `overrides` and no kicks, playing a policy file's output as its action.

  Returns (env, resolved config). The env adds no feed-forward of its own:
  the file adds the reference gait itself (`policy_io.file_output_is_the_action`).
  """
  from playground.open_duck_mini_v2.evaluation import policy_io

  runner, _, _, cfg = build_env("joystick", "flat_terrain", [*overrides, "push_config.enable=false"], preset="cpu")
  return runner.make_env("joystick", "flat_terrain", policy_io.file_output_is_the_action(cfg.env_config)), cfg


def history_overrides(policy_path) -> list[str]:
  """The `--set` that gives the env the file's observation history (`posture_env` builds the preset's, none).

  Exits with one line if the file is not one of this robot's policies.
  """
  from playground.open_duck_mini_v2.evaluation import policy_io

  try:
    return [f"observation_history={policy_io.observation_history(policy_path)}"]
  except policy_io.ScoreError as e:
    raise SystemExit(f"error: {e}") from None


def posture_terms(env, policies: dict[str, object], envs: int, settle_steps: int, steps: int, seed: int = 0) -> dict:
  """Per policy name: {"terms": mean weighted reward per control step by term, "sum", "fell",
  "held_action": the mean action ([14], action units), "trunk_pitch_deg": the mean pitch, nose-down positive}.

  `policies` maps a name to a batched `fn(obs[n, obs_size]) -> actions[n, 14]`. The means are
  over the envs and the steps after `settle_steps`.
  """
  import jax
  import jax.numpy as jp

  reset, step = batched(env)
  out = {}
  for name, policy in policies.items():
    state = hold_command(reset(jax.random.split(jax.random.PRNGKey(seed), envs)), None)
    sums: dict[str, float] = {}
    fell = np.zeros(envs, bool)
    held, pitch = [], []
    for i in range(settle_steps + steps):
      action = np.asarray(policy(np.asarray(state.obs["state"])))
      state = step(state, jp.asarray(action))
      fell |= np.asarray(state.done) > 0.5
      if i >= settle_steps:
        held.append(action.mean(axis=0))
        pitch.append(trunk_pitch_deg(np.asarray(state.data.qpos)).mean())
        for key, value in jax.device_get(state.metrics).items():
          term = key.removeprefix("reward/")
          if term != key:
            sums[term] = sums.get(term, 0.0) + float(np.mean(value))
    terms = {k: round(v / steps, 5) for k, v in sorted(sums.items())}
    out[name] = {
      "terms": terms,
      "sum": round(sum(terms.values()), 5),
      "fell": bool(fell.any()),
      "held_action": np.mean(held, axis=0),
      "trunk_pitch_deg": round(float(np.mean(pitch)), 2),
    }
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("policies", nargs="+", type=Path, help="policy files (.onnx) to hold at a zero command")
  parser.add_argument("--envs", type=int, default=8, help="starts (spawn noise, heading) per file")
  parser.add_argument("--settle", type=float, default=1.0, help="s played before the terms are averaged")
  parser.add_argument("--seconds", type=float, default=3.0, help="s over which the terms are averaged")
  parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
  parser.add_argument(
    "--statues",
    type=Path,
    help="folder: write for each file a statue holding its mean posture (NAME_held.onnx), to kick the posture alone",
  )
  args = parser.parse_args()

  from benchmarks import statue
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import constants

  missing = [str(p) for p in args.policies if not p.is_file()]
  if missing:
    raise SystemExit(f"error: no such policy file: {', '.join(missing)}")
  env, cfg = posture_env([*KICK_ONLY_OVERRIDES, *args.overrides])
  dt = float(env.dt)
  policies = {str(p): policy_io.onnx_policy(p, batched=True) for p in args.policies}
  result = posture_terms(env, policies, args.envs, int(round(args.settle / dt)), int(round(args.seconds / dt)))
  scale = float(cfg.env_config.action_scale)
  for path, entry in result.items():
    held = entry.pop("held_action")
    entry["held_targets_rad"] = {
      name: round(float(held[i] * scale), 4) for i, name in enumerate(constants.ACTUATOR_NAMES)
    }
    if args.statues:
      # A statue's action is tanh(pre_tanh): the held action, kept inside the tanh's range.
      args.statues.mkdir(parents=True, exist_ok=True)
      file = Path(path)
      # A checkpoint's policy.onnx is named after its run and step.
      name = f"{file.parent.parent.name}_{file.parent.name}" if file.stem == "policy" else file.stem
      out = statue.write_statue(args.statues / f"{name}_held.onnx", np.arctanh(np.clip(held, -0.999, 0.999)))
      entry["statue"] = str(out)
  emit(
    {
      "benchmark": "posture_reward",
      "conditions": "cpu preset's reward at a zero command; nominal model, no noise, no delays, no pushes",
      "overrides": args.overrides,
      "seconds": args.seconds,
      "settle_s": args.settle,
      "envs": args.envs,
      "per_policy": result,
      "ranking": sorted(result, key=lambda name: -result[name]["sum"]),
      "machine": machine(),
    }
  )


if __name__ == "__main__":
  main()
