"""Observation layout and the pure action/observation helpers of the duck."""

import jax
import jax.numpy as jp
import numpy as np
import pytest

from playground.common.observation import ObservationLayout
from playground.open_duck_mini_v2 import base
from playground.open_duck_mini_v2 import constants as consts
from playground.open_duck_mini_v2 import observations as obs_lib


def test_state_layout_is_the_documented_101_floats():
  assert obs_lib.STATE_LAYOUT.names == (
    "gyro",
    "accelerometer",
    "command",
    "joint_pos",
    "joint_vel",
    "last_actions",
    "motor_targets",
    "feet_contacts",
    "phase",
  )
  assert [s for _, s in obs_lib.STATE_LAYOUT.fields] == [3, 3, 7, 14, 14, 42, 14, 2, 2]
  assert obs_lib.STATE_LAYOUT.size == 101
  assert obs_lib.STATE_LAYOUT.slices["last_actions"] == slice(41, 83)
  assert obs_lib.PRIVILEGED_LAYOUT.names[:9] == obs_lib.STATE_LAYOUT.names
  assert obs_lib.PRIVILEGED_LAYOUT.size == 167


def test_layout_concat_checks_names_and_sizes():
  layout = ObservationLayout((("a", 2), ("b", 1)))
  np.testing.assert_array_equal(layout.concat({"b": [3.0], "a": [1.0, 2.0]}), [1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match="size 3, expected 2"):
    layout.concat({"a": [1.0, 2.0, 3.0], "b": [0.0]})
  with pytest.raises(ValueError, match="missing"):
    layout.concat({"a": [1.0, 2.0]})
  assert layout.to_json() == [{"name": "a", "start": 0, "size": 2}, {"name": "b", "start": 2, "size": 1}]


@pytest.fixture(scope="module")
def ids():
  return base.RobotIndices.from_model(base.load_model("flat_terrain"))


def test_motor_targets_scale_add_head_command_and_respect_the_speed_limit(ids):
  home = jp.asarray(ids.home_ctrl)
  command = jp.array([0.0, 0.0, 0.0, 0.05, 0.0, -0.02, 0.0])
  action = jp.zeros(14).at[0].set(0.2).at[3].set(-1.0)
  targets = base.motor_targets(ids, action, command, home, 0.25, 5.24, 0.02)
  max_delta = 5.24 * 0.02
  # 0.25 * 0.2 = 0.05 < 0.1048: passes unchanged.
  assert float(targets[0] - home[0]) == pytest.approx(0.05, abs=1e-6)
  # 0.25 * -1 = -0.25 is clipped to the servo speed: -0.1048 per step.
  assert float(targets[3] - home[3]) == pytest.approx(-max_delta, abs=1e-6)
  assert float(targets[5] - home[5]) == pytest.approx(0.05, abs=1e-6)
  assert float(targets[7] - home[7]) == pytest.approx(-0.02, abs=1e-6)
  np.testing.assert_allclose(np.delete(np.array(targets - home), [0, 3, 5, 7]), 0.0, atol=1e-7)


def test_noise_is_bounded_per_joint_group_and_off_at_level_zero():
  zeros = obs_lib.Readings(
    **{
      f: jp.zeros(3)
      if f in ("gyro", "accelerometer", "gravity", "local_linvel", "global_linvel", "global_angvel", "base_pos")
      else jp.zeros(14)
      for f in obs_lib.Readings.__dataclass_fields__
    }
  )
  scales = base.noise_scales(
    dict(
      gyro=0.1,
      accelerometer=0.05,
      joint_pos_hip=0.03,
      joint_pos_knee=0.05,
      joint_pos_ankle=0.08,
      joint_pos_head=0.2,
      joint_vel=2.5,
    )
  )
  bound = np.array(
    [
      0.2 if n in consts.HEAD_JOINT_NAMES else 0.03 if "hip" in n else 0.05 if "knee" in n else 0.08
      for n in consts.ACTUATOR_NAMES
    ]
  )
  pos = []
  for seed in range(200):
    pos.append(np.array(obs_lib.add_noise(zeros, jax.random.PRNGKey(seed), scales, 1.0).joint_pos))
  pos = np.abs(np.array(pos))
  # Each joint group stays within its own level and uses most of it.
  assert np.all(pos <= bound + 1e-7)
  assert np.all(pos.max(axis=0) > 0.9 * bound)
  noisy = obs_lib.add_noise(zeros, jax.random.PRNGKey(0), scales, 1.0)
  assert np.all(np.abs(np.array(noisy.gyro)) <= 0.1)
  assert np.abs(np.array(noisy.joint_vel)).max() <= 2.5
  assert obs_lib.add_noise(zeros, jax.random.PRNGKey(0), scales, 0.0) is zeros


def test_imu_buffer_delays_samples():
  buffer = jp.zeros((4, 6))
  for k in range(3):
    buffer = obs_lib.imu_push(buffer, jp.full(3, float(k)), jp.full(3, 10.0 + k))
  assert float(buffer[0, 0]) == 2.0 and float(buffer[2, 0]) == 0.0 and float(buffer[1, 3]) == 11.0
