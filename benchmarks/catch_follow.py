"""Does a policy react to a kick as the recovery reference asks: its leg targets against the searched catch's.

    uv run python -m benchmarks.catch_follow checkpoints/RUN/STEP/policy.onnx catch.json --directions 0 180

`catch.json` is the `catch_search --shared` result a run imitated
(`push_config.catch_reference`). For each direction the file holds a zero
command on the nominal model (no noise, no delays, no randomization) from
`--envs` starts; after `--settle` s its trunk is kicked `--kick` m/s
(degrees from the heading, 0: forward, 180: straight back), and it plays on
for `--after` s. Over the first `--window` s after the kick (the recovery
window) it reports, per direction:

- the reference's RMS excursion of the leg targets from the posture held
  before the kick (what following it asks for), the policy's own, and the
  RMS gap between the two (the reference played about the posture held, so a
  posture offset is not counted as a failure to react). As the reward does,
  each step is compared with the nearer of the motion and its mirror image
  (the same catch on the other foot); `mirror_side` is the share of steps
  the mirror image was the nearer;
- the mean per control step of exp(-gap² / `--sigma`), the reward's
  `catch_imitation` term at `reward_config.catch_sigma`;
- the share of starts that fell within `--after` s.

A policy whose excursion stays near 0 while the reference's is large does
not react to the kick at all, whatever the reward paid for.
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


def follow(
  env,
  policy,
  reference,
  directions,
  *,
  kick: float,
  envs: int,
  settle_steps: int,
  window: int,
  after: int,
  action_scale: float,
  sigma: float,
  mirror=None,
) -> dict:
  """Per direction (degrees): the excursions, the gap, the reward term's mean and the fall share (see the module).

  `policy` is a batched `fn(obs[n, obs_size]) -> actions[n, 14]`; `reference` a `CatchReference`;
  the step counts are control steps. `mirror` maps leg-joint values to their mirror image
  (`mirror.leg_map`); None compares with the motion only.
  """
  import jax
  import jax.numpy as jp

  from playground.open_duck_mini_v2.tasks.joystick import IMITATED_JOINTS

  legs = np.array(IMITATED_JOINTS)
  reset, step = batched(env)
  targets = jax.jit(jax.vmap(reference.targets, in_axes=(None, None, 0)))
  if mirror is not None:
    mirrored = jax.jit(
      jax.vmap(lambda k, t, stance: reference.mirrored_targets(k, t, stance, mirror), in_axes=(None, None, 0))
    )
  out = {}
  for direction in directions:
    state = hold_command(reset(jax.random.split(jax.random.PRNGKey(0), envs)), None)
    for _ in range(settle_steps):
      action = np.asarray(policy(np.asarray(state.obs["state"])))
      state = step(state, jp.asarray(action))
    held = action[:, legs] * action_scale  # [envs, 10], rad from home
    qvel = kicked_qvel(state.data.qpos, state.data.qvel, kick, direction)
    state = state.replace(data=state.data.replace(qvel=jp.asarray(qvel)))
    angle = np.radians(direction)
    kick_xy = jp.asarray([kick * np.cos(angle), kick * np.sin(angle)], jp.float32)
    fell = np.zeros(envs, bool)
    ref_moves, own_moves, gaps, paid, sides = [], [], [], [], []
    for t in range(after):
      action = np.asarray(policy(np.asarray(state.obs["state"])))
      state = step(state, jp.asarray(action))
      fell |= np.asarray(state.done) > 0.5
      if t < window:
        own = action[:, legs] * action_scale - held
        ref = np.asarray(targets(kick_xy, jp.asarray(t), jp.asarray(held))) - held
        gap = np.sum(np.square(own - ref), axis=1)
        if mirror is not None:
          other = np.asarray(mirrored(kick_xy, jp.asarray(t), jp.asarray(held))) - held
          other_gap = np.sum(np.square(own - other), axis=1)
          side = other_gap < gap * (1.0 - 1e-4)  # a tie (nothing moved) keeps the motion
          ref, gap = np.where(side[:, None], other, ref), np.minimum(gap, other_gap)
        else:
          side = np.zeros(envs, bool)
        live = ~fell
        if live.any():
          sides.append(side[live])
          gap = gap[live]
          ref_moves.append(np.mean(np.square(ref), axis=1)[live])
          own_moves.append(np.mean(np.square(own), axis=1)[live])
          gaps.append(gap / len(legs))
          paid.append(np.exp(-gap / sigma))
    out[f"{direction:g}"] = {
      "reference_excursion_rms_rad": round(float(np.sqrt(np.mean(np.concatenate(ref_moves)))), 4),
      "policy_excursion_rms_rad": round(float(np.sqrt(np.mean(np.concatenate(own_moves)))), 4),
      "gap_rms_rad": round(float(np.sqrt(np.mean(np.concatenate(gaps)))), 4),
      "catch_imitation_per_step": round(float(np.mean(np.concatenate(paid))), 3),
      "mirror_side": round(float(np.mean(np.concatenate(sides))), 3),
      "fell": round(float(fell.mean()), 3),
    }
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("policy", type=Path, help=".onnx policy file")
  parser.add_argument("reference", type=Path, help="the catch_search --shared JSON the run imitated")
  parser.add_argument("--directions", type=float, nargs="+", default=[0.0, 180.0], help="degrees from the heading")
  parser.add_argument("--kick", type=float, default=0.5, help="kick strength, m/s")
  parser.add_argument("--envs", type=int, default=4, help="starts (spawn noise, heading) per direction")
  parser.add_argument("--settle", type=float, default=1.5, help="s held at a zero command before the kick")
  parser.add_argument("--window", type=float, default=0.75, help="s after the kick the reaction is compared over")
  parser.add_argument("--after", type=float, default=2.0, help="s after the kick a fall is counted in")
  parser.add_argument("--sigma", type=float, default=0.05, help="the reward's reward_config.catch_sigma")
  args = parser.parse_args()

  from benchmarks.posture_reward import history_overrides
  from benchmarks.posture_reward import posture_env
  from playground.common.configs import ConfigError
  from playground.common.tasks.catch_reference import CatchReference
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.model import mirror

  if not args.policy.is_file():
    raise SystemExit(f"error: no such policy file: {args.policy}")
  env, cfg = posture_env([*KICK_ONLY_OVERRIDES, *history_overrides(args.policy)])
  try:
    reference = CatchReference.load(args.reference, constants.LEG_JOINT_NAMES, float(env.dt))
  except ConfigError as e:
    raise SystemExit(f"error: {e}") from None
  dt = float(env.dt)
  result = follow(
    env,
    policy_io.onnx_policy(args.policy, batched=True),
    reference,
    args.directions,
    kick=args.kick,
    envs=args.envs,
    settle_steps=int(round(args.settle / dt)),
    window=int(round(args.window / dt)),
    after=int(round(args.after / dt)),
    action_scale=float(cfg.env_config.action_scale),
    sigma=args.sigma,
    mirror=mirror.leg_map(env.mj_model),
  )
  emit(
    {
      "benchmark": "catch_follow",
      "policy": str(args.policy),
      "reference": str(args.reference),
      "conditions": "nominal model, no noise, no delays; zero command; one kick per start",
      "kick_mps": args.kick,
      "envs": args.envs,
      "settle_s": args.settle,
      "window_s": args.window,
      "after_s": args.after,
      "sigma": args.sigma,
      "by_direction_deg": result,
      "machine": machine(),
    }
  )


if __name__ == "__main__":
  main()
