"""Servo profiles: named data that flows to the model, the speed limit, randomization, gait, metadata and scorecard."""

import json
import math

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from helpers import REPO_ROOT
from helpers import duck_contract
from helpers import run_cli
from helpers import write_policy
from ml_collections import config_dict
from mujoco import mjx

from playground.common import configs
from playground.common.runner import RunArgs
from playground.common.tasks import mjcf
from playground.common.tasks import randomize
from playground.common.tasks.reference_motion import ReferenceTable
from playground.open_duck_mini_v2.evaluation import player
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner
from playground.open_duck_mini_v2.tasks import gait_generator
from playground.open_duck_mini_v2.tasks import gait_tables
from playground.open_duck_mini_v2.tasks import registry
from playground.open_duck_mini_v2.tasks.registry import env_class

WALKER = REPO_ROOT / "tests" / "fixtures" / "walker"
SCORE = REPO_ROOT / "playground" / "open_duck_mini_v2" / "score.py"
JOINT_VEL = gait_tables.FRAME_LAYOUT.slices["joint_vel"]


def walker_config() -> dict:
  """The env config the default walker (trained before servo profiles existed) recorded."""
  return json.loads((WALKER / "config.json").read_text())["env_config"]


def test_profiles_are_named_and_an_unknown_name_is_one_line_naming_the_choices():
  assert {"sts3215_7v4", "sts3215_12v", "c001"} <= set(servos.PROFILES)
  assert servos.DEFAULT == "sts3215_7v4"
  assert servos.profile("c001").max_velocity == pytest.approx(2.7)
  assert servos.profile("sts3215_12v").max_velocity == pytest.approx(math.radians(60) / 0.222)  # datasheet
  for p in servos.PROFILES.values():
    assert p.max_velocity > 0 and p.kp > 0 and p.max_torque > 0 and p.damping > 0
    for low, high in (p.kp_range, p.damping_range, p.armature_range, p.torque_range):
      assert 0 < low <= 1.0 <= high
  with pytest.raises(configs.ConfigError) as e:
    servos.profile("c01")
  message = str(e.value)
  assert "\n" not in message and "c01" in message and all(name in message for name in servos.PROFILES)


def test_the_default_profile_is_todays_servo_exactly():
  for task in constants.TASKS:
    model = robot_model.load_model(task)
    # The scene straight from the MJCF, as load_model built it before profiles existed.
    spec = mujoco.MjSpec.from_file(str(constants.XML_DIR / f"scene_{task.removesuffix('_backlash')}.xml"))
    if task.startswith("rough"):
      hfield = spec.hfield("terrain")
      hfield.userdata = mjcf.procedural_heightfield(hfield.nrow, hfield.ncol, constants.TERRAIN_SEED).ravel()
    if task.endswith("_backlash"):
      mjcf.add_backlash(
        spec,
        constants.JOINT_NAMES,
        constants.BACKLASH_HALF_RANGE,
        constants.BACKLASH_DAMPING,
        constants.BACKLASH_ARMATURE,
      )
    plain = spec.compile()
    fields = [n for n in dir(model) if not n.startswith("_") and isinstance(getattr(model, n), np.ndarray)]
    assert "actuator_gainprm" in fields and "dof_damping" in fields
    for name in fields:
      np.testing.assert_array_equal(getattr(model, name), getattr(plain, name), err_msg=f"{task}: {name}")
  m = robot_model.load_model("flat_terrain")
  np.testing.assert_array_equal(m.actuator_gainprm[:, 0], [13.37] * 5 + [3.565] * 4 + [13.37] * 5)
  np.testing.assert_array_equal(m.actuator_forcerange, [[-3.23, 3.23]] * 14)
  # The speed limit and the randomization ranges of today's configs, and of configs recorded before the profiles.
  for config in (env_class("joystick").default_config(), config_dict.ConfigDict(walker_config())):
    assert servos.name_of(config) == "sts3215_7v4"
    assert servos.speed_limit(config) == 5.24
    ranges = servos.domain_randomization(config)
    for key, value in config.domain_randomization.items():
      assert ranges[key] == value or tuple(ranges[key]) == tuple(value), key
    assert tuple(ranges.damping_scale) == (1.0, 1.0) and tuple(ranges.forcerange_scale) == (1.0, 1.0)


