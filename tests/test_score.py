"""The policy scorecard: it tells standing from walking and refuses foreign policies."""

import json
import math

import numpy as np
import pytest
from helpers import REPO_ROOT
from helpers import run_cli
from helpers import write_policy

from playground.common import configs
from playground.common.evaluation import best_policy
from playground.common.evaluation.scorecard import TRACKING_WINDOW_S
from playground.common.evaluation.scorecard import Command
from playground.common.evaluation.scorecard import Pushes
from playground.common.evaluation.scorecard import headline_line
from playground.common.evaluation.scorecard import summarize
from playground.common.evaluation.scorecard import table
from playground.common.evaluation.scorecard import tensorboard_scalars
from playground.common.evaluation.scorecard import trailing_mean
from playground.common.export import onnx_graph
from playground.common.runs.tensorboard import read_scalars
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import scorecard
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.tasks import joystick
from playground.open_duck_mini_v2.tasks.registry import env_class

SCORE = REPO_ROOT / "playground" / "open_duck_mini_v2" / "score.py"
#: Entries of the default suite, and those without pushes (the headline's falls).
SUITE = len(scorecard.suite(Pushes((0.1, 1.0), (5.0, 10.0))))
UNPUSHED = len([c for c in scorecard.suite() if c.pushes is None])


def score_config(metadata, env_config, clean, overrides=()):
  """The scorecard's play config: the training disturbances unless `clean`."""
  on = not clean
  return policy_io.play_config(metadata, env_config, noise=on, delays=on, randomization=on, overrides=overrides)


