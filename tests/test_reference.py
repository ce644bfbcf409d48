"""The generated reference gait, the table format, and community-file import."""

import json
import pickle

import jax
import jax.numpy as jp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import duck_contract
from helpers import run_cli
from ml_collections.config_dict import ConfigDict

from playground.common.configs import ConfigError
from playground.common.export import onnx_graph
from playground.common.runs import checkpoints
from playground.common.runs.tensorboard import read_scalars
from playground.common.tasks import reference_motion
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.tasks import gait_generator
from playground.open_duck_mini_v2.tasks import gait_tables
from playground.open_duck_mini_v2.tasks import joystick

SL = gait_tables.FRAME_LAYOUT.slices


@pytest.fixture(scope="module")
def table():
  return gait_generator.load_default()


@pytest.fixture(scope="module")
def ik():
  return gait_generator.make_ik()


def _cycle(table, vx, vy, wz):
  i = int(np.argmin(np.abs(table.axes[0] - vx)))
  j = int(np.argmin(np.abs(table.axes[1] - vy)))
  k = int(np.argmin(np.abs(table.axes[2] - wz)))
  return table.frames[i, j, k]


def test_the_built_in_table_is_up_to_date_with_the_model(table, ik):
  for command in ((0.1, 0.0, 0.0), (-0.05, 0.1, 0.5)):
    fresh = gait_generator.generate_cycle(ik, command, gait_generator.default_config())
    np.testing.assert_allclose(_cycle(table, *command), fresh, atol=2e-4)


def test_gait_is_periodic(table):
  lookup = jax.jit(table.lookup_fn())
  for command in ((0.1, 0.0, 0.0), (0.03, -0.07, 0.3)):
    np.testing.assert_allclose(lookup(jp.array(command), 0.0), lookup(jp.array(command), 1.0), atol=1e-6)
    frames = _cycle(table, *command)
    q = frames[:, SL["joint_pos"]]
    wrap_step = np.abs(q[0] - q[-1]).max()
    largest_step = np.abs(np.diff(q, axis=0)).max()
    assert wrap_step <= largest_step + 1e-6, "the last frame does not lead back to the first"


