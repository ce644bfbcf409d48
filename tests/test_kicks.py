"""Training kicks: their direction by heading sector, perturbed starts and the adaptive strength curriculum."""

import math

import jax
import jax.numpy as jp
import numpy as np
import pytest

from playground.common import configs
from playground.common.tasks import kicks
from playground.common.train import vec_env
from playground.open_duck_mini_v2.model import observations
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
  config.critic_kick = True  # the critic's kick block, checked on the same steps (one compilation)
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

  levels, done, since, kicked, strength, blocks = [], [], [], [], [], [kick_block(reset_state.env)]
  for i in range(20):
    state, result = step(state)
    blocks.append(kick_block(state.env))
    if i == 4:
      assert_capture_point_by_hand(env, state.env, blocks[-1], 1)
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

  # The critic's kick block (`critic_kick`), env 1: nothing before its first kick; the kick, of the
  # strength drawn, toward the trunk's back within 45 degrees, at once; then the time since it.
  np.testing.assert_array_equal(blocks[0]["kick_velocity"][1], 0.0)
  assert blocks[0]["since_kick"][1, 0] == 1.0
  kick = blocks[1]["kick_velocity"][1]
  assert 0.075 - 1e-6 <= np.linalg.norm(kick) <= 0.1 + 1e-6 and kick[0] <= -np.linalg.norm(kick) * math.cos(math.pi / 4)
  assert [blocks[k]["since_kick"][1, 0] for k in (1, 2, 6)] == pytest.approx([0.0, env.dt, 5 * env.dt])
  # A backward kick moves the capture point back by about v / omega (0.075 / 6.8 = 1.1 cm at least).
  assert blocks[1]["capture_point"][1, 0] < blocks[0]["capture_point"][1, 0] - 0.008


def kick_block(env_state):
  """The critic's `KICK_FIELDS` of a batched env state, by name."""
  layout = observations.privileged_layout(0, kick=True)
  tail = np.asarray(env_state.obs["privileged_state"])[:, layout.slices["kick_velocity"].start :]
  assert env_state.obs["state"].shape[-1] == 101  # the actor's view does not change
  return observations.ObservationLayout(observations.KICK_FIELDS).split(tail)


def assert_capture_point_by_hand(env, env_state, block, i):
  """The capture point of env `i` from MuJoCo's own fields: the whole duck's centre of mass plus its
  velocity over the pendulum's frequency, minus the feet's midpoint, in the trunk's heading frame."""
  d = jax.tree_util.tree_map(lambda x: np.asarray(x)[i], env_state.data)
  root = env.ids.root_body
  rot = d.xmat[root].reshape(3, 3)
  yaw = math.atan2(rot[1, 0], rot[0, 0])
  com = d.subtree_com[root]
  feet = np.stack([np.asarray(env.ids.sensor(d, n)) for n in ("left_foot_pos", "right_foot_pos")])
  vel = np.asarray(env.ids.sensor(d, "global_linvel"))
  point = com[:2] + vel[:2] / math.sqrt(9.81 / (com[2] - feet[:, 2].min())) - feet[:, :2].mean(axis=0)
  heading = np.array([[math.cos(yaw), math.sin(yaw)], [-math.sin(yaw), math.cos(yaw)]])
  np.testing.assert_allclose(block["capture_point"][i], heading @ point, atol=2e-4)


def test_the_critics_kick_block_forgets_a_kick_after_its_memory():
  """`observations.kick_state`: the kick shows, turned into the heading frame, until `KICK_MEMORY_S`."""
  vectors = ("gyro", "accelerometer", "gravity", "local_linvel", "global_linvel", "global_angvel", "base_pos")
  fields = observations.Readings.__dataclass_fields__
  readings = observations.Readings(**{f: jp.zeros(3) if f in vectors else jp.zeros(14) for f in fields})
  readings = readings.replace(
    com_pos=jp.array([0.0, 0.0, 0.21]),
    feet_pos=jp.array([[0.0, 0.05, 0.0], [0.0, -0.05, 0.0]]),
    global_linvel=jp.array([-0.34, 0.0, 0.0]),
  )
  kick = jp.array([-0.3, 0.0])
  facing_left = readings.replace(heading=jp.float32(0.5 * math.pi))
  fresh = np.asarray(observations.kick_state(kick, jp.float32(0.25), facing_left))
  # Facing +y, a kick toward -x comes from the trunk's right: +y in the heading frame.
  np.testing.assert_allclose(fresh[:3], [0.0, 0.3, 0.25], atol=1e-6)
  # Capture point: -0.34 / sqrt(9.81 / 0.21) = -5.0 cm in x, the trunk's right, heading frame +y.
  np.testing.assert_allclose(fresh[3:], [0.0, 0.34 / math.sqrt(9.81 / 0.21)], atol=1e-6)
  old = np.asarray(observations.kick_state(kick, jp.float32(observations.KICK_MEMORY_S), facing_left))
  np.testing.assert_allclose(old[:3], [0.0, 0.0, 1.0])


