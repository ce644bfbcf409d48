"""What a policy file sees of a kick: its inputs after the kick, in its own normalizer's units.

    uv run python -m benchmarks.kick_signal checkpoints/RUN/STEP/policy.onnx --directions 180 0

The file holds a zero command on the nominal model (no noise, no delays, no
randomization) from `--envs` starts; after `--settle` s its trunk is kicked
`--kick` m/s (degrees from the heading, 0: forward). Every observation the
file receives is normalized with the file's own statistics (`obs_mean`,
`obs_std`, the training distribution: walking and standing), so 1 is one
standard deviation of what the policy met in training. Per direction and
observation block it reports the largest change from the mean of the
second before the kick, at each of the first steps after it
(`max_abs_z_by_step`, step 0: the observation of the kicked state), and how
much the block moved in that second (`quiet_std`).

A reaction learned from the kick must start from these changes: a block
that moves by a tenth of its training spread says little to the network's
first layer, one that moves by several says much.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import KICK_ONLY_OVERRIDES
from benchmarks.common import batched
from benchmarks.common import emit
from benchmarks.common import hold_command
from benchmarks.common import kicked_qvel
from benchmarks.common import machine

STEPS_AFTER = 8


def normalizer(path: Path) -> tuple[np.ndarray, np.ndarray]:
  """The observation mean and std stored in a policy file exported by this project."""
  import onnx
  from onnx import numpy_helper

  inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}
  if "obs_mean" not in inits or "obs_std" not in inits:
    raise ValueError(f"{path} holds no observation normalizer (obs_mean, obs_std)")
  return inits["obs_mean"].astype(np.float64), inits["obs_std"].astype(np.float64)


def signal(env, policy, mean, std, fields, directions, *, kick: float, envs: int, settle_steps: int) -> dict:
  """Per direction (degrees) and observation block: the normalized change after the kick (see the module).

  `policy` is a batched `fn(obs[n, obs_size]) -> actions[n, 14]`; `fields` the actor layout's
  (name, size) pairs; `settle_steps` control steps, of which the last 50 are the quiet reference.
  """
  import jax
  import jax.numpy as jp

  reset, step = batched(env)
  quiet_steps = min(50, settle_steps)
  out = {}
  for direction in directions:
    state = hold_command(reset(jax.random.split(jax.random.PRNGKey(0), envs)), None)
    zs = []
    for t in range(settle_steps + STEPS_AFTER):
      if t == settle_steps:
        qvel = kicked_qvel(state.data.qpos, state.data.qvel, kick, direction)
        state = state.replace(data=state.data.replace(qvel=jp.asarray(qvel)))
      obs = np.asarray(state.obs["state"], np.float64)
      zs.append((obs - mean) / std)
      state = step(state, jp.asarray(policy(obs.astype(np.float32))))
    z = np.stack(zs)  # [T, envs, obs]
    quiet, after = z[settle_steps - quiet_steps : settle_steps], z[settle_steps:]
    base = quiet.mean(axis=0)
    blocks, start = {}, 0
    for name, size in fields:
      part = slice(start, start + size)
      start += size
      blocks[name] = {
        "quiet_std": round(float(quiet[:, :, part].std(axis=0).mean()), 3),
        "max_abs_z_by_step": [
          round(float(np.abs(after[k][:, part] - base[:, part]).max()), 3) for k in range(STEPS_AFTER)
        ],
      }
    out[f"{direction:g}"] = blocks
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("policy", type=Path, help=".onnx policy file")
  parser.add_argument("--directions", type=float, nargs="+", default=[180.0, 0.0], help="degrees from the heading")
  parser.add_argument("--kick", type=float, default=0.5, help="kick strength, m/s")
  parser.add_argument("--envs", type=int, default=4, help="starts (spawn noise, heading) per direction")
  parser.add_argument("--settle", type=float, default=1.5, help="s held at a zero command before the kick")
  args = parser.parse_args()

  from benchmarks.posture_reward import history_overrides
  from benchmarks.posture_reward import posture_env
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import observations

  if not args.policy.is_file():
    raise SystemExit(f"error: no such policy file: {args.policy}")
  try:
    mean, std = normalizer(args.policy)
  except ValueError as e:
    raise SystemExit(f"error: {e}") from None
  env, cfg = posture_env([*KICK_ONLY_OVERRIDES, *history_overrides(args.policy)])
  layout = observations.state_layout(int(cfg.env_config.get("observation_history", 0)))
  result = signal(
    env,
    policy_io.onnx_policy(args.policy, batched=True),
    mean,
    std,
    layout.fields,
    args.directions,
    kick=args.kick,
    envs=args.envs,
    settle_steps=int(round(args.settle / float(env.dt))),
  )
  emit(
    {
      "benchmark": "kick_signal",
      "policy": str(args.policy),
      "conditions": "nominal model, no noise, no delays; zero command; one kick per start; the file's normalizer",
      "kick_mps": args.kick,
      "envs": args.envs,
      "settle_s": args.settle,
      "by_direction_deg": result,
      "machine": machine(),
    }
  )


if __name__ == "__main__":
  main()
