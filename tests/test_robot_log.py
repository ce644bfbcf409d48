"""The robot's log (`robot_saved_obs.pkl`) and check_log.py: logs of this project's runtime loop in MuJoCo.

A clean log and logs with one fault injected each, written by the runtime-mode
player (`robot_log.simulate`) with the trained walker fixture: each fault is
found and named, the clean log passes, and a pickle that would run code is
refused before anything of it runs.
"""

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO_ROOT
from helpers import run_cli
from helpers import write_policy

from playground.common.evaluation.scorecard import Command
from playground.open_duck_mini_v2 import check_log
from playground.open_duck_mini_v2.evaluation import diagnosis
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import robot_log
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation import scorecard
from playground.open_duck_mini_v2.evaluation.policy_io import ScoreError
from playground.open_duck_mini_v2.model import constants

WALKER = Path(__file__).parent / "fixtures" / "walker" / "policy.onnx"
CHECK_LOG = REPO_ROOT / "playground" / "open_duck_mini_v2" / "check_log.py"
SCORE = REPO_ROOT / "playground" / "open_duck_mini_v2" / "score.py"
#: 5.5 s: standing, walking with the head raised, turning with the head turned, standing.
SCHEDULE = Command(
  "log",
  ((0.0, 0, 0, 0), (1.0, 0.15, 0, 0, 0.3, 0.2, 0.0, 0.0), (3.0, 0.0, 0, 0.6, 0.0, -0.2, 0.5, 0.1), (4.5, 0, 0, 0)),
  duration=5.5,
)
#: The seed of the logged robot (the simulated robots of the comparison use seeds 0 and 1).
LOG_SEED = 3


@pytest.fixture(scope="module")
def walker():
  """(policy path, its run's env config, its reference)."""
  path, env_config, _ = policy_io.resolve_policy(WALKER)
  return path, env_config, robot_log.Reference.of_metadata(policy_io.read_metadata(path), "the walker's metadata")


@pytest.fixture(scope="module")
def clean_log(walker, tmp_path_factory):
  """The walker's log, written as the runtime writes it."""
  path, env_config, _ = walker
  (frames,) = robot_log.simulate(path, SCHEDULE, seed=LOG_SEED, env_config=env_config)
  assert len(frames) == 275  # it did not fall
  return robot_log.save(tmp_path_factory.mktemp("robot") / robot_log.RUNTIME_LOG_NAME, frames)


def _upside_down(readings):
  """The IMU turned over (180 degrees about its x axis), as the runtime's `imu_upside_down` remap undoes."""
  for key in ("gyro", "accelerometer", "gravity"):
    readings[key] = readings[key] * np.array([1.0, -1.0, -1.0])
  return readings


def _tilted(readings):
  """The IMU mounted rotated 40 degrees about its x axis."""
  c, s = np.cos(np.radians(40)), np.sin(np.radians(40))
  rotation = np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
  for key in ("gyro", "accelerometer", "gravity"):
    readings[key] = readings[key] @ rotation
  return readings


def _dead_left_foot(readings):
  """The left foot switch unplugged: it never reads contact."""
  readings["feet_contacts"] = readings["feet_contacts"] * np.array([0.0, 1.0])
  return readings


def _knee_offset(readings):
  """The right knee's servo reads 0.3 rad (a horn one spline tooth off) away from the joint's angle."""
  readings["dof_pos"] = readings["dof_pos"].copy()
  readings["dof_pos"][:, constants.ACTUATOR_NAMES.index("right_knee")] += 0.3
  return readings


