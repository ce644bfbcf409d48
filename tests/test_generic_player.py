"""The generic player and scorecard (`playground.common.evaluation`), on the test biped.

The biped (tests/biped/) is a robot the library does not know; these tests
play it through the shared evaluation layer only: scripted policies whose
outcome is known (holding the home pose stands, a hard kick topples it, a
non-finite action ends the episode), the command schedule the policy sees,
and the floating-base velocity checked against MuJoCo's own.
"""

import math

import mujoco
import numpy as np
import pytest
from biped import biped

from playground.common.evaluation import player
from playground.common.evaluation.scorecard import Command
from playground.common.evaluation.scorecard import Pushes
from playground.common.evaluation.scorecard import Suite
from playground.common.evaluation.scorecard import summarize
from playground.common.evaluation.scorecard import table

COMMAND = biped.LAYOUT.slices["command"]
EPISODES = [
  (Command("stand", ((0.0, 0.0),), 2.0), 0),
  (Command("script", ((0.0, 0.0), (1.0, 0.2)), 2.0), 0),
  (Command("push_stand_1.0", ((0.0, 0.0),), 2.0, Pushes((1.0, 1.0), (0.5, 0.5))), 0),
  (Command("push_stand_0.2", ((0.0, 0.0),), 2.0, Pushes((0.2, 0.2), (0.5, 0.5))), 0),
]


@pytest.fixture(scope="module")
def env():
  return biped.Walk()


def hold_home(obs):
  return np.zeros((obs.shape[0], 4), np.float32)


def test_the_heading_frame_velocity_is_mujocos_own():
  model = mujoco.MjModel.from_xml_path(str(biped.XML))
  data = mujoco.MjData(model)
  rng = np.random.default_rng(0)
  trunk = model.body(biped.TRUNK_BODY).id
  for _ in range(5):
    data.qpos[:] = model.keyframe("home").qpos
    quat = rng.normal(size=4)
    data.qpos[3:7] = quat / np.linalg.norm(quat)
    data.qvel[:] = rng.normal(size=model.nv)
    mujoco.mj_forward(model, data)
    res = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, trunk, res, 0)  # world frame: [angular, linear]
    x_axis = data.xmat[trunk].reshape(3, 3)[:, 0]
    yaw = math.atan2(x_axis[1], x_axis[0])
    c, s = math.cos(yaw), math.sin(yaw)
    expected = [c * res[3] + s * res[4], -s * res[3] + c * res[4], res[2]]
    measured = player.heading_velocity(data.qpos[None], data.qvel[None])[0]
    np.testing.assert_allclose(measured, expected, atol=1e-9)


@pytest.mark.slow  # compiles the biped's step (about 30 s); the tests after it reuse it
def test_the_player_plays_the_schedule_ends_falls_and_counts_kicks(env):
  seen = []
  played = player.play(
    hold_home, env, EPISODES, biped.COMMAND_NAMES, biped.LAYOUT, on_step=lambda v: seen.append(v.seen[:, COMMAND])
  )
  assert [e["command"] for e in played] == [c.name for c, _ in EPISODES]
  # The policy sees the scheduled command from the first observation on (the env's reset drew another).
  assert np.all(seen[0] == 0.0) and len(seen) == 100
  np.testing.assert_allclose(np.stack(seen)[:, 1, 0], [0.0] * 50 + [0.2] * 50)  # 0.2 from t = 1.0 s (step 50)
  stand, script, hard, soft = played
  assert not stand["fell"] and stand["survival_s"] == pytest.approx(2.0) and stand["pushes"] == 0
  assert np.abs(stand["vel"]).max() < 0.02  # holding the home pose, it stays where it is
  # Velocities count after the first second (SETTLE_S): the 0.2 m/s half of the script.
  assert len(script["cmd"]) == 50 and np.allclose(script["cmd"], [0.2, 0.0, 0.0])
  assert hard["fell"] and hard["fall_cause"] == "terminated" and hard["survival_s"] < 2.0 and hard["pushes"] >= 1
  assert not soft["fell"] and soft["pushes"] == 3  # kicks at 0.5, 1.0 and 1.5 s
  card = summarize(played, [c for c, _ in EPISODES], window=50)
  assert card["headline"]["falls"] == 0 and card["headline"]["episodes"] == 2
  assert card["headline"]["push_falls"] == 1 and card["headline"]["push_falls_per_kick"] == pytest.approx(1 / 4)
  assert card["commands"]["push_stand_1.0"]["fall_causes"] == {"terminated": 1}
  assert "push_stand_1.0 (1 terminated)" in table(card)


def test_a_non_finite_action_ends_the_episode_at_once(env):
  played = player.play(
    lambda obs: np.full((obs.shape[0], 4), np.nan, np.float32), env, EPISODES, biped.COMMAND_NAMES, biped.LAYOUT
  )
  assert all(e["fell"] and e["fall_cause"] == "non-finite action" for e in played)
  assert all(e["survival_s"] == pytest.approx(env.dt) for e in played)


def test_the_player_refuses_what_it_cannot_play(env):
  with pytest.raises(ValueError, match="gait clock"):
    player.play(hold_home, env, [(Command("fast", ((0.0, 0.1),), 1.0, phase_factor=1.3), 0)], biped.COMMAND_NAMES)
  with pytest.raises(ValueError, match="schedule entry"):
    player.play(hold_home, env, [(Command("two", ((0.0, 0.1, 0.2),), 1.0), 0)], biped.COMMAND_NAMES)
  assert Suite(commands=(), command_names=("vx",)).seeds == 2
