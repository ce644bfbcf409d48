"""Sim-to-sim playback in MuJoCo C with the exported policy."""

import jax
import numpy as np
import pytest
from helpers import PLAYBACK
from helpers import run_cli
from mujoco import mjx

from playground.open_duck_mini_v2 import base
from playground.open_duck_mini_v2 import mujoco_infer


@pytest.fixture(scope="module")
def policy_path(smoke_run):
  run_dir, _ = smoke_run
  return run_dir / "000000002560" / "policy.onnx"


@pytest.fixture(scope="module")
def playback(policy_path):
  return mujoco_infer.Playback(mujoco_infer.onnx_policy(policy_path), "joystick", "flat_terrain")


def test_exported_policy_drives_mujoco_c_for_200_steps(playback):
  summary = mujoco_infer.run(playback, mujoco_infer.CommandSchedule.constant([0.1, 0, 0, 0, 0, 0, 0]), 4.0)
  assert summary["seconds"] == pytest.approx(4.0)
  assert np.isfinite(summary["distance_m"]) and np.isfinite(summary["mean_lin_vel_error_mps"])
  assert summary["falls"] >= 0
  assert np.all(np.isfinite(playback.data.qpos))


def test_playback_observation_equals_the_mjx_env_observation(playback):
  env = playback.env
  command = np.array([0.05, 0.0, 0.2, 0.1, 0.0, 0.0, 0.0], np.float32)
  playback.reset(command)
  for _ in range(30):
    playback.step(command)
  key = jax.random.PRNGKey(7)
  info = playback.info
  # 1) Same C state through MJX's data structure: identical observation.
  mjx_data = mjx.put_data(playback.model, playback.data)
  obs_mjx, _ = env.observe(base.read(env.ids, playback.model, mjx_data), info, key)
  obs_c, _ = env.observe(base.read(env.ids, playback.model, playback.view()), info, key)
  for name in ("state", "privileged_state"):
    np.testing.assert_allclose(np.asarray(obs_c[name]), np.asarray(obs_mjx[name]), atol=1e-6, rtol=1e-6)
  # 2) The same qpos/qvel simulated by MJX (mjx.forward) gives the same
  #    position/velocity-level observation; accelerometer and actuator forces
  #    depend on each engine's constraint solve and are compared loosely.
  data = mjx.make_data(playback.model).replace(
    qpos=playback.data.qpos,
    qvel=playback.data.qvel,
    ctrl=playback.data.ctrl,
    qacc_warmstart=playback.data.qacc_warmstart,
  )
  data = jax.jit(mjx.forward)(mjx.put_model(playback.model), data)
  obs_fwd, _ = env.observe(base.read(env.ids, playback.model, data), info, key)
  from playground.open_duck_mini_v2.observations import STATE_LAYOUT

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
  assert "summary" in result.stderr and '"falls"' in result.stderr
  import imageio.v3 as iio

  frames = iio.imread(video)
  assert frames.shape[0] == 50 and frames.shape[-1] == 3 and frames.std() > 1.0
  data = np.load(record)
  assert data["obs"].shape == (50, 101) and data["action"].shape == (50, 14)
  assert np.all(np.abs(data["action"]) <= 1.0)


def test_playback_rejects_a_missing_policy_in_one_line(tmp_path):
  result = run_cli("--onnx", tmp_path / "missing.onnx", "--duration", "0.1", script=PLAYBACK, timeout=300)
  assert result.returncode == 2 and "does not exist" in result.stderr
  assert "Traceback" not in result.stderr


def test_a_policy_with_an_observation_history_plays_back_with_its_own_layout(tmp_path):
  from test_score import write_policy

  policy = write_policy(tmp_path / "history.onnx", history=2)
  assert mujoco_infer.observation_history(policy) == 2
  playback = mujoco_infer.Playback(mujoco_infer.onnx_policy(policy), "joystick", "flat_terrain", observation_history=2)
  summary = mujoco_infer.run(playback, mujoco_infer.CommandSchedule.constant([0.0] * 7), 0.5)
  assert summary["falls"] == 0 and np.asarray(playback.obs["state"]).shape == (101 + 2 * 34,)
  record = tmp_path / "history.npz"
  result = run_cli("--onnx", policy, "--duration", "0.2", "--record", record, script=PLAYBACK)
  assert result.returncode == 0, result.stderr[-2000:]
  assert np.load(record)["obs"].shape == (10, 101 + 2 * 34)
  foreign = write_policy(tmp_path / "foreign.onnx", {"observation_layout": [{"name": "gyro", "start": 0, "size": 3}]})
  with pytest.raises(ValueError, match=r"not the Open Duck Mini V2's \(101 inputs, plus 34 per history frame\)"):
    mujoco_infer.observation_history(foreign)
  import onnx

  bare = onnx.load(str(policy))  # another project's export for the runtime: no layout in the metadata
  kept = [p for p in bare.metadata_props if p.key != "observation_layout"]
  del bare.metadata_props[:]
  bare.metadata_props.extend(kept)
  onnx.save(bare, str(tmp_path / "bare.onnx"))
  assert mujoco_infer.observation_history(tmp_path / "bare.onnx") == 0
  (tmp_path / "text.onnx").write_text("not a model")
  with pytest.raises(ValueError, match="is not an ONNX policy file"):
    mujoco_infer.observation_history(tmp_path / "text.onnx")
