"""Observation layout and the pure action/observation helpers of the duck."""

import jax
import jax.numpy as jp
import numpy as np
import pytest

from playground.common.tasks.observation_layout import ObservationLayout
from playground.open_duck_mini_v2.model import actuation
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.tasks import base


def test_state_layout_is_the_documented_101_floats():
  assert observations.STATE_LAYOUT.names == (
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
  assert [s for _, s in observations.STATE_LAYOUT.fields] == [3, 3, 7, 14, 14, 42, 14, 2, 2]
  assert observations.STATE_LAYOUT.size == 101
  assert observations.STATE_LAYOUT.slices["last_actions"] == slice(41, 83)
  assert observations.PRIVILEGED_LAYOUT.names[:9] == observations.STATE_LAYOUT.names
  assert observations.PRIVILEGED_LAYOUT.size == 167


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
  return robot_model.RobotIndices.from_model(robot_model.load_model("flat_terrain"))


def test_motor_targets_scale_add_head_command_and_respect_the_speed_limit(ids):
  home = jp.asarray(ids.home_ctrl)
  command = jp.array([0.0, 0.0, 0.0, 0.05, 0.0, -0.02, 0.0])
  action = jp.zeros(14).at[0].set(0.2).at[3].set(-1.0)
  targets = actuation.motor_targets(ids, action, command, home, 0.25, 5.24, 0.02)
  max_delta = 5.24 * 0.02
  # 0.25 * 0.2 = 0.05 < 0.1048: passes unchanged.
  assert float(targets[0] - home[0]) == pytest.approx(0.05, abs=1e-6)
  # 0.25 * -1 = -0.25 is clipped to the servo speed: -0.1048 per step.
  assert float(targets[3] - home[3]) == pytest.approx(-max_delta, abs=1e-6)
  assert float(targets[5] - home[5]) == pytest.approx(0.05, abs=1e-6)
  assert float(targets[7] - home[7]) == pytest.approx(-0.02, abs=1e-6)
  np.testing.assert_allclose(np.delete(np.array(targets - home), [0, 3, 5, 7]), 0.0, atol=1e-7)


def test_noise_is_bounded_per_joint_group_and_off_at_level_zero():
  vectors = ("gyro", "accelerometer", "gravity", "local_linvel", "global_linvel", "global_angvel")
  vectors += ("base_pos", "com_pos")
  zeros = observations.Readings(
    **{f: jp.zeros(3) if f in vectors else jp.zeros(14) for f in observations.Readings.__dataclass_fields__}
  )
  scales = observations.noise_scales(
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
      0.2 if n in constants.HEAD_JOINT_NAMES else 0.03 if "hip" in n else 0.05 if "knee" in n else 0.08
      for n in constants.ACTUATOR_NAMES
    ]
  )
  pos = []
  for seed in range(200):
    pos.append(np.array(observations.add_noise(zeros, jax.random.PRNGKey(seed), scales, 1.0).joint_pos))
  pos = np.abs(np.array(pos))
  # Each joint group stays within its own level and uses most of it.
  assert np.all(pos <= bound + 1e-7)
  assert np.all(pos.max(axis=0) > 0.9 * bound)
  noisy = observations.add_noise(zeros, jax.random.PRNGKey(0), scales, 1.0)
  assert np.all(np.abs(np.array(noisy.gyro)) <= 0.1)
  assert np.abs(np.array(noisy.joint_vel)).max() <= 2.5
  assert observations.add_noise(zeros, jax.random.PRNGKey(0), scales, 0.0) is zeros


def test_imu_buffer_delays_samples():
  buffer = jp.zeros((4, 6))
  for k in range(3):
    buffer = observations.imu_push(buffer, jp.full(3, float(k)), jp.full(3, 10.0 + k))
  assert float(buffer[0, 0]) == 2.0 and float(buffer[2, 0]) == 0.0 and float(buffer[1, 3]) == 11.0


def test_a_history_appends_34_floats_per_frame_and_is_recognized_from_metadata():
  for frames in (0, 1, 3, observations.MAX_HISTORY):
    layout = observations.state_layout(frames)
    assert layout.size == 101 + 34 * frames
    assert layout.fields[:9] == observations.STATE_LAYOUT.fields  # the runtime's 101 floats come first, unchanged
    assert observations.history_of(layout.to_json()) == frames
    assert observations.privileged_layout(frames).size == 167 + 34 * frames
  assert observations.state_layout(0) == observations.STATE_LAYOUT and "history" not in observations.STATE_LAYOUT.names
  assert observations.history_of([{"name": "gyro", "start": 0, "size": 3}]) is None
  assert observations.history_of(None) is None
  with pytest.raises(ValueError, match="0..10"):
    observations.state_layout(observations.MAX_HISTORY + 1)


