"""Jit smoke test of every registered env/task, through the training wrapper."""

import functools
import json
import types

import jax
import jax.numpy as jp
import numpy as np
import pytest
from helpers import FAST_COMPILE_OPTIONS
from helpers import REPO_ROOT
from helpers import zero_readings

from playground.common import configs
from playground.common.runner import RunArgs
from playground.common.train import vec_env
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner
from playground.open_duck_mini_v2.tasks import base
from playground.open_duck_mini_v2.tasks.registry import ENVS

NUM_ENVS = 2
NUM_STEPS = 25


def _venv(env_name, task, **overrides):
  runner = OpenDuckMiniV2Runner(RunArgs(env=env_name, task=task))
  config = runner.default_env_config(env_name)
  config.episode_length = 20
  for key, value in overrides.items():
    config[key] = value
  env = runner.make_env(env_name, task, config)
  return env, vec_env.VecEnv(env, config.episode_length, runner.make_randomizer(env, config))


# The joystick env on flat ground and on the scene with every feature (the
# heightfield and the backlash joints: `rough_terrain_backlash`) with the
# default backend, and that scene on MuJoCo Warp. The scenes share the base
# env's code and differ only in those features, so compiling each scene, env
# and backend again only repeats the same paths (each case compiles for
# 50-120 s on 2 cores under the suite's load). Covered elsewhere: every scene
# is loaded and stepped in MuJoCo C by tests/test_model.py; the joystick env on
# flat ground trains on Warp in tests/test_cli.py; the standing env's reset and
# step are traced below (`test_a_step_returns_the_state_types_reset_returns`)
# and it trains, exports and plays in tests/test_learning.py.
FEATURES_SCENE = "rough_terrain_backlash"
CASES = [("joystick", "flat_terrain", "jax"), ("joystick", FEATURES_SCENE, "jax"), ("joystick", FEATURES_SCENE, "warp")]
# A new scene must say here which of its features the cases above do not compile yet.
assert set(constants.TASKS) == {"flat_terrain", "rough_terrain", "flat_terrain_backlash", FEATURES_SCENE}
# A new env must say where it is compiled and stepped.
assert set(ENVS) == {"joystick", "standing"}


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


def test_critic_dynamics_observes_each_envs_randomized_model():
  """With critic_dynamics the critic sees the parameters its env's model was drawn with; the actor does not."""

  n = 3
  env, venv = _venv("joystick", "flat_terrain", critic_dynamics=True)
  models = venv.models(jp.arange(n))
  state = jax.jit(lambda keys: venv.reset(keys, models))(jax.random.split(jax.random.PRNGKey(0), n))
  layout = observations.privileged_layout(0, dynamics=True)
  privileged = np.asarray(state.env.obs["privileged_state"])
  assert privileged.shape == (n, 167 + observations.DYNAMICS_SIZE) and state.env.obs["state"].shape == (n, 101)
  block = observations.ObservationLayout(observations.DYNAMICS_FIELDS).split(privileged[:, layout.slices["dynamics"]])
  model, ids = env.mj_model, env.ids
  drawn = jax.device_get(models[0])
  for i in range(n):
    com = drawn.body_ipos[i, ids.root_body] - model.body_ipos[ids.root_body]
    np.testing.assert_allclose(block["trunk_com_offset"][i], com, atol=1e-6)
    np.testing.assert_allclose(block["floor_friction"][i], drawn.geom_friction[i, ids.floor_geom, 0], atol=1e-6)
    kp = (
      drawn.actuator_gainprm[i, : observations.NUM_ACTIONS, 0] / model.actuator_gainprm[: observations.NUM_ACTIONS, 0]
      - 1
    )
    np.testing.assert_allclose(block["kp_scale"][i], kp, atol=1e-5)
  # Three envs, three different models: the block is not a constant.
  assert np.ptp(block["trunk_com_offset"], axis=0).min() > 1e-3
  assert 0.0 < np.abs(block["servo_offset"]).max() <= env.config.domain_randomization.joint_offset + 1e-6
  # The nominal model reads zero offsets.
  nominal = np.asarray(observations.dynamics_params(ids, env.mjx_model))
  np.testing.assert_allclose(np.delete(nominal, 4), 0.0, atol=1e-6)