def test_the_default_profiles_randomization_draws_what_it_drew_before():
  mj_model = robot_model.load_model("flat_terrain")
  config = env_class("joystick").default_config()
  keys = jax.random.split(jax.random.PRNGKey(3), 4)
  model = mjx.put_model(mj_model)
  targets = registry.randomization_targets()
  before = config_dict.ConfigDict(config.domain_randomization.to_dict())
  with before.unlocked():  # a config from before the damping and force-limit ranges
    del before["damping_scale"], before["forcerange_scale"]
  old, _ = randomize.make_randomization_fn(mj_model, targets, before)(model, keys)
  new, in_axes = randomize.make_randomization_fn(mj_model, targets, servos.domain_randomization(config))(model, keys)
  for name in randomize.RANDOMIZED_FIELDS + randomize.SERVO_FIELDS:
    np.testing.assert_array_equal(np.asarray(getattr(old, name)), np.asarray(getattr(new, name)), err_msg=name)
  # Damping and force limits stay the model's own (one copy for all envs, float64 in MuJoCo C).
  assert in_axes.dof_damping is None and in_axes.actuator_forcerange is None
  # c001: one gear factor g per env for all its servos (kp, torque x g; damping, armature x g²),
  # each servo within the per-servo ranges around it.
  c001 = servos.select(config, "c001")
  fn = randomize.make_randomization_fn(mj_model, targets, servos.domain_randomization(c001))
  drawn, in_axes = fn(model, jax.random.split(jax.random.PRNGKey(3), 16))
  assert in_axes.dof_damping == 0 and in_axes.actuator_forcerange == 0
  dof = mj_model.jnt_dofadr[mj_model.actuator_trnid[:, 0]]
  legs = [constants.ACTUATOR_NAMES.index(name) for name in constants.LEG_JOINT_NAMES]
  damping = np.asarray(drawn.dof_damping)[:, dof] / mj_model.dof_damping[dof]
  force = np.asarray(drawn.actuator_forcerange)[:, :, 1] / mj_model.actuator_forcerange[:, 1]
  armature = np.asarray(drawn.dof_armature)[:, dof] / mj_model.dof_armature[dof]
  kp = np.asarray(drawn.actuator_gainprm)[:, legs, 0] / mj_model.actuator_gainprm[legs, 0]
  p = servos.profile("c001")
  gear = np.sqrt(armature.mean(axis=1) / 1.025)  # the generic armature draw is x1-1.05
  assert p.gear_range[0] * 0.98 < gear.min() < 1.8 < 2.1 < gear.max() < p.gear_range[1] * 1.02
  g = gear[:, None]
  assert p.torque_range[0] * 0.97 <= (force / g).min() and (force / g).max() <= p.torque_range[1] * 1.03
  assert p.damping_range[0] * 0.94 <= (damping / g**2).min() and (damping / g**2).max() <= p.damping_range[1] * 1.06
  assert 0.87 <= (kp / g).min() and (kp / g).max() <= 1.13  # the generic kp draw, x0.9-1.1
  # No servo livelier than the identified one: kp / damping at most 1.1 / (0.9 x 1.6) of its.
  assert (kp / damping[:, legs]).max() < 0.8


