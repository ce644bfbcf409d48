"""Training throughput (env steps/s with the PPO update) vs env-only throughput.

Builds the runner's PPO step for a preset, compiles it (timed), then times
whole training iterations after two warm-up calls. In the same process it
times the env alone (same num_envs, same randomized models, the same number
of steps per call, random actions instead of the policy). Prints JSON.

    uv run python -m benchmarks.train_throughput --preset quick
    uv run python -m benchmarks.train_throughput --compile_only --cache_dir /tmp/x

With `--cache_dir`, the step is compiled the way the runner does it: through
the step cache (`playground.common.train.step_cache`) next to JAX's persistent
compilation cache, unless `--no_step_cache` is given.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import build_env
from benchmarks.common import emit
from benchmarks.common import machine
from benchmarks.common import time_call


def build(env_name: str, task: str, preset: str, num_envs: int | None, overrides: list[str]):
  from playground.common.train.trainer import make_ppo

  runner, env, venv, cfg = build_env(env_name, task, overrides, preset, num_envs)
  return runner, env, venv, make_ppo(cfg, venv, runner.policy_contract(env, cfg.env_config)), cfg


def run(args, impl: str, num_envs: int | None) -> dict:
  import jax
  import jax.numpy as jp

  from playground.common.runner import setup_compilation_cache
  from playground.common.train import trainer
  from playground.common.train.step_cache import StepCache

  overrides = [*args.set, f"impl={impl}"]
  if args.cache_dir:
    setup_compilation_cache(args.cache_dir)
  runner, env, venv, ppo, cfg = build(args.env, args.task, args.preset, num_envs, overrides)
  cache = StepCache(None)
  if args.cache_dir and not args.no_step_cache:
    cache = trainer.make_step_cache(runner, cfg)
  p = cfg.ppo_config
  ts = ppo.init_training_state(0)
  env_state = ppo.init_env_state()
  start = time.perf_counter()
  if cache.directory is None:
    lowered = ppo.train_step.lower(ts, env_state)  # tracing + lowering to StableHLO
    trace_s = time.perf_counter() - start
    compiled = lowered.compile()  # XLA (or the persistent cache)
  else:
    trace_s = None  # inside the step cache: tracing happens only on a miss
    compiled = cache.compile("train_step", ppo.train_step, ts, env_state, donate=True)
  compile_s = time.perf_counter() - start
  result = {
    "preset": args.preset,
    "impl": impl,
    "devices": jax.device_count(),
    "num_envs": p.num_envs,
    "compile_s": round(compile_s, 2),
    "trace_s": None if trace_s is None else round(trace_s, 2),
    "step_cache": cache.last_outcome or "off",
    "env_steps_per_iteration": ppo.env_steps_per_iteration,
  }
  if args.compile_only:
    return result

  holder = {"ts": ts, "env": env_state}

  def train():
    holder["ts"], holder["env"], metrics = compiled(holder["ts"], holder["env"])
    return metrics

  steps_per_call = p.unroll_length * ppo.unrolls_per_iteration
  n = p.num_envs
  models = venv.models(jp.arange(n))  # eager: in_axes must stay a static tree
  reset = jax.jit(lambda k: venv.reset(jax.random.split(k, n), models))(jax.random.PRNGKey(0))
  actions = 0.2 * jax.random.uniform(jax.random.PRNGKey(1), (steps_per_call, n, env.action_size), minval=-1, maxval=1)

  @jax.jit
  def rollout(state):
    return jax.lax.scan(lambda s, a: (venv.step(s, a, models, reset)[0], None), state, actions)[0]

  env_holder = {"s": reset}

  def env_only():
    env_holder["s"] = rollout(env_holder["s"])
    return env_holder["s"]

  train_times, env_times = [], []
  for _ in range(args.rounds):
    train_times.append(time_call(train, args.repeats))
    env_times.append(time_call(env_only, args.repeats))
  train_sps = ppo.env_steps_per_iteration / min(train_times)
  env_sps = n * steps_per_call / min(env_times)
  result.update(
    {
      "train_env_steps_per_s": round(train_sps, 1),
      "env_only_steps_per_s": round(env_sps, 1),
      "ratio_train_to_env": round(train_sps / env_sps, 4),
    }
  )
  return result


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--env", default="joystick")
  parser.add_argument("--task", default="flat_terrain")
  parser.add_argument("--preset", default="quick")
  parser.add_argument("--num_envs", type=int, nargs="+", default=[None], help="default: the preset's")
  parser.add_argument("--impl", nargs="+", default=["jax"])
  parser.add_argument("--set", action="append", default=[])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--compile_only", action="store_true")
  parser.add_argument("--cache_dir", help="persistent compilation cache to use")
  parser.add_argument("--no_step_cache", action="store_true", help="with --cache_dir: XLA's cache only")
  args = parser.parse_args()
  emit(
    {
      "benchmark": "train_throughput",
      "machine": machine(),
      "results": [run(args, i, n) for i in args.impl for n in args.num_envs],
    }
  )


if __name__ == "__main__":
  main()
