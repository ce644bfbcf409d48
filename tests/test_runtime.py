"""The robot runtime's loop (runtime.py) against the training env's observation code.

Two independent implementations of one contract: on the same simulated
states they must build the same observation, slot by slot, except where the
runtime differs on purpose (its first frame's phase).
"""

import dataclasses
from pathlib import Path

import jax
import mujoco
import numpy as np
import pytest
from helpers import write_policy

from playground.common.evaluation import scorecard as scorecard_common
from playground.common.evaluation.scorecard import headline_line
from playground.common.evaluation.scorecard import table
from playground.common.export import onnx_graph
from playground.open_duck_mini_v2.evaluation import player
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation import scorecard
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.tasks import base
from playground.open_duck_mini_v2.tasks.registry import env_class

SLOTS = observations.STATE_LAYOUT.slices


def test_runtime_and_env_observations_match_slot_by_slot_after_the_first_frame():
  config = base.keeping_disturbances(env_class("joystick").default_config())  # no noise, delays or randomization
  env = env_class("joystick")(task="flat_terrain", config=config)
  model, ids = env.mj_model, env.ids
  data = mujoco.MjData(model)
  mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
  command = np.array([0.1, 0.0, 0.3, 0.2, -0.1, 0.3, 0.05], np.float32)
  period = 1.0 / (env.gait_frequency * env.dt)
  loop = runtime.RuntimeLoop(1, ids.home_ctrl, config.action_scale, period, env.dt)
  hardware = runtime.Hardware(
    model, [model], config.noise_config, config.delay, servos.speed_limit(config), env.dt, np.random.default_rng(0)
  )
  # The runtime's 2 s hold at the home pose; the env then starts from the same state.
  data.ctrl[:] = hardware.hold(ids.home_ctrl[None])[0]
  mujoco.mj_step(model, data, nstep=100 * env.n_substeps)
  read = jax.jit(lambda view: observations.read(ids, model, view))
  observe, apply, advance = jax.jit(env.observe), jax.jit(env.apply_action), jax.jit(env.advance)
  key = jax.random.PRNGKey(0)
  readings = read(observations.DataView.from_mjdata(data))
  info = dict(env.initial_info(key, readings), command=command)
  env_obs, info = observe(readings, info, key)
  rt_obs = loop.observe(commands=command[None], **hardware.sense([data]))[0]
  env_slots, rt_slots = (
    observations.STATE_LAYOUT.split(np.asarray(env_obs["state"])),
    observations.STATE_LAYOUT.split(rt_obs),
  )
  # The first frame: the runtime's phase is (0, 0), the env's (1, 0) (phase 0); every other slot agrees.
  np.testing.assert_array_equal(rt_slots["phase"], [0.0, 0.0])
  np.testing.assert_allclose(env_slots["phase"], [1.0, 0.0], atol=1e-7)
  for name in observations.STATE_LAYOUT.names:
    if name != "phase":
      np.testing.assert_allclose(rt_slots[name], env_slots[name], atol=2e-5, err_msg=f"first frame, {name}")
  rng = np.random.default_rng(1)
  for t in range(1, 60):
    action = np.clip(0.3 * np.sin(t / 5.0 + np.arange(14)) + 0.05 * rng.standard_normal(14), -1, 1).astype(np.float32)
    info = apply(info, action, key)
    sent = loop.act(action[None], command[None])[0]
    ctrl = hardware.drive(sent[None])[0]
    # What the runtime sends is what the env observes; the servos get the same control.
    np.testing.assert_allclose(sent, np.asarray(info["commanded_targets"]), atol=2e-6)
    np.testing.assert_allclose(ctrl, np.asarray(info["motor_targets"]), atol=2e-6)
    data.ctrl[:] = ctrl
    mujoco.mj_step(model, data, nstep=env.n_substeps)
    readings = read(observations.DataView.from_mjdata(data))
    info, _ = advance(info, readings, action)
    env_obs, info = observe(readings, info, key)
    rt_obs = loop.observe(commands=command[None], **hardware.sense([data]))[0]
    # From the second frame on the two agree in every slot, the phase included:
    # the runtime's phase index after t steps is t, the env's phase t steps of
    # 2 pi f dt (no offset between them).
    for name in observations.STATE_LAYOUT.names:
      np.testing.assert_allclose(
        rt_obs[SLOTS[name]], np.asarray(env_obs["state"])[SLOTS[name]], atol=5e-5, err_msg=f"step {t}, {name}"
      )


