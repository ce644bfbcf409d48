"""What the reward says about walking faster: a policy shown a larger command, judged at the true one.

    uv run python -m benchmarks.command_audit POLICY.onnx --set servo_profile=c001
    uv run python -m benchmarks.command_audit POLICY.onnx --command 0.1 --shown 0.1 0.125 0.15 0.2
    uv run python -m benchmarks.command_audit POLICY.onnx --axis yaw --command 0.5 --shown 0.5 0.7 0.9

A policy that walks slower than its command may be held back by its reward
(walking faster earns less) or by its training (faster would earn more, but
PPO did not find it). This tells them apart without training: the policy
file plays the joystick env of the `cpu` preset (its reward, randomized
models, sensor noise and delays; pushes off unless `--pushes`; `--set`
overrides) under the true command, forward at `--command` m/s (or turning
at `--command` rad/s with `--axis yaw`), while the file is shown a command
from `--shown` on the same axis instead (the command slot of its
observation; the file adds its gait at the command it is shown, as on the
robot). The env judges every step at the true command. Each shown command
plays the same `--models` randomized models for `--seconds`.

Per shown command: falls, the speed and yaw rate achieved (heading frame,
after the first second, while up), how far the velocity swings about that mean within
an episode (rms: the gait's own pulse and sway), the reward per second summed over the episode
with each fall's termination and nothing after it, and each term's share.
If a larger shown command walks faster without more falls and earns more at
the true command, the reward prefers the faster walk: what the policy lacks
is training, not incentive. If it earns less, the terms that charge for it
are named by the per-term sums.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from benchmarks.common import build_env
from benchmarks.common import emit
from benchmarks.common import hold_command
from benchmarks.common import machine

logger = logging.getLogger("playground")

#: The command slot each `--axis` plays, and its defaults (true command, shown commands).
AXES = {"vx": (0, 0.1, (0.1, 0.125, 0.15)), "yaw": (2, 0.5, (0.5, 0.7, 0.9))}
#: The file adds its own gait (`Feedforward`).
OVERRIDES = ("reference.feedforward=False",)
#: Pushes are off, as on the card's walking entries, unless `--pushes`.
NO_PUSHES = ("push_config.enable=False",)
SETTLE_S = 1.0


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("policy", help=".onnx policy file (the runtime's inputs; it adds its own gait)")
  parser.add_argument("--axis", choices=sorted(AXES), default="vx", help="the command audited: forward or yaw rate")
  parser.add_argument(
    "--command", type=float, default=None, help="true command, m/s or rad/s (the env's reward); vx 0.1, yaw 0.5"
  )
  parser.add_argument(
    "--shown", type=float, nargs="+", default=None, help="shown to the file (vx: 0.1 0.125 0.15; yaw: 0.5 0.7 0.9)"
  )
  parser.add_argument("--models", type=int, default=32, help="randomized models per shown command")
  parser.add_argument("--seconds", type=float, default=10.0, help="s played")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--pushes", action="store_true", help="kick the trunk as in training (the preset's pushes)")
  parser.add_argument("--set", dest="overrides", action="append", default=[], help="env config override")
  args = parser.parse_args()
  slot, default_command, default_shown = AXES[args.axis]
  args.command = default_command if args.command is None else args.command
  args.shown = list(default_shown) if args.shown is None else args.shown
  if args.models < 1 or not args.seconds > SETTLE_S:
    raise SystemExit(f"error: --models must be at least 1 and --seconds above {SETTLE_S:g}")

  import jax
  import jax.numpy as jp

  from playground.common.evaluation.player import heading_velocity
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.model import servos

  _, env, venv, cfg = build_env(
    "joystick", "flat_terrain", [*args.overrides, *OVERRIDES, *(() if args.pushes else NO_PUSHES)], preset="cpu"
  )
  policy = policy_io.onnx_policy(Path(args.policy), batched=True)
  shown = np.asarray(args.shown, np.float32)
  n = len(shown) * args.models
  group = np.repeat(np.arange(len(shown)), args.models)
  models = venv.models(jp.tile(jp.arange(args.models), len(shown)))  # the same models for every shown command
  keys = jp.tile(jax.random.split(jax.random.PRNGKey(args.seed), args.models), (len(shown), 1))
  reset = jax.jit(lambda k: venv.reset(k, models).env)
  step = jax.jit(lambda s, a: venv.step_envs(s, a, models))
  true_command = np.zeros((n, 7), np.float32)
  true_command[:, slot] = args.command
  state = hold_command(reset(keys), true_command)
  shown_slot = observations.STATE_LAYOUT.slices["command"].start + slot
  dt = float(env.dt)
  steps, settle = int(round(args.seconds / dt)), int(round(SETTLE_S / dt))
  alive = np.ones(n, bool)
  reward = np.zeros(n)
  terms: dict[str, np.ndarray] = {}
  velocities, up = [], []  # heading-frame (vx, vy, yaw rate) [n, 3] and alive [n] of each measured step
  for t in range(steps):
    obs = np.array(state.obs["state"], np.float32)
    obs[:, shown_slot] = shown[group]
    state = step(state, jp.asarray(policy(obs), jp.float32))
    reward += np.asarray(state.reward) * alive
    for name, value in state.metrics.items():
      if name.startswith("reward/"):
        terms.setdefault(name[7:], np.zeros(n))
        terms[name[7:]] += np.asarray(value) * alive
    alive &= ~np.asarray(state.done, bool)
    if t >= settle:
      qvel = np.asarray(state.data.qvel)
      planar = heading_velocity(np.asarray(state.data.qpos), qvel)[:, :2]
      # The yaw rate about the trunk's own z axis, as the gyro and the tracking reward read it
      # (the scorecard's heading rate, about the world's z, differs with the trunk's tilt).
      velocities.append(np.concatenate([planar, qvel[:, 5:6]], axis=1))
      up.append(alive.copy())
  velocity, up = np.stack(velocities, axis=1), np.stack(up, axis=1)  # [n, T, 3], [n, T]
  counted = np.maximum(up.sum(axis=1), 1)[:, None]
  mean = (velocity * up[..., None]).sum(axis=1) / counted  # [n, 3]
  # Each episode's swing about its own mean: what a per-step tracking kernel sees besides the speed.
  sway = np.sqrt((np.square(velocity - mean[:, None]) * up[..., None]).sum(axis=1) / counted)  # [n, 3]
  results = {}
  for g, value in enumerate(shown):
    rows = group == g
    # The group's mean over every step its episodes were up.
    vx, vy, yaw_rate = (mean[rows] * counted[rows]).sum(axis=0) / counted[rows].sum()
    results[f"shown {value:g}"] = {
      f"shown_{args.axis}": round(float(value), 3),
      "falls": int((~alive[rows]).sum()),
      "episodes": int(rows.sum()),
      "vx_mps": round(float(vx), 4),
      "vy_mps": round(float(vy), 4),
      "yaw_rate_rps": round(float(yaw_rate), 4),
      "velocity_swing_rms_mps": {
        "vx": round(float(sway[rows, 0].mean()), 4),
        "vy": round(float(sway[rows, 1].mean()), 4),
      },
      "yaw_rate_swing_rms_rps": round(float(sway[rows, 2].mean()), 4),
      "reward_per_s": round(float(reward[rows].mean() / args.seconds), 3),
      "terms_per_s": {k: round(float(v[rows].mean() / args.seconds), 3) for k, v in sorted(terms.items())},
    }
  emit(
    {
      "benchmark": "command_audit",
      "policy": args.policy,
      "overrides": args.overrides,
      "axis": args.axis,
      f"true_{args.axis}": args.command,
      "models": args.models,
      "seconds": args.seconds,
      "servo_profile": servos.name_of(cfg.env_config),
      "conditions": "cpu preset's reward judged at the true command; randomized models, noise and delays; "
      + ("the preset's pushes" if args.pushes else "no pushes"),
      "machine": machine(),
      "results": results,
    }
  )


if __name__ == "__main__":
  main()
