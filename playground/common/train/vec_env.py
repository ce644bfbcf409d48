"""Batched training environment: randomized models, episodes and auto-reset.

`VecEnv` runs a MuJoCo Playground `MjxEnv` for a batch of environments:

* Domain randomization: each environment simulates its own copy of the
  randomized model fields. The copies are a pure function of the run seed and
  the environment's global index, recomputed inside the jitted step, so they
  are never captured as large constants, never stored in checkpoints, and
  every device of a multi-device run builds exactly its own share.
* Episodes: step count, truncation at `episode_length`, and the running
  return and metric sums of the current episode.
* Auto-reset: a finished environment continues from a fresh initial state.
  Fresh initial states are drawn once per training iteration (`reset`), which
  costs one `mj_forward` per environment per iteration instead of one per
  step, and gives every new episode a new random start.

`compact`/`expand` convert the batch state to and from its checkpoint form,
which keeps only MuJoCo's integration state (`INTEGRATION_FIELDS`) of the
simulation: the derived quantities are recomputed by the next physics step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jp
from flax import struct
from mujoco import mjx
from mujoco_playground import MjxEnv
from mujoco_playground import State

from playground.common.tasks.randomize import RandomizationFn

#: The `mjx.Data` fields of MuJoCo's integration state (mjSTATE_INTEGRATION):
#: everything the next physics step reads. All other fields are recomputed.
INTEGRATION_FIELDS = (
  "time",
  "qpos",
  "qvel",
  "act",
  "qacc_warmstart",
  "ctrl",
  "qfrc_applied",
  "xfrc_applied",
  "eq_active",
  "mocap_pos",
  "mocap_quat",
  "userdata",
)


@struct.dataclass
class EnvState:
  """State of a batch of environments.

  Attributes:
    env: the task's batched `State` (data, obs, reward, done, metrics, info).
    steps: steps taken in the current episode, per env.
    episode_return: sum of rewards in the current episode, per env.
    episode_metrics: sums of the task metrics in the current episode.
    initialized: False for a placeholder env that must be reset before use.
  """

  env: State
  steps: jax.Array
  episode_return: jax.Array
  episode_metrics: dict[str, jax.Array]
  initialized: jax.Array


@struct.dataclass
class StepResult:
  """What one batched step produced, for the learner and for logging.

  `obs` is the observation the action was taken on; `next_obs` the one after
  the step (after auto-reset for finished envs). `done` includes time-outs,
  `truncation` marks time-outs only. `finished_*` hold the totals of the
  episodes that ended at this step (valid where `done`).
  """

  obs: Any
  reward: jax.Array
  done: jax.Array
  truncation: jax.Array
  next_obs: Any
  finished_return: jax.Array
  finished_length: jax.Array
  finished_metrics: dict[str, jax.Array]


def randomization_keys(seed: int | jax.Array, env_index: Any) -> jax.Array:
  """Keys of the randomized models: env `i` of a run seeded `seed` simulates the model of key `i`.

  Args:
    seed: the run's randomization seed (an int or its PRNG key).
    env_index: global environment indices.
  """
  key = jax.random.PRNGKey(seed) if isinstance(seed, int) else seed
  return jax.vmap(lambda i: jax.random.fold_in(key, i))(jp.asarray(env_index))


class VecEnv:
  """A batch of environments with per-env randomized models and auto-reset.

  Args:
    env: the unbatched task environment.
    episode_length: steps after which an episode is truncated.
    randomization_fn: `fn(mjx_model, keys) -> (batched model, in_axes)` or
      None for no randomization.
    randomization_seed: seed of the per-env randomization.
  """

  def __init__(
    self,
    env: MjxEnv,
    episode_length: int,
    randomization_fn: RandomizationFn | None = None,
    randomization_seed: int = 0,
  ):
    self.env = env
    self.episode_length = int(episode_length)
    self._randomization_fn = randomization_fn
    self._randomization_key = jax.random.PRNGKey(randomization_seed)

  @property
  def observation_size(self):
    return self.env.observation_size

  @property
  def action_size(self) -> int:
    return self.env.action_size

  def models(self, env_index: jax.Array) -> tuple[Any, Any]:
    """Randomized models of the environments with global indices `env_index`.

    Returns:
      (model, in_axes) for `jax.vmap`; without randomization the unbatched
      model and None.
    """
    if self._randomization_fn is None:
      return self.env.mjx_model, None
    return self._randomization_fn(self.env.mjx_model, randomization_keys(self._randomization_key, env_index))

  @contextlib.contextmanager
  def _using(self, model: mjx.Model, batch_size: int):
    """Makes the env simulate `model` while its methods are traced.

    An env with a `batch_size` attribute also learns how many environments
    the traced batch holds (e.g. to size MuJoCo Warp's shared buffers).
    """
    env = self.env.unwrapped
    original_model = env._mjx_model
    original_batch_size = getattr(env, "batch_size", None)
    env._mjx_model = model
    if original_batch_size is not None:
      env.batch_size = batch_size
    try:
      yield env
    finally:
      env._mjx_model = original_model
      if original_batch_size is not None:
        env.batch_size = original_batch_size

  def _vmap(self, fn, models):
    model, in_axes = models

    def batched(*args):
      batch_size = jax.tree_util.tree_leaves(args)[0].shape[0]

      def call(m, *a):
        with self._using(m, batch_size) as env:
          return fn(env, *a)

      return jax.vmap(call, in_axes=(in_axes,) + (0,) * len(args))(model, *args)

    return batched

  def reset(self, keys: jax.Array, models) -> EnvState:
    """Fresh episodes for all environments (`keys`: one per env)."""
    state = self._vmap(lambda env, k: env.reset(k), models)(keys)
    n = keys.shape[0]
    return EnvState(
      env=state,
      steps=jp.zeros(n, dtype=jp.int32),
      episode_return=jp.zeros(n),
      episode_metrics=jax.tree_util.tree_map(jp.zeros_like, state.metrics),
      initialized=jp.ones(n, dtype=bool),
    )

  def placeholder(self, num_envs: int) -> EnvState:
    """An all-zeros batch state marked uninitialized (no compilation needed).

    `fill_uninitialized` replaces it by fresh resets inside the jitted step,
    so the initial reset costs no separate compilation.
    """
    shapes = jax.eval_shape(
      lambda k: self.reset(k, self.models(jp.arange(num_envs))),
      jax.random.split(jax.random.PRNGKey(0), num_envs),
    )
    state = jax.tree_util.tree_map(lambda s: jp.zeros(s.shape, s.dtype), shapes)
    return state.replace(initialized=jp.zeros(num_envs, dtype=bool))

  @staticmethod
  def fill_uninitialized(state: EnvState, reset_state: EnvState) -> EnvState:
    """Uses `reset_state` for every env of `state` that is not initialized."""
    ready = state.initialized

    return jax.tree_util.tree_map(lambda new, old: _select(~ready, new, old), reset_state, state)

  def step_envs(self, env_state: State, action: jax.Array, models) -> State:
    """The task's own `step` for every env of the batch, on its model; no episode bookkeeping."""
    return self._vmap(lambda env, s, a: env.step(s, a), models)(env_state, action)

  def step(self, state: EnvState, action: jax.Array, models, reset_state: EnvState) -> tuple[EnvState, StepResult]:
    """One step of every env; finished envs continue from `reset_state`."""
    env_state = state.env
    nstate = self.step_envs(env_state, action, models)
    steps = state.steps + 1
    terminated = nstate.done > 0.5
    truncation = (steps >= self.episode_length) & ~terminated
    done = terminated | truncation
    episode_return = state.episode_return + nstate.reward
    episode_metrics = jax.tree_util.tree_map(jp.add, state.episode_metrics, nstate.metrics)

    select = lambda reset_value, value: _select(done, reset_value, value)  # noqa: E731
    next_env = nstate.replace(
      data=jax.tree_util.tree_map(select, reset_state.env.data, nstate.data),
      obs=jax.tree_util.tree_map(select, reset_state.env.obs, nstate.obs),
      info=self._next_info(select, reset_state.env.info, nstate.info),
      done=done.astype(jp.float32),
    )
    new_state = EnvState(
      env=next_env,
      steps=jp.where(done, 0, steps),
      episode_return=jp.where(done, 0.0, episode_return),
      episode_metrics=jax.tree_util.tree_map(lambda x: jp.where(done, 0.0, x), episode_metrics),
      initialized=state.initialized,
    )
    result = StepResult(
      obs=env_state.obs,
      reward=nstate.reward,
      done=done.astype(jp.float32),
      truncation=truncation.astype(jp.float32),
      next_obs=next_env.obs,
      finished_return=episode_return,
      finished_length=steps,
      finished_metrics=episode_metrics,
    )
    return new_state, result

  def _next_info(self, select, reset_info: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """The episode state after a step: the reset's where an episode ended, except the env's persistent keys.

    A task names in `persistent_info_keys` what outlives an episode (for
    example an adaptive curriculum's level); everything else starts afresh.
    """
    keep = set(getattr(self.env.unwrapped, "persistent_info_keys", ()))
    return {
      name: value if name in keep else jax.tree_util.tree_map(select, reset_info[name], value)
      for name, value in info.items()
    }

  # ---- Checkpoint form.

  def compact(self, state: EnvState) -> EnvState:
    """Checkpoint form: `data` reduced to MuJoCo's integration state."""
    data = state.env.data
    physics = {
      name: getattr(data, name)
      for name in INTEGRATION_FIELDS
      if hasattr(data, name) and getattr(data, name).size > 0  # Orbax rejects empty arrays
    }
    return state.replace(env=state.env.replace(data=physics))

  def expand(self, compact_state: EnvState, template: EnvState) -> EnvState:
    """Inverse of `compact`; `template` supplies a full batched `data`."""
    data = template.env.data.replace(**compact_state.env.data)
    return compact_state.replace(env=compact_state.env.replace(data=data))


def _select(mask: jax.Array, on_true: jax.Array, on_false: jax.Array) -> jax.Array:
  """Per-env `where`; leaves without the env axis (Warp's shared buffers) take `on_false`."""
  if on_false.ndim == 0 or on_false.shape[0] != mask.shape[0]:
    return on_false
  return jp.where(jp.reshape(mask, mask.shape + (1,) * (on_false.ndim - 1)), on_true, on_false)


def random_action_rollout(
  venv: VecEnv, num_envs: int, steps: int, action_size: int, scale: float = 0.2
) -> tuple[Any, EnvState, Callable[[EnvState], EnvState]]:
  """A throughput probe: `num_envs` randomized envs and a jitted rollout of fixed random actions.

  Returns:
    (models, state, rollout): the batch `VecEnv.models` gives, the reset
    state, and a jitted function that takes a state through `steps` control
    steps of uniform actions in [-scale, scale] (auto-reset included).
  """
  models = venv.models(jp.arange(num_envs))  # eager: in_axes must stay a static tree
  state = jax.jit(lambda k: venv.reset(jax.random.split(k, num_envs), models))(jax.random.PRNGKey(0))
  reset_state = state
  actions = random_actions(steps, num_envs, action_size, scale)

  @jax.jit
  def rollout(state: EnvState) -> EnvState:
    def body(s, a):
      s, _ = venv.step(s, a, models, reset_state)
      return s, None

    return jax.lax.scan(body, state, actions)[0]

  return models, state, rollout


def random_actions(steps: int, num_envs: int, action_size: int, scale: float = 0.2) -> jax.Array:
  """The fixed actions of `random_action_rollout`: uniform in [-scale, scale], shape (steps, envs, actions)."""
  return scale * jax.random.uniform(jax.random.PRNGKey(1), (steps, num_envs, action_size), minval=-1, maxval=1)