@pytest.fixture(scope="module")
def zero_card(tmp_path_factory):
  policy = write_policy(tmp_path_factory.mktemp("zero") / "zero.onnx")
  # Its run trained with a margin on the trunk offset, which the scorecard leaves out.
  config = env_class("joystick").default_config()
  config.domain_randomization.com_offset_margin = 0.005
  (policy.parent / "config.json").write_text(json.dumps({"env_config": config.to_dict()}))
  # --set narrows one randomization range (the cpu preset's); the rest stays on.
  result = run_cli(policy, "--seeds", "1", "--set", "domain_randomization.com_offset=0.03", script=SCORE, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return policy, result


def test_a_zero_action_policy_stands_and_does_not_walk(zero_card):
  policy, result = zero_card
  assert not (policy.parent / "zero_score.json").exists()  # other conditions: their own file
  card = json.loads((policy.parent / "zero_score_set.json").read_text())
  assert card["overrides"] == ["domain_randomization.com_offset=0.03"]
  offsets = np.array([e["trunk_com_offset_m"] for e in card["episodes"]])
  assert offsets.shape == (SUITE, 3) and not any(e["fell"] for e in card["episodes"] if "push" not in e["command"])
  assert np.abs(offsets).max() <= 0.03 + 1e-4 and np.unique(offsets[:, 0]).size == len(offsets)  # one model each
  assert "set domain_randomization.com_offset=0.03" in card["conditions"]
  assert "+-3.0 cm (trained with 0.5 cm more)" in card["conditions"]
  h = card["headline"]
  # With randomization, noise and delays on, holding the home pose keeps the duck up...
  assert h["falls"] == 0 and h["episodes"] == UNPUSHED == 12
  # Falls under pushes are counted apart from the headline's falls.
  assert h["push_episodes"] == SUITE - UNPUSHED == 3 and 0 <= h["push_falls"] <= 3
  assert {e["command"] for e in card["episodes"] if "push" in e["command"]} == {
    "push_stand_0.5",
    "push_forward_0.1_0.5",
    "push_forward_0.1_training",
  }
  # ...and it goes nowhere, whatever the command.
  assert abs(h["vx_at_0.1"]) < 0.02 and abs(h["vy_at_0.1"]) < 0.02
  assert abs(h["yaw_rate_at_0.5"]) < 0.1
  assert card["commands"]["forward_0.1"]["lin_vel_error_mps"] > 0.08
  assert card["commands"]["turn_left_0.5"]["yaw_rate_error_radps"] > 0.4
  assert card["commands"]["script"]["duration_s"] == pytest.approx(20.0)
  assert "randomization" in card["conditions"]
  # The table and the headline are printed; the PNG is a real image.
  assert "forward_0.1" in result.stdout and "score: falls 0/12" in result.stdout
  assert (policy.parent / "zero_score_set.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_leaning_policy_is_measured_moving_or_falling(tmp_path):
  # Bending every leg joint hard changes the pose: the scorecard must see the
  # duck fall or move (it is not a constant).
  leaning = np.zeros(14, np.float32)
  leaning[[2, 11]] = [-3.0, 3.0]  # hip pitches forward
  policy = write_policy(tmp_path / "lean.onnx", bias=leaning)
  commands = scorecard.suite()[:2]
  card = scorecard.score(policy, seeds=1, clean=True, commands=commands)
  stand = card["commands"]["stand"]
  assert stand["falls"] == 1 or stand["distance_m"] > 0.05


def test_a_file_alone_is_played_with_the_trunk_offsets_it_trained_with_and_its_card_says_so(tmp_path):
  # Without its run's config a file gets the range in its metadata: the env's default (the upstream
  # +-5 cm) here, the +-3 cm a `cpu`-preset run is judged with there. The card names the range it played.
  policy = write_policy(tmp_path / "zero.onnx")
  card = scorecard.score(policy, seeds=1, commands=scorecard.suite()[:1])
  assert "trunk offsets within +-5.0 cm" in card["conditions"] and "trained with" not in card["conditions"]
  cpu = write_policy(tmp_path / "cpu.onnx", {"trunk_offset_m": 0.03, "trunk_offset_margin_m": 0.005})
  card = scorecard.score(cpu, seeds=2, commands=scorecard.suite()[:1])
  assert "trunk offsets within +-3.0 cm (trained with 0.5 cm more)" in card["conditions"]
  offsets = np.array([e["trunk_com_offset_m"] for e in card["episodes"]])
  assert np.abs(offsets).max() <= 0.03 and np.abs(offsets).max() > 0.005
  clean = scorecard.score(policy, seeds=1, clean=True, commands=scorecard.suite()[:1])
  assert "trunk offsets" not in clean["conditions"]


def test_the_headline_averages_the_sideways_speed_in_the_commanded_direction():
  commands = [c for c in scorecard.suite() if c.name in ("left_0.1", "right_0.1", "forward_0.1")]

  def episode(name, vel):
    command = next(c for c in commands if c.name == name)
    n = 10
    return dict(
      command=name, seed=0, fell=False, survival_s=8.0, distance_m=0.1, foot_slip_mps=0.0, joint_limit_share=0.0,
      action_smoothness=0.0, power_w=0.0, cmd=np.tile(command.at(0.0)[:3], (n, 1)), vel=np.tile(vel, (n, 1)),
    )  # fmt: skip

  card = summarize(
    [
      episode("left_0.1", [0.0, 0.05, 0.0]),
      episode("right_0.1", [0.0, -0.03, 0.0]),
      episode("forward_0.1", [0.07, 0.0, 0.0]),
    ],
    commands,
    window=50,
  )
  assert card["headline"]["vy_at_0.1"] == pytest.approx(0.04)  # (0.05 + 0.03) / 2
  assert card["headline"]["vx_at_0.1"] == pytest.approx(0.07)
  assert tensorboard_scalars(card)["score/vy_at_0.1"] == pytest.approx(0.04)
  assert "sideways at 0.1 m/s command 0.040 m/s" in headline_line(card)


def test_tensorboard_gets_the_hold_falls_the_kicks_and_the_calm_figures_of_a_headline():
  headline = {
    "falls": 3, "episodes": 144, "tracking_error_mps": 0.04, "yaw_rate_error_radps": 0.1, "falls_in_hold": 1,
    "push_falls": 9, "push_episodes": 36, "push_survival_share": 0.8, "push_falls_per_kick": 0.125,
    "joint_speed_at_0.1": 0.79, "action_rate_at_0.1": 0.086,
  }  # fmt: skip
  scalars = tensorboard_scalars({"headline": headline}, "score/runtime_")
  assert scalars["score/runtime_falls"] == 3.0 and scalars["score/runtime_falls_in_hold"] == 1.0
  assert scalars["score/runtime_push_falls_per_kick"] == 0.125 and scalars["score/runtime_push_fall_share"] == 0.25
  assert scalars["score/runtime_joint_speed_at_0.1"] == 0.79 and scalars["score/runtime_action_rate_at_0.1"] == 0.086
  # An older card without them: none made up.
  old = {k: v for k, v in headline.items() if k not in ("falls_in_hold", "joint_speed_at_0.1")}
  assert not {"score/falls_in_hold", "score/joint_speed_at_0.1"} & set(tensorboard_scalars({"headline": old}))


def test_tracking_errors_rank_a_swaying_walker_above_a_standing_duck():
  # 7 s at 50 Hz of the 0.1 m/s forward command: a walker that averages 0.07
  # m/s but whose velocity swings +-0.15 m/s within each 0.54 s gait period
  # (as the trained CPU policies' does), and a duck that stands still.
  t = np.arange(350) * 0.02
  cmd = np.tile([0.1, 0.0, 0.0], (350, 1))
  walking = np.stack([0.07 + 0.15 * np.sin(2 * np.pi * t / 0.54), 0.05 * np.cos(2 * np.pi * t / 0.54), 0 * t], -1)
  window = int(TRACKING_WINDOW_S / 0.02)
  np.testing.assert_allclose(trailing_mean(np.arange(5.0), 2), [0.0, 0.5, 1.5, 2.5, 3.5])

  def error(vel):
    episode = dict(
      command="forward_0.1", seed=0, fell=False, survival_s=8.0, distance_m=0.0, foot_slip_mps=0.0,
      joint_limit_share=0.0, action_smoothness=0.0, power_w=0.0, cmd=cmd, vel=vel,
    )  # fmt: skip
    card = summarize([episode], [c for c in scorecard.suite() if c.name == "forward_0.1"], window)
    return card["commands"]["forward_0.1"]["lin_vel_error_mps"]

  assert error(walking) < 0.05 < 0.1 == pytest.approx(error(np.zeros_like(cmd)))
  # Instantaneous errors would rank them the other way round.
  assert np.mean(np.linalg.norm(cmd[:, :2] - walking[:, :2], axis=1)) > 0.1


def test_the_scorecard_names_the_joints_held_at_a_range_end(tmp_path):
  # Knee targets past the upper end of the range (home 1.37 + 0.25 rad, the
  # range ends at 1.571): both knees sit at the limit, no other joint does.
  knees = np.zeros(14, np.float32)
  knees[[3, 12]] = 3.0
  commands = scorecard.suite()[:1]
  bent = scorecard.score(write_policy(tmp_path / "knees.onnx", bias=knees), seeds=1, clean=True, commands=commands)
  home = scorecard.score(write_policy(tmp_path / "home.onnx"), seeds=1, clean=True, commands=commands)
  by_joint = bent["commands"]["stand"]["joint_limit_by_joint"]
  assert set(by_joint) == {"left_knee", "right_knee"} and min(by_joint.values()) > 0.9, by_joint
  assert bent["commands"]["stand"]["joint_limit_share"] > 0.9
  assert home["commands"]["stand"]["joint_limit_by_joint"] == {}
  assert home["commands"]["stand"]["joint_limit_share"] == 0.0
  assert "range end for at least a quarter of the time: stand (left_knee 1.00, right_knee 1.00)" in table(bent)
  assert "range end" not in table(home)


@pytest.mark.parametrize(
  "change, expected",
  [
    ({"action_names": ["x"] * 14}, "action order differs"),
    ({"observation_layout": [["gyro", 3]], "observation_size": 3}, "observation layout differs"),
    ({"control_period_s": 0.01}, "control period is 0.01 s"),
    ({"robot": "cartpole"}, "robot is 'cartpole'"),
  ],
)
def test_a_mismatched_policy_is_refused_in_one_line(tmp_path, change, expected):
  policy = write_policy(tmp_path / "bad.onnx", change)
  with pytest.raises(scorecard.ScoreError, match=expected):
    scorecard.score(policy, seeds=1)


def test_the_cli_refuses_a_mismatched_or_missing_policy_in_one_line(tmp_path):
  policy = write_policy(tmp_path / "bad.onnx", {"action_names": ["x"] * 14})
  for path in (policy, tmp_path / "missing.onnx"):
    result = run_cli(path, script=SCORE, timeout=300)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in result.stderr
  assert not (tmp_path / "bad_score.json").exists()
  good = write_policy(tmp_path / "good.onnx")
  result = run_cli(good, "--set", "domain_randomization.com_ofset=0.05", script=SCORE, timeout=300)
  assert result.returncode == 2 and "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1].startswith("error: unknown config key")
  assert "domain_randomization.com_offset" in result.stderr and not list(tmp_path.glob("good_score*"))


def test_the_runner_scores_every_checkpoint_into_tensorboard(smoke_run):
  run_dir, _ = smoke_run
  step_dir = run_dir / "000000002560"
  card = json.loads((step_dir / "score.json").read_text())
  assert card["seeds"] == 2 and card["training_step"] == 2560
  assert (step_dir / "score.png").is_file()
  scalars = read_scalars(run_dir)
  for name in (
    "score/falls",
    "score/tracking_error_mps",
    "score/vx_at_0.1",
    "score/vy_at_0.1",
    "score/yaw_rate_at_0.5",
  ):
    assert name in scalars, sorted(scalars)
  assert scalars["score/falls"][-1][1] == card["headline"]["falls"]
  best = json.loads((run_dir / best_policy.BEST_SCORE).read_text())
  assert best["checkpoint"] == step_dir.name and best["headline"] == card["headline"]
  assert (run_dir / best_policy.BEST_POLICY).read_bytes() == (step_dir / "policy.onnx").read_bytes()
  _, env_config, _ = policy_io.resolve_policy(run_dir / best_policy.BEST_POLICY)
  assert env_config == json.loads((run_dir / "config.json").read_text())["env_config"]


def test_the_run_keeps_the_walking_policy_with_the_fewest_falls_then_the_smallest_tracking_error(tmp_path):
  def card(falls, error, episodes=18, vx=0.08, yaw=0.4):
    return {
      "headline": {
        "falls": falls,
        "episodes": episodes,
        "tracking_error_mps": error,
        "yaw_rate_error_radps": 0.3,
        "vx_at_0.1": vx,
        "yaw_rate_at_0.5": yaw,
        "vx_at_0.1_phase_x1.3": vx,
      }
    }

  walking = scorecard.WALKING_SPEEDS
  names = ("000000000050", "000000000100", "000000000200", "000000000300", "000000000400", "000000000500")
  steps = {}
  for name in names:
    steps[name] = tmp_path / name
    steps[name].mkdir()
    (steps[name] / "policy.onnx").write_bytes(name.encode())

  def best():
    return json.loads((tmp_path / best_policy.BEST_SCORE).read_text())["checkpoint"], (
      tmp_path / best_policy.BEST_POLICY
    ).read_bytes()

  # A duck that stands (or only turns) without falling is the best only until one walks.
  assert best_policy.update_best(tmp_path, steps["000000000050"], card(0, 0.09, vx=0.01, yaw=0.05), walking)
  assert best_policy.update_best(
    tmp_path, steps["000000000100"], card(2, 0.15), walking
  )  # walks: beats standing, whatever its falls
  assert not best_policy.update_best(
    tmp_path, steps["000000000500"], card(0, 0.05, vx=0.069), walking
  )  # just under 0.07 m/s
  assert not best_policy.update_best(
    tmp_path, steps["000000000500"], card(0, 0.05, yaw=0.29), walking
  )  # turns too slowly
  assert best_policy.update_best(
    tmp_path, steps["000000000200"], card(1, 0.19), walking
  )  # fewer falls beat a smaller error
  assert not best_policy.update_best(
    tmp_path, steps["000000000300"], card(1, 0.19), walking
  )  # a tie keeps the earlier one
  assert best() == ("000000000200", b"000000000200")
  assert best_policy.update_best(
    tmp_path, steps["000000000400"], card(1, 0.16), walking
  )  # same falls: the smaller error
  assert not best_policy.update_best(
    tmp_path, steps["000000000100"], card(4, 0.10, episodes=54), walking
  )  # shares, not counts
  assert best() == ("000000000400", b"000000000400")
  assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind
  assert best_policy.walks_on_command(
    {"vx_at_0.1": 0.07, "yaw_rate_at_0.5": 0.3, "vx_at_0.1_phase_x1.3": 0.07}, walking
  )
  # Walking at 1x but not with the runtime's phase button held is not walking on command.
  assert not best_policy.walks_on_command(
    {"vx_at_0.1": 0.08, "yaw_rate_at_0.5": 0.4, "vx_at_0.1_phase_x1.3": 0.02}, walking
  )
  assert not best_policy.walks_on_command({"yaw_rate_at_0.5": 0.5}, walking)  # no forward command scored: not walking


def test_look_around_moves_the_head_through_a_fixed_sequence_within_the_command_ranges():
  look = scorecard.look_around()
  assert look == scorecard.look_around() and look != scorecard.look_around(seed=1)
  assert look.duration == 20.0
  commands = np.stack([look.at(t, 7) for t in np.arange(0.0, 20.0, 0.5)])
  assert np.all(commands[:, :3] == 0.0)  # stands still
  head = commands[:, 3:]
  assert len({tuple(h) for h in head}) == 10  # a new pose every 2 s
  np.testing.assert_array_equal(head[0], head[3])  # 0.0 and 1.5 s: the same pose
  low, high = np.array([-0.34, -0.78, -1.5, -0.5]), np.array([1.1, 0.78, 1.5, 0.5])
  assert np.all(head >= low) and np.all(head <= high)
  # The velocity-only entries of the suite keep the head at home.
  assert np.all(scorecard.suite()[1].at(1.0, 7)[3:] == 0.0)
  np.testing.assert_allclose(Command("short", ((0.0, 0.1),)).at(0.0, 3), [0.1, 0.0, 0.0])  # the rest is 0
  for bad in ((0.0, 0.1, 0.0, 0.0, 0.0), (0.0,)):  # more commands than the robot has, or none
    with pytest.raises(ValueError, match="schedule entry"):
      Command("bad", (bad,)).at(0.0, 3)


def test_score_config_keeps_the_training_disturbances_unless_clean():
  metadata = {"env": "joystick", "action_scale": 0.25, "gait_frequency_hz": 2.0}
  trained = joystick.default_config()
  trained.reference.feedforward = True
  trained.noise_config.level = 0.5
  robust = score_config(metadata, trained.to_dict(), clean=False)
  assert (robust.noise_config.level, tuple(robust.delay.action_steps)) == (0.5, (0, 2))
  assert robust.domain_randomization.enabled and not robust.push_config.enable  # pushes: the suite's own
  assert robust.reference.feedforward is False and robust.gait_frequency == 2.0
  clean = score_config(metadata, trained.to_dict(), clean=True)
  assert clean.noise_config.level == 0.0 and not clean.domain_randomization.enabled
  assert tuple(clean.delay.action_steps) == (0, 0) and tuple(clean.delay.imu_steps) == (0, 0)
  assert trained.noise_config.level == 0.5  # the caller's config is not changed
  wider = score_config(metadata, trained.to_dict(), False, [("domain_randomization.com_offset", "0.05")])
  assert wider.domain_randomization.com_offset == 0.05 and wider.noise_config.level == 0.5
  with pytest.raises(configs.ConfigError, match="domain_randomization.com_offset"):
    score_config(metadata, trained.to_dict(), False, [("domain_randomization.com_ofset", "0.05")])
  # A training margin on the trunk offset is not judged; --set brings it back.
  trained.domain_randomization.update(com_offset=0.03, com_offset_margin=0.005)
  judged = score_config(metadata, trained.to_dict(), False)
  assert (judged.domain_randomization.com_offset, judged.domain_randomization.com_offset_margin) == (0.03, 0.0)
  margin = [("domain_randomization.com_offset_margin", "0.005")]
  assert score_config(metadata, trained.to_dict(), False, margin).domain_randomization.com_offset_margin == 0.005
  old_run = trained.to_dict()
  del old_run["domain_randomization"]["com_offset_margin"]  # recorded before the margin existed
  assert score_config(metadata, old_run, False).domain_randomization.com_offset == 0.03


def test_an_onnx_file_takes_its_run_s_env_config_when_one_is_next_to_it(tmp_path):
  policy = write_policy(tmp_path / "best_policy.onnx")
  assert policy_io.resolve_policy(policy)[1] is None  # a bare file: the env's defaults
  (tmp_path / "config.json").write_text(json.dumps({"env_config": {"episode_length": 7}}))
  assert policy_io.resolve_policy(policy)[1] == {"episode_length": 7}
  (tmp_path / "config.json").write_text("not json")
  assert policy_io.resolve_policy(policy)[1] is None


def test_a_policy_with_an_observation_history_is_played_with_its_own_layout(tmp_path):
  policy = write_policy(tmp_path / "history.onnx", history=3)
  meta = onnx_graph.read_metadata(policy)
  assert meta["observation_size"] == 101 + 3 * 34 and meta["observation_history"] == 3
  config = score_config(meta, joystick.default_config().to_dict(), clean=False)
  assert config.observation_history == 3  # from the file, though the run's config says 0
  stand = Command("stand", ((0.0, 0.0, 0.0, 0.0),), duration=1.0)
  card = scorecard.score(policy, seeds=1, commands=(stand,))
  assert card["commands"]["stand"]["falls"] == 0  # the home pose holds for a second
  # A layout that is neither 101 floats nor 101 plus whole 34-float frames is refused.
  odd = observations.state_layout(1).to_json()
  odd[-1]["size"] = 35
  bad = write_policy(tmp_path / "bad.onnx", {"observation_layout": odd, "observation_size": 136}, history=1)
  with pytest.raises(scorecard.ScoreError, match="plus 34 per history frame"):
    scorecard.score(bad, seeds=1, commands=(stand,))


def test_the_card_reports_gait_calm_and_falls_per_kick_and_ignores_unmeasured_episodes():
  """Joint speed and action rate at 0.1 m/s (the gait-calm guard), falls per kick delivered on the
  push entries, and an episode that fell before it was measured (NaN metrics) left out of the means."""
  names = ("forward_0.1", "push_stand_0.5")
  commands = [c for c in scorecard.suite() if c.name in names]

  def episode(name, fell, pushes, speed, smooth):
    command = next(c for c in commands if c.name == name)
    n = 0 if math.isnan(speed) else 10
    return dict(
      command=name, seed=0, fell=fell, survival_s=1.0 if fell else 8.0, duration_s=8.0, pushes=pushes, distance_m=0.1,
      foot_slip_mps=speed, joint_limit_share=speed, action_smoothness=smooth, joint_speed_radps=speed, power_w=speed,
      cmd=np.tile(command.at(0.0)[:3], (n, 1)), vel=np.tile([0.08, 0.0, 0.0], (n, 1)),
    )  # fmt: skip

  card = summarize(
    [
      episode("forward_0.1", False, 0, 1.0, 0.08),
      episode("forward_0.1", False, 0, 2.0, 0.10),
      episode("forward_0.1", True, 0, math.nan, math.nan),  # fell in its first second
      episode("push_stand_0.5", True, 2, 0.5, 0.03),
      episode("push_stand_0.5", False, 3, 0.5, 0.03),
    ],
    commands,
    window=5,
  )
  h = card["headline"]
  assert h["joint_speed_at_0.1"] == pytest.approx(1.5) and h["action_rate_at_0.1"] == pytest.approx(0.09)
  assert card["commands"]["forward_0.1"]["foot_slip_mps"] == pytest.approx(1.5)  # not NaN
  assert h["push_falls"] == 1 and h["push_falls_per_kick"] == pytest.approx(1 / 5)
  assert "falls 1/2 (20% of kicks)" in headline_line(card)


def test_a_file_is_played_without_the_env_adding_the_gait_the_file_adds():
  # The generic player plays a file in `play_env_config`: the duck's residual file adds the
  # reference gait itself (with the env adding it too, the walker fell in 3 of 4 episodes).
  from playground.common.runs.arguments import RunArgs
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  config = joystick.default_config()
  config.reference.feedforward = True
  played = OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain")).play_env_config("joystick", config)
  assert not played.reference.feedforward and not played.push_config.enable
  assert played.reward_config.scales.imitation == 0.0
  assert config.reference.feedforward and config.push_config.enable  # the run's own config is untouched


def test_a_run_with_a_scaled_residual_is_played_with_the_gain_left_to_its_file(tmp_path):
  """`reference.residual_gain` is inside the file (as the feed-forward is): the play config turns both off
  in the env, and the env accepts it (a run's checkpoints were refused by the scorecard before)."""
  config = env_class("joystick").default_config()
  config.reference.feedforward = True
  config.reference.residual_gain = 2.0
  metadata = policy_io.read_metadata(write_policy(tmp_path / "k2.onnx"))
  played = score_config(metadata, config.to_dict(), clean=False)
  assert not played.reference.feedforward and played.reference.residual_gain == 1.0
  env_class("joystick")(task="flat_terrain", config=played)
