"""The duck learns, judged on the scorecard: a few minutes of PPO beat the untrained policy.

One short CLI training run of the standing task (randomization, sensor noise,
delays, pushes and random head commands on, as in every run). Its policy and
the same network with its initial weights (`export.py --untrained`) then play
`scorecard.look_around` (20 s of standing while the head jumps between random
poses) under the training pushes, on the same randomized models with the same
pushes. Measured on 2 cores (2026-11-30): the untrained policy survived 7.5 s
on average (21 of 24 episodes fell), the policy trained for 600k steps 13.1 s
(16 fell). A change that stops learning (a broken gradient, a reward that
ignores falls, an export of the wrong weights) leaves the two alike and fails.
"""

import json

import pytest
from helpers import run_cli

from playground import checkpoint_policy
from playground.common.runs import checkpoints
from playground.common.runs.tensorboard import read_scalars
from playground.open_duck_mini_v2.evaluation import scorecard

STEPS = 600_000
SEEDS = 24


@pytest.mark.slow
def test_a_briefly_trained_policy_survives_head_motion_and_pushes_that_topple_the_untrained_one(tmp_path):
  result = run_cli(
    "--env", "standing", "--preset", "quick", "--num_timesteps", STEPS, "--output_dir", tmp_path,
    "--exp_name", "learn", "--eval_every", 0, "--checkpoint_every", STEPS, "--score", "off",
    timeout=1500, fast_compile=False,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = tmp_path / "learn"
  scalars = read_scalars(run_dir)
  assert "episode/reward" in scalars and not any(tag.startswith("eval/") for tag in scalars)  # --eval_every 0
  trained = checkpoints.resolve(run_dir) / "policy.onnx"
  untrained, _ = checkpoint_policy.export_checkpoint(run_dir, tmp_path / "untrained.onnx", untrained_seed=0)
  env_config = json.loads((run_dir / "config.json").read_text())["env_config"]
  survival = {}
  for name, path in (("trained", trained), ("untrained", untrained)):
    card = scorecard.score(path, env_config, seeds=SEEDS, commands=[scorecard.look_around()], pushes=True)
    survival[name] = card["commands"]["look_around"]["survival_s"]
  assert survival["untrained"] < 11.0, f"head motion and pushes should topple the untrained policy: {survival}"
  assert survival["trained"] >= survival["untrained"] + 2.5, f"no learning: mean survival (s) {survival}"
