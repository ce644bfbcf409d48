"""Reward terms and advantage estimation against hand-computed numbers."""

import math

import jax.numpy as jp
import numpy as np
import pytest
from brax.training.agents.ppo import losses as ppo_losses
from helpers import zero_readings

from playground.common.tasks import rewards


def test_tracking_lin_vel():
  # error = (0.1-0.05)^2 + (0-0.05)^2 = 0.005 ; exp(-0.005/0.01) = exp(-0.5)
  value = rewards.tracking_lin_vel(jp.array([0.1, 0.0]), jp.array([0.05, 0.05]), 0.01)
  assert float(value) == pytest.approx(math.exp(-0.5), rel=1e-6)
  assert float(rewards.tracking_lin_vel(jp.array([0.1, 0.2]), jp.array([0.1, 0.2]), 0.01)) == 1.0


def test_tracking_ang_vel_and_head_tracking():
  assert float(rewards.tracking_ang_vel(jp.array(1.0), jp.array(0.8), 0.01)) == pytest.approx(math.exp(-4.0), rel=1e-5)
  value = rewards.joint_tracking(jp.array([0.1, 0.2, 0.0, 0.0]), jp.array([0.0, 0.0, 0.0, 0.1]), 0.1)
  assert float(value) == pytest.approx(math.exp(-(0.01 + 0.04 + 0.01) / 0.1), rel=1e-6)


def test_costs():
  assert float(rewards.torques(jp.array([1.0, -2.0, 3.0]))) == pytest.approx(14.0)
  assert float(rewards.action_rate(jp.array([1.0, 0.5]), jp.array([0.0, 1.0]))) == pytest.approx(1.25)
  assert float(rewards.orientation(jp.array([0.1, -0.2, -0.97]))) == pytest.approx(0.05)
  assert float(rewards.lin_vel_z(jp.array([1.0, 2.0, -0.5]))) == pytest.approx(0.25)
  assert float(rewards.ang_vel_xy(jp.array([0.3, 0.4, 9.0]))) == pytest.approx(0.25)
  assert float(rewards.base_height(jp.array(0.15), 0.16)) == pytest.approx(1e-4, rel=1e-4)


def test_stand_still_only_for_zero_commands():
  error = jp.array([0.1, -0.2, 0.3])
  assert float(rewards.stand_still(jp.zeros(3), error)) == pytest.approx(0.6)
  assert float(rewards.stand_still(jp.array([0.1, 0.0, 0.0]), error)) == 0.0


def test_feet_air_time_rewards_long_steps_when_moving():
  air = jp.array([0.5, 0.1])
  touch = jp.array([1.0, 1.0])
  # (0.5 - 0.2) + (0.1 - 0.2) = 0.2
  assert float(rewards.feet_air_time(air, touch, jp.array([0.1, 0, 0]), 0.2)) == pytest.approx(0.2)
  assert float(rewards.feet_air_time(air, touch, jp.zeros(3), 0.2)) == 0.0
  assert float(rewards.feet_air_time(air, jp.array([0.0, 1.0]), jp.array([0.1, 0, 0]), 0.2)) == (pytest.approx(-0.1))


def test_feet_slip_counts_only_feet_in_contact():
  value = rewards.feet_slip(jp.array([1.0, 0.0]), jp.array([[0.3, 0.4], [1.0, 1.0]]))
  assert float(value) == pytest.approx(0.25)


def test_alive_and_termination():
  assert float(rewards.alive()) == 1.0
  assert float(rewards.termination(jp.array(True))) == 1.0
  assert float(rewards.termination(jp.array(False))) == 0.0


def test_gae_matches_a_hand_computed_example():
  """GAE with gamma=0.5, lambda=0.5 on 3 steps, one env, termination at t=1."""
  gamma, lam = 0.5, 0.5
  rewards_ = np.array([1.0, 2.0, 3.0])
  values = np.array([0.5, 1.0, 1.5])
  bootstrap = 2.0
  termination = np.array([0.0, 1.0, 0.0])
  truncation = np.zeros(3)
  # deltas: d0 = 1 + 0.5*1.0 - 0.5 = 1.0 ; d1 = 2 + 0 - 1.0 = 1.0 ; d2 = 3 + 0.5*2 - 1.5 = 2.5
  # A2 = 2.5 ; A1 = d1 = 1.0 (terminated) ; A0 = d0 + 0.25 * A1 = 1.25
  vs, adv = ppo_losses.compute_gae(
    truncation=jp.array(truncation)[:, None],
    termination=jp.array(termination)[:, None],
    rewards=jp.array(rewards_)[:, None],
    values=jp.array(values)[:, None],
    bootstrap_value=jp.array([bootstrap]),
    lambda_=lam,
    discount=gamma,
  )
  np.testing.assert_allclose(np.array(vs)[:, 0], values + np.array([1.25, 1.0, 2.5]), rtol=1e-6)
  # advantages are one-step TD errors w.r.t. the lambda-returns vs
  expected_adv = [
    1.0 + gamma * (values[1] + 1.0) - values[0],
    2.0 - values[1],
    3.0 + gamma * bootstrap - values[2],
  ]
  np.testing.assert_allclose(np.array(adv)[:, 0], expected_adv, rtol=1e-6)


