"""Left/right mirror symmetry: the maps, the duck's physics under them, and PPO batch augmentation."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from brax.training import types

from playground.common.tasks import symmetry
from playground.common.tasks.observation_layout import ObservationLayout
from playground.common.tasks.symmetry import AXIAL
from playground.common.tasks.symmetry import POLAR
from playground.common.tasks.symmetry import SignedPermutation
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import mirror as duck_mirror
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.tasks.joystick import Joystick
from playground.open_duck_mini_v2.tasks.joystick import default_config


@pytest.fixture(scope="module")
def duck_model():
  return robot_model.load_model("flat_terrain")


@pytest.fixture(scope="module")
def joints():
  return duck_mirror.joint_map(robot_model.load_model("flat_terrain"))


def test_signed_permutation_rejects_a_non_permutation_and_a_bad_sign():
  with pytest.raises(ValueError, match="permutation"):
    SignedPermutation((0, 0), (1.0, 1.0))
  with pytest.raises(ValueError, match="sign"):
    SignedPermutation((1, 0), (1.0, 0.5))
  p = SignedPermutation((2, 0, 1), (1.0, -1.0, 1.0))
  x = np.array([1.0, 2.0, 3.0])
  np.testing.assert_array_equal(p(x), [3.0, -1.0, 2.0])
  np.testing.assert_array_equal(p.matrix() @ x, p(x))
  np.testing.assert_array_equal(np.asarray(p(jp.asarray(x))), p(x))


@pytest.mark.parametrize(
  "history,dynamics,kick,actor",
  [(0, False, False, False), (0, True, False, False), (2, True, True, False), (0, False, True, True)],
)
def test_the_duck_mirror_is_an_involution_on_every_observation_and_the_action(history, dynamics, kick, actor):
  config = default_config()
  config.observation_history = history
  config.critic_dynamics = dynamics
  config.critic_kick = kick
  config.actor_kick = actor
  m = duck_mirror.policy_mirror(robot_model.load_model("flat_terrain"), config)
  assert m.observation["state"].size == observations.state_layout(history, actor).size
  assert m.observation["privileged_state"].size == observations.privileged_layout(history, dynamics, kick).size
  x = {k: np.random.default_rng(0).normal(size=(3, p.size)) for k, p in m.observation.items()}
  twice = m.observe(m.observe(x))
  for k in x:
    np.testing.assert_array_equal(twice[k], x[k])
    assert not np.allclose(m.observe(x)[k], x[k])
  a = np.random.default_rng(1).normal(size=(3, 14))
  np.testing.assert_array_equal(m.act(m.act(a)), a)


def test_the_joint_map_swaps_legs_and_flips_the_yaw_and_roll_joints_read_from_the_mjcf(joints):
  names = constants.ACTUATOR_NAMES
  for i, name in enumerate(names):
    assert names[joints.index[i]] == duck_mirror.partner(name)
  sign = dict(zip(names, joints.sign, strict=True))
  # A hip yaw or roll, or the head's yaw and roll, turn about an axis in the
  # plane of symmetry's normal direction: the mirror turns the other way.
  for name in ("left_hip_yaw", "left_hip_roll", "head_yaw", "head_roll", "right_hip_roll"):
    assert sign[name] == -1.0, name
  for name in ("neck_pitch", "head_pitch", "left_knee", "right_ankle"):
    assert sign[name] == 1.0, name


def test_the_home_pose_is_mirror_symmetric_within_a_hundredth_of_a_radian(duck_model, joints):
  # Absolute motor targets are mirrored with the joint map: that needs a symmetric home pose.
  home = robot_model.RobotIndices.from_model(duck_model).home_ctrl
  np.testing.assert_allclose(joints(home), home, atol=0.015)


def _mirror_state(ids, joints, qpos, qvel):
  q, v = qpos.copy(), qvel.copy()
  q[0:3] = POLAR(qpos[0:3])
  w, x, y, z = qpos[3:7]
  q[3:7] = [w, -x, y, -z]  # the trunk's orientation reflected through x-z
  q[ids.act_qpos] = joints(qpos[ids.act_qpos])
  v[0:3] = POLAR(qvel[0:3])
  v[3:6] = AXIAL(qvel[3:6])  # a free joint's angular velocity is in the body frame
  v[ids.act_dof] = joints(qvel[ids.act_dof])
  return q, v


def _mirror_error(model, joints, steps=25, seed=0):
  """Largest |mirror(state of run A) - state of run B| after `steps` physics steps, where
  run B starts at the mirror image of run A's state and gets the mirrored servo targets."""
  ids = robot_model.RobotIndices.from_model(model)
  rng = np.random.default_rng(seed)
  qpos = ids.home_qpos.copy()
  qpos[1] = 0.0
  # Every joint clearly away from its home angle, so that a wrong sign shows.
  qpos[ids.act_qpos] += rng.choice([-1.0, 1.0], 14) * rng.uniform(0.1, 0.15, 14)
  qvel = np.zeros(model.nv)
  qvel[:6] = rng.uniform(-0.3, 0.3, 6)
  ctrl = ids.home_ctrl + rng.choice([-1.0, 1.0], 14) * rng.uniform(0.15, 0.3, 14)
  a, b = mujoco.MjData(model), mujoco.MjData(model)
  a.qpos[:], a.qvel[:] = qpos, qvel
  b.qpos[:], b.qvel[:] = _mirror_state(ids, joints, qpos, qvel)
  a.ctrl[:], b.ctrl[:] = ctrl, joints(ctrl)
  for _ in range(steps):
    mujoco.mj_step(model, a)
    mujoco.mj_step(model, b)
  q, _ = _mirror_state(ids, joints, a.qpos, a.qvel)
  adr, dim = ids.sensors[constants.GYRO_SENSOR]
  gyro_err = np.abs(AXIAL(a.sensordata[adr : adr + dim]) - b.sensordata[adr : adr + dim]).max()
  adr, dim = ids.sensors[constants.ACCELEROMETER_SENSOR]
  acc_err = np.abs(POLAR(a.sensordata[adr : adr + dim]) - b.sensordata[adr : adr + dim]).max()
  return np.abs(q - b.qpos).max(), gyro_err, acc_err


