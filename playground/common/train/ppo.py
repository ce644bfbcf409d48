"""PPO built from Brax's public building blocks, as one jit-compiled step.

Brax's `ppo.train()` keeps its optimizer state, RNG and step counter inside
the function, so a run cannot be checkpointed and continued exactly. Here the
same pieces (networks, `compute_ppo_loss`, running statistics, gradient
helpers) are arranged so that everything a run needs lives in two pytrees:

* `TrainingState`: network params, optimizer state, observation normalizer,
  env step count and the RNG key;
* `EnvState` (see `vec_env`): the batch of environments.

`PPO.train_step(training_state, env_state)` is a pure function: it collects
`unroll_length x (batch_size * num_minibatches / num_envs)` steps from every
environment (auto-reset included), updates the normalizer and runs the PPO
epochs, entirely inside one `jax.jit`. The environment batch is sharded over
all local devices with `shard_map`; gradients and normalizer statistics are
averaged across devices, so the training state stays replicated.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import flax
import jax
import jax.numpy as jp
import numpy as np
import optax
from brax.training import gradients
from brax.training import types
from brax.training.acme import running_statistics
from brax.training.acme import specs
from brax.training.agents.ppo import losses as ppo_losses
from brax.training.agents.ppo import networks as ppo_networks
from flax import linen
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from ml_collections import config_dict

from playground.common.hyperparameters import default_config  # noqa: F401  (re-export)
from playground.common.tasks import symmetry
from playground.common.train import distributed
from playground.common.train.vec_env import EnvState
from playground.common.train.vec_env import StepResult
from playground.common.train.vec_env import VecEnv

AXIS = "i"

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
  "swish": linen.swish,
  "elu": linen.elu,
  "relu": linen.relu,
  "tanh": linen.tanh,
}


@flax.struct.dataclass
class TrainingState:
  """Everything the learner needs to continue exactly where it stopped."""

  params: ppo_losses.PPONetworkParams
  optimizer_state: optax.OptState
  normalizer_params: running_statistics.RunningStatisticsState
  env_steps: types.UInt64
  key: jax.Array


def network_factory(config: config_dict.ConfigDict, obs_is_dict: bool):
  """`make_ppo_networks` bound to the configured sizes and activation."""
  if config.activation not in ACTIVATIONS:
    raise ValueError(f"ppo.activation must be one of {', '.join(ACTIVATIONS)}, got '{config.activation}'")
  kwargs = {}
  if obs_is_dict:
    kwargs = dict(policy_obs_key=config.policy_obs_key, value_obs_key=config.value_obs_key)
  return functools.partial(
    ppo_networks.make_ppo_networks,
    policy_hidden_layer_sizes=tuple(config.policy_hidden_layer_sizes),
    value_hidden_layer_sizes=tuple(config.value_hidden_layer_sizes),
    activation=ACTIVATIONS[config.activation],
    **kwargs,
  )


def observation_shapes(observation_size: Any) -> Any:
  """{'state': (101,), ...} or (n,) from an env's `observation_size`."""
  if isinstance(observation_size, Mapping):
    return {k: tuple(v) if not isinstance(v, int) else (v,) for k, v in observation_size.items()}
  return (observation_size,) if isinstance(observation_size, int) else tuple(observation_size)


def steps_per_iteration(config: config_dict.ConfigDict) -> int:
  """Env steps collected by one `train_step` (all devices together)."""
  return config.batch_size * config.num_minibatches * config.unroll_length


def _as_float(steps: types.UInt64) -> jax.Array:
  """A traced `UInt64` step count as float32 (exact to 2**24, within 1 ppm beyond)."""
  return jp.asarray(steps.hi, jp.float32) * 2.0**32 + jp.asarray(steps.lo, jp.float32)


def has_schedule(config: config_dict.ConfigDict) -> bool:
  """Whether the learning rate follows a schedule (`learning_rate_decay_start` > 0)."""
  return bool(config.get("learning_rate_decay_start", 0))


def learning_rate_at(config: config_dict.ConfigDict, env_steps: jax.Array) -> jax.Array:
  """The learning rate of the iteration that starts at `env_steps` (see `learning_rate_decay_start`)."""
  lr = config.learning_rate
  if not has_schedule(config):
    return jp.asarray(lr, dtype=jp.float32)
  start = config.learning_rate_decay_start
  span = max(config.learning_rate_decay_end - start, 1)
  done = jp.clip((jp.asarray(env_steps, dtype=jp.float32) - start) / span, 0.0, 1.0)
  return (1.0 - done) * lr + done * config.final_learning_rate