def test_kick_signal_shows_a_kick_in_the_files_normalized_inputs():
  """`benchmarks.kick_signal` on the trained walker fixture: a 0.5 m/s kick straight back moves
  the trunk's gyro and accelerometer by a sizeable part of their training spread within two steps,
  and the same run with no kick moves them by a third of that at most; the command input is unchanged."""
  from pathlib import Path

  from benchmarks import kick_signal
  from benchmarks.common import KICK_ONLY_OVERRIDES
  from benchmarks.posture_reward import posture_env
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import observations

  path = Path(__file__).parent / "fixtures" / "walker" / "policy.onnx"
  mean, std = kick_signal.normalizer(path)
  env, cfg = posture_env([*KICK_ONLY_OVERRIDES])
  fields = observations.state_layout(int(cfg.env_config.get("observation_history", 0))).fields
  policy = policy_io.onnx_policy(path, batched=True)
  got = {
    kick: kick_signal.signal(env, policy, mean, std, fields, [180.0], kick=kick, envs=2, settle_steps=40)["180"]
    for kick in (0.5, 0.0)
  }
  assert set(got[0.5]) == {name for name, _ in fields}
  for block in ("gyro", "accelerometer"):
    kicked = max(got[0.5][block]["max_abs_z_by_step"][:3])
    still = max(got[0.0][block]["max_abs_z_by_step"][:3])
    assert kicked > 0.3 and kicked > 3 * still, (block, kicked, still)  # the walker sways a little at rest
  assert got[0.5]["command"] == got[0.0]["command"]  # the kick is not a command


def test_kick_detect_labels_each_kick_where_the_inputs_first_show_it():
  """`benchmarks.kick_detect` on the trained walker fixture, randomized, noisy and delayed: the
  accelerometer jumps at the observations labelled 0-1 steps after a kick, not at the one before,
  and a detector trained on half the episodes finds the kicks of the other half above chance."""
  from pathlib import Path

  from benchmarks import kick_detect

  path = Path(__file__).parent / "fixtures" / "walker" / "policy.onnx"
  data = kick_detect.play_kicked(
    path, [0.0], episodes=6, duration=7.0, kick=0.5, first=1.5, interval=(2.0, 2.5), runtime=False, seed=0
  )["0"]
  z, since = data["z"], data["since"]
  accel = np.abs(z[..., observations.STATE_LAYOUT.slices["accelerometer"]]).max(-1)
  shown = np.argwhere(since == 0)
  assert len(shown) >= 6, len(shown)
  at = np.array([max(accel[e, t], accel[e, t + 1]) for e, t in shown])
  before = np.array([accel[e, t - 1] for e, t in shown])
  quiet = accel[(since < 0) & (np.arange(z.shape[1]) >= 50)]
  assert np.median(at) > 3 * np.median(quiet), (np.median(at), np.median(quiet))
  assert np.median(before) < 2 * np.median(quiet), (np.median(before), np.median(quiet))
  scored = kick_detect.evaluate(data, frames=1, positive=3, false_alarm=0.05, dt=0.02)
  assert scored["kicks_scored"] >= 3
  assert scored["mlp"]["auc"] > 0.7, scored
  assert max(scored["mlp"]["found_by_step"][:3]) > 0.5, scored


def test_kick_detect_stacks_frames_newest_first_and_ranks_scores():
  from benchmarks import kick_detect

  z = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
  stacked = kick_detect.stack_frames(z, 3)
  assert stacked.shape == (2, 4, 9)
  np.testing.assert_array_equal(stacked[1, 3], np.concatenate([z[1, 3], z[1, 2], z[1, 1]]))
  np.testing.assert_array_equal(stacked[0, 0], np.concatenate([z[0, 0], z[0, 0], z[0, 0]]))
  assert kick_detect.auc(np.array([2.0, 3.0]), np.array([0.0, 1.0])) == 1.0
  assert kick_detect.auc(np.array([0.0, 1.0]), np.array([2.0, 3.0])) == 0.0
  assert kick_detect.auc(np.array([1.0, 1.0]), np.array([1.0, 1.0])) == 0.5