def test_the_history_holds_the_previous_frames_newest_first():
  import mujoco

  from playground.open_duck_mini_v2.tasks.registry import env_class

  config = base.keeping_disturbances(env_class("joystick").default_config())
  config.observation_history = 2
  env = env_class("joystick")(config=config)
  data = mujoco.MjData(env.mj_model)
  mujoco.mj_resetDataKeyframe(env.mj_model, data, env.mj_model.key("home").id)
  mujoco.mj_forward(env.mj_model, data)
  home = observations.read(env.ids, env.mj_model, observations.DataView.from_mjdata(data))
  info = env.initial_info(jax.random.PRNGKey(0), home)
  layout, frame = env.state_layout, observations.HISTORY_FRAME_LAYOUT
  assert layout.size == 101 + 2 * 34
  frames = []
  for k in range(4):
    readings = home.replace(gyro=home.gyro + 0.1 * k, joint_pos=home.joint_pos + 0.01 * k, joint_vel=home.joint_vel + k)
    obs, info = env.observe(readings, info, jax.random.PRNGKey(k))
    state = layout.split(np.asarray(obs["state"]))
    assert state["history"].shape == (2 * 34,) and obs["privileged_state"].shape == (167 + 2 * 34,)
    frames.append(np.concatenate([state[name] for name in frame.names]))
    history = state["history"].reshape(2, 34)
    if k == 0:
      # Before the first step the history repeats the first state's readings.
      np.testing.assert_allclose(history, np.tile(frames[0], (2, 1)), atol=1e-6)
    else:
      np.testing.assert_allclose(history[0], frames[k - 1], atol=1e-6)
      np.testing.assert_allclose(history[1], frames[max(k - 2, 0)], atol=1e-6)
  # The frame blocks are what the actor saw: gyro moved by 0.1 and joint velocity by 1 x 0.05 per step.
  np.testing.assert_allclose(frames[3][frame.slices["gyro"]] - frames[2][frame.slices["gyro"]], 0.1, atol=1e-5)
  np.testing.assert_allclose(
    frames[3][frame.slices["joint_vel"]] - frames[2][frame.slices["joint_vel"]], 0.05, atol=1e-5
  )


@pytest.mark.parametrize("frames", [-1, observations.MAX_HISTORY + 1])
def test_an_invalid_observation_history_is_refused(frames):
  from playground.common import configs
  from playground.open_duck_mini_v2.tasks.registry import env_class

  config = env_class("joystick").default_config()
  config.observation_history = frames
  with pytest.raises(configs.ConfigError, match="observation_history must be a whole number of frames in 0..10"):
    env_class("joystick")(config=config)


def test_the_actor_kick_diagnostic_ends_the_actors_view_with_the_critics_kick_block_and_no_player_takes_it():
  """`actor_kick`: the actor's 101 floats, then the 5 of `KICK_FIELDS`, equal to the critic's; it
  needs `critic_kick`; the exported contract says so, and the players' contract check refuses it."""
  from playground.common import configs
  from playground.open_duck_mini_v2 import runner_hooks
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.tasks import joystick

  sizes = dict(gyro=3, accelerometer=3, gravity=3, local_linvel=3, global_linvel=3, global_angvel=3, base_pos=3)
  sizes.update(com_pos=3, joint_pos=14, joint_vel=14, actuator_force=14, feet_contacts=2, feet_pos=(2, 3))
  sizes.update(feet_vel=(2, 3), base_height=1, heading=())
  readings = observations.Readings(**{f: jp.ones(n) for f, n in sizes.items()})
  kick = jp.array([-0.4, 0.1, 0.25, -0.03, 0.01])
  common = dict(
    noisy=readings,
    clean=readings,
    imu_sample=jp.ones(6),
    command=jp.zeros(7),
    last_actions=jp.zeros(42),
    motor_targets=jp.zeros(14),
    phase=jp.asarray(0.0),
    feet_air_time=jp.zeros(2),
    kick=kick,
  )
  plain = observations.build(**common)
  seen = observations.build(**common, actor_kick=True)
  assert seen["state"].shape == (106,) and plain["state"].shape == (101,)
  np.testing.assert_array_equal(seen["state"][:101], plain["state"])
  np.testing.assert_array_equal(seen["state"][101:], kick)
  np.testing.assert_array_equal(seen["privileged_state"], plain["privileged_state"])
  with pytest.raises(ValueError, match="critic_kick"):
    observations.build(**{**common, "kick": None}, actor_kick=True)

  config = joystick.default_config()
  config.actor_kick = True
  with pytest.raises(configs.ConfigError, match="needs critic_kick=true"):
    joystick.Joystick(config=config)
  config.critic_kick = True
  env = joystick.Joystick(config=config)
  assert env.state_layout.size == 106
  contract = runner_hooks.policy_contract(env, "joystick", config)
  assert contract.metadata["observation_size"] == 106 and "actor_kick" in contract.metadata["diagnostic"]
  assert contract.probe_observations.shape[1] == 106 and np.all(contract.probe_observations[:, 103] == 1.0)
  with pytest.raises(policy_io.ScoreError, match="106 inputs"):
    policy_io.check_contract(contract.metadata, env.ids.home_ctrl, float(config.ctrl_dt))