def test_mirrored_servo_targets_from_a_mirrored_state_give_the_mirrored_motion(duck_model, joints):
  # Real MuJoCo physics, 50 ms with the feet on the floor. The model is symmetric
  # to the precision of its CAD numbers, so the two runs agree closely but not exactly.
  qpos_err, gyro_err, acc_err = _mirror_error(duck_model, joints)
  assert qpos_err < 2e-3, qpos_err
  assert gyro_err < 0.05, gyro_err  # rad/s (the motion's own gyro reaches ~1 rad/s)
  assert acc_err < 0.5, acc_err  # m/s^2
  # Any one wrong joint sign shows up as a wrong motion: 3x the error above in
  # the joints or in the trunk's rotation.
  for i, name in enumerate(constants.ACTUATOR_NAMES):
    sign = list(joints.sign)
    sign[i] = -sign[i]
    wrong_qpos, wrong_gyro, _ = _mirror_error(duck_model, SignedPermutation(joints.index, tuple(sign)))
    assert wrong_qpos > 3 * qpos_err or wrong_gyro > 3 * gyro_err, (name, wrong_qpos, wrong_gyro)


def test_a_model_that_is_not_left_right_symmetric_is_refused():
  xml = """
  <mujoco><worldbody><body name="trunk"><freejoint/><geom size="0.05"/>
    <body name="l" pos="0 0.05 0"><joint name="left_hip" axis="0 1 0"/><geom size="0.01"/></body>
    <body name="r" pos="0 -0.05 0"><joint name="right_hip" axis="1 0 0"/><geom size="0.01"/></body>
  </body></worldbody></mujoco>"""
  model = mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(ValueError, match="not the mirror"):
    symmetry.joint_mirror(model, ("left_hip", "right_hip"), duck_mirror.partner)
  with pytest.raises(ValueError, match="no mirror partner"):
    symmetry.joint_mirror(model, ("left_hip",), duck_mirror.partner)


def test_every_observation_block_needs_a_declared_mirror(joints):
  layout = observations.state_layout(0).extend(("base_height_estimate", 1))
  with pytest.raises(ValueError, match="base_height_estimate"):
    duck_mirror.layout_map(layout, duck_mirror.block_maps(joints))
  with pytest.raises(ValueError, match="whole number"):
    duck_mirror.layout_map(ObservationLayout((("gyro", 4),)), duck_mirror.block_maps(joints))