def test_gae_masks_truncated_steps():
  vs, adv = ppo_losses.compute_gae(
    truncation=jp.array([[0.0], [1.0]]),
    termination=jp.zeros((2, 1)),
    rewards=jp.array([[1.0], [1.0]]),
    values=jp.array([[0.0], [0.0]]),
    bootstrap_value=jp.array([10.0]),
    lambda_=1.0,
    discount=0.9,
  )
  assert float(adv[1, 0]) == 0.0


def test_dof_pos_limits_costs_radians_outside_the_soft_range():
  lower, upper = jp.array([-1.0, 0.0]), jp.array([1.0, 2.0])
  soft_lower, soft_upper = rewards.soft_limits(lower, upper, 0.9)
  np.testing.assert_allclose(soft_lower, [-0.9, 0.1], rtol=1e-6)
  np.testing.assert_allclose(soft_upper, [0.9, 1.9], rtol=1e-6)
  # Inside the soft range: no cost; 0.05 below the first, 0.1 above the second: 0.15.
  assert float(rewards.dof_pos_limits(jp.array([0.5, 1.0]), soft_lower, soft_upper)) == 0.0
  cost = rewards.dof_pos_limits(jp.array([-0.95, 2.0]), soft_lower, soft_upper)
  assert float(cost) == pytest.approx(0.15, rel=1e-5)


def test_a_kick_waives_the_gait_terms_for_the_recovery_window_only():
  """`push_config.recovery_s`: after each kick, imitation, stand_still and feet_air_time pay nothing
  for that long (a recovery step off the clock costs nothing), and pay again afterwards."""
  import jax

  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.tasks import joystick

  config = joystick.default_config()
  config.push_config.interval_range = (0.1, 0.1)  # a kick every 5 control steps
  config.push_config.recovery_s = 0.04  # the kick's step and the next one
  config.push_config.magnitude_range = (1.0, 1.0)
  config.reward_config.scales.capture_point = -50.0
  config.noise_config.level = 0.0
  env = joystick.Joystick(config=config)
  assert joystick.Joystick(config=joystick.default_config())._recovery_steps == 0  # off by default

  state = jax.jit(env.reset)(jax.random.PRNGKey(0))
  state = state.replace(info={**state.info, "command": jp.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])})

  def step(state, _):
    state = env.step(state, jp.zeros(env.action_size))
    metrics = state.metrics
    return state, (state.info["since_push"], metrics["reward/imitation_joint_pos"], metrics["reward/capture_point"])

  _, (since, imitation, capture) = jax.jit(lambda s: jax.lax.scan(step, s, None, length=12))(state)
  since, imitation, capture = np.asarray(since), np.asarray(imitation), np.asarray(capture)
  kicked = since < 2
  np.testing.assert_array_equal(np.flatnonzero(since == 0), [4, 9])  # kicks at steps 5 and 10
  assert np.all(imitation[kicked] == 0.0)
  assert np.all(imitation[~kicked] > 0.0)
  # The capture point: charged only in the window, where a 1 m/s kick puts it 14 cm out, beyond the feet.
  assert np.all(capture[~kicked] == 0.0) and np.all(capture[kicked] < 0.0)

  # stand_still (zero command, legs off home) and feet_air_time (a touch-down
  # after a short step, which it charges) are waived the same way.
  readings = observations.Readings(
    gyro=jp.zeros(3), accelerometer=jp.array([0.0, 0.0, 9.81]), gravity=jp.array([0.0, 0.0, -1.0]),
    local_linvel=jp.zeros(3), global_linvel=jp.zeros(3), global_angvel=jp.zeros(3),
    joint_pos=jp.full(14, 0.1), joint_vel=jp.zeros(14), actuator_force=jp.zeros(14), feet_contacts=jp.ones(2),
    feet_pos=jp.zeros((2, 3)), feet_vel=jp.zeros(6), base_pos=jp.zeros(3), base_height=jp.array([0.17]),
    com_pos=jp.zeros(3), heading=jp.zeros(()),
  )  # fmt: skip
  for command in (jp.zeros(7), jp.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])):
    calm = observations.StepContext.idle(command).replace(air_time=jp.array([0.1, 0.1]), first_contact=jp.ones(2))
    terms = {k: env.compute_rewards(readings, calm.replace(recovering=r)) for k, r in (("calm", 0.0), ("kicked", 1.0))}
    waived = ("stand_still",) if not command.any() else ("feet_air_time", "imitation_joint_pos")
    for name in waived:
      assert float(terms["calm"][name]) != 0.0 and float(terms["kicked"][name]) == 0.0, name
    assert float(terms["kicked"]["tracking_lin_vel"]) == float(terms["calm"]["tracking_lin_vel"])