def validate(config: config_dict.ConfigDict, device_count: int) -> None:
  """Raises ValueError for batch/env sizes that cannot be split evenly, or a bad learning-rate schedule."""
  start, end = config.get("learning_rate_decay_start", 0), config.get("learning_rate_decay_end", 0)
  if start < 0 or (has_schedule(config) and (end < start or config.final_learning_rate <= 0)):
    raise ValueError(
      "the learning-rate schedule needs 0 <= learning_rate_decay_start <= learning_rate_decay_end and "
      f"final_learning_rate > 0 (got start {start}, end {end}, final {config.get('final_learning_rate')}); "
      "learning_rate_decay_start=0 keeps the learning rate constant"
    )
  if config.num_envs % device_count:
    raise ValueError(f"num_envs={config.num_envs} must be divisible by the {device_count} devices")
  if (config.batch_size * config.num_minibatches) % config.num_envs:
    raise ValueError(
      f"batch_size * num_minibatches = {config.batch_size * config.num_minibatches} "
      f"must be a multiple of num_envs={config.num_envs}"
    )
  if config.num_eval_envs % device_count and device_count > 1:
    raise ValueError(f"num_eval_envs must be divisible by the {device_count} devices")


@dataclasses.dataclass
class PPO:
  """The PPO learner for one environment and configuration.

  Args:
    venv: the batched training environment.
    config: PPO hyper-parameters (`default_config()` layout).
    devices: devices to shard the environment batch over (default: every
      device of every process, see `playground.common.train.distributed`).
    mirror: the robot's left/right mirror (`symmetry.Mirror`); required by
      `symmetry_augmentation`, unused otherwise.
  """

  venv: VecEnv
  config: config_dict.ConfigDict
  devices: Any = None
  mirror: symmetry.Mirror | None = None

  def __post_init__(self):
    cfg = self.config
    self.devices = list(self.devices or jax.devices())
    self.mesh = Mesh(np.array(self.devices), (AXIS,))
    validate(cfg, len(self.devices))
    if not cfg.get("symmetry_augmentation", False):
      self.mirror = None
    elif self.mirror is None:
      raise ValueError(
        "ppo.symmetry_augmentation=True needs a robot whose policy contract has a mirror; this one has none"
      )
    self.obs_shapes = observation_shapes(self.venv.observation_size)
    obs_is_dict = isinstance(self.obs_shapes, Mapping)
    normalize = running_statistics.normalize if cfg.normalize_observations else (lambda x, y: x)
    self.network = network_factory(cfg, obs_is_dict)(
      self.obs_shapes, self.venv.action_size, preprocess_observations_fn=normalize
    )
    self.make_policy = ppo_networks.make_inference_fn(self.network)
    optimizer = optax.adam(learning_rate=cfg.learning_rate)
    if cfg.max_grad_norm:
      optimizer = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optimizer)
    self.optimizer = optimizer
    self.local_num_envs = cfg.num_envs // len(self.devices)  # per device
    self.process_num_envs = self.local_num_envs * sum(d.process_index == jax.process_index() for d in self.devices)
    self.unrolls_per_iteration = cfg.batch_size * cfg.num_minibatches // cfg.num_envs
    self.env_steps_per_iteration = steps_per_iteration(cfg)
    self._loss_and_grad = gradients.loss_and_pgrad(
      functools.partial(
        ppo_losses.compute_ppo_loss,
        ppo_network=self.network,
        entropy_cost=cfg.entropy_cost,
        discounting=cfg.discounting,
        reward_scaling=cfg.reward_scaling,
        gae_lambda=cfg.gae_lambda,
        clipping_epsilon=cfg.clipping_epsilon,
        normalize_advantage=True,
      ),
      pmap_axis_name=AXIS,
      has_aux=True,
    )
    self.replicated = NamedSharding(self.mesh, P())
    self.sharded = NamedSharding(self.mesh, P(AXIS))
    self.train_step = jax.jit(
      jax.shard_map(
        self._train_step,
        mesh=self.mesh,
        in_specs=(P(), P(AXIS)),
        out_specs=(P(), P(AXIS), P()),
        check_vma=False,
      ),
      donate_argnums=(0, 1),
    )

  # ---- Initialization.

  def init_training_state(self, seed: int) -> TrainingState:
    """Fresh params, optimizer and normalizer for `seed`."""
    key = jax.random.PRNGKey(seed)
    key, key_policy, key_value = jax.random.split(key, 3)
    params = ppo_losses.PPONetworkParams(
      policy=init_policy_head(
        self.network.policy_network.init(key_policy),
        self.venv.action_size,
        self.config.init_noise_std,
        self.config.init_action_mean_scale,
      ),
      value=self.network.value_network.init(key_value),
    )
    obs_spec = jax.tree_util.tree_map(
      lambda shape: specs.Array(shape, jp.dtype("float32")),
      self.obs_shapes,
      is_leaf=lambda x: isinstance(x, tuple),
    )
    state = TrainingState(
      params=params,
      optimizer_state=self.optimizer.init(params),
      normalizer_params=running_statistics.init_state(obs_spec),
      env_steps=types.UInt64(hi=0, lo=0),
      key=key,
    )
    return distributed.to_global(distributed.host_local(strip_weak_type(state)), self.replicated)

  def init_env_state(self) -> EnvState:
    """A placeholder batch state, sharded over the devices.

    The first `train_step` replaces it by resets drawn from the training
    state's key, so the initial states follow from the seed and need no
    separate compilation.
    """
    return distributed.to_global(self.env_state_template(process_only=True), self.sharded)

  def env_state_template(self, process_only: bool = False) -> EnvState:
    """A placeholder batch state in the global layout (host arrays, no device).

    The global env state is every device's own batch state, concatenated.
    For per-env leaves that is one batch of `num_envs`; leaves without an
    env axis (MuJoCo Warp's contact buffer and counters, shared by one
    device's batch) get one copy per device.

    Args:
      process_only: only the part of this process's devices.
    """
    me = jax.process_index()
    copies = sum(d.process_index == me for d in self.devices) if process_only else len(self.devices)
    local = self.venv.placeholder(self.local_num_envs)
    return jax.tree_util.tree_map(lambda x: np.concatenate([np.asarray(x)] * copies), local)

  def _local_env_index(self) -> jax.Array:
    offset = jax.lax.axis_index(AXIS) * self.local_num_envs
    return offset + jp.arange(self.local_num_envs)

  # ---- The training step.

  def _train_step(self, ts: TrainingState, env_state: EnvState):
    cfg = self.config
    key, key_reset, key_unroll, key_sgd = jax.random.split(ts.key, 4)
    device = jax.lax.axis_index(AXIS)
    key_reset = jax.random.fold_in(key_reset, device)
    key_unroll = jax.random.fold_in(key_unroll, device)

    index = self._local_env_index()
    models = self.venv.models(index)
    reset_state = self.venv.reset(jax.random.split(key_reset, self.local_num_envs), models)
    env_state = self.venv.fill_uninitialized(env_state, reset_state)
    policy = self.make_policy((ts.normalizer_params, ts.params.policy, ts.params.value))

    def env_step(carry, _):
      state, key = carry
      key, key_action = jax.random.split(key)
      action, policy_extras = policy(state.env.obs, key_action)
      state, result = self.venv.step(state, action, models, reset_state)
      transition = types.Transition(
        observation=result.obs,
        action=action,
        reward=result.reward,
        discount=1.0 - result.done,
        next_observation=result.next_obs,
        extras={
          "policy_extras": policy_extras,
          "state_extras": {"truncation": result.truncation},
        },
      )
      return (state, key), (transition, _episode_stats(result))

    def unroll(carry, _):
      state, key = carry
      key, key_unroll = jax.random.split(key)
      (state, _), out = jax.lax.scan(env_step, (state, key_unroll), None, length=cfg.unroll_length)
      return (state, key), out

    (env_state, _), (data, stats) = jax.lax.scan(
      unroll, (env_state, key_unroll), None, length=self.unrolls_per_iteration
    )
    # [unrolls, T, envs, ...] -> [unrolls * envs, T, ...]
    data = jax.tree_util.tree_map(lambda x: jp.swapaxes(x, 1, 2), data)
    data = jax.tree_util.tree_map(lambda x: jp.reshape(x, (-1,) + x.shape[2:]), data)

    if self.mirror is not None:
      data = symmetry.augment(data, self.mirror)

    learning_rate = learning_rate_at(cfg, _as_float(ts.env_steps))
    # Adam's step is proportional to its learning rate: scaling its update
    # is Adam at the scheduled rate, with the optimizer state unchanged.
    update_scale = learning_rate / cfg.learning_rate if has_schedule(cfg) else None

    normalizer_params = ts.normalizer_params
    if cfg.normalize_observations:
      normalizer_params = running_statistics.update(normalizer_params, data.observation, pmap_axis_name=AXIS)

    def minibatch_step(carry, batch):
      optimizer_state, params, key = carry
      key, key_loss = jax.random.split(key)
      (_, metrics), grads = self._loss_and_grad(params, normalizer_params, batch, key_loss)
      updates, optimizer_state = self.optimizer.update(grads, optimizer_state)
      if update_scale is not None:
        updates = jax.tree_util.tree_map(lambda u: u * update_scale, updates)
      params = optax.apply_updates(params, updates)
      return (optimizer_state, params, key), metrics

    def sgd_step(carry, _):
      optimizer_state, params, key = carry
      key, key_perm, key_grad = jax.random.split(key, 3)

      def shuffle(x):
        x = jax.random.permutation(key_perm, x)
        return jp.reshape(x, (cfg.num_minibatches, -1) + x.shape[1:])

      (optimizer_state, params, _), metrics = jax.lax.scan(
        minibatch_step,
        (optimizer_state, params, key_grad),
        jax.tree_util.tree_map(shuffle, data),
      )
      return (optimizer_state, params, key), metrics

    (optimizer_state, params, _), loss_metrics = jax.lax.scan(
      sgd_step,
      (ts.optimizer_state, ts.params, key_sgd),
      None,
      length=cfg.num_updates_per_batch,
    )
    new_ts = TrainingState(
      params=params,
      optimizer_state=optimizer_state,
      normalizer_params=normalizer_params,
      env_steps=ts.env_steps + self.env_steps_per_iteration,
      key=key,
    )
    metrics = {f"train/{k}": jax.lax.pmean(jp.mean(v), AXIS) for k, v in loss_metrics.items()}
    metrics["train/learning_rate"] = learning_rate
    metrics.update(_reduce_episode_stats(stats))
    metrics["train/finite"] = _all_finite(new_ts.params) & jp.isfinite(metrics["train/total_loss"])
    return new_ts, env_state, metrics

  # ---- Policies.

  def inference_params(self, ts: TrainingState):
    """(normalizer, policy, value) params on the host, as Brax's `make_policy` expects."""
    return distributed.host_local((ts.normalizer_params, ts.params.policy, ts.params.value))


