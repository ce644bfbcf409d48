"""Deterministic policy evaluation on a separate batch of environments."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from playground.common.train import distributed
from playground.common.train.step_cache import StepCache
from playground.common.train.vec_env import VecEnv


class Evaluator:
  """Runs one episode in each of `num_envs` environments and reports returns.

  Every evaluation starts from fresh resets drawn from `seed` and the
  evaluation count, so results are reproducible and independent of training.
  With a `mesh`, the episodes are split over its devices (each runs until
  its own episodes have ended); every env gets the same reset key and model
  as without one.

  Args:
    venv: batched evaluation environment (its own randomization seed).
    make_policy: Brax-style `make_policy(params, deterministic)`.
    num_envs: number of parallel evaluation episodes.
    seed: seed of the evaluation resets.
    step_cache: a `step_cache.StepCache` to compile the rollout with (plain
      compilation when None).
    mesh: a one-axis device mesh to split the episodes over (the PPO mesh);
      `num_envs` must divide evenly. None runs on the default device.
  """

  def __init__(
    self,
    venv: VecEnv,
    make_policy: Callable[..., Any],
    num_envs: int,
    seed: int,
    step_cache: StepCache | None = None,
    mesh: Mesh | None = None,
  ):
    self._venv = venv
    self._make_policy = make_policy
    self._num_envs = num_envs
    self._key = jax.random.PRNGKey(seed)
    self._count = 0
    if mesh is not None and num_envs % mesh.size:
      raise ValueError(f"num_eval_envs={num_envs} must be divisible by the {mesh.size} devices")
    self._mesh = mesh
    self._sharded = mesh is not None and mesh.size > 1
    self._rollout = jax.jit(self._sharded_rollout if self._sharded else self._rollout_fn)
    self._step_cache = step_cache or StepCache(None)
    self._compiled = None

  def _rollout_fn(self, params: Any, key: jax.Array) -> dict[str, jax.Array]:
    key_reset, key_act = jax.random.split(key)
    n = self._num_envs
    return self._episodes(params, jp.arange(n), jax.random.split(key_reset, n), key_act)

  def _sharded_rollout(self, params: Any, key: jax.Array) -> dict[str, jax.Array]:
    """`_rollout_fn` with the env indices and reset keys split over the mesh."""
    (axis,) = self._mesh.axis_names
    key_reset, key_act = jax.random.split(key)
    n = self._num_envs

    # No collective inside: each device ends its loop on its own, and the
    # sharded results are gathered outside (`distributed.gather`).
    return jax.shard_map(
      self._episodes,
      mesh=self._mesh,
      in_specs=(P(), P(axis), P(axis), P()),
      out_specs=P(axis),
      check_vma=False,
    )(params, jp.arange(n), jax.random.split(key_reset, n), key_act)

  def _episodes(self, params: Any, indices: jax.Array, reset_keys: jax.Array, key_act: jax.Array):
    """One episode per env index; returns, lengths and episode metrics."""
    venv, n = self._venv, indices.shape[0]
    models = venv.models(indices)
    state = venv.reset(reset_keys, models)
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
    if self._mesh is not None:
      # The same key on every process (a global array, also multi-process).
      key = jax.make_array_from_process_local_data(NamedSharding(self._mesh, P()), np.asarray(key))
    self._count += 1
    start = time.monotonic()
    if self._compiled is None:
      self._compiled = self._step_cache.compile("eval_rollout", self._rollout, params, key)
    out = self._compiled(params, key)
    out = distributed.gather(out) if self._sharded else jax.device_get(out)
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
