"""`push_directions`' kicks played by a checkpoint in its own env: scores policies no player can run.

    uv run python -m benchmarks.checkpoint_kicks checkpoints/RUN/STEP --seeds 6 --magnitudes 0.5 0.35

`push_directions` plays a policy file and kicks the trunk from outside the
env, so a policy whose actor observes the kick (the `actor_kick` diagnostic,
a teacher for `benchmarks.distill`) cannot be scored there: every player
refuses its file. This plays the checkpoint's JAX policy (the tanh of its
mean action) in the run's own env and config, batched and jitted, and hands
it each kick through the env's own kick state: the trunk's velocity changes
exactly as a training kick would, and the time since the kick, the kick's
velocity change and its heading-frame direction are set as the env sets
them, so a critic (or an `actor_kick` actor) sees the kick it trained on.
The env's own kicks never fire, and the clock runs at its nominal rate.

The protocol is push_directions': per command (standing; walking 0.1 m/s),
direction (evenly spaced, 0 deg: the trunk's front, 90: its left) and
strength, `--seeds` episodes kicked once at `--kick_at` s plus seed / seeds
of a gait period, counted as falls when the env terminates within
`--after` s of the kick. Randomization, sensor noise and delays are the
run's (as it trained); every episode draws its own randomized model and
start (from `--seed`), as in push_directions. A checkpoint that a player
can also run (the runtime's 101 inputs) scores here and in push_directions
on its file: two independent paths, whose fall shares should agree within
the seeds' noise.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine
from benchmarks.push_directions import COMMANDS

#: The env settings held while playing (where the run's config has them): the
#: env's own kicks never fire (nor grow), and the clock runs at its nominal rate.
FIXED_SETTINGS = {
  "push_config.enable": "True",
  "push_config.interval_range": "(100000.0,100000.0)",
  "push_config.kicked_start_share": "0.0",
  "push_config.curriculum.enable": "False",
  "gait_frequency_spread": "0.0",
}


def kick_protocol(
  seeds: int, directions: int, magnitudes: list[float], kick_at: float, period: float, dt: float
) -> dict[str, np.ndarray]:
  """The episodes of the grid, one row per (command, direction, strength, seed), command-major.

  Returns arrays `command` (index into `COMMANDS`), `angle_deg`, `strength`, `seed`, `kick_s` and
  `kick_step` (the control steps taken before the kick: it lands on step `kick_step`).
  """
  angles = np.arange(directions) * 360.0 / directions
  cells = [(c, a, m) for c in range(len(COMMANDS)) for a in angles for m in magnitudes]
  rows = [(c, a, m, s) for c, a, m in cells for s in range(seeds)]
  command, angle, strength, seed = (np.array(v) for v in zip(*rows, strict=True))
  kick_s = kick_at + seed / seeds * period
  return {
    "command": command.astype(int),
    "angle_deg": angle.astype(float),
    "strength": strength.astype(float),
    "seed": seed.astype(int),
    "kick_s": kick_s,
    "kick_step": np.rint(kick_s / dt).astype(int),
  }


def inject_kick(state, now, angle_rad, strength):
  """A batch of env states ([n] leading axes) with a kick where `now`, as the env's own kick gives it.

  The trunk's velocity changes by `strength` m/s at `angle_rad` from its
  heading, and the env's kick bookkeeping (where the env keeps it) is set as
  its own kick sets it: the time since the kick (the env's step advances it
  to 0), the kick's world-frame velocity change and its heading-frame one.
  """
  import jax
  import jax.numpy as jp

  from playground.common.tasks import kicks

  heading = kicks.heading(state.data.qpos[:, 3:7])
  kick = jax.vmap(kicks.velocity_change)(heading + angle_rad, strength) * now[:, None]
  info = dict(state.info)
  if "since_push" in info:
    info["since_push"] = jp.where(now, -1, info["since_push"])
  if "last_kick" in info:
    info["last_kick"] = jp.where(now[:, None], kick, info["last_kick"])
  if "kick_heading" in info:
    info["kick_heading"] = jp.where(now[:, None], kicks.in_heading_frame(kick, heading), info["kick_heading"])
  return state.replace(data=state.data.replace(qvel=state.data.qvel.at[:, 0:2].add(kick)), info=info)


def play(policy, env_cfg, grid: dict[str, np.ndarray], steps: int, seed: int = 0) -> np.ndarray:
  """Plays the grid in env config `env_cfg`; returns each episode's first terminated step (`steps` where none)."""
  import jax
  import jax.numpy as jp

  from benchmarks.common import hold_command
  from playground.common.runs.arguments import RunArgs
  from playground.common.train import vec_env

  record = policy.record
  runner = policy.runner_cls(RunArgs(env=record["env"], task=record["task"]))
  env = runner.make_env(record["env"], record["task"], env_cfg)
  randomizer = runner.make_randomizer(env, env_cfg)
  venv = vec_env.VecEnv(env, int(env_cfg.episode_length), randomizer, randomization_seed=seed)
  n = len(grid["seed"])
  models = venv.models(jp.arange(n))
  state = venv.reset(jax.random.split(jax.random.PRNGKey(seed), n), models).env
  command = np.zeros(state.info["command"].shape, np.float32)
  command[:, :3] = np.array(list(COMMANDS.values()), np.float32)[grid["command"]]
  state = hold_command(state, command)
  apply = policy.network.policy_network.apply
  size = policy.action_size
  kick_step = jp.asarray(grid["kick_step"])
  angle = jp.radians(jp.asarray(grid["angle_deg"], jp.float32))
  strength = jp.asarray(grid["strength"], jp.float32)

  @jax.jit
  def rollout(state):
    def body(carry, t):
      state, first = carry
      state = inject_kick(state, kick_step == t, angle, strength)
      action = jp.tanh(apply(policy.normalizer, policy.policy_params, state.obs)[..., :size])
      state = venv.step_envs(state, action, models)
      first = jp.where((first == steps) & (state.done > 0.5), t, first)
      return (state, first), None

    (state, first), _ = jax.lax.scan(body, (state, jp.full(n, steps)), jp.arange(steps))
    return first

  return np.asarray(rollout(state))


