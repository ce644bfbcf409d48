"""What the reward says about a kick: the return of stepping to catch it against that of falling.

    uv run python -m benchmarks.reward_audit tests/fixtures/walker/policy.onnx
    uv run python -m benchmarks.reward_audit tests/fixtures/walker/policy.onnx --set push_config.recovery_s=0.75
    uv run python -m benchmarks.reward_audit POLICY --commands forward_0.1 --directions backward --check

A policy plays a command for `--kick_at` seconds in the joystick env of the
`cpu` preset (its reward, with `--set` overrides; nominal model, no noise,
no delays, so that every candidate below starts from the same state), then
its trunk is kicked (`--kick` m/s, backward and to the left of its heading,
standing and walking at 0.1 m/s). From each kicked state, `--after` seconds
are played three ways:

  (a) the policy alone;
  (b) the policy plus a scripted step: one leg's hip pitch or hip roll
      moved by an offset and its knee flexed for `--swing` seconds, then
      handed back to the policy (a grid of legs, joints, offsets and knee
      lifts; the best one that does not fall is kept);
  (c) falling: the best return among the trajectories that fell (the duck
      frozen in its home pose, a collapse, and the scripted steps that fell).

The return is the env's own reward summed over the window (undiscounted,
and discounted with the preset's gamma), with the fall's termination cost,
and nothing after a fall (PPO bootstraps nothing past it). A reward that
ranks (c) above (b) cannot teach a recovery step: the verdict says so per
kicked state. The per-term sums show which terms charge for the step.
`margin` is the best catching step's discounted return minus the best
fall's. With `--check` the exit status is 1 when any kicked state's verdict
is such a bug (after the JSON is printed), so that a reward change can be
guarded by it.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from benchmarks.common import KICK_ONLY_OVERRIDES
from benchmarks.common import batched
from benchmarks.common import build_env
from benchmarks.common import emit
from benchmarks.common import hold_command
from benchmarks.common import kicked_qvel
from benchmarks.common import machine

logger = logging.getLogger("playground")

#: Commands played before and after the kick: name -> (vx, vy, yaw rate).
COMMANDS = {"stand": (0.0, 0.0, 0.0), "forward_0.1": (0.1, 0.0, 0.0)}
#: Kick directions, degrees from the trunk's heading (90: to the left).
DIRECTIONS = {"backward": 180.0, "left": 90.0}
#: Scripted steps: (leg, joint, offset in rad, knee flex in rad).
LEGS = ("left", "right")
STEP_JOINTS = ("hip_pitch", "hip_roll")
STEP_OFFSETS = (-0.5, -0.25, 0.25, 0.5)
KNEE_FLEX = (0.0, 0.5)


#: Rows of one kicked state: the policy, the home pose, the collapse, then the
#: scripted steps from this index on.
FIRST_STEP = 3


def rank(discounted: np.ndarray, fell: np.ndarray) -> tuple[str, int | None, int | None]:
  """The verdict on one kicked state, with the rows of the best catch and the best fall.

  `discounted` and `fell` hold one row per trajectory played from the state:
  0 the policy, then the home pose and the collapse, then the scripted steps
  (`FIRST_STEP` on). A catching step is a scripted step that did not fall; a
  fall is any trajectory that fell. The reward is buggy where the best fall
  earns at least as much as the best catching step.
  """
  catching = [i for i in range(FIRST_STEP, len(fell)) if not fell[i]]
  falling = [i for i in range(len(fell)) if fell[i]]
  best_catch = max(catching, key=lambda i: discounted[i]) if catching else None
  best_fall = max(falling, key=lambda i: discounted[i]) if falling else None
  if best_catch is None:
    verdict = "no scripted step catches this kick"
  elif best_fall is not None and discounted[best_fall] >= discounted[best_catch]:
    verdict = "BUG: the reward ranks a fall above a catching step"
  elif fell[0]:
    verdict = "ok: a catching step beats falling, which the policy does"
  elif discounted[0] >= discounted[best_catch]:
    verdict = "ok: the policy catches it without a scripted step, and earns more"
  else:
    verdict = "ok: a catching step beats the policy's own recovery and falling"
  return verdict, best_catch, best_fall


def scripted_offsets(action_scale: float, home: np.ndarray) -> tuple[list[str], np.ndarray]:
  """Names and (n, 14) action offsets of the scripted steps.

  The knee flexes the way it bends at home (its sign there); hip offsets take
  both signs, so no convention of the MJCF's axes is assumed.
  """
  from playground.open_duck_mini_v2.model import constants

  names, rows = [], []
  for leg in LEGS:
    for joint in STEP_JOINTS:
      for offset in STEP_OFFSETS:
        for flex in KNEE_FLEX:
          row = np.zeros(len(constants.ACTUATOR_NAMES), np.float32)
          row[constants.ACTUATOR_NAMES.index(f"{leg}_{joint}")] = offset / action_scale
          knee = constants.ACTUATOR_NAMES.index(f"{leg}_knee")
          row[knee] = np.sign(home[knee]) * flex / action_scale
          names.append(f"{leg} {joint} {offset:+.2f} rad, knee {flex:.1f}")
          rows.append(row)
  return names, np.stack(rows)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("policy", help=".onnx policy file (the runtime's 101 inputs)")
  parser.add_argument("--kick", type=float, default=0.5, help="kick strength, m/s")
  parser.add_argument("--kick_at", type=float, default=2.0, help="s of the command before the kick")
  parser.add_argument("--after", type=float, default=2.0, help="s played after the kick")
  parser.add_argument("--swing", type=float, default=0.2, help="s a scripted step holds its offset")
  parser.add_argument("--set", dest="overrides", action="append", default=[], help="env config override")
  parser.add_argument(
    "--commands", nargs="+", choices=sorted(COMMANDS), default=list(COMMANDS), help="commands kicked (default: all)"
  )
  parser.add_argument(
    "--directions", nargs="+", choices=sorted(DIRECTIONS), default=list(DIRECTIONS), help="kick directions"
  )
  parser.add_argument(
    "--check", action="store_true", help="exit 1 if the reward ranks a fall above a catching step anywhere"
  )
  args = parser.parse_args()

  import jax
  import jax.numpy as jp

  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import constants

  overrides = [*args.overrides, *KICK_ONLY_OVERRIDES]
  _, env, _, cfg = build_env("joystick", "flat_terrain", overrides, preset="cpu")
  gamma = float(cfg.ppo_config.discounting)
  policy = policy_io.onnx_policy(Path(args.policy), batched=True)
  home = np.asarray(env.ids.home_ctrl)
  names, offsets = scripted_offsets(float(cfg.env_config.action_scale), home)
  collapse = np.zeros(len(home), np.float32)
  for leg in LEGS:  # both knees folded: a fall
    knee = constants.ACTUATOR_NAMES.index(f"{leg}_knee")
    collapse[knee] = np.sign(home[knee]) * 1.0 / float(cfg.env_config.action_scale)
  # Per kicked state: 0 the policy, 1 frozen at home, 2 collapse, then the scripted steps (FIRST_STEP).
  kinds = ["policy", "home pose", "collapse", *names]
  n_kinds = len(kinds)
  scenarios = [(c, d) for c in args.commands for d in args.directions]
  reset, step = batched(env)
  dt = float(env.dt)
  state = reset(jax.random.split(jax.random.PRNGKey(0), len(scenarios)))
  # One copy of every state per kind from the start: identical copies stay
  # identical until the kick (no noise, no delays), and one batch size means
  # one compilation of the step.
  state = jax.tree_util.tree_map(lambda x: jp.repeat(x, n_kinds, axis=0), state)
  commands = np.zeros((len(scenarios) * n_kinds, 7), np.float32)
  commands[:, :3] = np.repeat([COMMANDS[c] for c, _ in scenarios], n_kinds, axis=0)
  state = hold_command(state, commands)  # the episode's timers never fire
  for _ in range(int(round(args.kick_at / dt))):
    state = step(state, jp.asarray(policy(np.asarray(state.obs["state"]))))
  if np.asarray(state.done).any():
    raise SystemExit("error: the policy fell before the kick")
  # The kick, relative to each trunk's heading.
  directions = np.repeat([DIRECTIONS[d] for _, d in scenarios], n_kinds)
  qvel = kicked_qvel(state.data.qpos, state.data.qvel, args.kick, directions)
  info = dict(state.info)
  if "since_push" in info:  # the reward's recovery window opens at the kick
    info["since_push"] = jp.zeros_like(info["since_push"])
  state = state.replace(data=state.data.replace(qvel=jp.asarray(qvel, dtype=state.data.qvel.dtype)), info=info)
  kind = np.tile(np.arange(n_kinds), len(scenarios))
  scripted = np.zeros((len(kind), len(home)), np.float32)
  scripted[kind >= FIRST_STEP] = np.tile(offsets, (len(scenarios), 1))
  swing_steps = int(round(args.swing / dt))
  alive = np.ones(len(kind), bool)
  undiscounted = np.zeros(len(kind))
  discounted = np.zeros(len(kind))
  terms: dict[str, np.ndarray] = {}
  for t in range(int(round(args.after / dt))):
    action = policy(np.asarray(state.obs["state"])).astype(np.float32)
    action = np.where((kind == 1)[:, None], 0.0, action)
    action = np.where((kind == 2)[:, None], collapse, action)
    if t < swing_steps:
      action = action + scripted
    state = step(state, jp.asarray(action))
    reward = np.asarray(state.reward) * alive
    undiscounted += reward
    discounted += gamma**t * reward
    for name, value in state.metrics.items():
      if name.startswith("reward/"):
        terms.setdefault(name[7:], np.zeros(len(kind)))
        terms[name[7:]] += np.asarray(value) * alive
    alive &= ~np.asarray(state.done, bool)
  fell = ~alive

  def summary(i: int) -> dict:
    return {
      "kind": kinds[kind[i]],
      "fell": bool(fell[i]),
      "return": round(float(undiscounted[i]), 3),
      "discounted_return": round(float(discounted[i]), 3),
      "terms": {k: round(float(v[i]), 3) for k, v in sorted(terms.items())},
    }

  results = {}
  for s, (command, direction) in enumerate(scenarios):
    rows = s * n_kinds + np.arange(n_kinds)
    verdict, best_catch, best_fall = rank(discounted[rows], fell[rows])
    best_catch = None if best_catch is None else int(rows[best_catch])
    best_fall = None if best_fall is None else int(rows[best_fall])
    catching = [i for i in rows[FIRST_STEP:] if not fell[i]]
    margin = None
    if best_catch is not None and best_fall is not None:
      margin = round(float(discounted[best_catch] - discounted[best_fall]), 3)
    results[f"{command}, kicked {direction}"] = {
      "verdict": verdict,
      "margin": margin,
      "policy": summary(rows[0]),
      "best_catching_step": summary(best_catch) if best_catch is not None else None,
      "catching_steps": f"{len(catching)}/{len(names)}",
      "best_fall": summary(best_fall) if best_fall is not None else None,
      "home_pose_fell": bool(fell[rows[1]]),
    }
  emit(
    {
      "benchmark": "reward_audit",
      "policy": args.policy,
      "overrides": args.overrides,
      "kick_mps": args.kick,
      "kick_at_s": args.kick_at,
      "after_s": args.after,
      "gamma": gamma,
      "conditions": "cpu preset's reward; nominal model, no noise, no delays; the command holds",
      "machine": machine(),
      "results": results,
    }
  )
  bugs = [name for name, result in results.items() if result["verdict"].startswith("BUG")]
  if args.check and bugs:
    logger.error("the reward ranks a fall above a catching step: %s", "; ".join(bugs))
    raise SystemExit(1)


if __name__ == "__main__":
  main()
