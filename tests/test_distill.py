"""`benchmarks.distill`: a teacher that sees the kick, distilled into a file on the runtime's 101 inputs."""

from __future__ import annotations

import numpy as np
import pytest


def test_kick_falls_counts_each_kick_once_and_a_fall_within_its_second():
  from benchmarks.distill import kick_falls

  steps, memory = 12, 4
  since = np.ones((steps, 3))
  fell = np.zeros((steps, 3))
  # env 0 (teacher): kicked at steps 1 and 6, falls at 8 (within the second kick's 4 steps only)
  since[1:5, 0] = [0.0, 0.25, 0.5, 0.75]
  since[6:10, 0] = [0.0, 0.25, 0.5, 0.75]
  fell[8, 0] = 1.0
  # env 1 (student): kicked at step 2, up; env 2 (student): kicked at 10, too late to judge
  since[2:6, 1] = [0.0, 0.25, 0.5, 0.75]
  since[10:, 2] = [0.0, 0.25]
  got = kick_falls(since, fell, np.array([True, False, False]), memory)
  assert got == {"teacher_kicks": 2, "teacher_fall_share": 0.5, "student_kicks": 1, "student_fall_share": 0.0}


@pytest.mark.slow
def test_a_teacher_that_sees_the_kick_is_distilled_into_a_file_the_players_take(tmp_path):
  """An untrained `actor_kick` teacher: the student starts as the teacher without the kick's
  inputs; a fresh student's gap to the teacher's actions, on states it has not yet been fitted to,
  shrinks over DAgger iterations; and the exported file
  observes the runtime's 101 floats, passes the players' contract check and computes the student."""
  import jax
  from brax.training.acme import running_statistics

  from benchmarks import distill
  from playground.common import configs
  from playground.common.train import ppo
  from playground.open_duck_mini_v2 import presets
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.tasks import joystick

  env_cfg = joystick.default_config()
  env_cfg.critic_kick = True
  env_cfg.actor_kick = True
  ppo_cfg = presets.ppo_config("smoke")
  shapes = {"state": (106,), "privileged_state": (observations.privileged_layout(0, False, True).size,)}
  network = ppo.network_factory(ppo_cfg, True)(shapes, 14, preprocess_observations_fn=running_statistics.normalize)
  params = network.policy_network.init(jax.random.PRNGKey(3))
  normalizer = running_statistics.init_state({k: jax.ShapeDtypeStruct(v, np.float32) for k, v in shapes.items()})
  record = {"env": "joystick", "task": "flat_terrain", "robot": "open_duck_mini_v2"}
  teacher = distill.make_teacher(record, env_cfg, ppo_cfg, 0, shapes, normalizer, params)

  with pytest.raises(ValueError, match="actor_kick"):
    distill.make_teacher(record, joystick.default_config(), ppo_cfg, 0, shapes, normalizer, params)

  start = distill.student_of(teacher)[2]["params"]["hidden_0"]["kernel"]
  np.testing.assert_array_equal(start, np.asarray(params["params"]["hidden_0"]["kernel"])[:101])
  # A fresh student, so that there is something to learn besides the kick.
  student = distill.distill(teacher, iterations=3, envs=4, steps=25, buffer=10_000, epochs=60, seed=0, fresh=True)
  gaps = [h["gap_fresh"] for h in student["history"]]  # on states the student has not been fitted to
  assert gaps[-1] < 0.5 * gaps[0], gaps

  out = tmp_path / "student"
  gap = distill.export_student(teacher, student, out)
  assert gap < 1e-4
  metadata = policy_io.read_metadata(out / "policy.onnx")
  assert metadata["observation_size"] == 101 and "diagnostic" not in metadata
  env = joystick.Joystick(config=configs.apply_overrides(env_cfg, [("actor_kick", "false")]))
  policy_io.check_contract(metadata, env.ids.home_ctrl, float(env_cfg.ctrl_dt))  # no ScoreError
  _, env_config, _ = policy_io.resolve_policy(out / "policy.onnx")
  assert env_config["actor_kick"] is False and env_config["critic_kick"] is True

  # The student as a checkpoint: its policy and normalizer on the 101 inputs, the teacher's critic;
  # `checkpoint_policy` (the exporter, `checkpoint_kicks`) loads it as a run of the runtime's inputs.
  from playground import checkpoint_policy
  from playground.common.runs import checkpoints

  value = network.value_network.init(jax.random.PRNGKey(4))
  compat = {"observation_shapes": {k: list(v) for k, v in shapes.items()}, "action_size": 14}
  teacher_dir = checkpoints.save(
    tmp_path / "teacher",
    0,
    {"training_state": {"params": {"policy": params, "value": value}}},
    {"compat": compat, "step": 0},
  )
  step_dir = distill.save_student_checkpoint(teacher_dir, teacher, student, out)
  loaded = checkpoint_policy.load_policy(out)
  assert loaded.step_dir == step_dir and loaded.obs_shapes["state"] == (101,)
  assert loaded.env_config.actor_kick is False and loaded.normalizer.mean["state"].shape == (101,)
  for got, want in zip(jax.tree_util.tree_leaves(loaded.policy_params), jax.tree_util.tree_leaves(student["params"])):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  saved_value = checkpoints.read_parts(step_dir, ["training_state/params/value"])["training_state/params/value"]
  for got, want in zip(jax.tree_util.tree_leaves(saved_value), jax.tree_util.tree_leaves(value)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
