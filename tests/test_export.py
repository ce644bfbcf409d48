"""ONNX export: the file the robot loads, verified against the JAX policy."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import jax
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from brax.training.acme import running_statistics
from helpers import EXPORT
from helpers import REPO_ROOT
from helpers import duck_contract
from helpers import run_cli
from ml_collections import config_dict

from playground.common.export import onnx_graph
from playground.common.export import policy_file
from playground.common.train import ppo


def test_every_checkpoint_has_a_robot_ready_onnx_policy(smoke_run):
  run_dir, _ = smoke_run
  path = run_dir / "000000002560" / "policy.onnx"
  assert path.is_file()
  session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
  (inp,), (out,) = session.get_inputs(), session.get_outputs()
  assert inp.name == "obs" and inp.shape[1] == 101 and inp.type == "tensor(float)"
  assert out.name == "continuous_actions" and out.shape[1] == 14
  actions = session.run(None, {"obs": [np.zeros(101, np.float32)]})[0][0]
  assert actions.shape == (14,) and np.all(np.abs(actions) <= 1.0)
  model = onnx.load(str(path))
  assert model.opset_import[0].version == onnx_graph.OPSET
  ops = {node.op_type for node in model.graph.node}
  assert ops >= {"Sub", "Div", "MatMul", "Add", "Sigmoid", "Mul", "Slice", "Tanh", "Max", "Min"}
  meta = onnx_graph.read_metadata(path)
  assert meta["action_names"][:2] == ["left_hip_yaw", "left_hip_roll"] and len(meta["action_names"]) == 14
  assert meta["observation_size"] == 101 and meta["observation_layout"][0] == {"name": "gyro", "start": 0, "size": 3}
  assert meta["action_scale"] == 0.25 and meta["control_period_s"] == 0.02 and len(meta["home_pose"]) == 14
  assert meta["env"] == "joystick" and meta["task"] == "flat_terrain" and meta["training_step"] == 2560
  assert meta["project_version"]
  # The commands are clamped to the trained ranges inside the file, as the metadata says.
  assert meta["command_range"]["vx"] == [-0.15, 0.15] and "clamped" in meta["input_clamp"]
  far = np.zeros((1, 101), np.float32)
  far[0, 6] = 0.15
  edge = session.run(None, {"obs": far})[0]
  far[0, 6] = 5.0
  np.testing.assert_array_equal(session.run(None, {"obs": far})[0], edge)


def test_export_command_writes_a_verified_file(smoke_run, tmp_path):
  run_dir, _ = smoke_run
  out = tmp_path / "duck.onnx"
  # A relative path, as users type it (Orbax itself restores only absolute ones).
  relative = os.path.relpath(run_dir, REPO_ROOT)
  result = run_cli(relative, "--output", out, script=EXPORT, timeout=300)
  assert result.returncode == 0, result.stderr
  assert "max |onnx - jax|" in result.stderr
  assert out.is_file()
  # The on-demand export equals the one written at checkpoint time.
  ckpt = onnx.load(str(run_dir / "000000002560" / "policy.onnx"))
  again = onnx.load(str(out))
  for a, b in zip(ckpt.graph.initializer, again.graph.initializer):
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(a), onnx.numpy_helper.to_array(b))
  # The untrained baseline: same network and normalizer, freshly initialized
  # policy weights (actions near the home pose), step 0 in its metadata.
  assert run_cli(relative, "--untrained", "0", script=EXPORT, timeout=300).returncode == 2  # needs --output
  base = tmp_path / "untrained.onnx"
  result = run_cli(relative, "--untrained", "0", "--output", base, script=EXPORT, timeout=300)
  assert result.returncode == 0, result.stderr
  assert onnx_graph.read_metadata(base)["training_step"] == 0
  weights = lambda path: [onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer]  # noqa: E731
  assert any(a.shape == b.shape and not np.array_equal(a, b) for a, b in zip(weights(out), weights(base)))
  obs = np.random.default_rng(0).normal(size=(64, 101)).astype(np.float32)
  assert np.abs(onnx_graph.run_onnx(base, obs)).max() < 0.3


def test_export_refuses_a_run_whose_reference_gait_changed_since(smoke_run, tmp_path):
  """The file carries the gait of today's table: exporting a run trained on another one would ship a
  policy around a gait it never saw, so the export stops in one line and writes nothing."""
  run_dir, _ = smoke_run
  run = tmp_path / "run"
  shutil.copytree(run_dir, run)
  step = run / "000000002560"
  before = (step / "policy.onnx").read_bytes()
  record = json.loads((run / "config.json").read_text())
  table = str(REPO_ROOT / "playground/open_duck_mini_v2/data/reference_gait.npz")
  assert table in record["file_digests"]
  # As the record of a residual run (the file adds the gait) trained in another
  # checkout, on an earlier built-in gait.
  record["env_config"]["reference"]["feedforward"] = True
  del record["file_digests"][table]
  record["file_digests"]["/elsewhere/duck/playground/open_duck_mini_v2/data/reference_gait.npz"] = "0" * 64
  (run / "config.json").write_text(json.dumps(record))
  (step / "policy.onnx").unlink()
  result = run_cli(step, script=EXPORT, timeout=300)
  assert result.returncode == 2, result.stderr
  assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
  assert "reference_gait.npz changed since the run trained with it" in result.stderr
  assert "000000000000... then" in result.stderr and "at commit" in result.stderr
  assert not (step / "policy.onnx").exists()
  # The policy file written at checkpoint time is never touched by a refused export.
  (step / "policy.onnx").write_bytes(before)
  result = run_cli(step, "--output", step / "policy.onnx", script=EXPORT, timeout=300)
  assert result.returncode == 2 and (step / "policy.onnx").read_bytes() == before
  # With the digest it trained on, the same export writes a file that adds the gait.
  record["file_digests"] = {table: hashlib.sha256(Path(table).read_bytes()).hexdigest()}
  (run / "config.json").write_text(json.dumps(record))
  out = tmp_path / "residual.onnx"
  result = run_cli(step, "--output", out, script=EXPORT, timeout=300)
  assert result.returncode == 0, result.stderr
  assert len(onnx.load(str(out)).graph.initializer) > len(onnx.load_from_string(before).graph.initializer)


def test_export_command_reports_bad_paths_in_one_line(tmp_path):
  result = run_cli(tmp_path / "nope", script=EXPORT, timeout=300)
  assert result.returncode == 2
  assert result.stderr.strip().count("\n") == 0 and "does not exist" in result.stderr
  (tmp_path / "empty").mkdir()
  result = run_cli(tmp_path / "empty", script=EXPORT, timeout=300)
  assert result.returncode == 2 and "no complete checkpoint" in result.stderr


def _random_policy(activation):
  cfg = config_dict.ConfigDict(
    dict(
      policy_hidden_layer_sizes=(32, 16),
      value_hidden_layer_sizes=(8,),
      activation=activation,
      policy_obs_key="state",
      value_obs_key="state",
    )
  )
  network = ppo.network_factory(cfg, obs_is_dict=True)(
    {"state": (11,)}, 3, preprocess_observations_fn=running_statistics.normalize
  )
  params = network.policy_network.init(jax.random.PRNGKey(0))
  rng = np.random.default_rng(0)
  mean = {"state": rng.normal(size=11).astype(np.float32)}
  std = {"state": rng.uniform(0.5, 3.0, size=11).astype(np.float32)}
  normalizer = running_statistics.RunningStatisticsState(count=np.ones(()), mean=mean, summed_variance=std, std=std)
  return network, normalizer, params


@pytest.mark.parametrize("activation", ["swish", "elu", "relu", "tanh"])
def test_onnx_matches_jax_on_1000_observations(activation, tmp_path):
  network, normalizer, params = _random_policy(activation)
  path = tmp_path / "p.onnx"
  diff = policy_file.export(path, network, normalizer, params, "state", 3, activation, {"k": [1, 2]})
  assert diff <= 1e-5
  obs = onnx_graph.sample_observations(normalizer.mean["state"], normalizer.std["state"], 1000, seed=3)
  jax_actions = policy_file.jax_policy_fn(network, normalizer, params, "state")(obs)
  np.testing.assert_allclose(onnx_graph.run_onnx(path, obs), jax_actions, atol=1e-5)
  assert onnx_graph.read_metadata(path)["k"] == [1, 2]


def test_parity_failure_is_loud_and_writes_nothing(tmp_path):
  network, normalizer, params = _random_policy("swish")
  model = onnx_graph.build_model(normalizer.mean["state"], normalizer.std["state"], params, 3, "swish")
  wrong = policy_file.jax_policy_fn(network, normalizer, params, "state")
  with pytest.raises(onnx_graph.ExportError, match="does not match the JAX policy"):
    onnx_graph.verify_parity(model, lambda obs: wrong(obs) + 1e-3, normalizer.mean["state"], normalizer.std["state"])


def test_unknown_parameter_layouts_are_rejected():
  network, normalizer, params = _random_policy("swish")
  mean, std = normalizer.mean["state"], normalizer.std["state"]
  with pytest.raises(onnx_graph.ExportError, match="not a Brax MLP"):
    onnx_graph.build_model(mean, std, {"params": {"conv_0": params["params"]["hidden_0"]}}, 3, "swish")
  with pytest.raises(onnx_graph.ExportError, match="unsupported policy parameter layout"):
    onnx_graph.build_model(mean, std, {"weights": 1}, 3, "swish")
  with pytest.raises(onnx_graph.ExportError, match="expected 2 x 5"):
    onnx_graph.build_model(mean, std, params, 5, "swish")
  with pytest.raises(onnx_graph.ExportError, match="unsupported activation"):
    onnx_graph.build_model(mean, std, params, 3, "gelu")


@pytest.mark.parametrize(
  "in_place, gain, stance",
  [(False, 1.0, False), (True, 1.0, False), (False, 2.0, False), (False, 1.0, True)],
  ids=["stands", "steps_in_place", "residual_x2", "stands_in_stance"],
)
def test_feedforward_policy_adds_the_reference_gait_in_onnx(tmp_path, in_place, gain, stance):
  """A residual policy's ONNX adds the env's feed-forward, read from the observation's command and phase
  (at a zero command only with `reference.step_in_place`, or the stance with
  `reference.feedforward_stand_pose`), to its residual times `reference.residual_gain`."""
  from playground.open_duck_mini_v2.model import constants
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.tasks import joystick

  config = joystick.default_config()
  config.reference.feedforward = True
  config.reference.step_in_place = in_place
  config.reference.residual_gain = gain
  config.reference.feedforward_stand_pose = stance
  config.reward_config.stand_pose.left_knee = 0.11
  config.reward_config.stand_pose.right_hip_pitch = -0.15
  contract = duck_contract("joystick", config)
  ff = contract.feedforward
  assert ff is not None and duck_contract("standing").feedforward is None
  assert ff.residual_gain == gain
  # The file says so when its residual is scaled.
  assert ("multiplied by 2 inside the file" in contract.metadata["feedforward"]) == (gain == 2.0)
  size, actions = observations.STATE_LAYOUT.size, observations.NUM_ACTIONS
  network, params, normalizer = _small_state_policy(size, actions, seed=1)
  path = tmp_path / "ff.onnx"
  policy_file.export(path, network, normalizer, params, "state", actions, "swish", {}, ff)

  # Observations with commands across (and beyond) the grid, zero commands,
  # and phases on the unit circle including the quadrant boundaries.
  rng = np.random.default_rng(0)
  n = 400
  obs = rng.normal(size=(n, size)).astype(np.float32)
  commands = rng.uniform([-0.2, -0.25, -1.2], [0.2, 0.25, 1.2], size=(n, 3)).astype(np.float32)
  commands[:40] = 0.0
  phases = rng.uniform(0, 2 * np.pi, n).astype(np.float32)
  phases[40:48] = np.array([0, 0.5, 1, 1.5, 2, 1.25, 0.75, 1.999], np.float32) * np.pi
  cmd, ph = ff.command_index, ff.phase_index
  obs[:, cmd : cmd + 3] = commands
  obs[:, ph], obs[:, ph + 1] = np.cos(phases), np.sin(phases)
  network_only = policy_file.jax_policy_fn(network, normalizer, params, "state")(obs)
  offsets = np.asarray(jax.vmap(ff.jax_fn())(commands, phases))
  got = onnx_graph.run_onnx(path, obs)
  np.testing.assert_allclose(got, gain * network_only + offsets, atol=4e-5)
  if gain != 1.0:  # the gain is in the file: the plain sum is off by the residual itself
    assert np.abs(got - (network_only + offsets)).max() > 0.1
  if in_place:  # zero commands: the in-place gait is in the output
    assert np.abs(offsets[:40, list(joystick.IMITATED_JOINTS)]).max() > 0.5
  elif stance:  # zero commands: the stance, in action units, and nothing else
    expected = np.zeros(actions, np.float32)
    for name, rad in (("left_knee", 0.11), ("right_hip_pitch", -0.15)):
      expected[joystick.IMITATED_JOINTS[constants.LEG_JOINT_NAMES.index(name)]] = rad / config.action_scale
    np.testing.assert_allclose(offsets[:40], np.broadcast_to(expected, (40, actions)), atol=1e-6)
    assert "standing stance" in contract.metadata["feedforward"]
  else:  # standing commands: the network alone
    assert np.all(offsets[:40] == 0.0)
  assert np.abs(offsets[40:]).max() > 0.5  # the gait is in the output (about +-1.4 action units)
  assert np.abs(offsets[40:, list(joystick.IMITATED_JOINTS)]).max() > 0.5
  head = [i for i in range(actions) if i not in joystick.IMITATED_JOINTS]
  assert np.all(offsets[:, head] == 0.0)


def test_a_feedforward_policy_gives_finite_actions_on_the_runtime_first_frame(tmp_path):
  """The Open Duck runtime observes a (0, 0) phase on its first step: the file reads it as phase 0."""
  from playground.open_duck_mini_v2.evaluation import runtime
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.model import robot_model
  from playground.open_duck_mini_v2.tasks import joystick

  config = joystick.default_config()
  config.reference.feedforward = True
  contract = duck_contract("joystick", config)
  ff = contract.feedforward
  size, actions = observations.STATE_LAYOUT.size, observations.NUM_ACTIONS
  network, params, normalizer = _small_state_policy(size, actions, seed=2)
  path = tmp_path / "ff.onnx"
  bounds = contract.input_bounds
  policy_file.export(path, network, normalizer, params, "state", actions, "swish", {}, ff, bounds)
  model = robot_model.load_model("flat_terrain")
  home = robot_model.RobotIndices.from_model(model).home_ctrl
  commands = np.array([[0.0] * 7, [0.1, 0, 0, 0, 0, 0, 0], [0.15, 0.2, 1.0, 0, 0, 0, 0]])
  first = runtime.first_frames(model, home, commands)
  phase = observations.STATE_LAYOUT.slices["phase"]
  assert np.all(first[:, phase] == 0.0)
  got = onnx_graph.run_onnx(path, first)
  assert np.all(np.isfinite(got))
  # The feed-forward reads phase (0, 0) as phase 0 (the env's first phase):
  # the file equals the JAX network plus the gait at phase 0.
  network_only = policy_file.jax_policy_fn(network, normalizer, params, "state")(first)
  gait = np.asarray(jax.vmap(ff.jax_fn())(first[:, 6:9], np.zeros(3, np.float32)))
  np.testing.assert_allclose(got, network_only + gait, atol=2e-5)
  assert np.abs(gait[1]).max() > 0.1 and np.all(gait[0] == 0.0)  # the gait at 0.1 m/s, none standing


def test_the_export_fails_in_one_line_on_a_non_finite_action(tmp_path):
  """The fuzz set (zeros, far outside the statistics, +-1e3) fails an export whose file returns NaN."""
  size = 6
  params = {
    "params": {
      "hidden_0": {"kernel": np.ones((size, 4), np.float32), "bias": np.zeros(4, np.float32)},
      "hidden_1": {"kernel": np.ones((4, 6), np.float32), "bias": np.zeros(6, np.float32)},
    }
  }
  # A normalizer whose std is 0 for one input: (obs - mean) / 0 is inf or NaN away from the mean.
  mean, std = np.zeros(size, np.float32), np.ones(size, np.float32)
  std[0] = 0.0
  model = onnx_graph.build_model(mean, std, params, 3, "swish")
  jax_like = lambda obs: onnx_graph.run_onnx(model, obs)  # noqa: E731 - parity itself holds
  with pytest.raises(onnx_graph.ExportError, match=r"non-finite actions for \d+ of \d+ finite"):
    onnx_graph.verify_parity(model, jax_like, mean, np.ones(size, np.float32), n=8)
  fuzz = onnx_graph.fuzz_observations(mean, np.ones(size, np.float32), probes=np.ones((2, size)))
  assert set(fuzz) == {"zeros", "probes", "10_std", "100_std", "plus_minus_1e3", "uniform_1e3"}
  assert all(np.all(np.isfinite(v)) for v in fuzz.values()) and np.abs(fuzz["plus_minus_1e3"]).max() == 1e3


def _small_state_policy(size, actions, seed):
  """A 16-unit Brax policy on a `state` observation of `size`, with an identity normalizer."""
  cfg = config_dict.ConfigDict(dict(policy_hidden_layer_sizes=(16,), value_hidden_layer_sizes=(8,), activation="swish"))
  cfg.policy_obs_key, cfg.value_obs_key = "state", "state"
  network = ppo.network_factory(cfg, obs_is_dict=True)(
    {"state": (size,)}, actions, preprocess_observations_fn=running_statistics.normalize
  )
  params = network.policy_network.init(jax.random.PRNGKey(seed))
  ones = {"state": np.ones(size, np.float32)}
  normalizer = running_statistics.RunningStatisticsState(
    count=np.ones(()), mean={"state": np.zeros(size, np.float32)}, summed_variance=ones, std=ones
  )
  return network, params, normalizer
