"""Deterministic policy evaluation on a separate batch of environments."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jp
import numpy as np

from playground.common.step_cache import StepCache
from playground.common.training_env import VecEnv


class Evaluator:
  """Runs one episode in each of `num_envs` environments and reports returns.

  Every evaluation starts from fresh resets drawn from `seed` and the
  evaluation count, so results are reproducible and independent of training.

  Args:
    venv: batched evaluation environment (its own randomization seed).
    make_policy: Brax-style `make_policy(params, deterministic)`.
    num_envs: number of parallel evaluation episodes.
    seed: seed of the evaluation resets.
    step_cache: a `step_cache.StepCache` to compile the rollout with (plain
      compilation when None).
  """

  def __init__(
    self,
    venv: VecEnv,
    make_policy: Callable[..., Any],
    num_envs: int,
    seed: int,
    step_cache: StepCache | None = None,
  ):
    self._venv = venv
    self._make_policy = make_policy
    self._num_envs = num_envs
    self._key = jax.random.PRNGKey(seed)
    self._count = 0
    self._rollout = jax.jit(self._rollout_fn)
    self._step_cache = step_cache or StepCache(None)
    self._compiled = None

  def _rollout_fn(self, params: Any, key: jax.Array) -> dict[str, jax.Array]:
    venv, n = self._venv, self._num_envs
    models = venv.models(jp.arange(n))
    key_reset, key_act = jax.random.split(key)
    state = venv.reset(jax.random.split(key_reset, n), models)
    first = state
    policy = self._make_policy(params, deterministic=True)

    def cond(carry):
      t, _, active, *_ = carry
      return (t < venv.episode_length) & jp.any(active > 0)

    def body(carry):
      t, state, active, ret, length, metrics = carry
      action, _ = policy(state.env.obs, key_act)
      state, result = venv.step(state, action, models, first)
      ended = active * result.done
      ret = jp.where(ended > 0, result.finished_return, ret)
      length = jp.where(ended > 0, result.finished_length, length)
      metrics = jax.tree_util.tree_map(lambda m, f: jp.where(ended > 0, f, m), metrics, result.finished_metrics)
      return t + 1, state, active * (1.0 - result.done), ret, length, metrics

    init = (
      jp.zeros((), jp.int32),
      state,
      jp.ones(n),
      jp.zeros(n),
      jp.zeros(n, dtype=jp.int32),
      jax.tree_util.tree_map(jp.zeros_like, state.episode_metrics),
    )
    # Stops as soon as every episode has ended (early policies fall quickly).
    _, _, _, ret, length, metrics = jax.lax.while_loop(cond, body, init)
    return {"return": ret, "length": length, "metrics": metrics}

  def run(self, params: Any) -> dict[str, float]:
    """Evaluates `params` ((normalizer, policy, value)); returns eval/* metrics."""
    key = jax.random.fold_in(self._key, self._count)
    self._count += 1
    start = time.monotonic()
    if self._compiled is None:
      self._compiled = self._step_cache.compile("eval_rollout", self._rollout, params, key)
    out = jax.device_get(self._compiled(params, key))
    elapsed = time.monotonic() - start
    ret = np.asarray(out["return"])
    metrics = {
      "eval/episode_reward": float(ret.mean()),
      "eval/episode_reward_std": float(ret.std()),
      "eval/episode_length": float(np.mean(out["length"])),
      "eval/walltime": elapsed,
    }
    for name, value in out["metrics"].items():
      metrics[f"eval/episode_{name}"] = float(np.mean(value))
    return metrics
