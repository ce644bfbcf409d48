"""Domain randomization: per-env models differ, within the configured ranges."""

import jax
import numpy as np
import pytest
from mujoco import mjx

from playground.common.tasks import randomize
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import robot_model

N = 16


@pytest.fixture(scope="module")
def randomized():
  mj_model = robot_model.load_model("flat_terrain")
  model = mjx.put_model(mj_model)
  config = randomize.default_config()
  targets = randomize.RandomizationTargets(constants.FLOOR_GEOM, constants.ROOT_BODY, constants.ACTUATOR_NAMES)
  fn = randomize.make_randomization_fn(mj_model, targets, config)
  batched, in_axes = jax.jit(fn)(model, jax.random.split(jax.random.PRNGKey(0), N))
  return mj_model, config, jax.device_get(batched), in_axes


def _ids(mj_model):
  joints = [mj_model.joint(n).id for n in constants.JOINT_NAMES]
  return mj_model.jnt_dofadr[joints], mj_model.jnt_qposadr[joints]


def test_batched_fields_are_declared_in_in_axes(randomized):
  _, _, batched, in_axes = randomized
  for name in randomize.RANDOMIZED_FIELDS:
    assert getattr(in_axes, name) == 0
    assert getattr(batched, name).shape[0] == N
  assert in_axes.opt is None or all(x is None for x in jax.tree_util.tree_leaves(in_axes.opt))


def test_values_differ_across_envs_within_ranges(randomized):
  mj_model, c, m, _ = randomized
  dofs, qpos = _ids(mj_model)
  floor = mj_model.geom(constants.FLOOR_GEOM).id
  trunk = mj_model.body(constants.ROOT_BODY).id

  friction = m.geom_friction[:, floor, 0]
  assert np.all((friction >= c.floor_friction[0]) & (friction <= c.floor_friction[1]))
  assert np.unique(friction).size == N

  ratio = m.dof_frictionloss[:, dofs] / mj_model.dof_frictionloss[dofs]
  assert np.all((ratio >= c.frictionloss_scale[0] - 1e-6) & (ratio <= c.frictionloss_scale[1] + 1e-6))
  np.testing.assert_allclose(m.dof_frictionloss[:, :6], 0.0)
  ratio = m.dof_armature[:, dofs] / mj_model.dof_armature[dofs]
  assert np.all((ratio >= c.armature_scale[0] - 1e-6) & (ratio <= c.armature_scale[1] + 1e-6))

  com = m.body_ipos[:, trunk] - mj_model.body_ipos[trunk]
  assert np.all(np.abs(com) <= c.com_offset + 1e-7) and np.unique(com[:, 0]).size == N

  others = [b for b in range(1, mj_model.nbody) if b != trunk]
  ratio = m.body_mass[:, others] / mj_model.body_mass[others]
  assert np.all((ratio >= c.link_mass_scale[0] - 1e-6) & (ratio <= c.link_mass_scale[1] + 1e-6))
  trunk_delta = m.body_mass[:, trunk] - mj_model.body_mass[trunk]
  lo = mj_model.body_mass[trunk] * (c.link_mass_scale[0] - 1) + c.trunk_extra_mass[0]
  hi = mj_model.body_mass[trunk] * (c.link_mass_scale[1] - 1) + c.trunk_extra_mass[1]
  assert np.all((trunk_delta >= lo - 1e-6) & (trunk_delta <= hi + 1e-6))

  offsets = m.qpos0[:, qpos] - mj_model.qpos0[qpos]
  assert np.all(np.abs(offsets) <= c.joint_offset + 1e-7)
  np.testing.assert_allclose(m.qpos0[:, :7], np.broadcast_to(mj_model.qpos0[:7], (N, 7)))

  kp = m.actuator_gainprm[:, :, 0]
  ratio = kp / mj_model.actuator_gainprm[:, 0]
  assert np.all((ratio >= c.kp_scale[0] - 1e-6) & (ratio <= c.kp_scale[1] + 1e-6))
  np.testing.assert_allclose(m.actuator_biasprm[:, :, 1], -kp, rtol=1e-6)
  np.testing.assert_allclose(m.actuator_biasprm[:, :, 0], kp * offsets, rtol=1e-5, atol=1e-7)


def test_missing_names_are_clear_errors():
  mj_model = robot_model.load_model("flat_terrain")
  targets = randomize.RandomizationTargets("ground", constants.ROOT_BODY, constants.ACTUATOR_NAMES)
  with pytest.raises(ValueError, match="'ground'"):
    randomize.make_randomization_fn(mj_model, targets, randomize.default_config())


def test_the_scorecard_can_play_the_models_a_run_trained_on(tmp_path):
  import jax.numpy as jp
  from helpers import write_policy

  from playground.common.train import vec_env
  from playground.open_duck_mini_v2.evaluation import player
  from playground.open_duck_mini_v2.evaluation import scorecard
  from playground.open_duck_mini_v2.tasks.registry import env_class

  config = env_class("joystick").default_config()
  env = env_class("joystick")(config=config)
  targets = randomize.RandomizationTargets(
    constants.FLOOR_GEOM, constants.ROOT_BODY, constants.ACTUATOR_NAMES, constants.HEAD_JOINT_NAMES
  )
  fn = randomize.make_randomization_fn(env.mj_model, targets, config.domain_randomization)
  venv = vec_env.VecEnv(env, 100, fn, randomization_seed=3)
  trained, _ = venv.models(jp.array([4, 9]))  # what envs 4 and 9 of a run seeded 3 simulate
  replayed = player.randomized_models(env.mj_model, config, vec_env.randomization_keys(3, [4, 9]))
  fresh = player.randomized_models(env.mj_model, config, jax.random.split(jax.random.PRNGKey(3), 2))
  for k in range(2):
    for name in ("body_ipos", "body_mass", "qpos0", "actuator_gainprm", "geom_friction"):
      np.testing.assert_allclose(getattr(replayed[k], name), np.asarray(getattr(trained, name)[k]), atol=1e-6)
    assert not np.allclose(fresh[k].body_ipos, replayed[k].body_ipos)
  policy = write_policy(tmp_path / "zero.onnx")
  with pytest.raises(scorecard.ScoreError, match=r"2 model keys for 15 episodes \(15 commands x 1 seeds\)"):
    scorecard.score(policy, seeds=1, model_keys=vec_env.randomization_keys(3, [4, 9]))


def test_the_trunk_offset_margin_widens_the_training_range_by_the_same_draw():
  # Same keys: the margin scales each draw by (com_offset + margin) / com_offset.
  mj_model = robot_model.load_model("flat_terrain")
  model = mjx.put_model(mj_model)
  targets = randomize.RandomizationTargets(constants.FLOOR_GEOM, constants.ROOT_BODY, constants.ACTUATOR_NAMES)
  trunk = mj_model.body(constants.ROOT_BODY).id
  keys = jax.random.split(jax.random.PRNGKey(3), 64)
  com = {}
  for margin in (0.0, 0.005):
    config = randomize.default_config()
    config.com_offset, config.com_offset_margin = 0.03, margin
    batched, _ = jax.jit(randomize.make_randomization_fn(mj_model, targets, config))(model, keys)
    com[margin] = np.asarray(batched.body_ipos[:, trunk] - mj_model.body_ipos[trunk])
  np.testing.assert_allclose(com[0.005], com[0.0] * 0.035 / 0.03, atol=1e-6)
  assert np.abs(com[0.0]).max() <= 0.03 + 1e-7 < np.abs(com[0.005]).max() <= 0.035 + 1e-7