def test_capture_point_excess_against_the_pendulum_by_hand():
  feet = jp.array([[0.0, 0.08], [0.0, -0.08]])  # side by side, 16 cm apart, the segment on the y axis
  height = jp.array([0.2])

  def excess_of(com, vel, feet, height, margin):
    return rewards.capture_point_excess(rewards.capture_point(com, vel, height), feet, margin)

  # At rest over the feet: the capture point is the centre of mass itself, on the segment.
  assert float(excess_of(jp.array([0.01, 0.0]), jp.zeros(2), feet, height, 0.03)) == 0.0
  # Kicked back at 0.5 m/s, 0.2 m high: omega = sqrt(9.81 / 0.2) = 7.0 rad/s, so the capture
  # point lies 0.5 / 7.0 = 7.1 cm behind the segment: 4.1 cm beyond a 3 cm margin.
  reach = 0.5 / math.sqrt(9.81 / 0.2)
  excess = excess_of(jp.zeros(2), jp.array([-0.5, 0.0]), feet, height, 0.03)
  assert float(excess) == pytest.approx(reach - 0.03, rel=1e-5)
  # The left foot stepped 7 cm back: the segment from (-0.07, 0.08) to (0, -0.08) passes 3.34 cm
  # from the capture point (-0.0714, 0) (the foot of the perpendicular at 41.6% along it).
  stepped = jp.array([[-0.07, 0.08], [0.0, -0.08]])
  (bx, by), (px, py) = (0.07, -0.16), (-reach + 0.07, -0.08)  # b - a, p - a
  d = (bx * py - by * px) / math.hypot(bx, by)  # cross(b - a, p - a) / |b - a|
  assert abs(d) == pytest.approx(0.0334, abs=2e-4)
  excess = excess_of(jp.zeros(2), jp.array([-0.5, 0.0]), stepped, height, 0.03)
  assert float(excess) == pytest.approx(abs(d) - 0.03, rel=1e-3)
  # Kicked sideways within the stance (7.1 cm of 8): between the feet, free; at 1 m/s it passes
  # the left foot by 14.3 - 8 = 6.3 cm (the distance to the segment's end).
  assert float(excess_of(jp.zeros(2), jp.array([0.0, 0.5]), feet, height, 0.03)) == 0.0
  side = excess_of(jp.zeros(2), jp.array([0.0, 1.0]), feet, height, 0.03)
  assert float(side) == pytest.approx(2 * reach - 0.08 - 0.03, rel=1e-5)


def test_the_capture_point_term_is_paid_in_the_recovery_window_only_and_needs_one():
  from playground.common import configs
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.tasks import joystick

  config = joystick.default_config()
  config.push_config.recovery_s = 0.5
  config.reward_config.scales.capture_point = -50.0
  env = joystick.Joystick(config=config)
  kicked = observations.Readings(
    gyro=jp.zeros(3), accelerometer=jp.array([0.0, 0.0, 9.81]), gravity=jp.array([0.0, 0.0, -1.0]),
    local_linvel=jp.zeros(3), global_linvel=jp.array([-0.5, 0.0, 0.0]), global_angvel=jp.zeros(3),
    joint_pos=jp.zeros(14), joint_vel=jp.zeros(14), actuator_force=jp.zeros(14), feet_contacts=jp.ones(2),
    feet_pos=jp.array([[0.0, 0.08, 0.0], [0.0, -0.08, 0.0]]), feet_vel=jp.zeros(6),
    base_pos=jp.array([0.0, 0.0, 0.2]), base_height=jp.array([0.2]), com_pos=jp.array([0.0, 0.0, 0.2]),
    heading=jp.zeros(()),
  )  # fmt: skip
  idle = observations.StepContext.idle(jp.zeros(7))
  inside = env.compute_rewards(kicked, idle.replace(recovering=1.0))["capture_point"]
  outside = env.compute_rewards(kicked, idle.replace(recovering=0.0))["capture_point"]
  assert float(inside) == pytest.approx(0.5 / math.sqrt(9.81 / 0.2) - 0.03, rel=1e-5) and float(outside) == 0.0
  assert env.reward_scales()["capture_point"] == -50.0
  # Off by default; asked for without a recovery window it would never pay: one line.
  assert "capture_point" not in joystick.Joystick(config=joystick.default_config()).reward_scales()
  config.push_config.recovery_s = 0.0
  with pytest.raises(configs.ConfigError, match="push_config.recovery_s above 0"):
    joystick.Joystick(config=config)


def test_the_audit_verdict_flags_a_fall_that_earns_as_much_as_a_catching_step():
  from benchmarks.reward_audit import rank

  # Rows: the policy, the home pose, the collapse, then three scripted steps.
  fell = np.array([True, True, True, False, True, False])
  assert rank(np.array([1.0, 1.5, 0.2, 3.0, 2.9, 2.0]), fell) == (
    "ok: a catching step beats falling, which the policy does",
    3,
    4,
  )
  assert rank(np.array([1.0, 3.0, 0.2, 3.0, 2.9, 2.0]), fell)[0].startswith("BUG")
  two_fell = np.array([False, False, True, False, True, False])
  assert rank(np.array([5.0, 0.0, 0.0, 3.0, 0.0, 0.0]), two_fell)[0] == (
    "ok: the policy catches it without a scripted step, and earns more"
  )
  assert rank(np.zeros(6), np.ones(6, bool)) == ("no scripted step catches this kick", None, 0)


