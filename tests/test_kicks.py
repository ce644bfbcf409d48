"""Training kicks: their direction by heading sector, perturbed starts and the adaptive strength curriculum."""

import math

import jax
import jax.numpy as jp
import numpy as np
import pytest

from playground.common import configs
from playground.common.tasks import kicks
from playground.common.train import vec_env
from playground.open_duck_mini_v2.tasks import joystick


def test_a_level_grows_after_a_survived_kick_shrinks_after_a_fall_and_stays_in_bounds():
  step = lambda level, survived, fell: float(  # noqa: E731
    kicks.next_level(jp.float32(level), survived, fell, grow=1.1, shrink=0.5, bounds=(0.2, 1.0))
  )
  assert step(0.5, True, False) == pytest.approx(0.55)
  assert step(0.5, False, True) == pytest.approx(0.25)
  assert step(0.5, False, False) == pytest.approx(0.5)
  assert step(0.95, True, False) == pytest.approx(1.0)  # capped
  assert step(0.3, False, True) == pytest.approx(0.2)  # floored
  # grow^(1-p) shrink^p = 1: 1.05 and 0.8 settle where 17.9% of kicks fall.
  p = kicks.settling_fall_share(1.05, 0.8)
  assert p == pytest.approx(0.179, abs=1e-3)
  assert (1 - p) * math.log(1.05) + p * math.log(0.8) == pytest.approx(0.0, abs=1e-12)