def test_the_12v_servos_unknowns_are_one_value_per_duck():
  """Supply voltage and stall torque are unknown for the 12 V servo, but the same for all of a duck's servos:
  one kp and one torque factor per env (x0.8-1.25, x0.4-1.25), each servo within +-10% of them."""
  mj_model = robot_model.load_model("flat_terrain")
  config = servos.select(env_class("joystick").default_config(), "sts3215_12v")
  ranges = servos.domain_randomization(config)
  p = servos.profile("sts3215_12v")
  assert tuple(ranges[randomize.DUCK_KP_SCALE]) == p.duck_kp_range == (0.8, 1.25)
  assert tuple(ranges[randomize.DUCK_FORCERANGE_SCALE]) == p.duck_torque_range == (0.4, 1.25)
  assert randomize.GEAR_SCALE not in ranges
  fn = randomize.make_randomization_fn(mj_model, registry.randomization_targets(), ranges)
  drawn, in_axes = fn(mjx.put_model(mj_model), jax.random.split(jax.random.PRNGKey(5), 32))
  assert in_axes.actuator_forcerange == 0 and in_axes.dof_damping is None
  legs = [constants.ACTUATOR_NAMES.index(name) for name in constants.LEG_JOINT_NAMES]
  kp = np.asarray(drawn.actuator_gainprm)[:, legs, 0] / mj_model.actuator_gainprm[legs, 0]
  force = np.asarray(drawn.actuator_forcerange)[:, legs, 1] / mj_model.actuator_forcerange[legs, 1]
  for ratio, (low, high) in ((kp, p.duck_kp_range), (force, p.duck_torque_range)):
    within = ratio.max(axis=1) / ratio.min(axis=1)  # one duck's servos: only the +-10% per-servo spread
    assert within.max() <= 1.1 / 0.9 + 1e-6
    duck = np.sqrt(ratio.max(axis=1) * ratio.min(axis=1))  # the duck's factor, within the per-servo spread
    assert low * 0.9 <= duck.min() < low + 0.25 * (high - low) and high - 0.25 * (high - low) < duck.max() <= high * 1.1


def test_the_servo_flag_changes_the_simulated_servos_and_speed_limit():
  metadata = policy_io.read_metadata(WALKER / "policy.onnx")
  own = policy_io.play_config(metadata, walker_config(), noise=False, delays=False, randomization=False)
  slow = policy_io.play_config(metadata, walker_config(), noise=False, delays=False, randomization=False, servo="c001")
  strong = policy_io.play_config(
    metadata, walker_config(), noise=False, delays=False, randomization=False, servo="sts3215_12v"
  )
  assert servos.speed_limit(own) == 5.24 and servos.speed_limit(slow) == 2.7
  assert servos.name_of(slow) == "c001" and slow.action_scale == own.action_scale
  # The env steps: a target asked to jump moves at most 2.7 rad/s x 0.02 s.
  env = env_class("joystick")(task="flat_terrain", config=slow)
  info = {
    "command": jp.zeros(7),
    "motor_targets": jp.asarray(env.ids.home_ctrl),
    "action_buffer": jp.zeros((4, 14)),
  }
  info = env.apply_action(info, jp.ones(14) * 4.0, jax.random.PRNGKey(0))
  moved = np.abs(np.asarray(info["motor_targets"]) - env.ids.home_ctrl)
  assert moved.max() == pytest.approx(2.7 * 0.02, rel=1e-5)
  # The runtime loop's servos, and the model's gains and force limits.
  models = [env.mj_model]
  source = player.RuntimeSource(
    env.mj_model, models, slow, metadata, 0, np.ones(1, np.float32), runtime.RuntimeOptions()
  )
  assert source.hardware.max_step == pytest.approx(2.7 * 0.02)
  p = servos.profile("sts3215_12v")
  strong_model = env_class("joystick")(task="flat_terrain", config=strong).mj_model
  assert strong_model.actuator_gainprm[0, 0] == pytest.approx(p.kp)
  assert strong_model.actuator_forcerange[0, 1] == pytest.approx(p.max_torque)
  dof = strong_model.jnt_dofadr[strong_model.actuator_trnid[0, 0]]
  assert strong_model.dof_damping[dof] == pytest.approx(p.damping)