def test_the_runtime_loop_advances_its_phase_as_the_robot_does():
  loop = runtime.RuntimeLoop(
    2, np.zeros(14), 0.25, 27.0, 0.02, phase_factor=np.array([1.0, runtime.PHASE_BUTTON_FACTOR])
  )
  zeros = dict(
    gyro=np.zeros((2, 3)),
    accelerometer=np.zeros((2, 3)),
    commands=np.zeros((2, 7)),
    dof_pos=np.zeros((2, 14)),
    dof_vel=np.zeros((2, 14)),
    feet_contacts=np.ones((2, 2)),
  )
  phases = [loop.observe(**zeros)[:, SLOTS["phase"]] for _ in range(30)]
  np.testing.assert_array_equal(phases[0], 0.0)  # (0, 0) before the first advance
  angle = 2 * np.pi * np.array([1.0, 1.3]) * 4 / 27  # the fifth frame: 4 advances
  np.testing.assert_allclose(phases[4], np.stack([np.cos(angle), np.sin(angle)], 1), atol=1e-6)
  np.testing.assert_allclose(phases[28][0], phases[1][0], atol=1e-6)  # 27 steps per period
  # Targets: home + scale * action, then the head command in place (observed next).
  commands = np.zeros((2, 7))
  commands[:, 3:] = [0.1, 0.2, 0.3, 0.4]
  sent = loop.act(np.ones((2, 14)), commands)
  head = [5, 6, 7, 8]
  np.testing.assert_allclose(sent[:, head], 0.25 + commands[:, 3:])
  np.testing.assert_allclose(np.delete(sent, head, axis=1), 0.25)
  obs = loop.observe(**dict(zeros, commands=commands))
  np.testing.assert_allclose(obs[:, SLOTS["motor_targets"]], sent)
  np.testing.assert_allclose(obs[:, SLOTS["last_actions"]][:, :14], 1.0)


def test_the_runtime_loop_plays_the_undated_walk_scripts_contract_too():
  """Projected gravity in the accelerometer's slot, velocities x 0.1, the phase held at small commands,
  no head commands in the targets (`runtime.UNDATED_CONTRACT`)."""
  options = runtime.RuntimeOptions(contract=runtime.UNDATED_CONTRACT)
  loop = runtime.RuntimeLoop(2, np.zeros(14), 0.25, 27.0, 0.02, options)
  commands = np.zeros((2, 7))
  commands[1, 0] = 0.15  # the second robot walks: its phase advances
  commands[:, 3:] = [0.1, 0.2, 0.3, 0.4]
  readings = dict(
    gyro=np.zeros((2, 3)),
    accelerometer=np.tile([0.0, 0.0, 9.81], (2, 1)),
    gravity=np.tile([0.0, 0.0, -1.0], (2, 1)),
    commands=commands,
    dof_pos=np.zeros((2, 14)),
    dof_vel=np.ones((2, 14)),
    feet_contacts=np.ones((2, 2)),
  )
  frames = [loop.observe(**readings) for _ in range(3)]
  np.testing.assert_array_equal(frames[0][:, SLOTS["accelerometer"]], [[0, 0, -1], [0, 0, -1]])
  np.testing.assert_allclose(frames[0][:, SLOTS["joint_vel"]], 0.1)
  np.testing.assert_allclose(frames[2][0, SLOTS["phase"]], [1.0, 0.0])  # held at 0
  angle = 2 * 2 * np.pi / 27
  np.testing.assert_allclose(frames[2][1, SLOTS["phase"]], [np.cos(angle), np.sin(angle)], atol=1e-6)
  np.testing.assert_allclose(loop.act(np.ones((2, 14)), commands), 0.25)  # no head mix
  with pytest.raises(ValueError, match="gravity"):
    loop.observe(**{k: v for k, v in readings.items() if k != "gravity"})
  with pytest.raises(ValueError, match="valid: accelerometer, gravity"):
    runtime.RuntimeContract(imu_slot="magnetometer")