def test_kicks_land_in_the_weighted_sectors_of_the_trunks_heading():
  yaw = 0.7
  quat = jp.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
  assert float(kicks.heading(quat)) == pytest.approx(yaw, abs=1e-6)
  keys = jax.random.split(jax.random.PRNGKey(0), 4000)
  draw = jax.vmap(lambda k, w: kicks.direction(k, kicks.heading(quat), w), in_axes=(0, None))
  # Backward only: every kick within 45 degrees of the trunk's back.
  relative = np.mod(np.asarray(draw(keys, (0.0, 0.0, 1.0, 0.0))) - yaw, 2 * np.pi)
  assert np.all(np.abs(relative - np.pi) <= np.pi / 4 + 1e-5)
  assert relative.min() < np.pi - 0.7 and relative.max() > np.pi + 0.7  # the whole sector
  # Weights 1:0:2:1 over front, left, back, right: shares 1/4, 0, 1/2, 1/4.
  relative = np.mod(np.asarray(draw(keys, (1.0, 0.0, 2.0, 1.0))) - yaw + np.pi / 4, 2 * np.pi)
  shares = np.bincount((relative // (np.pi / 2)).astype(int), minlength=4) / len(keys)
  np.testing.assert_allclose(shares, [0.25, 0.0, 0.5, 0.25], atol=0.03)
  with pytest.raises(ValueError, match="4 non-negative weights"):
    kicks.check_direction_weights((1.0, -1.0, 1.0, 1.0))


@pytest.mark.parametrize(
  "key, value, message",
  [
    ("direction_weights", (0.0, 0.0, 0.0, 0.0), "push_config.direction_weights needs 4 non-negative"),
    ("direction_weights", (1.0, 1.0), "one per sector"),
    ("kicked_start_share", 1.5, "kicked_start_share must be a fraction in"),
    ("curriculum.shrink", 1.2, "push_config.curriculum.shrink must lie in"),
    ("curriculum.start", 2.0, "push_config.curriculum.start must lie in magnitude_range"),
  ],
)
def test_bad_kick_settings_are_refused_in_one_line(key, value, message):
  config = joystick.default_config()
  config.push_config.curriculum.enable = True
  target = config.push_config
  *path, leaf = key.split(".")
  for name in path:
    target = target[name]
  target[leaf] = value
  with pytest.raises(configs.ConfigError, match=message) as error:
    joystick.Joystick(config=config)
  assert "\n" not in str(error.value)


def test_the_curriculum_judges_each_kick_and_its_level_outlives_the_episode():
  """Two envs, both kicked at their first step (a perturbed start): one is knocked over at once
  (its trunk turned upside down) and its level shrinks; the other stands through the judging window
  and its level grows. Both levels carry over the episodes' ends, where everything else starts afresh."""
  config = joystick.default_config()
  config.noise_config.level = 0.0
  config.push_config.kicked_start_share = 1.0
  config.push_config.magnitude_range = (0.05, 0.4)
  config.push_config.interval_range = (0.2, 0.2)  # then a kick every 10 control steps
  config.push_config.direction_weights = (0.0, 0.0, 1.0, 0.0)
  config.push_config.curriculum.update(enable=True, start=0.1, grow=1.5, shrink=0.5, judge_s=0.04)
  env = joystick.Joystick(config=config)
  assert env.persistent_info_keys == ("push_level",)
  assert joystick.Joystick(config=joystick.default_config()).persistent_info_keys == ()  # off by default
  venv = vec_env.VecEnv(env, episode_length=15)
  models = venv.models(jp.arange(2))
  reset = jax.jit(lambda k: venv.reset(jax.random.split(k, 2), models))
  state = reset(jax.random.PRNGKey(1))
  reset_state = state
  # Env 0 starts upside down: it ends at its first step, within the judging window of its kick.
  qpos = state.env.data.qpos.at[0, 3:7].set(jp.array([0.0, 1.0, 0.0, 0.0]))
  state = state.replace(env=state.env.replace(data=state.env.data.replace(qpos=qpos)))
  step = jax.jit(lambda s: venv.step(s, jp.zeros((2, env.action_size)), models, reset_state))

  levels, done, since, kicked, strength = [], [], [], [], []
  for _ in range(20):
    state, result = step(state)
    levels.append(np.asarray(state.env.info["push_level"]))
    done.append(np.asarray(result.done))
    since.append(np.asarray(state.env.info["since_push"]))
    kicked.append(np.asarray(result.finished_metrics["kick/count"]))
    strength.append(np.asarray(result.finished_metrics["kick/strength"]))
  levels, done, since = np.array(levels), np.array(done), np.array(since)

  # Env 0: knocked over by its first step; its level halves and carries into the next episode.
  assert done[0, 0] == 1.0 and levels[0, 0] == pytest.approx(0.05)
  assert kicked[0][0] == 1.0 and 0.075 - 1e-6 <= strength[0][0] <= 0.1 + 1e-6  # within [0.75, 1] of its level
  # Env 1: up 2 steps after its kick: x1.5 once, then again after the kick 10 steps later.
  assert done[:14, 1].sum() == 0
  assert levels[0, 1] == pytest.approx(0.1) and levels[2, 1] == pytest.approx(0.15)
  assert levels[12, 1] == pytest.approx(0.225)
  # Truncated at 15 steps: the step counter and the kick clock restart, the level stays.
  assert done[14, 1] == 1.0 and levels[14, 1] == pytest.approx(0.225)
  assert since[14, 1] == 1_000_000 and since[15, 1] == 0  # a fresh episode, kicked at its first step
  assert levels[17, 1] == pytest.approx(0.3375)  # and judged 2 steps later
  # Env 0's second episode starts from the reset state, upright: its kick is survived.
  assert done[1:15, 0].sum() == 0 and levels[3, 0] == pytest.approx(0.075)


def test_the_critic_observes_the_kick_the_time_since_it_and_the_capture_point():
  """`critic_kick`: after a perturbed start the critic's kick block holds the kick in the trunk's
  heading frame, then forgets it after `KICK_MEMORY_S`; the capture point is checked against the
  pendulum computed here from MuJoCo's own fields. The actor's observation does not change."""
  from playground.open_duck_mini_v2.model import observations

  config = joystick.default_config()
  config.noise_config.level = 0.0
  config.critic_kick = True
  config.push_config.kicked_start_share = 1.0
  config.push_config.magnitude_range = (0.2, 0.2)  # one the rigid home pose stands through
  config.push_config.interval_range = (5.0, 5.0)
  config.push_config.direction_weights = (0.0, 0.0, 1.0, 0.0)  # straight back, within 45 degrees
  env = joystick.Joystick(config=config)
  layout = observations.privileged_layout(0, kick=True)
  state = jax.jit(env.reset)(jax.random.PRNGKey(3))
  assert state.obs["state"].shape == (101,)
  assert state.obs["privileged_state"].shape == (observations.privileged_layout(0).size + observations.KICK_SIZE,)
  step = jax.jit(env.step)
  zero = jp.zeros(env.action_size)

  def block(state):
    return observations.ObservationLayout(observations.KICK_FIELDS).split(
      np.asarray(state.obs["privileged_state"])[layout.slices["kick_velocity"].start :]
    )

  first = block(state)
  np.testing.assert_array_equal(first["kick_velocity"], 0.0)
  assert first["since_kick"][0] == 1.0
  steps_per_memory = round(observations.KICK_MEMORY_S / env.dt)
  seen = []
  for i in range(steps_per_memory + 2):
    state = step(state, zero)
    seen.append(block(state))
    if i in (0, 10):
      # The capture point by hand: the whole duck's centre of mass plus its velocity over the
      # pendulum's frequency, minus the feet's midpoint, turned into the trunk's heading frame.
      d = state.data
      root = env.ids.root_body
      rot = np.asarray(d.xmat[root]).reshape(3, 3)
      yaw = math.atan2(rot[1, 0], rot[0, 0])
      com = np.asarray(d.subtree_com[root])
      feet = np.stack([np.asarray(env.ids.sensor(d, n)) for n in ("left_foot_pos", "right_foot_pos")])
      vel = np.asarray(env.ids.sensor(d, "global_linvel"))
      point = com[:2] + vel[:2] / math.sqrt(9.81 / (com[2] - feet[:, 2].min())) - feet[:, :2].mean(axis=0)
      heading = np.array([[math.cos(yaw), math.sin(yaw)], [-math.sin(yaw), math.cos(yaw)]])
      np.testing.assert_allclose(seen[-1]["capture_point"], heading @ point, atol=2e-4)
  kicked = seen[0]
  # Kicked at the first step, 0.2 m/s toward the trunk's back within 45 degrees.
  assert np.linalg.norm(kicked["kick_velocity"]) == pytest.approx(0.2, abs=1e-5)
  assert kicked["kick_velocity"][0] <= -0.2 * math.cos(math.pi / 4) + 1e-5
  assert kicked["since_kick"][0] == 0.0
  # A backward kick throws the capture point back by about v / omega (0.2 / 6.8 = 3 cm).
  assert kicked["capture_point"][0] < first["capture_point"][0] - 0.015
  assert not np.asarray(state.done)  # still up: the last block is this episode's
  # Time since the kick grows by one control step a step, and the kick is forgotten after the memory.
  assert seen[10]["since_kick"][0] == pytest.approx(10 * env.dt / observations.KICK_MEMORY_S, abs=1e-5)
  # The same kick, seen from the trunk's present heading (world frame kept, the trunk may have turned).
  assert np.linalg.norm(seen[10]["kick_velocity"]) == pytest.approx(0.2, abs=1e-5)
  assert seen[-1]["since_kick"][0] == 1.0
  np.testing.assert_array_equal(seen[-1]["kick_velocity"], 0.0)