def test_the_reference_gait_is_its_own_mirror_half_a_period_later():
  # The mirror shifts the gait phase by pi (cos and sin change sign): the
  # feed-forward of the mirrored command half a period later must be the
  # mirror image of the feed-forward, or augmented samples teach a wrong gait.
  config = default_config()
  config.reference.feedforward = True
  feedforward = Joystick(config=config).feedforward.from_obs_fn()
  m = duck_mirror.policy_mirror(robot_model.load_model("flat_terrain"), config)
  slices = observations.state_layout(0).slices
  rng = np.random.default_rng(0)
  obs = np.zeros((256, 101), np.float32)
  obs[:, slices["command"].start : slices["command"].start + 3] = rng.uniform(
    [-0.15, -0.2, -1], [0.15, 0.2, 1], (256, 3)
  )
  phase = rng.uniform(0, 2 * np.pi, 256)
  obs[:, slices["phase"]] = np.stack([np.cos(phase), np.sin(phase)], 1)
  offsets = np.asarray(feedforward(jp.asarray(obs)))
  mirrored = np.asarray(feedforward(jp.asarray(m.observe({"state": obs})["state"])))
  err = np.abs(mirrored - m.act(offsets))
  # Action units (x 0.25 rad); the largest offsets are ~2. The home pose's own
  # asymmetry (up to 0.012 rad = 0.05 units) is most of what remains, and at
  # the corners of the grid a knee held at its limit: half a period is 13.5 of
  # the 27 frames, and the phase interpolation rounds the kink by up to 0.04
  # rad (0.16 units). A knee flipped backwards on one side costs ~7 units.
  assert err.mean() < 0.01 and err.max() < 0.2, (err.mean(), err.max())
  # Without the half-period shift the same check fails by far.
  unshifted = obs.copy()
  unshifted[:, slices["command"]] = m.observation["state"](obs)[:, slices["command"]]
  err = np.abs(np.asarray(feedforward(jp.asarray(unshifted))) - m.act(offsets))
  assert err.mean() > 0.1, err.mean()


def test_augment_appends_the_mirror_image_of_every_trajectory_with_the_collected_log_probs():
  m = symmetry.Mirror(
    observation={"state": SignedPermutation((1, 0, 2), (1.0, 1.0, -1.0))},
    action=SignedPermutation((1, 0), (-1.0, 1.0)),
  )
  rng = np.random.default_rng(0)
  b, t = 4, 5
  data = types.Transition(
    observation={"state": jp.asarray(rng.normal(size=(b, t, 3)))},
    action=jp.asarray(rng.normal(size=(b, t, 2))),
    reward=jp.asarray(rng.normal(size=(b, t))),
    discount=jp.ones((b, t)),
    next_observation={"state": jp.asarray(rng.normal(size=(b, t, 3)))},
    extras={
      "policy_extras": {
        "raw_action": jp.asarray(rng.normal(size=(b, t, 2))),
        "log_prob": jp.asarray(rng.normal(size=(b, t))),
      },
      "state_extras": {"truncation": jp.zeros((b, t))},
    },
  )
  out = symmetry.augment(data, m)
  assert out.reward.shape == (2 * b, t)
  np.testing.assert_array_equal(out.observation["state"][:b], data.observation["state"])
  np.testing.assert_array_equal(out.observation["state"][b:], m.observe(data.observation)["state"])
  np.testing.assert_array_equal(out.next_observation["state"][b:], m.observe(data.next_observation)["state"])
  np.testing.assert_array_equal(out.action[b:], m.act(data.action))
  np.testing.assert_array_equal(
    out.extras["policy_extras"]["raw_action"][b:], m.act(data.extras["policy_extras"]["raw_action"])
  )
  for x in (
    out.reward,
    out.discount,
    out.extras["policy_extras"]["log_prob"],
    out.extras["state_extras"]["truncation"],
  ):
    np.testing.assert_array_equal(x[b:], x[:b])


