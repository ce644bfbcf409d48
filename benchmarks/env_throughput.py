"""Env throughput: joystick + domain randomization vs bare MJX physics (the ceiling).

Both are measured in the same process on the same batch of per-env
randomized models: the env step (action pipeline, 10 physics substeps,
sensors, observation, rewards, termination, auto-reset) and the bare physics
(the same 10 `mjx.step` calls per control step, nothing else). Prints JSON.

    uv run python -m benchmarks.env_throughput --num_envs 1024
"""

from __future__ import annotations

import argparse

from benchmarks.common import build_env
from benchmarks.common import emit
from benchmarks.common import machine
from benchmarks.common import time_call


def run(env_name: str, task: str, num_envs: int, impl: str, repeats: int, steps_per_call: int, overrides=()) -> dict:
  import jax
  import jax.numpy as jp
  from mujoco import mjx

  from playground.common.train import vec_env

  _, env, venv, _ = build_env(env_name, task, [f"impl={impl}", *overrides])
  models, state, env_steps = vec_env.random_action_rollout(venv, num_envs, steps_per_call, env.action_size)
  model_batch, in_axes = models
  actions = vec_env.random_actions(steps_per_call, num_envs, env.action_size)

  n_sub = env.n_substeps

  @jax.jit
  def physics_steps(data):
    def control(d, a):
      def one(m, d, a):
        ctrl = jp.asarray(env.ids.home_ctrl) + 0.25 * a
        d = d.replace(ctrl=ctrl)
        return jax.lax.scan(lambda dd, _: (mjx.step(m, dd), None), d, None, length=n_sub)[0]

      return jax.vmap(one, in_axes=(in_axes, 0, 0))(model_batch, d, a), None

    return jax.lax.scan(control, data, actions)[0]

  holder = {"env": state, "data": state.env.data}

  def call_env():
    holder["env"] = env_steps(holder["env"])
    return holder["env"]

  def call_physics():
    holder["data"] = physics_steps(holder["data"])
    return holder["data"]

  # Interleave the two measurements so that machine noise hits both alike.
  # Two warm-up calls each in the first round only (the 2nd call may recompile).
  env_times, phys_times = [], []
  for round_ in range(3):
    warmup = 2 if round_ == 0 else 0
    env_times.append(time_call(call_env, repeats, warmup))
    phys_times.append(time_call(call_physics, repeats, warmup))
  env_sps = num_envs * steps_per_call / min(env_times)
  phys_sps = num_envs * steps_per_call / min(phys_times)
  return {
    "env": env_name,
    "task": task,
    "impl": impl,
    "num_envs": num_envs,
    "env_steps_per_s": round(env_sps, 1),
    "physics_steps_per_s": round(phys_sps, 1),
    "ratio_env_to_physics": round(env_sps / phys_sps, 4),
    "overrides": list(overrides),
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--env", default="joystick")
  parser.add_argument("--task", default="flat_terrain")
  parser.add_argument("--num_envs", type=int, nargs="+", default=[1024])
  parser.add_argument("--impl", nargs="+", default=["jax"])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--steps_per_call", type=int, default=10)
  parser.add_argument("--set", action="append", default=[], help="env config override KEY=VALUE")
  args = parser.parse_args()
  results = [
    run(args.env, args.task, n, impl, args.repeats, args.steps_per_call, args.set)
    for impl in args.impl
    for n in args.num_envs
  ]
  emit({"benchmark": "env_throughput", "machine": machine(), "results": results})


if __name__ == "__main__":
  main()