def test_a_file_alone_plays_with_the_servos_it_was_trained_for(tmp_path):
  def played(path, servo=None, drop=()):
    metadata = {k: v for k, v in policy_io.read_metadata(path).items() if k not in drop}
    return policy_io.play_config(metadata, None, noise=False, delays=False, randomization=False, servo=servo)

  c001 = write_policy(tmp_path / "c001.onnx", {"servo_profile": "c001", "max_motor_velocity": 2.7})
  config = played(c001)
  assert servos.name_of(config) == "c001" and servos.speed_limit(config) == pytest.approx(2.7)
  assert config.max_motor_velocity is None  # the profile's own speed
  # --servo still names other servos; a file from before the keys plays the default ones.
  assert servos.speed_limit(played(c001, servo="sts3215_7v4")) == pytest.approx(5.24)
  old = played(c001, drop=("servo_profile", "max_motor_velocity"))
  assert servos.name_of(old) == servos.DEFAULT and servos.speed_limit(old) == pytest.approx(5.24)
  # A speed set apart from the profile's (`--set max_motor_velocity=4`) is kept.
  custom = played(write_policy(tmp_path / "custom.onnx", {"max_motor_velocity": 4.0}))
  assert servos.name_of(custom) == servos.DEFAULT and servos.speed_limit(custom) == pytest.approx(4.0)
  # A profile this version does not know: one line naming the known ones, unless --servo names one.
  unknown = write_policy(tmp_path / "c002.onnx", {"servo_profile": "c002"})
  result = run_cli(unknown, "--seeds", "1", script=SCORE)
  assert result.returncode == 2 and "Traceback" not in result.stderr
  line = result.stderr.strip().splitlines()[-1]
  assert "'c002'" in line and all(name in line for name in servos.PROFILES) and "--servo" in line
  assert servos.name_of(played(unknown, servo="c001")) == "c001"


def test_the_runner_takes_a_profile_with_one_flag_and_refuses_an_unknown_one():
  def resolved(*overrides):
    args = RunArgs(env="joystick", task="flat_terrain", preset="cpu", overrides=list(overrides))
    return OpenDuckMiniV2Runner(args).resolve_config().env_config

  config = resolved("servo_profile=c001")
  assert servos.name_of(config) == "c001" and servos.speed_limit(config) == 2.7
  # Slower servos play the built-in gait (their speed limit clips it), or with one more key the slowed one.
  assert gait_tables.table_path(config) == gait_tables.BUILTIN_TABLE
  slowed = resolved("servo_profile=c001", "reference.servo_gait=slowed")
  assert gait_tables.table_path(slowed) == gait_tables.servo_table("c001") != gait_tables.BUILTIN_TABLE
  with pytest.raises(configs.ConfigError, match="valid choices: sts3215_7v4, sts3215_12v, c001"):
    resolved("servo_profile=c002")
  with pytest.raises(configs.ConfigError, match="valid choices: builtin, slowed"):
    resolved("servo_profile=c001", "reference.servo_gait=slow")
  # A run recorded before the key played the slowed gait, and still does when resumed.
  recorded = config_dict.ConfigDict(config.to_dict())
  del recorded.reference["servo_gait"]
  assert gait_tables.table_path(recorded) == gait_tables.servo_table("c001")


def test_the_derived_gait_obeys_the_speed_limit():
  base = gait_generator.default_config()
  assert gait_generator.fit_to_speed(base, 5.24) is base  # the built-in gait fits its own servo
  assert gait_generator.fit_to_speed(base, 9.0) is base
  assert gait_tables.servo_table("sts3215_7v4") == gait_tables.BUILTIN_TABLE
  for name in ("sts3215_12v", "c001"):
    limit = servos.profile(name).max_velocity
    fitted = gait_generator.fit_to_speed(base, limit)
    frames = fitted.period * fitted.fps
    assert frames == pytest.approx(round(frames)) and round(frames) > 27  # whole control steps, slower
    assert fitted.period >= base.period * 5.24 / limit - 1e-9  # slowed down at least as much as the servo
    assert fitted.period < base.period * 5.24 / limit + 1.0 / base.fps  # and by no more than one frame
    assert fitted.stride_gain * fitted.period == pytest.approx(base.stride_gain * base.period)  # same footsteps
    table = ReferenceTable.load(gait_tables.servo_table(name))
    assert table.period == pytest.approx(fitted.period)
  assert gait_generator.fit_to_speed(base, 2.7).period == pytest.approx(53 / 50)
  assert gait_generator.fit_to_speed(base, servos.profile("sts3215_12v").max_velocity).period == pytest.approx(0.6)
  # The c001 table is the generator's output for the fitted config, and its joints move within the budget.
  builtin = ReferenceTable.load(gait_tables.BUILTIN_TABLE)
  table = ReferenceTable.load(gait_tables.servo_table("c001"))
  fitted = gait_generator.fit_to_speed(base, 2.7)
  ik = gait_generator.make_ik()
  for command, index in (((0.1, 0.0, 0.0), (5, 2, 2)), ((0.0, 0.0, 0.5), (3, 2, 3))):
    np.testing.assert_allclose(gait_generator.generate_cycle(ik, command, fitted), table.frames[index], atol=1e-5)
    peak = np.abs(table.frames[index][:, JOINT_VEL]).max()
    builtin_peak = np.abs(builtin.frames[index][:, JOINT_VEL]).max()
    assert peak <= builtin_peak * 2.7 / 5.24 * 1.05, (command, peak, builtin_peak)


