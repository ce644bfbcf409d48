"""The simulation tells the truth: contact friction, observations, servo gains, metadata.

Each test here failed on the code before the fix it protects.
"""

import dataclasses
import logging

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from helpers import duck_contract
from mujoco import mjx

from playground.common.tasks import randomize
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.tasks import gait_generator
from playground.open_duck_mini_v2.tasks.registry import env_class

HEAD = [constants.ACTUATOR_NAMES.index(n) for n in constants.HEAD_JOINT_NAMES]
LEGS = [i for i in range(14) if i not in HEAD]


@pytest.fixture(scope="module")
def joystick():
  return env_class("joystick")(task="flat_terrain")


def _home(m):
  d = mujoco.MjData(m)
  mujoco.mj_resetDataKeyframe(m, d, m.key(constants.HOME_KEYFRAME).id)
  mujoco.mj_forward(m, d)
  return d


def test_randomized_floor_friction_is_the_friction_the_contacts_use():
  m = robot_model.load_model("flat_terrain")
  config = randomize.default_config()
  config.floor_friction = (0.3, 0.35)
  targets = randomize.RandomizationTargets(constants.FLOOR_GEOM, constants.ROOT_BODY, constants.ACTUATOR_NAMES)
  fn = randomize.make_randomization_fn(m, targets, config)
  model = mjx.put_model(m)
  batched, in_axes = fn(model, jax.random.split(jax.random.PRNGKey(0), 2))
  floor = np.asarray(batched.geom_friction)[:, m.geom(constants.FLOOR_GEOM).id, 0]
  d = _home(m)
  d.qpos[2] -= 0.002  # press both soles into the floor

  def contact_friction(mx):
    out = mjx.forward(mx, mjx.make_data(m).replace(qpos=jp.asarray(d.qpos), ctrl=jp.asarray(d.ctrl)))
    return out._impl.contact.friction[:, 0], out._impl.contact.dist

  friction, dist = jax.jit(jax.vmap(contact_friction, in_axes=(in_axes,)))(batched)
  touching = np.asarray(dist) < 0
  assert touching.any(axis=1).all()
  for env in range(2):
    np.testing.assert_allclose(np.asarray(friction)[env][touching[env]], floor[env], rtol=1e-6)
  # MuJoCo C (playback, the scorecard) agrees, on both terrains.
  for task in ("flat_terrain", "rough_terrain"):
    m = robot_model.load_model(task)
    m.geom_friction[m.geom(constants.FLOOR_GEOM).id, 0] = 0.3
    d = _home(m)
    d.qpos[2] -= 0.002
    mujoco.mj_forward(m, d)
    assert d.ncon > 0
    np.testing.assert_allclose(d.contact.friction[: d.ncon, 0], 0.3)


def test_joystick_stand_still_ignores_the_head(joystick):
  zeros = {f: jp.zeros(3) for f in ("gyro", "accelerometer", "gravity", "local_linvel", "global_linvel")}
  readings = observations.Readings(
    **zeros,
    global_angvel=jp.zeros(3),
    joint_pos=jp.zeros(14).at[jp.array(HEAD)].set(0.5),
    joint_vel=jp.zeros(14),
    actuator_force=jp.zeros(14),
    feet_contacts=jp.ones(2),
    feet_pos=jp.zeros((2, 3)),
    feet_vel=jp.zeros(6),
    base_pos=jp.zeros(3),
    com_pos=jp.zeros(3),
    base_height=jp.ones(1),
    heading=jp.zeros(()),
  )
  step = observations.StepContext.idle(jp.array([0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5]))
  terms = joystick.compute_rewards(readings, step)
  # The head sits at its command: no stand-still cost, full head tracking.
  assert float(terms["stand_still"]) == 0.0
  assert float(terms["head_tracking"]) == pytest.approx(1.0)
  legs_moved = readings.replace(joint_pos=readings.joint_pos.at[jp.array(LEGS)].set(0.1))
  assert float(joystick.compute_rewards(legs_moved, step)["stand_still"]) == pytest.approx(1.0)