def test_feet_alternate_contacts(table):
  contacts = table.frames[..., SL["foot_contacts"]]
  assert np.all(contacts.max(axis=-1) == 1.0), "both feet in the air"
  left, right = contacts[..., 0], contacts[..., 1]
  assert np.all(left.min(axis=-1) == 0.0) and np.all(right.min(axis=-1) == 0.0), "a foot never swings"
  assert not np.any((left == 0) & (right == 0))
  # The left foot swings in the first half of the period, the right in the second.
  n = table.num_phases
  assert np.all(left[..., : n // 2].min(axis=-1) == 0) and np.all(right[..., n // 2 :].min(axis=-1) == 0)


@pytest.mark.parametrize("vx", [0.05, 0.1, 0.15, -0.1])
def test_commanded_speed_matches_the_generated_motion(table, ik, vx):
  """Forward kinematics of the generated joints: stance feet move back at -stride_gain x vx."""
  frames = _cycle(table, vx, 0.0, 0.0)
  np.testing.assert_allclose(frames[:, SL["base_linvel"]][:, 0], vx, rtol=1e-6)
  dt = table.period / table.num_phases
  speeds = []
  for foot, side in enumerate(("left", "right")):
    legs = [constants.ACTUATOR_NAMES.index(n) for n in gait_generator.LEGS[side]]
    x = np.array([ik.foot_position(side, f[SL["joint_pos"]][legs])[0] for f in frames])
    stance = frames[:, SL["foot_contacts"]][:, foot] > 0.5
    steps = np.where(stance & np.roll(stance, -1))[0]
    speeds.append(np.mean((x[(steps + 1) % len(x)] - x[steps]) / dt))
  assert np.mean(speeds) == pytest.approx(-vx * gait_generator.default_config().stride_gain, rel=0.10)


def test_joint_targets_stay_inside_the_joint_ranges(table):
  model = gait_generator.make_ik().model
  q = table.frames[..., SL["joint_pos"]]
  lower = np.array([model.joint(n).range[0] for n in constants.ACTUATOR_NAMES])
  upper = np.array([model.joint(n).range[1] for n in constants.ACTUATOR_NAMES])
  assert np.all(q >= lower - 1e-6) and np.all(q <= upper + 1e-6)


def test_knees_bend_the_home_pose_way_at_every_command(table):
  # At the corners of the grid (fast, sideways and turning at once) the foot
  # target is out of reach; an unconstrained IK let one knee pass straight and
  # bend backwards (-1.57 rad against the home pose's +1.38) and not its mirror.
  model = gait_generator.make_ik().model
  home = np.array(model.key(constants.HOME_KEYFRAME).qpos)
  q = table.frames[..., SL["joint_pos"]]
  for name in ("left_knee", "right_knee"):
    knee = q[..., constants.ACTUATOR_NAMES.index(name)]
    assert np.all(knee * np.sign(home[model.joint(name).qposadr[0]]) >= -1e-6), (name, knee.min(), knee.max())


def test_swing_feet_lift_off_the_ground(table, ik):
  frames = _cycle(table, 0.1, 0.0, 0.0)
  legs = [constants.ACTUATOR_NAMES.index(n) for n in gait_generator.LEGS["left"]]
  z = np.array([ik.foot_position("left", f[SL["joint_pos"]][legs])[2] for f in frames])
  swing = frames[:, SL["foot_contacts"]][:, 0] < 0.5
  assert z[swing].max() - z[~swing].mean() == pytest.approx(gait_generator.default_config().swing_height, abs=0.004)


def test_lookup_interpolates_continuously_in_command_and_phase(table):
  lookup = jax.jit(table.lookup_fn())
  a, b = table.axes[0][3], table.axes[0][4]
  fa = np.asarray(lookup(jp.array([a, 0.0, 0.0]), 0.3))
  fb = np.asarray(lookup(jp.array([b, 0.0, 0.0]), 0.3))
  mid = np.asarray(lookup(jp.array([0.25 * a + 0.75 * b, 0.0, 0.0]), 0.3))
  np.testing.assert_allclose(mid, 0.25 * fa + 0.75 * fb, atol=1e-5)
  k = 5
  p0, p1 = k / table.num_phases, (k + 1) / table.num_phases
  f0 = np.asarray(lookup(jp.array([a, 0.0, 0.0]), p0))
  f1 = np.asarray(lookup(jp.array([a, 0.0, 0.0]), p1))
  np.testing.assert_allclose(np.asarray(lookup(jp.array([a, 0.0, 0.0]), 0.5 * (p0 + p1))), 0.5 * (f0 + f1), atol=1e-5)


def test_table_round_trips_through_npz_without_pickle(table, tmp_path):
  path = table.save(tmp_path / "t.npz")
  with np.load(path, allow_pickle=False) as data:
    assert data["frames"].dtype == np.float32
  again = reference_motion.ReferenceTable.load(path)
  np.testing.assert_array_equal(again.frames, table.frames)
  assert again.period == pytest.approx(0.54)


def test_plot_command_writes_a_png(tmp_path):
  out = tmp_path / "gait.png"
  result = run_cli("plot", "--vx", "0.1", "--output", out, script=gait_generator.__file__, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_imitation_reward_terms_are_computed_and_logged():
  config = joystick.default_config()
  config.reward_config.scales.imitation = 1.0
  env = joystick.Joystick("flat_terrain", config)
  names = {f"reward/imitation_{c}" for c in ("joint_pos", "joint_vel", "foot_contacts", "base_linvel", "base_angvel")}
  state = jax.jit(env.reset)(jax.random.PRNGKey(0))
  state = jax.jit(env.step)(state, jp.zeros(14))
  assert names <= set(state.metrics)
  for name in names:
    assert 0.0 <= float(state.metrics[name]) <= env.dt * 1.0 + 1e-6
  assert env.gait_frequency == pytest.approx(1 / 0.54)
  assert joystick.default_config().reward_config.scales.imitation > 0  # on by default
  off = joystick.default_config()
  off.reward_config.scales.imitation = 0.0
  disabled = joystick.Joystick("flat_terrain", off)
  assert not any("imitation" in t for t in disabled.active_reward_terms)
  assert disabled.reference is None


def test_uncovered_command_ranges_fail_with_one_line_or_clamp():
  config = joystick.default_config()
  config.reward_config.scales.imitation = 1.0
  config.command_config.lin_vel_x = (-0.5, 0.5)
  with pytest.raises(ConfigError, match=r"vx range \[-0.5, 0.5\] exceeds the reference grid"):
    joystick.Joystick("flat_terrain", config)
  config.reference.clamp = True
  joystick.Joystick("flat_terrain", config)


# ---- The community's polynomial format (a small file built here).


def _community_entries(xs=(0.0, 0.1), ys=(-0.05, 0.05), ts=(0.0, 0.5)):
  rng = np.random.default_rng(0)
  entries = {}
  for x in xs:
    for y in ys:
      for t in ts:
        coefficients = {f"dim_{d}": list(rng.normal(scale=0.1, size=4)) for d in range(40)}
        coefficients["dim_3"] = [1.4, 0.1, 0.0, 0.0]  # left knee: 1.4 + 0.1 * phase
        coefficients["dim_32"] = [1.0, 0.0, 0.0, 0.0]
        coefficients["dim_33"] = [0.0, 0.0, 0.0, 0.0]
        entries[f"{x:.3f}_{y:.3f}_{t:.3f}"] = {
          "coefficients": coefficients,
          "period": 0.54,
          "fps": 50,
          "nb_steps_in_period": 27,
          "startend_double_support_ratio": 1.0,
          "start_offset": 0,
          "frame_offsets": {},
        }
  return entries


def test_community_file_converts_with_explicit_opt_in(tmp_path):
  path = tmp_path / "polynomial_coefficients.pkl"
  path.write_bytes(pickle.dumps(_community_entries()))
  with pytest.raises(ConfigError, match="--allow_pickle"):
    gait_tables.from_polynomial_pickle(path, allow_pickle=False)
  table = gait_tables.from_polynomial_pickle(path, allow_pickle=True)
  assert [list(a) for a in table.axes] == [[0.0, 0.1], [-0.05, 0.05], [0.0, 0.5]]
  assert table.num_phases == 27 and table.period == pytest.approx(0.54)
  knee = table.frames[0, 0, 0, :, SL["joint_pos"]][:, 3]
  np.testing.assert_allclose(knee, 1.4 + 0.1 * np.arange(27) / 27, atol=1e-6)
  np.testing.assert_array_equal(table.frames[..., SL["foot_contacts"]][..., 0], 1.0)
  cached = gait_tables.prepare(path, True, tmp_path / "cache")
  assert cached.suffix == ".npz" and gait_tables.prepare(path, True, tmp_path / "cache") == cached
  np.testing.assert_array_equal(reference_motion.ReferenceTable.load(cached).frames, table.frames)


def test_community_grid_written_in_rounded_entry_names_is_accepted():
  # The community's grid (e.g. yaw rates -1.111, -0.852, ..., 1.222) is only
  # known through entry names rounded to 3 decimals: steps differ by 0.001.
  yaw = np.linspace(-10 / 9, 11 / 9, 10)
  vx = np.linspace(-0.148, 0.222, 6)
  entries = _community_entries(xs=vx, ys=(-0.111, -0.037), ts=yaw)
  assert "0.000_-0.111_-0.852" in entries or any(k.endswith("_-0.852") for k in entries)
  for key, entry in entries.items():
    # Tag every entry with its yaw rate to check where it lands.
    entry["coefficients"]["dim_3"] = [float(key.split("_")[2]), 0.0, 0.0, 0.0]
  table = gait_tables.from_polynomial_entries(entries)
  np.testing.assert_allclose(table.axes[2], yaw, atol=1e-3)
  assert np.ptp(np.diff(table.axes[2])) < 1e-9
  knee = table.frames[0, 0, :, 0, SL["joint_pos"]][:, 3]
  np.testing.assert_allclose(knee, np.round(yaw, 3), atol=1e-6)
  # A genuinely uneven grid is still refused.
  with pytest.raises(ConfigError, match="evenly spaced"):
    gait_tables.from_polynomial_entries(_community_entries(xs=(0.0, 0.1, 0.3)))


def test_incomplete_community_grid_names_the_missing_commands():
  entries = _community_entries()
  del entries["0.100_0.050_0.500"]
  with pytest.raises(ConfigError, match="missing commands 0.100_0.050_0.500"):
    gait_tables.from_polynomial_entries(entries)


def test_training_with_a_converted_community_file_logs_imitation_components(tmp_path):
  path = tmp_path / "community.pkl"
  entries = _community_entries(xs=(-0.15, 0.0, 0.15), ys=(-0.2, 0.2), ts=(-1.0, 1.0))
  path.write_bytes(pickle.dumps(entries))
  common = ("--preset", "smoke", "--output_dir", tmp_path, "--set", "reward_config.scales.imitation=2.0")
  refused = run_cli(*common, "--exp_name", "refused", "--reference", path, timeout=300)
  assert refused.returncode == 2 and "--allow_pickle" in refused.stderr
  assert not (tmp_path / "refused").exists()
  # With the feed-forward on (the cpu and full presets' setting), as a user would train it
  # (without evaluation episodes: the components are the training episodes' metrics).
  result = run_cli(
    *common, "--exp_name", "imitation", "--reference", path, "--allow_pickle", "--set", "reference.feedforward=true",
    "--eval_every", 0,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  scalars = read_scalars(tmp_path / "imitation")
  for component in ("joint_pos", "joint_vel", "foot_contacts", "base_linvel", "base_angvel"):
    assert f"episode/reward/imitation_{component}" in scalars
  # The exported policy adds the community gait: its output minus the
  # network's (the graph's "residual") is the run's feed-forward.
  policy = checkpoints.resolve(tmp_path / "imitation") / "policy.onnx"
  meta = onnx_graph.read_metadata(policy)
  assert meta["feedforward"].startswith("the output includes the reference gait")
  model = onnx.load(str(policy))
  model.graph.output.append(onnx.helper.make_tensor_value_info("residual", onnx.TensorProto.FLOAT, None))
  session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
  env_config = ConfigDict(json.loads((tmp_path / "imitation" / "config.json").read_text())["env_config"])
  ff = duck_contract("joystick", env_config).feedforward
  assert ff is not None and ff.offsets.shape[:3] == (3, 2, 2)  # the community grid
  obs = np.zeros((1, meta["observation_size"]), np.float32)
  obs[0, ff.command_index] = 0.15
  obs[0, ff.phase_index] = 1.0  # phase 0
  out, residual = session.run(["continuous_actions", "residual"], {"obs": obs})
  expected = np.asarray(ff.jax_fn()(obs[0, ff.command_index : ff.command_index + 3], 0.0))
  np.testing.assert_allclose(out - residual, expected[None], atol=1e-5)
  assert np.abs(expected).max() > 0.3


@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_feedforward_env_applies_residual_plus_the_gait_it_observes(gain):
  """With reference.feedforward the env applies (and remembers) gain x residual + gait, as the ONNX outputs it."""
  config = joystick.default_config()
  config.reference.feedforward = True
  config.reference.residual_gain = gain
  config.reward_config.scales.imitation = 0.0  # the feed-forward alone loads the reference
  env = joystick.Joystick(config=config)
  ff = env.feedforward
  assert ff is not None and joystick.Joystick(config=joystick.default_config()).feedforward is None
  gait, from_obs = ff.jax_fn(), jax.jit(ff.from_obs_fn())
  step = jax.jit(env.step)
  state = jax.jit(env.reset)(jax.random.PRNGKey(0))
  residual = jp.full(env.action_size, 0.1)
  for command in (jp.array([0.1, 0.0, 0.3, 0, 0, 0, 0]), jp.zeros(7)):
    state = state.replace(info={**state.info, "command": command})
    state = state.replace(info={**state.info, "phase": jp.asarray(1.3)})
    expected = gain * residual + gait(command, state.info["phase"])
    after = step(state, residual)
    np.testing.assert_allclose(after.info["last_actions"][0], expected, atol=1e-6)
    moving = bool(jp.linalg.norm(command[:3]) > 0.01)
    assert (float(jp.abs(expected - gain * residual).max()) > 0.3) == moving  # the gait only while moving
    # The observation carries the command and phase the next feed-forward uses.
    np.testing.assert_allclose(
      from_obs(after.obs["state"][None])[0], gait(after.info["command"], after.info["phase"]), atol=1e-4
    )


def test_the_feedforward_stands_the_duck_in_its_stance():
  """`reference.feedforward_stand_pose`: at a zero command the env applies residual + stand_pose / action_scale,
  so a zero residual holds the stance through real MJX steps; a walking command gets the gait alone."""
  from playground.open_duck_mini_v2.model import observations

  stance = {"left_hip_pitch": -0.15, "right_hip_pitch": -0.15, "left_knee": 0.11, "right_knee": 0.11}
  config = joystick.default_config()
  config.reference.feedforward = True
  config.reference.feedforward_stand_pose = True
  for name, rad in stance.items():
    config.reward_config.stand_pose[name] = rad
  env = joystick.Joystick(config=config)
  expected = np.zeros(env.action_size, np.float32)
  for name, rad in stance.items():
    expected[constants.ACTUATOR_NAMES.index(name)] = rad / config.action_scale
  step = jax.jit(env.step)
  state = jax.jit(env.reset)(jax.random.PRNGKey(0))
  state = state.replace(info={**state.info, "command": jp.zeros(7), "command_timer": jp.asarray(10**9)})
  for _ in range(50):  # 1 s
    state = step(state, jp.zeros(env.action_size))
  np.testing.assert_allclose(state.info["last_actions"][0], expected, atol=1e-6)
  # The joints went there: within 0.05 rad of the stance, which is 0.11-0.15 rad from home.
  joint_pos = np.asarray(observations.read(env.ids, env.mjx_model, state.data).joint_pos)
  for name, rad in stance.items():
    assert joint_pos[constants.ACTUATOR_NAMES.index(name)] == pytest.approx(rad, abs=0.05), name
  # Walking: the gait, not the stance.
  gait = env.feedforward.jax_fn()
  command = jp.array([0.1, 0.0, 0.0, 0, 0, 0, 0])
  walking = state.replace(info={**state.info, "command": command})
  after = step(walking, jp.zeros(env.action_size))
  assert float(jp.abs(gait(command, walking.info["phase"]) - expected).max()) > 0.3
  np.testing.assert_allclose(after.info["last_actions"][0], gait(command, walking.info["phase"]), atol=1e-6)


def test_a_file_with_the_stance_in_it_is_played_from_its_output_alone():
  """Players feed a residual file's output to the servos as the runtime does: the env they build adds
  no feed-forward and no stance, even for a run whose stance lies beyond the unit gain's reach."""
  from helpers import REPO_ROOT

  from playground.open_duck_mini_v2.evaluation import policy_io

  walker = REPO_ROOT / "tests" / "fixtures" / "walker"
  run = json.loads((walker / "config.json").read_text())["env_config"]
  run["reference"] |= {"feedforward": True, "residual_gain": 2.0, "feedforward_stand_pose": True}
  run["reward_config"]["stand_pose"] = {name: 0.0 for name in constants.LEG_JOINT_NAMES} | {"left_knee": 0.4}
  config = policy_io.play_config(
    policy_io.read_metadata(walker / "policy.onnx"), run, noise=False, delays=False, randomization=False
  )
  assert not config.reference.feedforward and not config.reference.feedforward_stand_pose
  assert joystick.Joystick(config=config).feedforward is None


def test_the_stance_in_the_feedforward_needs_a_standing_feedforward():
  """`reference.feedforward_stand_pose` without the feed-forward, or with stepping in place, is refused in one line."""
  config = joystick.default_config()
  config.reference.feedforward_stand_pose = True
  with pytest.raises(ConfigError, match="set reference.feedforward=true and reference.step_in_place=false"):
    joystick.Joystick(config=config)
  config.reference.feedforward = True
  config.reference.step_in_place = True
  with pytest.raises(ConfigError, match="set reference.feedforward=true and reference.step_in_place=false"):
    joystick.Joystick(config=config)


@pytest.mark.parametrize("gain", [0.0, -1.0])
def test_a_residual_gain_that_is_not_positive_is_refused(gain):
  """`reference.residual_gain` must be positive: one line naming the key, before anything is built."""
  config = joystick.default_config()
  config.reference.feedforward = True
  config.reference.residual_gain = gain
  with pytest.raises(ConfigError, match="reference.residual_gain must be positive"):
    joystick.Joystick(config=config)


def test_a_residual_gain_without_the_feedforward_is_refused():
  """Without the feed-forward there is no residual to scale: the gain would silently do nothing."""
  config = joystick.default_config()
  config.reference.residual_gain = 2.0
  with pytest.raises(ConfigError, match="set reference.feedforward=true"):
    joystick.Joystick(config=config)


def test_step_in_place_adds_the_gait_and_pays_imitation_at_a_zero_command():
  """`reference.step_in_place`: at a zero command the env adds the in-place gait, pays imitation, drops stand_still."""
  config = joystick.default_config()
  config.reference.feedforward = True
  config.reference.step_in_place = True
  env = joystick.Joystick(config=config)
  assert "stand_still" not in env.active_reward_terms and "imitation_joint_pos" in env.active_reward_terms
  assert "stand_still" in joystick.Joystick(config=joystick.default_config()).active_reward_terms
  gait = env.feedforward.jax_fn()
  step = jax.jit(env.step)
  state = jax.jit(env.reset)(jax.random.PRNGKey(0))
  state = state.replace(info={**state.info, "command": jp.zeros(7), "phase": jp.asarray(1.3)})
  residual = jp.zeros(env.action_size)
  after = step(state, residual)
  offset = gait(jp.zeros(7), jp.asarray(1.3))
  legs = jp.array(joystick.IMITATED_JOINTS)
  assert float(jp.abs(offset[legs]).max()) > 0.3  # the in-place gait, in action units
  np.testing.assert_allclose(after.info["last_actions"][0], offset, atol=1e-6)
  # Imitation is paid at the zero command (0 without step_in_place).
  assert float(after.metrics["reward/imitation_joint_pos"]) > 0.0
  plain = joystick.default_config()
  plain.reference.feedforward = True
  env0 = joystick.Joystick(config=plain)
  state0 = jax.jit(env0.reset)(jax.random.PRNGKey(0))
  state0 = state0.replace(info={**state0.info, "command": jp.zeros(7), "phase": jp.asarray(1.3)})
  assert float(jax.jit(env0.step)(state0, residual).metrics["reward/imitation_joint_pos"]) == 0.0


def test_stride_gain_lengthens_the_steps_not_the_commanded_velocity(ik):
  config = gait_generator.default_config()
  config.stride_gain = 1.0
  longer = gait_generator.default_config()
  longer.stride_gain = 1.5
  base = gait_generator.generate_cycle(ik, (0.1, 0.0, 0.0), config)
  long = gait_generator.generate_cycle(ik, (0.1, 0.0, 0.0), longer)
  legs = [constants.ACTUATOR_NAMES.index(n) for n in constants.LEG_JOINT_NAMES]
  swing = lambda frames: np.ptp(frames[:, SL["joint_pos"]][:, legs], axis=0).sum()  # noqa: E731
  standing_swing = swing(gait_generator.generate_cycle(ik, (0.0, 0.0, 0.0), config))
  ratio = (swing(long) - standing_swing) / (swing(base) - standing_swing)
  assert 1.3 < ratio < 2.0, ratio  # the stride part of the joint motion grows (1.66x measured)
  np.testing.assert_array_equal(long[:, SL["base_linvel"]], base[:, SL["base_linvel"]])
  np.testing.assert_allclose(  # nothing changes at a zero command
    gait_generator.generate_cycle(ik, (0.0, 0.0, 0.0), longer),
    gait_generator.generate_cycle(ik, (0.0, 0.0, 0.0), config),
    atol=1e-9,
  )


def test_a_free_foot_roll_steps_as_far_sideways_as_planned(ik):
  # No ankle roll: a level sole limits sideways steps; with foot_roll_weight 0
  # the foot lands where planned (1.5 x 0.1 m/s x 0.27 s stance = 4 cm; at
  # stride_gain 1.75 the leg's joint ranges stop it at 3.6 of 4.7 cm).
  def left_foot_y(weight):
    config = gait_generator.default_config()
    config.foot_roll_weight = weight
    config.sideways_sway = 0.0  # the foot alone, the base does not sway
    config.stride_gain = 1.5
    frames = gait_generator.generate_cycle(ik, (0.0, 0.1, 0.0), config)
    left = [constants.ACTUATOR_NAMES.index(n) for n in gait_generator.LEGS["left"]]
    return np.array([ik.foot_position("left", q)[1] for q in frames[:, SL["joint_pos"]][:, left]])

  planned = 1.5 * 0.1 * 0.27
  assert np.ptp(left_foot_y(0.0)) == pytest.approx(planned, rel=0.02)
  assert np.ptp(left_foot_y(0.3)) < 0.4 * planned  # a weight of 0.3 keeps the sole level instead (1 cm measured)
  assert gait_generator.default_config().foot_roll_weight == 0.0  # the built-in gait's feet land where planned


def test_sideways_sway_grows_with_the_sideways_command_only(ik):
  config = gait_generator.default_config()
  config.foot_roll_weight = 0.0
  config.sideways_sway = 0.0
  swaying = config.copy_and_resolve_references()
  swaying.sideways_sway = -0.1  # the built-in gait's (gait_generator.default_config())
  for command in ((0.1, 0.0, 0.0), (0.0, 0.0, 0.5)):  # forward and turning gaits keep theirs
    np.testing.assert_allclose(
      gait_generator.generate_cycle(ik, command, swaying),
      gait_generator.generate_cycle(ik, command, config),
      rtol=0,
      atol=1e-9,
    )
  # At vy = 0.1 m/s the base sways 1 cm (the base velocity carries it), away from the stance foot.
  frames = gait_generator.generate_cycle(ik, (0.0, 0.1, 0.0), swaying)
  vy = frames[:, SL["base_linvel"]][:, 1]
  assert np.ptp(vy) == pytest.approx(2 * 0.01 * 2 * np.pi / 0.54, rel=0.01)  # 27 samples of a cosine
  left_contact = frames[:, SL["foot_contacts"]][:, 0] > 0.5
  sway = np.cumsum(vy - 0.1) / 50
  assert np.mean(sway[left_contact]) < np.mean(sway[~left_contact])  # further right while the left foot stands