def test_the_policy_metadata_carries_the_servo_profile():
  default = duck_contract("joystick").metadata
  assert default["servo_profile"] == "sts3215_7v4" and default["max_motor_velocity"] == 5.24
  assert default["gait_period_steps"] == 27
  config = env_class("joystick").default_config()
  config.servo_profile = "c001"
  metadata = duck_contract("joystick", config).metadata
  assert metadata["servo_profile"] == "c001" and metadata["max_motor_velocity"] == 2.7
  assert metadata["gait_period_steps"] == 27  # the built-in gait, clipped by the servos
  config.reference.servo_gait = "slowed"
  assert duck_contract("joystick", config).metadata["gait_period_steps"] == 53  # slowed down to the c001's speed


def test_the_policy_metadata_carries_the_trunk_offsets_it_trained_with():
  assert duck_contract("joystick").metadata["trunk_offset_m"] == 0.05  # the env's default, the upstream +-5 cm
  config = env_class("joystick").default_config()
  config.domain_randomization.update(com_offset=0.03, com_offset_margin=0.005)  # as the cpu preset trains
  metadata = duck_contract("joystick", config).metadata
  assert metadata["trunk_offset_m"] == 0.03 and metadata["trunk_offset_margin_m"] == 0.005


def test_score_refuses_an_unknown_servo_in_one_line(tmp_path):
  result = run_cli(WALKER / "policy.onnx", "--servo", "c01", "--output", tmp_path, script=SCORE, timeout=300)
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
  assert "c01" in lines[0] and all(name in lines[0] for name in servos.PROFILES)
  assert not list(tmp_path.iterdir())


def test_the_open_loop_benchmark_plays_a_table_at_its_own_period():
  """A gait slower than the default ran twice as fast as made in `reference_openloop` until 2026-12-05."""
  import importlib.util

  path = REPO_ROOT / "benchmarks" / "reference_openloop.py"
  spec = importlib.util.spec_from_file_location("reference_openloop", path)
  benchmark = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(benchmark)
  table = ReferenceTable.load(gait_tables.servo_table("c001"))
  assert table.period > 1.0  # slower than the default 0.54 s
  config = benchmark.playback_config(table, robust=False, servo="c001")
  assert env_class("joystick").gait_frequency_of(config) == pytest.approx(1.0 / table.period)
  assert servos.name_of(config) == "c001" and config.reward_config.scales.imitation == 0.0


def test_servo_falls_reads_back_the_models_the_card_played():
  """`benchmarks.servo_falls` on the trained fixture, one seed per entry: every episode's model is
  read back (the benchmark refuses when a model's trunk offset differs from the one its episode
  played), and each falls statistic counts the 9 episodes once."""
  import subprocess
  import sys

  fixture = REPO_ROOT / "tests" / "fixtures" / "walker" / "policy.onnx"
  done = subprocess.run(
    [sys.executable, "-m", "benchmarks.servo_falls", str(fixture), "--seeds", "1"],
    capture_output=True,
    text=True,
    timeout=900,
    cwd=REPO_ROOT,
  )
  assert done.returncode == 0, done.stderr[-2000:]
  result = json.loads(done.stdout)
  assert result["episodes"] == 9 and 0 <= result["falls"] <= 9
  assert sum(result["falls_by_entry"].values()) == result["falls"]
  assert sum(row["episodes"] for row in result["by_kp_per_damping"]) == 9
  kp = result["by_quartile"]["kp"]
  # Randomized servos: the nine models' gains differ (quartile edges spread), within the profile's draw.
  assert kp["quartile_edges"][0] < kp["quartile_edges"][2]
  assert all(0.0 <= share <= 1.0 for q in result["by_quartile"].values() for share in q["fall_share"] if share == share)