def test_a_kick_injected_by_checkpoint_kicks_is_the_envs_own_kick():
  """`benchmarks.checkpoint_kicks` kicks through the env's own kick state, so that a policy that
  observes the kick (`actor_kick`) sees it: after one step, a kick it injects leaves the same trunk
  velocity, actor and critic observations and kick bookkeeping as the env's own kick of that velocity."""
  from benchmarks.checkpoint_kicks import inject_kick

  config = joystick.default_config()
  config.critic_kick = True
  config.actor_kick = True
  config.push_config.interval_range = (1000.0, 1000.0)  # the env's own kick fires only when told below
  config.push_config.magnitude_range = (0.4, 0.4)
  env = joystick.Joystick(config=config)
  reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
  start = reset(jax.random.split(jax.random.PRNGKey(4), 1))
  zeros = jp.zeros((1, env.action_size))
  own = step(start.replace(info={**start.info, "push_timer": jp.ones(1, jp.int32)}), zeros)
  kick = np.asarray(own.info["last_kick"][0])
  assert np.linalg.norm(kick) == pytest.approx(0.4, abs=1e-6)
  heading = float(kicks.heading(start.data.qpos[0, 3:7]))
  angle = math.atan2(kick[1], kick[0]) - heading
  injected = step(inject_kick(start, jp.array([True]), jp.array([angle]), jp.array([0.4])), zeros)
  for got, want in (
    (injected.data.qvel, own.data.qvel),
    (injected.obs["state"], own.obs["state"]),
    (injected.obs["privileged_state"], own.obs["privileged_state"]),
    (injected.info["last_kick"], own.info["last_kick"]),
  ):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
  assert int(injected.info["since_push"][0]) == int(own.info["since_push"][0]) == 0
  # The actor's kick block (its inputs after the runtime's 101) shows it at once, in the heading frame.
  block = np.asarray(injected.obs["state"][0, 101:104])
  assert np.linalg.norm(block[:2]) == pytest.approx(0.4, abs=1e-5) and block[2] == 0.0
  # Where no kick is due, nothing changes.
  idle = inject_kick(start, jp.array([False]), jp.array([angle]), jp.array([0.4]))
  for a, b in zip(jax.tree_util.tree_leaves(idle), jax.tree_util.tree_leaves(start), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_checkpoint_kicks_grid_kicks_each_cell_at_spread_phases_and_counts_falls_after_the_kick_only():
  from benchmarks.checkpoint_kicks import COMMANDS
  from benchmarks.checkpoint_kicks import kick_protocol
  from benchmarks.checkpoint_kicks import summarize

  grid = kick_protocol(seeds=2, directions=4, magnitudes=[0.5, 0.35], kick_at=2.0, period=0.5, dt=0.02)
  n = len(COMMANDS) * 4 * 2 * 2
  assert all(len(v) == n for v in grid.values())
  assert grid["command"][: n // 2].tolist() == [0] * (n // 2)  # command-major
  np.testing.assert_allclose(np.unique(grid["kick_s"]), [2.0, 2.25])  # seed s at s / seeds of a period
  assert np.unique(grid["kick_step"]).tolist() == [100, 112]
  # Every fall 0.5 s after its kick, but only standing kicks straight back (180 deg) at 0.5 m/s count;
  # one walking episode falls before its kick; the rest never fall (fell_at == steps).
  steps = 400
  fell_at = np.full(n, steps)
  back = (grid["command"] == 0) & (grid["angle_deg"] == 180.0) & (grid["strength"] == 0.5)
  fell_at[back] = grid["kick_step"][back] + 24
  early = np.flatnonzero(grid["command"] == 1)[0]
  fell_at[early] = 50
  late = np.flatnonzero((grid["command"] == 1) & ~np.isin(np.arange(n), [early]))[0]
  fell_at[late] = grid["kick_step"][late] + 150  # 3 s after: outside --after 3 s (150 steps)
  out = summarize(grid, fell_at, after_steps=150, period=0.5, dt=0.02)
  assert out["falls_before_kick"] == 1
  stand, walk = out["commands"]["stand"], out["commands"]["forward_0.1"]
  assert stand["fall_share_by_strength"] == {"0.35": 0.0, "0.5": 0.25}  # 2 of 8 episodes at 0.5 m/s
  assert stand["fall_share_by_strength_and_direction_deg"]["0.5"] == {"0": 0.0, "90": 0.0, "180": 1.0, "270": 0.0}
  assert stand["mean_s_kick_to_fall"] == pytest.approx(0.5)
  assert walk["fall_share_by_strength"] == {"0.35": 0.0, "0.5": 0.0} and walk["mean_s_kick_to_fall"] is None
