"""Sim-to-sim playback in MuJoCo C: the scorecard's player with one episode."""

import json

import jax
import mujoco
import numpy as np
import pytest
from helpers import PLAYBACK
from helpers import run_cli
from helpers import write_policy
from mujoco import mjx

from playground.common.evaluation.scorecard import FALL_CAUSES
from playground.common.evaluation.scorecard import Command
from playground.common.evaluation.scorecard import headline_line
from playground.common.evaluation.scorecard import table
from playground.open_duck_mini_v2 import playback as playback_cli
from playground.open_duck_mini_v2.evaluation import player
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import scorecard
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model.observations import STATE_LAYOUT
from playground.open_duck_mini_v2.tasks.registry import env_class


@pytest.fixture(scope="module")
def policy_path(smoke_run):
  run_dir, _ = smoke_run
  return run_dir / "000000002560" / "policy.onnx"


def test_exported_policy_drives_mujoco_c_for_200_steps(policy_path):
  playback = playback_cli.Playback(policy_path)
  assert playback.config.action_scale == 0.25 and playback.metadata["training_step"] == 2560
  summary = playback_cli.run(playback, Command("walk", ((0.0, 0.1, 0.0, 0.0),), 4.0))
  # Four seconds, or a fall named by its cause.
  assert summary["seconds"] == pytest.approx(4.0) or summary["fall_cause"] in FALL_CAUSES
  assert np.isfinite(summary["distance_m"]) and summary["fall_cause"] != "non-finite action"


def test_playback_is_the_scorecards_episode_with_the_policy_s_own_action_scale(tmp_path):
  """A non-default action scale: playback and the scorecard drive the servos to home + 0.4 * action."""
  bias = np.full(14, 0.2, np.float32)
  policy = write_policy(tmp_path / "scaled.onnx", {"action_scale": 0.4}, bias=bias)
  command = Command("stand", ((0.0, 0.0, 0.0, 0.0),), 1.5)
  home = np.asarray(policy_io.read_metadata(policy)["home_pose"])
  for source in player.SOURCES:
    playback = playback_cli.Playback(policy, source=source)
    assert playback.config.action_scale == 0.4
    ctrl = []
    episode = playback.play(command, lambda view, ctrl=ctrl: ctrl.append(view.ctrl[0].copy()))
    # The first target is within the servo's speed limit of home: exactly home + 0.4 tanh(0.2).
    np.testing.assert_allclose(ctrl[0], home + 0.4 * np.tanh(0.2), atol=1e-6)
    card = scorecard.score(policy, seeds=1, clean=True, commands=(command,), source=source)
    assert card["episodes"][0]["survival_s"] == episode["survival_s"]
    assert card["commands"]["stand"]["distance_m"] == round(episode["distance_m"], 4)  # the card rounds
    assert card["commands"]["stand"]["power_w"] == round(episode["power_w"], 4) > 0.0


def test_a_run_whose_critic_observes_the_kick_is_scored_as_the_same_policy(tmp_path):
  """`critic_kick` changes only the critic's view: the card of a run with it is the card without it."""
  policy = write_policy(tmp_path / "p.onnx", bias=np.full(14, 0.05, np.float32))
  command = Command("walk", ((0.0, 0.1, 0.0, 0.0),), 1.0)
  cards = [
    scorecard.score(policy, seeds=1, commands=(command,), overrides=overrides)
    for overrides in ((), (("critic_kick", "true"),))
  ]
  assert cards[0]["episodes"] == cards[1]["episodes"]


def test_a_non_finite_action_ends_the_episode_as_a_named_failure(tmp_path):
  policy = write_policy(tmp_path / "nan.onnx", bias=np.full(14, np.nan, np.float32))
  command = Command("stand", ((0.0, 0.0, 0.0, 0.0),), 1.0)
  for source in player.SOURCES:
    card = scorecard.score(policy, seeds=2, commands=(command,), source=source)
    assert card["commands"]["stand"]["falls"] == 2
    assert card["commands"]["stand"]["fall_causes"] == {"non-finite action": 2}
    assert card["headline"]["non_finite_action_episodes"] == 2
    assert "NON-FINITE ACTIONS in 2 episodes" in headline_line(card)
    assert "stand (2 non-finite action)" in table(card)
  result = run_cli("--onnx", policy, "--duration", "0.5", "--runtime", script=PLAYBACK, timeout=600)
  assert result.returncode == 1 and '"fall_cause": "non-finite action"' in result.stderr