def init_policy_head(policy_params: Any, action_size: int, noise_std: float, mean_scale: float) -> Any:
  """Initializes the output layer of a Brax tanh-normal policy.

  The last layer outputs (loc, raw_scale), scale = softplus(raw_scale) +
  0.001. Its loc weights are scaled by `mean_scale` (a small value starts the
  policy at "action 0", i.e. the robot's home pose, as CleanRL does) and its
  raw_scale bias is set so that the initial action noise is `noise_std`
  (Brax's default gives softplus(0) ~= 0.69).
  """
  layers = policy_params["params"]
  last = sorted(layers, key=lambda name: int(name.rsplit("_", 1)[-1]))[-1]
  kernel, bias = layers[last]["kernel"], layers[last]["bias"]
  kernel = kernel.at[:, :action_size].multiply(mean_scale)
  bias = bias.at[:action_size].multiply(mean_scale)
  raw = float(np.log(np.expm1(max(noise_std - 0.001, 1e-6))))
  bias = bias.at[action_size:].set(raw)
  return {**policy_params, "params": {**layers, last: {"kernel": kernel, "bias": bias}}}


def _episode_stats(result: StepResult) -> dict[str, jax.Array]:
  done = result.done
  stats = {
    "count": jp.sum(done),
    "return": jp.sum(result.finished_return * done),
    "length": jp.sum(result.finished_length * done),
  }
  for name, value in result.finished_metrics.items():
    stats[f"metric/{name}"] = jp.sum(value * done)
  return stats


def _reduce_episode_stats(stats: dict[str, jax.Array]) -> dict[str, jax.Array]:
  totals = {k: jax.lax.psum(jp.sum(v), AXIS) for k, v in stats.items()}
  count = totals.pop("count")
  denom = jp.maximum(count, 1.0)
  out = {
    "episode/count": count,
    "episode/reward": totals.pop("return") / denom,
    "episode/length": totals.pop("length") / denom,
  }
  for name, value in totals.items():
    out[f"episode/{name.removeprefix('metric/')}"] = value / denom
  return out


def _all_finite(tree: Any) -> jax.Array:
  leaves = jax.tree_util.tree_leaves(tree)
  return jp.all(jp.array([jp.all(jp.isfinite(x)) for x in leaves]))


def strip_weak_type(tree: Any) -> Any:
  """Gives every leaf a strong dtype so that jitted steps never recompile."""

  def strip(leaf):
    leaf = jp.asarray(leaf)
    return leaf.astype(leaf.dtype)

  return jax.tree_util.tree_map(strip, tree)