def test_metadata_writes_the_gait_frequency_the_env_uses(tmp_path, caplog):
  table = gait_generator.load_default()
  path = dataclasses.replace(table, period=0.55).save(tmp_path / "slow.npz")
  config = env_class("joystick").default_config()
  config.reward_config.scales.imitation = 1.0
  config.reference.path = str(path)
  config.gait_frequency = 3.0  # ignored: the reference sets the phase clock
  with caplog.at_level(logging.WARNING, logger="playground"):
    meta = duck_contract("joystick", config).metadata
  assert meta["gait_frequency_hz"] == pytest.approx(1 / 0.55)
  assert meta["gait_period_steps"] == pytest.approx(27.5)
  assert "not a whole number" in caplog.text
  env = env_class("joystick")(task="flat_terrain", config=config)
  assert env.gait_frequency == pytest.approx(meta["gait_frequency_hz"])
  # The built-in reference: 0.54 s = 27 steps at 50 Hz, no warning.
  caplog.clear()
  config.reference.path = ""
  with caplog.at_level(logging.WARNING, logger="playground"):
    meta = duck_contract("joystick", config).metadata
  assert meta["gait_period_steps"] == pytest.approx(27.0) and "whole number" not in caplog.text


def _first_info(env):
  """Episode state and readings at the home pose (eager: no compilation)."""
  d = _home(env.mj_model)
  readings = observations.read(env.ids, env.mj_model, observations.DataView.from_mjdata(d))
  return env.initial_info(jax.random.PRNGKey(0), readings), readings


def test_the_policy_observes_the_raw_commanded_targets_as_the_runtime_does(joystick):
  info, readings = _first_info(joystick)
  info = dict(info)
  info["command"] = jp.array([0.1, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0])
  action = jp.ones(14)
  info = joystick.apply_action(info, action, jax.random.PRNGKey(1))
  raw = joystick.ids.home_ctrl + 0.25 * np.ones(14)
  raw[HEAD[0]] += 0.3
  np.testing.assert_allclose(info["commanded_targets"], raw, atol=1e-6)
  # The servos cannot follow a 0.25 rad jump in one step: their targets are limited...
  servo = np.asarray(info["motor_targets"])
  assert np.all(servo - joystick.ids.home_ctrl <= 5.24 * 0.02 + 1e-6)
  # ...but the observation holds what the runtime sent.
  obs, _ = joystick.observe(readings, info, jax.random.PRNGKey(2))
  observed = np.asarray(obs["state"][observations.STATE_LAYOUT.slices["motor_targets"]])
  np.testing.assert_allclose(observed, raw, atol=1e-6)


def test_action_delay_is_redrawn_every_step_within_its_range(joystick):
  assert tuple(joystick.config.delay.action_steps) == (0, 2)
  info, _ = _first_info(joystick)
  apply = jax.jit(joystick.apply_action)
  delays = {int(apply(info, jp.zeros(14), jax.random.PRNGKey(k))["action_delay"]) for k in range(40)}
  assert delays == {0, 1, 2}


def test_backlash_scenes_observe_what_the_encoder_reads():
  m = robot_model.load_model("flat_terrain_backlash")
  ids = robot_model.RobotIndices.from_model(m)
  d = _home(m)
  before = np.asarray(observations.read(ids, m, observations.DataView.from_mjdata(d)).joint_pos)
  knee = constants.ACTUATOR_NAMES.index("left_knee")
  d.qpos[m.joint("left_knee_backlash").qposadr[0]] = 0.008
  d.qvel[m.joint("left_knee_backlash").dofadr[0]] = 0.5
  mujoco.mj_forward(m, d)
  readings = observations.read(ids, m, observations.DataView.from_mjdata(d))
  delta = np.asarray(readings.joint_pos) - before
  assert delta[knee] == pytest.approx(0.008, abs=1e-6)
  assert np.abs(np.delete(delta, knee)).max() < 1e-6
  assert float(readings.joint_vel[knee]) == pytest.approx(0.5, abs=1e-5)


