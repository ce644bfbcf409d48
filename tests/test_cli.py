"""The training command line, run as real subprocesses."""

import json
import math

import orbax.checkpoint as ocp
import pytest
from helpers import run_cli

from playground.common import distributed
from playground.common.tensorboard_reader import read_scalars


def test_smoke_run_logs_tensorboard_scalars(smoke_run):
  run_dir, _ = smoke_run
  scalars = read_scalars(run_dir)
  for tag in (
    "eval/episode_reward",
    "eval/episode_reward_std",
    "eval/episode_length",
    "episode/reward",
    "episode/length",
    "episode/reward/alive",
    "episode/reward/tracking_lin_vel",
    "train/policy_loss",
    "train/v_loss",
    "train/entropy_loss",
    "train/learning_rate",
    "perf/sps",
    "perf/compile_time_s",
  ):
    assert tag in scalars, f"missing TensorBoard scalar {tag}"
  steps = [s for s, _ in scalars["eval/episode_reward"]]
  assert steps[0] == 0 and steps[-1] >= 2560
  assert all(v > 0 for _, v in scalars["perf/sps"])


def test_smoke_run_writes_a_loadable_orbax_checkpoint_and_config(smoke_run):
  run_dir, _ = smoke_run
  step_dir = run_dir / "000000002560"
  assert step_dir.is_dir(), sorted(p.name for p in run_dir.iterdir())
  meta = json.loads((step_dir / "meta.json").read_text())
  assert meta["step"] == 2560 and meta["compat"]["observation_shapes"]["state"] == [101]
  with ocp.StandardCheckpointer() as checkpointer:
    tree = checkpointer.restore(step_dir / "state")
  policy = tree["training_state"]["params"]["policy"]["params"]
  assert policy["hidden_0"]["kernel"].shape == (101, 32)
  assert tree["training_state"]["normalizer_params"]["mean"]["state"].shape == (101,)
  config = json.loads((run_dir / "config.json").read_text())
  assert config["env"] == "joystick" and config["ppo_config"]["num_envs"] == 16
  assert config["env_config"]["ctrl_dt"] == 0.02 and "jax" in config["versions"]
  # impl=auto resolves to MJX's JAX implementation on a CPU.
  assert config["env_config"]["impl"] == "auto" and config["physics_impl"] == "jax"
  # --cpu_devices auto: one device per core that divides 16 training and 8 eval envs.
  devices = distributed.auto_cpu_devices(distributed.available_cores(), 16, 8)
  assert config["device_count"] == devices and config["flags"]["cpu_devices"] == "auto"
  assert f"on {devices} cpu device(s)" in smoke_run[1].stderr


@pytest.mark.parametrize(
  "args, expected",
  [
    (["--env", "walk"], "valid choices: joystick, standing"),
    (["--task", "moon"], "valid choices: flat_terrain, rough_terrain"),
    (["--preset", "huge"], "valid choices: full, quick, smoke"),
    (["--set", "reward_config.scales.alve=10"], "did you mean 'reward_config.scales.alive'"),
    (["--set", "ppo.learnin_rate=1"], "did you mean 'ppo.learning_rate'"),
    (["--set", "reward_config.scales.alive=lots"], "expected a number"),
    (["--bogus"], "valid flags:"),
    (["--restore_mode", "model"], "needs --restore_checkpoint_path"),
    (["--set", "impl=mjx"], "impl must be one of auto, jax, warp"),
    (["--cpu_devices", "0"], "--cpu_devices must be 'auto' or a positive integer"),
    (["--preset", "smoke", "--cpu_devices", "3"], "num_envs=16 must be divisible by the 3 devices"),
  ],
)
def test_bad_input_is_one_clear_line_and_touches_nothing(tmp_path, args, expected):
  result = run_cli("--output_dir", tmp_path / "runs", "--exp_name", "x", *args, timeout=300)
  assert result.returncode == 2
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert len(lines) == 1, result.stderr
  assert expected in lines[0]
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "runs").exists()


def test_training_runs_on_the_warp_backend(tmp_path):
  """The whole training loop (rollout, PPO, eval, checkpoint, ONNX) on MuJoCo Warp."""
  result = run_cli(
    "--preset", "smoke", "--num_timesteps", "1280", "--set", "impl=warp",
    "--output_dir", tmp_path, "--exp_name", "warp",
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = tmp_path / "warp"
  assert json.loads((run_dir / "config.json").read_text())["physics_impl"] == "warp"
  step_dir = run_dir / "000000001280"
  assert (step_dir / "policy.onnx").is_file(), sorted(p.name for p in run_dir.iterdir())
  rewards = [v for _, v in read_scalars(run_dir)["eval/episode_reward"]]
  assert len(rewards) >= 2 and all(math.isfinite(v) for v in rewards)