#: fault -> (what is injected, the check that must name it, a word of its message).
FAULTS = {
  "flipped_imu": (dict(sense=_upside_down), "imu_mount", "upside down"),
  "rotated_imu": (dict(sense=_tilted), "imu_mount", "about the IMU's x axis"),
  "dead_foot_switch": (dict(sense=_dead_left_foot), "foot_switches", "the left switch never reads contact"),
  "velocities_x0.1": (dict(contract=runtime.RuntimeContract(joint_vel_scale=0.1)), "velocity_scale", "x0.1"),
  "gravity_for_accelerometer": (dict(contract=runtime.RuntimeContract(imu_slot="gravity")), "imu_slot", "gravity"),
  "no_head_mix": (dict(contract=runtime.RuntimeContract(head_mix=False)), "head_mix", "does not add"),
  "slow_servos": (dict(overrides=[("max_motor_velocity", "1.0")]), "servos", "slower than the servos the file trained"),
  "joint_offset": (dict(sense=_knee_offset), "calibration", "right_knee +0.30"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_injected_in_the_runtime_loop_is_found_and_named(fault, walker, tmp_path, monkeypatch):
  path, env_config, ref = walker
  injected, check, words = FAULTS[fault]
  if "sense" in injected:
    sense = runtime.Hardware.sense
    monkeypatch.setattr(runtime.Hardware, "sense", lambda self, datas: injected["sense"](sense(self, datas)))
  options = runtime.RuntimeOptions(contract=injected.get("contract", runtime.CONTRACT))
  overrides = injected.get("overrides", ())
  (frames,) = robot_log.simulate(
    path, SCHEDULE, seed=LOG_SEED, env_config=env_config, overrides=overrides, runtime_options=options
  )
  log = robot_log.load(robot_log.save(tmp_path / "robot_saved_obs.pkl", frames))
  findings = diagnosis.check(log, ref)
  errors = {f.check: f.message for f in findings if f.level == "error"}
  assert set(errors) == {check}, "\n".join(f.line() for f in findings)
  assert words in errors[check]
  assert robot_log.exit_status(findings) == 1


def test_a_clean_log_passes_and_the_robot_stays_within_the_simulated_range(clean_log, tmp_path):
  plot = tmp_path / "vs_sim.png"
  result = run_cli(clean_log, "--policy", WALKER, "--plot", plot, script=CHECK_LOG, timeout=300)
  assert result.returncode == 0, result.stdout + result.stderr
  lines = result.stdout.splitlines()
  checks = [line.split()[1].rstrip(":") for line in lines]
  for name in ("imu_order", "imu_slot", "imu_mount", "velocity_scale", "phase_rule", "targets", "head_mix"):
    assert name in checks
  assert {"calibration", "foot_switches", "servos", "replay", "sim"} <= set(checks)
  assert all(line.startswith(("ok ", "info ")) for line in lines), result.stdout
  assert "the logged actions are this file's outputs" in result.stdout
  assert plot.stat().st_size > 10_000
  # Without the file: the same against the contract this project's files are made for.
  assert check_log.main([str(clean_log)]) == 0


def test_a_file_made_for_the_other_contract_or_another_file_is_an_error(clean_log, tmp_path):
  """The log against a file whose metadata names the undated walk script's contract, and another policy's."""
  undated = write_policy(
    tmp_path / "undated.onnx", {"runtime_contract": runtime.contract_metadata(runtime.UNDATED_CONTRACT)}
  )
  result = run_cli(clean_log, "--policy", undated, "--no_sim", script=CHECK_LOG, timeout=300)
  assert result.returncode == 1, result.stdout + result.stderr
  errors = {line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("error")}
  # The four facts, and the replay: the robot did not run this (untrained) file.
  assert errors == {"imu_slot", "velocity_scale", "phase_rule", "head_mix", "replay"}, result.stdout
  other = write_policy(tmp_path / "other.onnx")
  finding = diagnosis.replay(robot_log.load(clean_log), policy_io.onnx_policy(other, batched=True))
  assert finding.level == "error" and "not this file's outputs" in finding.message


def test_a_file_of_another_project_is_checked_without_the_simulation(clean_log, tmp_path, capsys):
  foreign = write_policy(tmp_path / "foreign.onnx", {"robot": "another_duck"})
  assert check_log.main([str(clean_log), "--policy", str(foreign)]) == 1  # the replay: another file
  out = capsys.readouterr().out
  assert "info  sim: not simulated: the policy does not match the Open Duck Mini V2 model" in out
  assert "error replay:" in out


class _Exploit:
  """Unpickling this runs a shell command."""

  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (os.system, (f"touch {self.marker}",))


def test_a_malicious_pickle_is_refused_without_running_anything(tmp_path):
  marker = tmp_path / "ran"
  log = tmp_path / "robot_saved_obs.pkl"
  log.write_bytes(pickle.dumps([np.zeros(101), _Exploit(marker)]))
  with pytest.raises(robot_log.LogError, match="refused: it asks for `(posix|os|nt).system`"):
    robot_log.load(log)
  result = run_cli(log, script=CHECK_LOG, timeout=300)
  assert result.returncode == 2 and result.stdout == ""
  assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
  assert "refused" in result.stderr and "numpy arrays, lists and numbers" in result.stderr
  assert not marker.exists()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_logs_load_from_every_pickle_protocol_and_numpy_1(tmp_path, protocol):
  """The robot's numpy 1.26 names `numpy.core`; numpy 2 `numpy._core`; Python 3.14 pickles with protocol 5."""
  frames = [np.arange(101.0), list(np.arange(101.0) + 1), [np.float64(x) for x in range(101)]]
  data = pickle.dumps(frames, protocol=protocol)
  if protocol == 2:  # names are text lines: write them as numpy 1.x does
    data = data.replace(b"numpy._core.", b"numpy.core.")
  (tmp_path / "log.pkl").write_bytes(data)
  log = robot_log.load(tmp_path / "log.pkl")
  assert log.dtype == np.float64 and log.shape == (3, 101) and log[1, 0] == 1.0


def test_bad_logs_are_answered_in_one_line(tmp_path, capsys):
  text = tmp_path / "notes.pkl"
  text.write_text("not a pickle")
  short = robot_log.save(tmp_path / "short.pkl", np.zeros((10, 101)))
  wide = tmp_path / "wide.pkl"
  wide.write_bytes(pickle.dumps([np.zeros(50)] * 60))
  table = tmp_path / "dict.pkl"
  table.write_bytes(pickle.dumps({"obs": [1.0]}))
  objects = tmp_path / "objects.pkl"
  objects.write_bytes(pickle.dumps([np.array([None] * 101, dtype=object)]))
  cases = {
    tmp_path / "nope.pkl": "does not exist",
    text: "is not a runtime log",
    short: "needs 50",
    wide: "shape (50,)",
    table: "holds a dict",
    objects: "holds object values",
  }
  for path, words in cases.items():
    assert check_log.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and words in err, err
  assert check_log.main([str(short), "--policy", str(tmp_path / "nope.onnx")]) == 2
  assert "does not exist" in capsys.readouterr().err


def test_the_runtime_scorecard_writes_logs_the_check_reads(walker, tmp_path):
  path, env_config, ref = walker
  stand = Command("stand", ((0.0, 0.0, 0.0, 0.0),), duration=1.5)
  card = scorecard.score(path, env_config, seeds=2, commands=[stand], source="runtime", save_obs=tmp_path)
  assert card["saved_obs"] == str(tmp_path)
  log = robot_log.load(tmp_path / "stand.pkl")
  assert log.shape == (75, 101)
  assert robot_log.exit_status(diagnosis.check(log, ref)) == 0
  with pytest.raises(ScoreError, match="--runtime"):
    scorecard.score(path, env_config, seeds=1, commands=[stand], save_obs=tmp_path)
  result = run_cli(path, "--save_obs", tmp_path, script=SCORE, timeout=300)
  assert result.returncode == 2 and "add --runtime" in result.stderr and "Traceback" not in result.stderr