def test_head_servos_run_at_the_runtime_s_lower_gain_and_are_randomized():
  m = robot_model.load_model("flat_terrain")
  kp = m.actuator_gainprm[:, 0]
  np.testing.assert_allclose(kp[LEGS], 13.37)
  np.testing.assert_allclose(kp[HEAD], 13.37 * 8 / 30, rtol=1e-3)
  np.testing.assert_allclose(m.actuator_biasprm[:, 1], -kp)
  config = randomize.default_config()
  targets = randomize.RandomizationTargets(
    constants.FLOOR_GEOM, constants.ROOT_BODY, constants.ACTUATOR_NAMES, constants.HEAD_JOINT_NAMES
  )
  batched, _ = randomize.make_randomization_fn(m, targets, config)(
    mjx.put_model(m), jax.random.split(jax.random.PRNGKey(0), 64)
  )
  scale = np.asarray(batched.actuator_gainprm)[:, :, 0] / kp
  lo, hi = config.kp_scale[0] * config.head_kp_scale[0], config.kp_scale[1] * config.head_kp_scale[1]
  assert np.all(scale[:, HEAD] >= lo - 1e-6) and np.all(scale[:, HEAD] <= hi + 1e-6)
  assert scale[:, HEAD].min() < config.kp_scale[0] and scale[:, HEAD].max() > config.kp_scale[1]
  assert np.all(scale[:, LEGS] >= config.kp_scale[0] - 1e-6) and np.all(scale[:, LEGS] <= config.kp_scale[1] + 1e-6)


def test_robustness_levels_are_at_least_the_robot_s():
  c = env_class("joystick").default_config()
  assert tuple(c.push_config.magnitude_range) == (0.1, 1.0)
  assert c.domain_randomization.com_offset == pytest.approx(0.05)
  s = c.noise_config.scales
  assert (s.joint_pos_hip, s.joint_pos_knee, s.joint_pos_ankle, s.joint_vel) == (0.03, 0.05, 0.08, 2.5)


def test_warp_keeps_buffer_overflow_warnings_and_silences_iteration_limits():
  from mujoco.mjx.third_party.mujoco_warp._src.types import OverflowType

  model = robot_model.quiet_warp(mjx.put_model(robot_model.load_model("flat_terrain"), impl="warp"))
  mask = OverflowType(model.opt._impl.warn_overflow)
  for kept in (OverflowType.NEFC, OverflowType.NARROWPHASE, OverflowType.BROADPHASE):
    assert kept in mask
  for silenced in (OverflowType.ITERATIONS, OverflowType.LS_ITERATIONS):
    assert silenced not in mask


# ---- The reward makes walking the optimum (issue: the duck walks).


def test_following_the_command_beats_standing_by_a_wide_margin(joystick):
  from playground.open_duck_mini_v2.tasks.joystick import ideal_reward_per_second

  for vx, vy, wz in [(0.1, 0, 0), (0.15, 0, 0), (-0.1, 0, 0), (0, 0.1, 0), (0, 0, 0.5), (0.05, 0, -0.5)]:
    command = jp.array([vx, vy, wz, 0.0, 0.0, 0.0, 0.0])
    walking = ideal_reward_per_second(joystick, command, walking=True)
    standing = ideal_reward_per_second(joystick, command, walking=False)
    assert walking > 1.5 * standing, (vx, vy, wz, walking, standing)
  # At a zero command, standing is what pays.
  zero = jp.zeros(7)
  assert ideal_reward_per_second(joystick, zero, walking=False) >= ideal_reward_per_second(joystick, zero, True)


def test_imitation_pays_only_for_a_moving_command(joystick):
  readings = _first_info(joystick)[1]
  still = joystick.compute_rewards(readings, observations.StepContext.idle(jp.zeros(7)))
  moving = joystick.compute_rewards(readings, observations.StepContext.idle(jp.array([0.1, 0, 0, 0, 0, 0, 0.0])))
  imitation = [k for k in still if k.startswith("imitation_")]
  assert imitation and all(float(still[k]) == 0.0 for k in imitation)
  assert sum(float(moving[k]) for k in imitation) > 0.0


def test_warp_buffer_overflow_bits_ignore_iteration_limits():
  from mujoco.mjx.third_party.mujoco_warp._src.types import OverflowType

  from playground.common.train import backend

  per_world = np.array([0, OverflowType.ITERATIONS | OverflowType.LS_ITERATIONS, OverflowType.NARROWPHASE])
  assert backend.warp_buffer_overflow_bits(per_world) == int(OverflowType.NARROWPHASE)
  assert backend.warp_buffer_overflow_bits(per_world[:2]) == 0
  assert backend.WARP_BUFFER_OVERFLOW_BITS == int(
    OverflowType.ALL & ~(OverflowType.ITERATIONS | OverflowType.LS_ITERATIONS)
  )
  assert int(OverflowType.ALL) == 0b1111_1111_1111  # the constant above covers every flag of this Warp version