def test_c_and_mjx_states_give_the_same_observation():
  env = env_class("joystick")(task="flat_terrain", config=env_class("joystick").default_config())
  model = env.mj_model
  data = mujoco.MjData(model)
  mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
  rng = np.random.default_rng(0)
  for _ in range(30):
    data.ctrl[:] = env.ids.home_ctrl + rng.uniform(-0.1, 0.1, 14)
    mujoco.mj_step(model, data, nstep=env.n_substeps)
  key = jax.random.PRNGKey(7)
  readings_c = observations.read(env.ids, model, observations.DataView.from_mjdata(data))
  info = env.initial_info(key, readings_c)
  # 1) Same C state through MJX's data structure: identical observation.
  obs_c, _ = env.observe(readings_c, info, key)
  obs_mjx, _ = env.observe(observations.read(env.ids, model, mjx.put_data(model, data)), info, key)
  for name in ("state", "privileged_state"):
    np.testing.assert_allclose(np.asarray(obs_c[name]), np.asarray(obs_mjx[name]), atol=1e-6, rtol=1e-6)
  # 2) The same qpos/qvel simulated by MJX (mjx.forward) gives the same
  #    position/velocity-level observation; accelerometer and actuator forces
  #    depend on each engine's constraint solve and are compared loosely.
  mdata = mjx.make_data(model).replace(
    qpos=data.qpos, qvel=data.qvel, ctrl=data.ctrl, qacc_warmstart=data.qacc_warmstart
  )
  mdata = jax.jit(mjx.forward)(mjx.put_model(model), mdata)
  obs_fwd, _ = env.observe(observations.read(env.ids, model, mdata), info, key)
  split_c = STATE_LAYOUT.split(np.asarray(obs_c["state"]))
  split_f = STATE_LAYOUT.split(np.asarray(obs_fwd["state"]))
  for name in ("gyro", "command", "joint_pos", "joint_vel", "last_actions", "motor_targets", "feet_contacts", "phase"):
    np.testing.assert_allclose(split_c[name], split_f[name], atol=1e-4, err_msg=name)
  np.testing.assert_allclose(split_c["accelerometer"], split_f["accelerometer"], atol=0.5)


def test_video_and_record_are_written_headless(policy_path, tmp_path):
  video, record = tmp_path / "duck.mp4", tmp_path / "duck.npz"
  result = run_cli(
    "--onnx",
    policy_path,
    "--vx",
    "0.1",
    "--duration",
    "1.0",
    "--video",
    video,
    "--record",
    record,
    script=PLAYBACK,
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  summary = json.loads(result.stderr.split("summary ", 1)[1].splitlines()[0])
  assert summary["source"] == "env" and summary["falls"] == 0 and summary["seconds"] == pytest.approx(1.0)
  import imageio.v3 as iio

  frames = iio.imread(video)
  assert frames.shape[0] == 50 and frames.shape[-1] == 3 and frames.std() > 1.0
  data = np.load(record)
  assert data["obs"].shape == (50, 101) and data["action"].shape == (50, 14)
  assert np.all(np.isfinite(data["action"]))


def test_playback_rejects_a_missing_policy_in_one_line(tmp_path):
  result = run_cli("--onnx", tmp_path / "missing.onnx", "--duration", "0.1", script=PLAYBACK, timeout=300)
  assert result.returncode == 2 and "does not exist" in result.stderr
  assert "Traceback" not in result.stderr
  foreign = write_policy(tmp_path / "foreign.onnx", {"control_period_s": 0.01})
  result = run_cli("--onnx", foreign, "--duration", "0.1", script=PLAYBACK, timeout=300)
  assert result.returncode == 2 and "control period is 0.01 s" in result.stderr and "Traceback" not in result.stderr


def test_a_policy_with_an_observation_history_plays_back_with_its_own_layout(tmp_path):
  policy = write_policy(tmp_path / "history.onnx", history=2)
  assert policy_io.observation_history(policy) == 2
  playback = playback_cli.Playback(policy)
  assert playback.config.observation_history == 2
  record = tmp_path / "history.npz"
  result = run_cli("--onnx", policy, "--duration", "0.2", "--record", record, script=PLAYBACK)
  assert result.returncode == 0, result.stderr[-2000:]
  assert np.load(record)["obs"].shape == (10, 101 + 2 * 34)
  # The runtime observes 101 floats: a history policy is not played its way.
  with pytest.raises(policy_io.ScoreError, match="observes a history"):
    scorecard.score(policy, seeds=1, commands=(Command("stand", ((0.0, 0.0, 0.0, 0.0),), 0.2),), source="runtime")
  foreign = write_policy(tmp_path / "foreign.onnx", {"observation_layout": [{"name": "gyro", "start": 0, "size": 3}]})
  with pytest.raises(ValueError, match=r"not the Open Duck Mini V2's \(101 inputs, plus 34 per history frame\)"):
    policy_io.observation_history(foreign)
  import onnx

  bare = onnx.load(str(policy))  # another project's export for the runtime: no layout in the metadata
  kept = [p for p in bare.metadata_props if p.key != "observation_layout"]
  del bare.metadata_props[:]
  bare.metadata_props.extend(kept)
  onnx.save(bare, str(tmp_path / "bare.onnx"))
  assert policy_io.observation_history(tmp_path / "bare.onnx") == 0
  (tmp_path / "text.onnx").write_text("not a model")
  with pytest.raises(ValueError, match="is not a readable ONNX policy"):
    policy_io.observation_history(tmp_path / "text.onnx")