def summarize(grid: dict[str, np.ndarray], fell_at: np.ndarray, after_steps: int, period: float, dt: float) -> dict:
  """Per command: fall shares by strength and direction, by strength, and by gait phase at the kick."""
  toppled = (fell_at >= grid["kick_step"]) & (fell_at < grid["kick_step"] + after_steps)
  out = {"falls_before_kick": int((fell_at < grid["kick_step"]).sum()), "commands": {}}
  for c, name in enumerate(COMMANDS):
    by_cell, by_strength, by_phase, to_fall = {}, {}, {}, []
    for m in np.unique(grid["strength"]):
      rows = (grid["command"] == c) & (grid["strength"] == m)
      by_cell[f"{m:g}"] = {
        f"{a:.0f}": round(float(toppled[rows & (grid["angle_deg"] == a)].mean()), 3)
        for a in np.unique(grid["angle_deg"])
      }
      by_strength[f"{m:g}"] = round(float(toppled[rows].mean()), 3)
      by_phase[f"{m:g}"] = {
        f"{(grid['kick_s'][rows & (grid['seed'] == s)][0] / period) % 1.0:.3f}": round(
          float(toppled[rows & (grid["seed"] == s)].mean()), 3
        )
        for s in np.unique(grid["seed"])
      }
      hit = rows & toppled
      to_fall += list((fell_at[hit] - grid["kick_step"][hit] + 1) * dt)
    out["commands"][name] = {
      "fall_share_by_strength": by_strength,
      "fall_share_by_strength_and_direction_deg": by_cell,
      "fall_share_by_strength_and_gait_phase": by_phase,
      "mean_s_kick_to_fall": round(float(np.mean(to_fall)), 2) if to_fall else None,
    }
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("checkpoint", type=Path, help="checkpoint (step) directory, or a run directory (its latest)")
  parser.add_argument("--seeds", type=int, default=3, help="episodes per command, direction and strength")
  parser.add_argument("--directions", type=int, default=8, help="kick directions, evenly spaced")
  parser.add_argument("--magnitudes", type=float, nargs="+", default=[0.3, 0.5, 0.7], help="kick strengths, m/s")
  parser.add_argument("--kick_at", type=float, default=2.0, help="s into the episode")
  parser.add_argument("--after", type=float, default=3.0, help="s played after the kick")
  parser.add_argument("--seed", type=int, default=0, help="draws the randomized models and starts")
  from playground.common import configs

  configs.add_override_argument(parser, help="change the run's env config before playing, e.g. noise_config.level=0.0")
  args = parser.parse_args()
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  from playground import checkpoint_policy
  from playground.common.runs import checkpoints

  if args.seeds < 1 or args.directions < 1 or min(args.magnitudes) < 0 or args.kick_at <= 0 or args.after <= 0:
    raise SystemExit("error: --seeds and --directions must be at least 1, --magnitudes at least 0, times above 0 s")
  try:
    policy = checkpoint_policy.load_policy(args.checkpoint)
  except (OSError, checkpoints.CheckpointError) as e:
    raise SystemExit(f"error: {e}") from None
  known = configs.flatten(policy.env_config)
  try:
    held = [(k, v) for k, v in FIXED_SETTINGS.items() if k in known]
    env_cfg = configs.apply_overrides(policy.env_config, held + configs.parse_overrides(args.overrides))
  except configs.ConfigError as e:
    raise SystemExit(f"error: {e}") from None
  dt = float(env_cfg.ctrl_dt)
  period = 1.0 / float(env_cfg.gait_frequency)
  grid = kick_protocol(args.seeds, args.directions, args.magnitudes, args.kick_at, period, dt)
  after_steps = int(round(args.after / dt))
  steps = int(grid["kick_step"].max()) + after_steps
  fell_at = play(policy, env_cfg, grid, steps, args.seed)
  emit(
    {
      "benchmark": "checkpoint_kicks",
      "checkpoint": str(policy.step_dir),
      "step": policy.step,
      "actor_kick": bool(policy.env_config.get("actor_kick", False)),
      "seeds": args.seeds,
      "seed": args.seed,
      "kick_at_s": args.kick_at,
      "after_s": args.after,
      "gait_period_s": round(period, 4),
      "overrides": args.overrides,
      **summarize(grid, fell_at, after_steps, period, dt),
      "machine": machine(),
    }
  )


if __name__ == "__main__":
  main()
