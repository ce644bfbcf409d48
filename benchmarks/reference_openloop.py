"""Does the reference gait walk by itself? Plays it open loop in MJX and measures.

    uv run benchmarks/reference_openloop.py                         # the built-in table
    uv run benchmarks/reference_openloop.py --set double_support_ratio=0.0 --set swing_height=0.015
    uv run benchmarks/reference_openloop.py --reference my_table.npz --robust
    uv run benchmarks/reference_openloop.py --servo c001 --robust      # on C001 servos

The joystick env (its servos, speed limit and contacts) drives the motors to
the reference's joint positions at the gait phase, with no feedback at all.
A gait that the robot can follow moves it at about the commanded velocity; one
that it cannot (too fast for the servos, feet that scuff) moves it much less,
and imitation then rewards a motion that does not walk. Prints JSON: per
command, the velocity achieved in the starting heading frame (after 1 s) and
the share of episodes still standing after `--seconds`, and the share of
time a foot is off the ground (the reference lifts each foot 30% of the time
with its default double support). `--robust` keeps the
env's randomization, noise and delays (pushes stay off). `--servo NAME` plays
with that servo profile's actuators, speed limit and randomization (the gait
stays the built-in one, as in training; `--reference
playground/open_duck_mini_v2/data/reference_gait_c001.npz` plays the C001's
slowed gait).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import emit  # noqa: E402
from benchmarks.common import machine  # noqa: E402

COMMANDS = ((0.1, 0.0, 0.0), (0.15, 0.0, 0.0), (-0.1, 0.0, 0.0), (0.0, 0.1, 0.0), (0.0, 0.0, 0.5))


def playback_config(table, robust: bool, servo: str | None = None):
  """The joystick env config that plays `table` open loop: no imitation, one command per episode.

  The phase advances at the table's own rate. With imitation off the env
  loads no table, so without this every table would run at the default
  period (until 2026-12-05 a slowed-down gait ran twice as fast as made).
  """
  from playground.open_duck_mini_v2.tasks import base
  from playground.open_duck_mini_v2.tasks import joystick

  cfg = base.keeping_disturbances(joystick.default_config(), noise=robust, delays=robust, randomization=robust)
  cfg.reward_config.scales.imitation = 0.0  # the table is played here, not rewarded
  if servo is not None:
    cfg.servo_profile = servo
  cfg.gait_frequency = float(table.frequency)
  cfg.command_config.resample_interval = (1e6, 1e6)
  return cfg


def play(table, robust: bool, envs: int, seconds: float, seed: int = 0, servo: str | None = None) -> list[dict]:
  """Open-loop playback of `table` for each of COMMANDS (and a zero-action baseline), on `servo`'s servos."""
  import jax
  import jax.numpy as jp
  import numpy as np

  from playground.common.tasks import kicks
  from playground.open_duck_mini_v2.tasks import joystick
  from playground.open_duck_mini_v2.tasks.gait_tables import FRAME_LAYOUT

  cfg = playback_config(table, robust, servo)
  env = joystick.Joystick(config=cfg)
  home = jp.asarray(env.ids.home_ctrl)
  head = np.asarray(env.ids.head_act)
  lookup = table.lookup_fn()
  steps = int(round(seconds / env.dt))
  settle = int(round(1.0 / env.dt))
  reset = jax.jit(jax.vmap(env.reset))

  def rollout(state, command, feedforward):
    def body(carry, _):
      s, up = carry
      ref = jax.vmap(lambda p: FRAME_LAYOUT.split(lookup(command[:3], p / (2 * jp.pi)))["joint_pos"])(s.info["phase"])
      action = jp.where(feedforward, (ref - home) / cfg.action_scale, 0.0)
      action = action.at[:, head].set(0.0)  # the head holds its home pose
      s = jax.vmap(env.step)(s, action)
      airborne = (s.info["feet_air_time"] > 0).astype(jp.float32)
      return (s, up & (s.done == 0)), (s.data.qpos[:, :2], kicks.heading(s.data.qpos[:, 3:7]), airborne)

    (s, up), (xy, yaw, airborne) = jax.lax.scan(body, (state, jp.ones(envs, bool)), None, length=steps)
    return up, xy, yaw, airborne

  rollout = jax.jit(rollout)
  results = []
  for command in COMMANDS:
    for mode in ("reference", "zero_action"):
      state = reset(jax.random.split(jax.random.PRNGKey(seed), envs))
      c = jp.zeros(7).at[:3].set(jp.asarray(command))
      state = state.replace(info={**state.info, "command": jp.tile(c, (envs, 1))})
      up, xy, yaw, airborne = (np.asarray(x) for x in rollout(state, c, mode == "reference"))
      yaw0 = yaw[settle]
      d = xy[-1] - xy[settle]
      cos, sin = np.cos(yaw0), np.sin(yaw0)
      heading = np.stack([cos * d[:, 0] + sin * d[:, 1], -sin * d[:, 0] + cos * d[:, 1]])
      duration = (steps - 1 - settle) * env.dt
      dyaw = np.unwrap(yaw[settle:], axis=0)
      standing = up.astype(bool)
      pick = standing if standing.any() else np.ones_like(standing)
      results.append(
        dict(
          command=list(command),
          mode=mode,
          standing=float(standing.mean()),
          vx=float((heading[0] / duration)[pick].mean()),
          vy=float((heading[1] / duration)[pick].mean()),
          yaw_rate=float(((dyaw[-1] - dyaw[0]) / duration)[pick].mean()),
          airborne_share=float(airborne[settle:].mean()),  # per foot and step
        )
      )
  return results


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--reference", help=".npz table (default: the built-in one, or one generated with --set)")
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="generate with these overrides")
  parser.add_argument("--robust", action="store_true", help="keep randomization, noise and delays (pushes stay off)")
  parser.add_argument("--servo", help="servo profile whose servos play the gait (default: the default profile)")
  parser.add_argument("--envs", type=int, default=8)
  parser.add_argument("--seconds", type=float, default=5.0)
  args = parser.parse_args(argv)

  from playground.common import configs
  from playground.common.tasks import reference_motion
  from playground.open_duck_mini_v2.model import servos
  from playground.open_duck_mini_v2.tasks import gait_generator

  if args.servo is not None:
    try:
      servos.profile(args.servo)
    except configs.ConfigError as e:
      print(f"error: {e}", file=sys.stderr)
      return 2
  start = time.perf_counter()
  if args.set:
    gen = configs.apply_overrides(gait_generator.default_config(), configs.parse_overrides(args.set))
    table = gait_generator.generate(gen)
  elif args.reference:
    table = reference_motion.ReferenceTable.load(args.reference)
  else:
    table = gait_generator.load_default()
  generated = time.perf_counter() - start
  results = play(table, args.robust, args.envs, args.seconds, servo=args.servo)
  emit(
    dict(
      benchmark="reference_openloop",
      machine=machine(),
      reference=table.source,
      overrides=args.set,
      robust=args.robust,
      servo=args.servo or servos.DEFAULT,
      envs=args.envs,
      seconds=args.seconds,
      generate_s=round(generated, 1),
      results=results,
    )
  )
  return 0


if __name__ == "__main__":
  sys.exit(main())
