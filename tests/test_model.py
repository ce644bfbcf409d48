"""The project's Open Duck Mini V2 MJCF, checked with MuJoCo C (no JAX)."""

import mujoco
import numpy as np
import pytest

from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import robot_model


@pytest.fixture(scope="module", params=constants.TASKS)
def model(request):
  return robot_model.load_model(request.param)


def test_every_scene_compiles_with_the_actuators_in_order(model):
  names = [model.actuator(i).name for i in range(model.nu)]
  assert names == [
    "left_hip_yaw",
    "left_hip_roll",
    "left_hip_pitch",
    "left_knee",
    "left_ankle",
    "neck_pitch",
    "head_pitch",
    "head_yaw",
    "head_roll",
    "right_hip_yaw",
    "right_hip_roll",
    "right_hip_pitch",
    "right_knee",
    "right_ankle",
  ]
  for i in range(model.nu):
    joint = model.actuator_trnid[i, 0]
    assert model.joint(joint).name == names[i]
  assert model.opt.timestep == pytest.approx(0.002)


def test_total_mass_matches_the_real_robot(model):
  trunk = model.body(constants.ROOT_BODY).id
  mass = model.body_subtreemass[trunk]
  assert abs(mass - constants.REFERENCE_MASS) / constants.REFERENCE_MASS < 0.10
  assert 2.0 < mass < 2.2


def test_home_keyframe_stands_for_two_seconds(model):
  data = mujoco.MjData(model)
  mujoco.mj_resetDataKeyframe(model, data, model.key(constants.HOME_KEYFRAME).id)
  start_height = data.qpos[2]
  trunk = model.body(constants.ROOT_BODY).id
  for _ in range(int(2.0 / model.opt.timestep)):
    mujoco.mj_step(model, data)
    up_z = data.xmat[trunk].reshape(3, 3)[2, 2]
    assert up_z > 0.95, "the robot tipped over"
  assert data.qpos[2] > start_height - 0.02, "the robot sagged more than 2 cm"
  assert np.linalg.norm(data.qvel[:3]) < 0.05, "the robot is still moving after 2 s"


def test_feet_touch_the_floor_at_home(model):
  data = mujoco.MjData(model)
  mujoco.mj_resetDataKeyframe(model, data, model.key(constants.HOME_KEYFRAME).id)
  for _ in range(100):
    mujoco.mj_step(model, data)
  ids = robot_model.RobotIndices.from_model(model)
  contacts = [ids.sensor(data, n)[0] for n in constants.FEET_CONTACT_SENSORS]
  assert all(c > 0 for c in contacts)
  data.qpos[2] += 0.1
  mujoco.mj_forward(model, data)
  assert all(ids.sensor(data, n)[0] == 0 for n in constants.FEET_CONTACT_SENSORS)


def test_only_the_soles_collide_and_not_with_each_other(model):
  colliding = [model.geom(g).name for g in range(model.ngeom) if model.geom_contype[g] or model.geom_conaffinity[g]]
  assert sorted(colliding) == sorted([constants.FLOOR_GEOM, *constants.FEET_GEOMS])
  left, right = (model.geom(n).id for n in constants.FEET_GEOMS)
  assert not (model.geom_contype[left] & model.geom_conaffinity[right])


def test_backlash_variants_add_a_limited_passive_joint_per_actuated_joint():
  plain = robot_model.load_model("flat_terrain")
  backlash = robot_model.load_model("flat_terrain_backlash")
  assert backlash.njnt == plain.njnt + len(constants.JOINT_NAMES)
  assert backlash.nu == plain.nu
  for name in constants.JOINT_NAMES:
    j = backlash.joint(f"{name}_backlash")
    actuated = backlash.joint(name)
    assert j.bodyid[0] == actuated.bodyid[0]
    np.testing.assert_allclose(
      backlash.jnt_range[j.id], [-constants.BACKLASH_HALF_RANGE, constants.BACKLASH_HALF_RANGE]
    )
    assert backlash.key_qpos[0][backlash.jnt_qposadr[j.id]] == 0.0
    assert backlash.key_qpos[0][backlash.jnt_qposadr[actuated.id]] == pytest.approx(
      plain.key_qpos[0][plain.jnt_qposadr[plain.joint(name).id]]
    )


def test_rough_terrain_is_seeded_procedural_and_flat_at_the_spawn():
  a = robot_model.load_model("rough_terrain", terrain_seed=0)
  b = robot_model.load_model("rough_terrain", terrain_seed=0)
  c = robot_model.load_model("rough_terrain", terrain_seed=1)
  np.testing.assert_array_equal(a.hfield_data, b.hfield_data)
  assert not np.array_equal(a.hfield_data, c.hfield_data)
  h = a.hfield_data.reshape(a.hfield_nrow[0], a.hfield_ncol[0])
  assert h.max() == pytest.approx(1.0, abs=1e-6) and h.min() == 0.0
  center = h[h.shape[0] // 2 - 5 : h.shape[0] // 2 + 6, h.shape[1] // 2 - 5 : h.shape[1] // 2 + 6]
  assert np.all(center == 0.0)
  assert a.hfield_size[0][2] * h.max() <= 0.03, "bumps are at most 3 cm for a 15 cm tall leg"
