"""Jit smoke test of every registered env/task, through the training wrapper."""

import functools

import jax
import jax.numpy as jp
import numpy as np
import pytest
from helpers import FAST_COMPILE_OPTIONS

from playground.common import training_env
from playground.common.runner import RunArgs
from playground.open_duck_mini_v2 import base
from playground.open_duck_mini_v2 import constants as consts
from playground.open_duck_mini_v2.runner import ENVS
from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

NUM_ENVS = 2
NUM_STEPS = 25


def _venv(env_name, task, **overrides):
  runner = OpenDuckMiniV2Runner(RunArgs(env=env_name, task=task))
  config = runner.default_env_config(env_name)
  config.episode_length = 20
  for key, value in overrides.items():
    config[key] = value
  env = runner.make_env(env_name, task, config)
  return env, training_env.VecEnv(env, config.episode_length, runner.make_randomizer(env, config))


# Every scene (heightfield and backlash joints included) with the joystick env,
# and every other env on flat ground (the scenes share the base env's code, so
# env x scene would compile the same scene paths again), on both backends.
CASES = [
  (env_name, task, impl)
  for impl in ("jax", "warp")
  for env_name in ENVS
  for task in (consts.TASKS if env_name == "joystick" else ("flat_terrain",))
]


@pytest.mark.parametrize("env_name, task, impl", CASES)
def test_reset_and_step_shapes_and_no_nan(env_name, task, impl):
  env, venv = _venv(env_name, task, impl=impl)

  @functools.partial(jax.jit, compiler_options=FAST_COMPILE_OPTIONS)  # 25 steps: compile-bound
  def rollout(key):
    models = venv.models(jp.arange(NUM_ENVS))
    key_reset, key_act = jax.random.split(key)
    state = venv.reset(jax.random.split(key_reset, NUM_ENVS), models)
    first = state

    def step(state, key):
      action = jax.random.uniform(key, (NUM_ENVS, env.action_size), minval=-1, maxval=1)
      state, result = venv.step(state, action, models, first)
      contacts = state.env.data._impl.nacon if impl == "warp" else jp.zeros(())
      return state, (result.obs["state"], result.reward, result.done, result.truncation, contacts)

    return jax.lax.scan(step, state, jax.random.split(key_act, NUM_STEPS))

  state, (obs, reward, done, truncation, contacts) = jax.device_get(rollout(jax.random.PRNGKey(0)))
  if impl == "warp":
    # The shared contact buffer never fills (Warp would drop contacts).
    assert 0 < contacts.max() < state.env.data._impl.naconmax
  assert state.env.obs["state"].shape == (NUM_ENVS, 101)
  assert state.env.obs["privileged_state"].shape == (NUM_ENVS, 167)
  assert obs.shape == (NUM_STEPS, NUM_ENVS, 101)
  for leaf in jax.tree_util.tree_leaves((state.env.obs, obs, reward)):
    assert np.all(np.isfinite(leaf))
  # Episodes are truncated at episode_length=20 unless they terminated earlier.
  assert done.sum(axis=0).min() >= 1
  assert np.all(truncation <= done)
  metrics = state.env.metrics
  assert set(metrics) == {f"reward/{k}" for k in env.active_reward_terms}


def test_warp_contact_buffer_is_sized_by_the_traced_batch():
  env, venv = _venv("joystick", "flat_terrain", impl="warp")
  for n in (4, 32):
    shapes = jax.eval_shape(
      lambda k, n=n: venv.reset(k, venv.models(jp.arange(n))), jax.random.split(jax.random.PRNGKey(0), n)
    )
    naconmax = shapes.env.data._impl.naconmax
    assert naconmax == max(env.config.naconmax_per_env * n, base.MIN_NACONMAX)
  assert (base.warp_contact_buffer(12, 4), base.warp_contact_buffer(12, 32)) == (64, 384)
  assert env.batch_size == 1  # restored after tracing