def test_a_policy_file_names_the_runtime_contract_it_is_made_for(tmp_path):
  meta = onnx_graph.read_metadata(write_policy(tmp_path / "duck.onnx"))
  contract = meta["runtime_contract"]
  assert contract == runtime.contract_metadata()
  assert "Open_Duck_Mini_Runtime" in contract["runtime"] and "uv run walk" in contract["walk_script"]
  assert "6faec97" in contract["commits"]
  facts = {k: contract[k] for k in ("imu_slot", "joint_vel_scale", "phase_rule", "head_mix")}
  assert facts == {"imu_slot": "accelerometer", "joint_vel_scale": 0.05, "phase_rule": "free-running", "head_mix": True}
  assert runtime.RuntimeContract.from_metadata(meta) == runtime.CONTRACT
  undated = runtime.contract_metadata(runtime.UNDATED_CONTRACT)
  assert runtime.RuntimeContract.from_metadata({"runtime_contract": undated}) == runtime.UNDATED_CONTRACT
  # A file from before the key: the project's contract (it was the only one the project trained for).
  assert runtime.RuntimeContract.from_metadata({"joint_vel_scale": 0.05}) == runtime.CONTRACT


def test_the_runtimes_exact_call_takes_its_float64_observation(tmp_path):
  """The runtime calls `session.run(None, {"obs": [obs]})` with the float64 array it concatenated:
  the same actions as float32, for the walker and a freshly written file."""
  import onnxruntime as ort

  model = robot_model.load_model("flat_terrain")
  commands = np.array([[0.0] * 7, [0.15, 0.0, 0.5, 0.3, 0.2, -0.4, 0.1]])
  frames = runtime.first_frames(model, robot_model.RobotIndices.from_model(model).home_ctrl, commands)
  frames = frames.astype(np.float64)
  frames = np.concatenate([frames, frames + np.random.default_rng(0).normal(0, 0.1, frames.shape)])
  for path in (WALKER, write_policy(tmp_path / "duck.onnx", bias=0.3)):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    batch = session.run(None, {"obs": frames.astype(np.float32)})[0]
    for obs, expected in zip(frames, batch):
      assert obs.dtype == np.float64
      np.testing.assert_array_equal(session.run(None, {"obs": [obs]})[0][0], expected)


@pytest.mark.parametrize("cutoff, clip", [(None, None), (10.0, None), (None, 1.0)])
def test_the_runtime_options_filter_and_clip_the_targets(cutoff, clip):
  options = runtime.RuntimeOptions(cutoff_frequency=cutoff, max_motor_velocity=clip, filter_after_s=0.1)
  loop = runtime.RuntimeLoop(1, np.zeros(14), 1.0, 27.0, 0.02, options)
  sent = np.array([loop.act(np.ones((1, 14)), np.zeros((1, 7)))[0, 0] for _ in range(20)])
  if cutoff is None and clip is None:
    np.testing.assert_array_equal(sent, 1.0)
  elif cutoff:
    alpha = (1 / 10.0) / (0.02 + 1 / 10.0)
    expected = 1.0 - alpha ** np.arange(1, 21)  # the filter's state from 0; used after 0.1 s
    np.testing.assert_allclose(sent[6:], expected[6:], atol=1e-9)
    np.testing.assert_array_equal(sent[:5], 1.0)
  else:
    np.testing.assert_allclose(sent, np.minimum(0.02 * np.arange(1, 21), 1.0), atol=1e-12)


#: A trained policy (the cpu preset's recipe; see fixtures/walker/config.json)
#: and its run's env config, as a run directory holds them.
WALKER = Path(__file__).parent / "fixtures" / "walker" / "policy.onnx"