def test_the_preset_reward_ranks_a_catching_step_above_a_fall():
  """The reward audit as a guard, through real MJX steps: the test walker kicked
  backward at 0.5 m/s while walking at 0.1 m/s.

  The preset's reward must pay the best scripted step that catches the kick
  clearly more than any fall (1.9 discounted on this fixture, 2026-12-06); a reward
  change that makes falling pay fails here (`--check` exits 1).
  """
  import json
  import subprocess
  import sys

  from helpers import REPO_ROOT
  from helpers import subprocess_env

  walker = REPO_ROOT / "tests" / "fixtures" / "walker" / "policy.onnx"
  command = [sys.executable, "-m", "benchmarks.reward_audit", str(walker), "--check"]
  command += ["--commands", "forward_0.1", "--directions", "backward"]
  done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=subprocess_env(), cwd=REPO_ROOT)
  assert done.returncode == 0, done.stderr[-2000:]
  result = json.loads(done.stdout)["results"]["forward_0.1, kicked backward"]
  assert result["verdict"].startswith("ok"), result["verdict"]
  assert not result["best_catching_step"]["fell"] and result["best_fall"]["fell"]
  assert result["margin"] > 1.0, result


def test_the_command_audit_judges_at_the_true_command_what_the_file_does_for_the_shown_one():
  """`benchmarks/command_audit`: the fixture walker, judged at a 0.5 rad/s turn, shown 0 (it does not
  turn: the yaw-rate term pays little) or 1.0 rad/s (it turns: the term pays more), as JSON."""
  import json
  import subprocess
  import sys

  from helpers import REPO_ROOT
  from helpers import subprocess_env

  walker = REPO_ROOT / "tests" / "fixtures" / "walker" / "policy.onnx"
  command = [sys.executable, "-m", "benchmarks.command_audit", str(walker), "--axis", "yaw", "--command", "0.5"]
  command += ["--shown", "0", "1.0", "--models", "2", "--seconds", "3"]
  done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=subprocess_env(), cwd=REPO_ROOT)
  assert done.returncode == 0, done.stderr[-2000:]
  report = json.loads(done.stdout)
  assert report["axis"] == "yaw" and report["true_yaw"] == 0.5
  still, turning = report["results"]["shown 0"], report["results"]["shown 1"]
  assert still["falls"] == turning["falls"] == 0, report
  assert abs(still["yaw_rate_rps"]) < 0.15 < 0.3 < turning["yaw_rate_rps"], report
  ang = lambda r: r["terms_per_s"]["tracking_ang_vel"]  # noqa: E731
  assert ang(turning) > ang(still) + 0.5, report


def test_stand_still_pulls_the_legs_to_the_configured_stance():
  """`reward_config.stand_pose`: stand_still charges the L1 distance of the leg joints from home plus
  the stance (0 in the stance, its L1 size at home); an offset beyond the residual's reach is refused."""
  from playground.common import configs
  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.tasks import joystick

  config = joystick.default_config()
  stance = {"left_hip_pitch": -0.15, "right_hip_pitch": 0.15, "left_knee": 0.11, "right_knee": 0.11}
  for name, value in stance.items():
    config.reward_config.stand_pose[name] = value
  env = joystick.Joystick(config=config)
  at_home = zero_readings(env)
  offsets = np.zeros(observations.NUM_ACTIONS, np.float32)
  for name, value in stance.items():
    offsets[constants.ACTUATOR_NAMES.index(name)] = value
  in_stance = at_home.replace(joint_pos=jp.asarray(offsets))
  idle = observations.StepContext.idle(jp.zeros(7))
  cost = lambda readings: float(env.compute_rewards(readings, idle)["stand_still"])  # noqa: E731
  assert cost(in_stance) == pytest.approx(0.0, abs=1e-7)
  assert cost(at_home) == pytest.approx(0.52, rel=1e-5)
  walking = observations.StepContext.idle(jp.array([0.1, 0, 0, 0, 0, 0, 0]))
  assert float(env.compute_rewards(at_home, walking)["stand_still"]) == 0.0

  config.reward_config.stand_pose.left_knee = 0.3
  with pytest.raises(configs.ConfigError, match=r"stand_pose.left_knee=0.3 is beyond the residual's reach of 0.25 rad"):
    joystick.Joystick(config=config)