def test_mirrored_samples_carry_the_mirror_image_of_the_behaviour_distribution():
  """A mirrored sample's behaviour distribution is the original's mirror image: under it the
  mirrored raw action has exactly the stored log-probability, and Brax's `kl_mean` of an unchanged
  mirror-symmetric policy is zero on the whole augmented batch. Kept unmirrored (as before
  2026-12-07) the metric read 1-13 on every run with the mirror on."""
  from brax.training import distribution

  act = SignedPermutation((2, 1, 0), (-1.0, 1.0, -1.0))  # a mirror is its own inverse
  m = symmetry.Mirror(observation={"state": act}, action=act)
  dist = distribution.NormalTanhDistribution(event_size=3)
  rng = np.random.default_rng(1)
  b, t = 4, 5
  # A mirror-symmetric linear policy: loc = W o with act(W o) = W obs_mirror(o); scales mirror-unsigned.
  w = np.diag([0.7, -0.4, 0.7]) + np.array([[0.0, 0.2, 0.3], [0.1, 0.0, -0.1], [-0.3, -0.2, 0.0]])
  w = 0.5 * (w + act.matrix() @ w @ act.matrix().T)
  raw_scale = np.array([0.3, -0.5, 0.3])

  def logits(obs):
    return jp.concatenate([jp.asarray(obs @ w.T), jp.broadcast_to(jp.asarray(raw_scale), obs.shape[:-1] + (3,))], -1)

  obs = rng.normal(size=(b, t, 3))
  params = logits(obs)
  raw = dist.sample_no_postprocessing(params, jax.random.PRNGKey(0))
  data = types.Transition(
    observation={"state": jp.asarray(obs)},
    action=dist.postprocess(raw),
    reward=jp.zeros((b, t)),
    discount=jp.ones((b, t)),
    next_observation={"state": jp.asarray(obs)},
    extras={
      "policy_extras": {"raw_action": raw, "log_prob": dist.log_prob(params, raw), "distribution_params": params},
      "state_extras": {"truncation": jp.zeros((b, t))},
    },
  )
  out = symmetry.augment(data, m)
  extras = out.extras["policy_extras"]
  np.testing.assert_allclose(
    dist.log_prob(extras["distribution_params"][b:], extras["raw_action"][b:]), extras["log_prob"][b:], atol=1e-5
  )
  new = dist.create_dist(logits(np.asarray(out.observation["state"])))
  kl = new.kl_divergence(dist.create_dist(extras["distribution_params"]))
  np.testing.assert_allclose(kl, 0.0, atol=1e-4)  # Brax adds 1e-5 inside its log
  # The unmirrored parameters (the old augmentation) read a large KL for the same unchanged policy.
  stale = new.kl_divergence(dist.create_dist(jp.concatenate([params, params])))
  assert float(jp.mean(stale[b:])) > 0.1, float(jp.mean(stale[b:]))
  with pytest.raises(ValueError, match="distribution parameters"):
    symmetry.mirror_distribution_params(params[..., :4], act)


# Training through the command line with the augmentation on: tests/test_second_robot.py (the test
# biped's mirror, its checkpoint and its exported file) and the `cpu` preset, which turns it on.


def test_the_stance_search_holds_symmetric_postures_and_writes_them_as_a_statue_file(joints, tmp_path):
  """`benchmarks.stance_search`: every candidate is its own mirror image (the right leg mirrors
  the left, the head at home), and the statue file it writes (`--write_policy`) outputs that posture
  whatever it observes, with the duck's metadata."""
  import onnxruntime as ort

  from benchmarks import stance_search
  from benchmarks import statue
  from playground.open_duck_mini_v2.evaluation import policy_io

  names = constants.ACTUATOR_NAMES
  left = np.array([names.index(n) for n in constants.LEG_JOINT_NAMES if n.startswith("left_")])
  offsets = np.random.default_rng(0).uniform(-0.9, 0.9, (6, len(left))).astype(np.float32)
  actions = stance_search.symmetric_actions(offsets, left, np.array(joints.index), np.array(joints.sign), len(names))
  np.testing.assert_array_equal(actions[:, left], offsets)
  np.testing.assert_allclose(np.asarray(joints(jp.asarray(actions))), actions, atol=0)
  head = [names.index(n) for n in constants.HEAD_JOINT_NAMES]
  assert not actions[:, head].any() and np.abs(actions).min(axis=0)[[i for i in range(14) if i not in head]].all()

  path = tmp_path / "stance.onnx"
  statue.write_statue(path, np.arctanh(actions[0]))
  session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
  size = observations.STATE_LAYOUT.size
  observed = np.random.default_rng(1).normal(size=(3, size)).astype(np.float32)
  out = session.run(None, {session.get_inputs()[0].name: observed})[0]
  np.testing.assert_allclose(out, np.tile(actions[0], (3, 1)), atol=1e-5)
  assert policy_io.read_metadata(path)["env"] == "joystick"
