"""A second robot through the front door: a small biped defined entirely under `tests/biped/`.

Its MJCF, task, commands, observation layout, mirror, randomization targets,
PPO settings and policy contract use only the extension points the library
documents (docs/adding-a-robot.md): nothing in `playground/` names it. It
trains through the command line (with the mirror augmentation), and every
checkpoint's ONNX file is exported from its contract and checked (parity with
JAX on random and probe observations, finite actions) before it is written,
then scored in the run by the generic player and scorecard from the biped's
`score_suite` (playground/common/evaluation/; tests/test_generic_player.py).
"""

import json
import math

import numpy as np
import pytest
from helpers import REPO_ROOT
from helpers import run_cli

from playground.common.export import onnx_graph
from playground.common.runs import checkpoints
from playground.common.runs.tensorboard import read_scalars

BIPED = REPO_ROOT / "tests" / "biped" / "runner.py"


def test_nothing_in_the_library_names_the_test_biped():
  named = [p for p in (REPO_ROOT / "playground").rglob("*.py") if "biped" in p.read_text().lower()]
  assert not named, named


def test_the_test_biped_refuses_a_bad_flag_in_one_line(tmp_path):
  result = run_cli("--env", "run", "--output_dir", tmp_path, script=BIPED, timeout=120)
  assert result.returncode == 2 and "Traceback" not in result.stderr
  assert "walk" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
  assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_second_robot_trains_mirrored_and_exports_a_checked_policy(tmp_path):
  result = run_cli(
    "--preset", "smoke", "--output_dir", tmp_path, "--exp_name", "biped", "--eval_every", 0,
    "--set", "ppo.symmetry_augmentation=True", script=BIPED, timeout=900,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = tmp_path / "biped"
  scalars = read_scalars(run_dir)
  assert "episode/reward" in scalars and "train/policy_loss" in scalars
  policy = checkpoints.resolve(run_dir) / "policy.onnx"
  meta = onnx_graph.read_metadata(policy)
  assert meta["robot"] == "test_biped" and meta["env"] == "walk" and meta["training_step"] == 1280
  assert meta["action_names"] == ["left_hip", "left_knee", "right_hip", "right_knee"]
  layout = {block["name"]: block for block in meta["observation_layout"]}
  size = sum(block["size"] for block in meta["observation_layout"])
  command = layout["command"]["start"]
  obs = np.zeros((3, size), np.float32)
  obs[:, layout["upvector"]["start"] + 2] = 1.0
  obs[1, command], obs[2, command] = 0.3, 5.0  # the top of the trained range, and far beyond it
  actions = onnx_graph.run_onnx(policy, obs)
  assert actions.shape == (3, 4) and np.all(np.isfinite(actions))
  np.testing.assert_array_equal(actions[1], actions[2])  # the file clamps the command to its trained range
  # Scored in the run by the generic player and scorecard (the biped's `score_suite`), best policy kept.
  card = json.loads((policy.parent / "score.json").read_text())
  assert card["source"] == "mjx" and card["training_step"] == 1280 and card["seeds"] == 2
  assert set(card["commands"]) == {"stand", "forward_0.1", "forward_0.2", "push_forward_0.1_0.3"}
  assert card["headline"]["episodes"] == 6 and card["headline"]["push_episodes"] == 2
  assert 0 <= card["headline"]["falls"] <= 6 and math.isfinite(card["headline"]["tracking_error_mps"])
  assert (policy.parent / "score.png").stat().st_size > 0
  assert (run_dir / "best_policy.onnx").read_bytes() == policy.read_bytes()
  assert json.loads((run_dir / "best_score.json").read_text())["checkpoint"] == policy.parent.name
  assert "score/falls" in scalars and "score/push_fall_share" in scalars