def test_posture_reward_shows_the_limit_cost_charging_the_stance(tmp_path):
  """`benchmarks.posture_reward`: held at a zero command, the stance that `stance_search` found pays the
  preset's joint-limit cost (its loaded knees cross the soft limit at 95% of the range) and home does not;
  `stand_still`, pulling to the stance, charges home more."""
  from benchmarks import posture_reward
  from benchmarks import statue
  from benchmarks.common import KICK_ONLY_OVERRIDES
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import constants

  left = {"hip_yaw": -0.083, "hip_roll": -0.052, "hip_pitch": -0.153, "knee": 0.111, "ankle": 0.053}
  mirrored = {"hip_yaw", "hip_roll", "hip_pitch"}  # the right leg's axes of these point the other way
  stance = {f"left_{j}": v for j, v in left.items()}
  stance |= {f"right_{j}": -v if j in mirrored else v for j, v in left.items()}
  overrides = [*KICK_ONLY_OVERRIDES, *(f"reward_config.stand_pose.{k}={v}" for k, v in stance.items())]
  env, cfg = posture_reward.posture_env(overrides)
  pre_tanh = np.zeros(len(constants.ACTUATOR_NAMES))
  for name, rad in stance.items():
    pre_tanh[constants.ACTUATOR_NAMES.index(name)] = np.arctanh(rad / cfg.env_config.action_scale)
  files = {"stance": statue.write_statue(tmp_path / "stance.onnx", pre_tanh)}
  files["home"] = statue.write_statue(tmp_path / "home.onnx")
  policies = {name: policy_io.onnx_policy(path, batched=True) for name, path in files.items()}
  got = posture_reward.posture_terms(env, policies, envs=2, settle_steps=25, steps=25)
  assert not got["stance"]["fell"] and not got["home"]["fell"]
  assert got["stance"]["terms"]["dof_pos_limits"] < -0.005 and got["home"]["terms"]["dof_pos_limits"] == 0.0
  assert got["home"]["terms"]["stand_still"] < 3 * got["stance"]["terms"]["stand_still"] < 0.0
  # The posture held: each file's own action, and the trunk's pitch it stands at.
  np.testing.assert_allclose(got["stance"]["held_action"], np.tanh(pre_tanh), atol=1e-5)
  np.testing.assert_allclose(got["home"]["held_action"], 0.0, atol=1e-6)
  # The stance's hip pitch tips the trunk nose-down: measured 2.0 deg against home's -0.4.
  assert got["stance"]["trunk_pitch_deg"] > got["home"]["trunk_pitch_deg"] + 1.0