def _suite(*names, duration=None):
  commands = [c for c in scorecard.suite() if c.name in names]
  return tuple(dataclasses.replace(c, duration=duration) if duration else c for c in commands)


def test_a_trained_policy_played_the_runtime_way_survives_its_first_second():
  policy, env_config, _ = policy_io.resolve_policy(WALKER)
  assert env_config is not None  # the run's config next to the file
  first = runtime.first_frames(
    robot_model.load_model("flat_terrain"), policy_io.read_metadata(policy)["home_pose"], np.zeros((1, 7))
  )
  assert np.all(np.isfinite(onnx_graph.run_onnx(policy, first)))  # the runtime's first frame
  commands = _suite("stand", "forward_0.1", "turn_left_0.5", duration=1.5)
  card = scorecard.score(policy, env_config, seeds=4, commands=commands, source="runtime")
  assert card["source"] == "runtime" and card["headline"]["falls"] == 0, table(card)
  assert all(e["survival_s"] == pytest.approx(1.5) for e in card["episodes"])


def test_runtime_and_env_headlines_agree_on_a_trained_policy():
  """The same policy scored through both observation sources: the same card within its sampling noise."""
  policy, env_config, _ = policy_io.resolve_policy(WALKER)
  commands = _suite("stand", "forward_0.1", "turn_left_0.5", "turn_right_0.5")
  cards = {src: scorecard.score(policy, env_config, seeds=4, commands=commands, source=src) for src in player.SOURCES}
  env, rt = cards["env"]["headline"], cards["runtime"]["headline"]
  assert env["falls"] == rt["falls"] == 0, (table(cards["env"]), table(cards["runtime"]))
  assert abs(env["vx_at_0.1"] - rt["vx_at_0.1"]) < 0.015
  assert abs(env["yaw_rate_at_0.5"] - rt["yaw_rate_at_0.5"]) < 0.06
  assert abs(env["tracking_error_mps"] - rt["tracking_error_mps"]) < 0.015


def test_a_duck_down_before_the_policy_acts_is_the_start_up_holds_fall_not_the_policys(tmp_path):
  """Statue, C001 servos, trunk mass 5 cm off: the duck whose mass sits furthest back tips over
  while the runtime holds the home pose. The runtime card names that fall `start-up hold` (0 s
  survived, counted in `falls_in_hold`); the duck with its mass furthest forward stands. The env
  source has no hold: the same back-heavy duck tips over after the policy starts acting (about
  1.3 s), and that fall is the policy's."""
  from benchmarks.statue import write_statue

  statue = write_statue(tmp_path / "statue.onnx")
  config = servos.select(env_class("joystick").default_config(), "c001")
  config.domain_randomization.com_offset = 0.05
  nominal = robot_model.load_model("flat_terrain")
  root = nominal.body(constants.ROOT_BODY).id
  keys = jax.random.split(jax.random.PRNGKey(0), 64)
  offsets = [m.body_ipos[root, 0] - nominal.body_ipos[root, 0] for m in player.randomized_models(nominal, config, keys)]
  back, front = int(np.argmin(offsets)), int(np.argmax(offsets))
  assert offsets[back] < -0.04 and offsets[front] > 0.04
  stand = _suite("stand", duration=4.0)
  cards = {
    src: scorecard.score(
      statue, config.to_dict(), seeds=2, commands=stand, model_keys=np.asarray(keys)[[back, front]], source=src
    )
    for src in player.SOURCES
  }
  held, env = cards["runtime"]["episodes"], cards["env"]["episodes"]
  assert held[0]["fall_cause"] == scorecard_common.HOLD_CAUSE and held[0]["survival_s"] == 0.0, table(cards["runtime"])
  assert not held[1]["fell"], table(cards["runtime"])
  assert cards["runtime"]["headline"]["falls_in_hold"] == 1 and "start-up hold" in headline_line(cards["runtime"])
  assert env[0]["fell"] and env[0]["fall_cause"] != scorecard_common.HOLD_CAUSE and env[0]["survival_s"] > 0
  assert cards["env"]["headline"]["falls_in_hold"] == 0
