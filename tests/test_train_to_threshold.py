"""Train-to-threshold: PPO learns MuJoCo Playground's CartpoleBalance.

Budget: the cartpole `quick` preset, 3M env steps at 128 envs (about a
minute on a 2-core CPU, compile included). Threshold: an eval return of 900
out of a possible 1000. The untrained policy scores about 260 (measured: the
pole starts upright and falls within a few hundred steps); a return above 900
needs the pole upright and the cart centred for 90% of a 1000-step episode,
which no untrained or random policy does, so the test cannot pass by chance.
"""

import pytest
from helpers import CARTPOLE
from helpers import run_cli

from playground.common.runs.tensorboard import read_scalars


@pytest.mark.slow
def test_cartpole_balance_reaches_a_learned_return(tmp_path):
  # The CLI as users run it, compiled for speed of execution (3M steps: not compile-bound).
  result = run_cli(
    "--env", "balance", "--preset", "quick", "--output_dir", tmp_path, "--exp_name", "cartpole",
    script=CARTPOLE, fast_compile=False, timeout=1200,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  evals = read_scalars(tmp_path / "cartpole")["eval/episode_reward"]
  steps = [s for s, _ in evals]
  assert steps[0] == 0 and steps[-1] >= 3_000_000
  first = evals[0][1]
  best = max(v for _, v in evals)
  assert first < 400, f"the untrained policy should fail, got {first}"
  assert best > 900, f"PPO did not learn CartpoleBalance: eval returns {evals}"