def test_the_filtered_tracking_pays_for_the_speed_not_for_the_gait_s_sway():
  """`reward_config.tracking_filter_s`: a duck walking at the command while its trunk sways 0.1 m/s rms
  sideways (a 0.54 s gait) earns nearly all of tracking_lin_vel through the filter, and
  standing earns little; judged each step, the sway alone costs more than half of it, and
  walking at the command instead of at 0.04 m/s earns less than half as much more."""
  import jax

  from playground.common import configs
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.tasks import joystick

  config = joystick.default_config()
  config.reward_config.tracking_filter_s = 0.27
  env = joystick.Joystick(config=config)
  dt, sigma = float(env.dt), float(config.reward_config.tracking_sigma)
  readings = zero_readings(env)
  t = np.arange(200) * dt  # 4 s, past the filter's start-up
  sway = 0.1 * math.sqrt(2.0) * np.sin(2 * math.pi * t / 0.54)  # 0.1 m/s rms

  def mean_tracking(vx, filter_s):
    velocity, paid = jp.zeros(3), []
    for vy in sway:
      r = readings.replace(local_linvel=jp.array([vx, vy, 0.0]))
      velocity = observations.tracked_velocity(velocity, r, dt, filter_s)
      paid.append(float(rewards.tracking_lin_vel(jp.array([0.1, 0.0]), velocity[:2], sigma)))
    return float(np.mean(paid[100:]))

  filtered = {vx: mean_tracking(vx, 0.27) for vx in (0.1, 0.04, 0.0)}
  instant = {vx: mean_tracking(vx, 0.0) for vx in (0.1, 0.04, 0.0)}
  assert filtered[0.1] > 0.9 and filtered[0.0] < 0.4
  assert instant[0.1] < 0.5  # the sway alone costs more than half
  # Walking at the command instead of at 0.04 m/s (a walker on slow servos): the filter pays
  # at least twice as much more for it.
  assert filtered[0.1] - filtered[0.04] > 2.0 * (instant[0.1] - instant[0.04]) > 0.0

  # The env judges the filtered velocity of its step (not the readings), keeps it from step to
  # step, and refuses a negative time constant.
  command = jp.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
  at_speed = observations.StepContext.idle(command).replace(velocity=jp.array([0.1, 0.0, 0.0]))
  assert float(env.compute_rewards(readings, at_speed)["tracking_lin_vel"]) == 1.0
  assert float(env.compute_rewards(readings, observations.StepContext.idle(command))["tracking_lin_vel"]) < 0.4
  state = jax.jit(env.reset)(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(np.asarray(state.info["tracked_velocity"]), np.zeros(3))
  assert "tracked_velocity" not in jax.eval_shape(joystick.Joystick().reset, jax.random.PRNGKey(0)).info
  config.reward_config.tracking_filter_s = -0.1
  with pytest.raises(configs.ConfigError, match="tracking_filter_s"):
    joystick.Joystick(config=config)


def _catch_json(path, *, shared=True, knots=None):
  """A small `catch_search --shared` result: motions for kicks straight back and forward, 2 knots each."""
  import json

  from playground.open_duck_mini_v2.model import constants

  legs = constants.LEG_JOINT_NAMES
  back = [[0.1 * (j + 1) / 10 for j in range(10)], [0.2] * 10]
  forward = [[-0.05] * 10, [-0.1] * 10]
  doc = {
    "benchmark": "catch_search",
    "shared": shared,
    "kick_mps": 0.5,
    "span_s": 0.08,  # 2 knots, 2 control steps each
    "knots": 2,
    "react_s": 0.04,  # 2 control steps
    "start_pose": {"offset_rad": {legs[0]: 0.02, legs[3]: -0.04}},
    "results": {
      "kick 180 deg, reach 1": {"best_knots_rad": knots if knots is not None else back},
      "kick 0 deg, reach 1": {"best_knots_rad": forward},
      "kick 0 deg, reach 2": {"best_knots_rad": [[9.0] * 10, [9.0] * 10]},
    },
  }
  path.write_text(json.dumps(doc))
  return path, np.array(back), np.array(forward)


def test_the_recovery_reference_plays_the_searched_motion_for_the_kick_by_hand(tmp_path):
  """`CatchReference.targets`: the stance through the reaction time, then the knots of the nearest
  direction, linearly, about the env's stance, scaled by the kick along that direction; none for a
  kick far from every direction."""
  from playground.common import configs
  from playground.common.tasks.catch_reference import CatchReference
  from playground.open_duck_mini_v2.model import constants

  path, back, forward = _catch_json(tmp_path / "catch.json")
  ref = CatchReference.load(path, constants.LEG_JOINT_NAMES, ctrl_dt=0.02)
  assert ref.react_steps == 2 and ref.steps_per_knot == 2 and ref.kick_mps == 0.5
  origin = np.zeros(10)
  origin[0], origin[3] = 0.02, -0.04
  np.testing.assert_allclose(ref.origin, origin)
  stance = jp.full(10, 0.01)

  def at(kick, since):
    return np.asarray(ref.targets(jp.asarray(kick, jp.float32), jp.asarray(since), stance))

  for since in (0, 1):  # the reaction time: the stance
    np.testing.assert_allclose(at([-0.5, 0.0], since), 0.01, atol=1e-7)
  # Step 2: halfway from the origin to the first knot; step 3: the first knot; 4: halfway to the second;
  # from 5 on: the second, held. Played about the env's stance (0.01), not the search's origin.
  np.testing.assert_allclose(at([-0.5, 0.0], 2), 0.01 + 0.5 * (back[0] - origin), atol=1e-6)
  np.testing.assert_allclose(at([-0.5, 0.0], 3), 0.01 + back[0] - origin, atol=1e-6)
  np.testing.assert_allclose(at([-0.5, 0.0], 4), 0.01 + 0.5 * (back[0] + back[1]) - origin, atol=1e-6)
  np.testing.assert_allclose(at([-0.5, 0.0], 40), 0.01 + back[1] - origin, atol=1e-6)
  # Half the kick: half the excursion; a kick 30 deg off straight back: its component along it.
  np.testing.assert_allclose(at([-0.25, 0.0], 40), 0.01 + 0.5 * (back[1] - origin), atol=1e-6)
  off = [-0.5 * np.cos(np.radians(30)), 0.5 * np.sin(np.radians(30))]
  np.testing.assert_allclose(at(off, 40), 0.01 + np.cos(np.radians(30)) * (back[1] - origin), atol=1e-6)
  np.testing.assert_allclose(at([0.5, 0.0], 40), 0.01 + forward[1] - origin, atol=1e-6)
  # To the side (90 deg from both motions): the stance; a 2 m/s kick: at most 1.5 times the excursion.
  np.testing.assert_allclose(at([0.0, 0.5], 40), 0.01, atol=1e-7)
  np.testing.assert_allclose(at([-2.0, 0.0], 40), 0.01 + 1.5 * (back[1] - origin), atol=1e-6)
  # Reach 2 reads the other cell only.
  assert CatchReference.load(path, constants.LEG_JOINT_NAMES, 0.02, reach=2.0).directions.tolist() == [0.0]

  # Files that are not such a result: one line naming the maker.
  for bad in (_catch_json(tmp_path / "a.json", shared=False)[0], _catch_json(tmp_path / "b.json", knots=[[0.1]])[0]):
    with pytest.raises(configs.ConfigError, match="catch_search --shared"):
      CatchReference.load(bad, constants.LEG_JOINT_NAMES, 0.02)
  (tmp_path / "c.json").write_text("not json")
  with pytest.raises(configs.ConfigError, match="cannot be read as JSON"):
    CatchReference.load(tmp_path / "c.json", constants.LEG_JOINT_NAMES, 0.02)


def test_the_recovery_reference_replays_the_motion_catch_search_played(tmp_path):
  """The reward's targets after a full-strength kick are, step for step, the motor targets that
  `benchmarks.catch_search` played when it searched the motion (its `knot_path` after the reaction
  time), so the policy is asked for the motion that caught the kick."""
  from benchmarks.catch_search import knot_path
  from playground.common.tasks.catch_reference import CatchReference
  from playground.open_duck_mini_v2.model import constants

  path, back, _ = _catch_json(tmp_path / "catch.json")
  ref = CatchReference.load(path, constants.LEG_JOINT_NAMES, ctrl_dt=0.02)
  played = knot_path(back[None].astype(np.float32), ref.steps_per_knot, 8, ref.origin)[:, 0]
  stance = jp.asarray(ref.origin)
  for t in range(8):
    since = ref.react_steps + t
    got = np.asarray(ref.targets(jp.asarray([-0.5, 0.0]), jp.asarray(since), stance))
    np.testing.assert_allclose(got, played[t], atol=1e-6, err_msg=f"step {t} after the reaction time")


def test_catch_search_shared_writes_a_reference_the_reward_reads(tmp_path):
  """`benchmarks.catch_search --shared` (a tiny search on 2 randomized models) writes a JSON that
  `push_config.catch_reference` loads, with one motion per direction and a verdict per model; asked
  for a shared motion without models it exits with one line."""
  import json
  import subprocess
  import sys

  from playground.common.tasks.catch_reference import CatchReference
  from playground.open_duck_mini_v2.model import constants

  run = [sys.executable, "-m", "benchmarks.catch_search", "--shared", "--directions", "180", "--reach", "1"]
  refused = subprocess.run(run, capture_output=True, text=True, timeout=120)
  assert refused.returncode != 0 and "Traceback" not in refused.stderr
  assert refused.stderr.strip().splitlines()[-1].startswith("error: --shared searches one motion for several models")
  tiny = ["--models", "2", "--population", "4", "--elite", "2", "--iterations", "1", "--knots", "2"]
  done = subprocess.run([*run, *tiny, "--after", "0.3", "--settle", "0.2"], capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, done.stderr[-2000:]
  result = json.loads(done.stdout)
  cell = result["results"]["kick 180 deg, reach 1"]
  assert result["shared"] and result["models"] == 2 and len(cell["caught_by_model"]) == 2
  assert 0 <= cell["caught"] <= 2 and 0 <= cell["held_pose_stands"] <= 2
  path = tmp_path / "catch.json"
  path.write_text(done.stdout)
  ref = CatchReference.load(path, constants.LEG_JOINT_NAMES, ctrl_dt=0.02)
  assert ref.knots.shape == (1, 2, 10) and np.degrees(ref.directions).tolist() == [180.0]
  assert np.abs(ref.knots).max() <= 0.25 + 1e-6 + np.abs(ref.origin).max()


def test_catch_follow_sees_a_statue_not_react_to_the_kick(tmp_path):
  """`benchmarks.catch_follow` on the home statue kicked straight back: the statue's targets do not
  move, so its excursion is 0 and its gap to the reference is the reference's whole excursion."""
  from benchmarks import catch_follow
  from benchmarks import statue
  from benchmarks.common import KICK_ONLY_OVERRIDES
  from benchmarks.posture_reward import posture_env
  from playground.common.tasks.catch_reference import CatchReference
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.model import mirror as duck_mirror

  path, back, _ = _catch_json(tmp_path / "catch.json")
  env, cfg = posture_env([*KICK_ONLY_OVERRIDES])
  reference = CatchReference.load(path, constants.LEG_JOINT_NAMES, float(env.dt))
  policy = policy_io.onnx_policy(statue.write_statue(tmp_path / "home.onnx"), batched=True)
  got = catch_follow.follow(
    env,
    policy,
    reference,
    [180.0],
    kick=0.3,
    envs=2,
    settle_steps=10,
    window=8,
    after=8,
    action_scale=float(cfg.env_config.action_scale),
    sigma=0.05,
    mirror=duck_mirror.leg_map(env.mj_model),
  )["180"]
  # The reference (kick 0.3 of the searched 0.5: 0.6 of each excursion), steps 0-7 after the kick,
  # by hand: 2 steps held, then through the knots at 2 steps each, about the posture held (home).
  origin = reference.origin
  path_rad = [origin, origin, 0.5 * (origin + back[0]), back[0], 0.5 * (back[0] + back[1]), back[1], back[1], back[1]]
  moves = np.array([0.6 * (p - origin) for p in path_rad])
  # Standing still is as far from the motion as from its mirror image: the motion's side is kept.
  assert got["policy_excursion_rms_rad"] == 0.0 and got["mirror_side"] == 0.0
  np.testing.assert_allclose(got["reference_excursion_rms_rad"], np.sqrt(np.mean(moves**2)), atol=1e-4)
  np.testing.assert_allclose(got["gap_rms_rad"], got["reference_excursion_rms_rad"], atol=1e-4)
  np.testing.assert_allclose(got["catch_imitation_per_step"], np.mean(np.exp(-np.sum(moves**2, 1) / 0.05)), atol=1e-3)


def test_catch_imitation_pays_for_the_reference_targets_after_a_kick_while_standing_only(tmp_path):
  import jax

  from playground.common import configs
  from playground.common.tasks import kicks
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.tasks import joystick

  path, back, _ = _catch_json(tmp_path / "catch.json")
  config = joystick.default_config()
  config.push_config.recovery_s = 0.5
  config.push_config.catch_reference = str(path)
  config.reward_config.scales.catch_imitation = 4.0
  env = joystick.Joystick(config=config)
  readings = observations.Readings(
    gyro=jp.zeros(3), accelerometer=jp.array([0.0, 0.0, 9.81]), gravity=jp.array([0.0, 0.0, -1.0]),
    local_linvel=jp.zeros(3), global_linvel=jp.zeros(3), global_angvel=jp.zeros(3),
    joint_pos=jp.zeros(14), joint_vel=jp.zeros(14), actuator_force=jp.zeros(14), feet_contacts=jp.ones(2),
    feet_pos=jp.zeros((2, 3)), feet_vel=jp.zeros(6), base_pos=jp.zeros(3), base_height=jp.array([0.17]),
    com_pos=jp.zeros(3), heading=jp.zeros(()),
  )  # fmt: skip
  legs = np.array(joystick.IMITATED_JOINTS)
  origin = np.zeros(10)
  origin[0], origin[3] = 0.02, -0.04
  target = back[1] - origin  # the home stance, straight back at 0.5 m/s, long after the knots
  on_target = np.zeros(14, np.float32)
  on_target[legs] = target / config.action_scale
  kicked = observations.StepContext.idle(jp.zeros(7)).replace(
    kick=jp.array([-0.5, 0.0]), since_kick=jp.asarray(30), recovering=1.0
  )

  def term(context, action):
    return float(env.compute_rewards(readings, context.replace(action=jp.asarray(action)))["catch_imitation"])

  assert term(kicked, on_target) == pytest.approx(1.0)
  assert term(kicked, np.zeros(14)) == pytest.approx(np.exp(-np.sum(np.square(target)) / 0.05), rel=1e-5)
  assert term(kicked.replace(recovering=0.0), on_target) == 0.0  # after the window
  # The other foot: the mirror image of the motion pays as much, and every action earns what its
  # mirror image earns for the mirrored kick, so a mirrored sample (`symmetry.augment`) is paid right.
  from playground.open_duck_mini_v2.model import mirror as duck_mirror

  flip = duck_mirror.joint_map(env.mj_model)
  assert not np.allclose(flip(on_target), on_target, atol=0.01)  # the motion is one-sided
  assert term(kicked, flip(on_target)) == pytest.approx(1.0)
  rng = np.random.default_rng(3)
  for angle in (160.0, 200.0, 180.0):
    kick = 0.5 * np.array([np.cos(np.radians(angle)), np.sin(np.radians(angle))])
    for _ in range(3):
      action = (on_target + rng.normal(scale=0.3, size=14)).astype(np.float32)
      here = term(kicked.replace(kick=jp.asarray(kick, jp.float32)), action)
      there = term(kicked.replace(kick=jp.asarray(kick * [1.0, -1.0], jp.float32)), flip(action))
      assert here == pytest.approx(there, rel=1e-5, abs=1e-9) and here > 1e-3
  walking = kicked.replace(command=jp.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
  assert term(walking, on_target) == 0.0  # walking: the gait's imitation, not this
  assert env.reward_scales()["catch_imitation"] == 4.0

  # In the env, the kick reaches the term in the trunk's heading frame at the kick: the world-frame
  # kick (`last_kick`, the critic's) turned by minus the trunk's yaw (a start turned 90 deg left).
  config.push_config.interval_range = (0.1, 0.1)  # the first kick at the fifth step
  config.push_config.magnitude_range = (0.5, 0.5)
  config.critic_kick = True
  env = joystick.Joystick(config=config)
  state = jax.jit(env.reset)(jax.random.PRNGKey(0))
  turned = state.data.qpos.at[3:7].set(jp.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)]))
  state = state.replace(data=state.data.replace(qpos=turned))
  step = jax.jit(env.step)
  for _ in range(4):
    state = step(state, jp.zeros(env.action_size))
  assert float(jp.linalg.norm(state.info["kick_heading"])) == 0.0
  yaw = float(kicks.heading(state.data.qpos[3:7]))
  state = step(state, jp.zeros(env.action_size))
  world, local = np.asarray(state.info["last_kick"]), np.asarray(state.info["kick_heading"])
  assert int(state.info["since_push"]) == 0 and np.linalg.norm(world) == pytest.approx(0.5, rel=1e-5)
  assert abs(yaw - np.pi / 2) < 0.1
  c, s = np.cos(yaw), np.sin(yaw)
  np.testing.assert_allclose(local, [c * world[0] + s * world[1], -s * world[0] + c * world[1]], atol=1e-5)

  # Without kicks (the scorecard's env) it builds and pays nothing.
  config.push_config.enable = False
  env = joystick.Joystick(config=config)
  state = jax.jit(env.step)(jax.jit(env.reset)(jax.random.PRNGKey(0)), jp.zeros(env.action_size))
  assert float(state.metrics["reward/catch_imitation"]) == 0.0 and "kick_heading" not in state.info

  # Asked for without a reference or a window, it would never pay: one line.
  for key, value in (("catch_reference", ""), ("recovery_s", 0.0)):
    bad = joystick.default_config()
    bad.push_config.recovery_s, bad.push_config.catch_reference = 0.5, str(path)
    bad.reward_config.scales.catch_imitation = 4.0
    bad.push_config[key] = value
    with pytest.raises(configs.ConfigError, match="catch_reference"):
      joystick.Joystick(config=bad)