@pytest.mark.parametrize("env_name", sorted(ENVS))
def test_a_step_returns_the_state_types_reset_returns(env_name):
  """A jitted `step` compiles once: its output state has the avals of `reset`'s.

  A weakly typed leaf (a Python scalar turned array, as `jp.array(1.0)` is)
  makes `jit(step)` compile a second time on its own output, which costs every
  tool that steps a reset state with `step` (the generic player, the
  benchmarks; the duck's scorecard builds its own steps) one more compilation
  of the physics (about 25 s on 2 cores).
  """
  env, _ = _venv(env_name, "flat_terrain")
  _assert_step_keeps_the_avals_of_reset(env)


def test_with_every_kick_option_a_step_returns_the_state_types_reset_returns():
  """The same with the kick options on: their episode state and metrics (`push_level`, `kick/*`,
  the critic's kick block) too."""
  runner = OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain"))
  config = runner.default_env_config("joystick")
  config.critic_kick = True
  config.push_config.update(kicked_start_share=0.5, direction_weights=(1.0, 0.0, 2.0, 1.0), recovery_s=0.5)
  config.push_config.curriculum.enable = True
  _assert_step_keeps_the_avals_of_reset(runner.make_env("joystick", "flat_terrain", config))


def _assert_step_keeps_the_avals_of_reset(env):
  reset = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
  stepped = jax.eval_shape(env.step, reset, jp.zeros(env.action_size))
  assert jax.tree_util.tree_structure(reset) == jax.tree_util.tree_structure(stepped)
  differing = [
    jax.tree_util.keystr(path)
    for (path, before), after in zip(
      jax.tree_util.tree_leaves_with_path(reset), jax.tree_util.tree_leaves(stepped), strict=True
    )
    if (before.shape, before.dtype, before.weak_type) != (after.shape, after.dtype, after.weak_type)
  ]
  assert not differing, differing


def test_each_training_episode_draws_its_clock_rate_and_players_keep_the_runtimes():
  """`gait_frequency_spread` s: each episode's phase advances at gait_frequency x U(1 - s, 1 + s).

  Without it an episode has no rate of its own (the state tree, and so a
  checkpoint's, is as before the option); a player of the file always runs
  the runtime's fixed clock; a spread outside [0, 1) is a one-line error.
  """
  env, _ = _venv("joystick", "flat_terrain", gait_frequency_spread=0.2)
  # The first state's readings matter to no clock: zeros, without compiling the physics.
  readings = zero_readings(env)
  infos = jax.vmap(env.initial_info, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(0), 64), readings)
  rate = np.asarray(infos["gait_rate"])
  assert 0.8 <= rate.min() and rate.max() <= 1.2 and np.ptp(rate) > 0.3, rate
  standing = types.SimpleNamespace(feet_contacts=jp.ones(2))  # all `advance` reads
  for i in np.argsort(rate)[[0, -1]]:  # the slowest and the fastest episode
    info = jax.tree_util.tree_map(lambda x, i=i: x[i], infos)
    for _ in range(10):
      info, _ = env.advance(info, standing, jp.zeros(observations.NUM_ACTIONS))
    expected = np.mod(10 * 2 * np.pi * env.gait_frequency * rate[i] * env.dt, 2 * np.pi)
    np.testing.assert_allclose(float(info["phase"]), expected, atol=1e-5)

  plain, _ = _venv("joystick", "flat_terrain")
  assert "gait_rate" not in jax.eval_shape(plain.reset, jax.random.PRNGKey(0)).info

  walker = REPO_ROOT / "tests" / "fixtures" / "walker"
  run_config = json.loads((walker / "config.json").read_text())["env_config"]
  run_config["gait_frequency_spread"] = 0.2
  metadata = policy_io.read_metadata(walker / "policy.onnx")
  played = policy_io.play_config(metadata, run_config, noise=True, delays=True, randomization=True)
  assert played.gait_frequency_spread == 0.0 and played.gait_frequency == metadata["gait_frequency_hz"]

  for bad in (1.0, -0.1):
    with pytest.raises(configs.ConfigError, match=r"gait_frequency_spread must be a fraction in \[0, 1\)"):
      _venv("joystick", "flat_terrain", gait_frequency_spread=bad)
