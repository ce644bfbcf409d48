"""Data-parallel training on 2 virtual CPU devices and on 2 local processes.

XLA_FLAGS=--xla_force_host_platform_device_count=2 gives one process two CPU
devices; `jax.distributed` on loopback joins two processes into one run.
"""

import socket
import subprocess
import sys

import jax
import pytest
from helpers import CARTPOLE
from helpers import DUCK
from helpers import REPO_ROOT
from helpers import run_cli
from helpers import subprocess_env

from playground.common import configs
from playground.common.runs import checkpoints
from playground.common.runs.tensorboard import read_scalars
from playground.common.train import distributed

TWO_DEVICES = "--xla_force_host_platform_device_count=2"

REPLICATION_CHECK = """
import sys
import jax, numpy as np
from playground.common.runner import RunArgs
from playground.cartpole.runner import CartpoleRunner
from playground.common.runner import setup_compilation_cache
assert jax.device_count() == 2, jax.devices()
setup_compilation_cache(None)  # the test run's cache ($PLAYGROUND_JAX_CACHE)
runner = CartpoleRunner(RunArgs(env="balance", task="default", preset="smoke"))
from playground.common.train import trainer
session = trainer.build(runner, runner.resolve_config())
ppo = session.ppo
ts, env_state, _ = trainer.initial_state(runner, session, None, "all")
assert len(env_state.steps.addressable_shards) == 2
for _ in range(2):
  ts, env_state, metrics = ppo.train_step(ts, env_state)
for leaf in jax.tree_util.tree_leaves(ts):
  shards = [np.asarray(s.data) for s in leaf.addressable_shards]
  assert len(shards) == 2
  assert all(np.array_equal(shards[0], s) for s in shards), leaf.shape
# Each device simulated its own half of the envs.
halves = [np.asarray(s.data) for s in env_state.env.data.qpos.addressable_shards]
assert halves[0].shape[0] == 8 and not np.array_equal(halves[0], halves[1])
print("REPLICATED", int(ts.env_steps))

# Evaluation split over both devices scores every episode as on one device.
from playground.common.train.evaluator import Evaluator
params = ppo.inference_params(ts)
evals = [
  Evaluator(session.evaluator._venv, ppo.make_policy, 8, seed=3, mesh=mesh).run(params)
  for mesh in (None, ppo.mesh)
]
# (XLA's arithmetic may differ in the last bits between batch sizes 8 and 4.)
for k in ("eval/episode_reward", "eval/episode_length", "eval/episode_reward_std"):
  np.testing.assert_allclose(evals[0][k], evals[1][k], rtol=1e-3)
print("SHARDED", evals[1]["eval/episode_reward"])
"""


def _env(**extra):
  return subprocess_env(**extra)


@pytest.mark.slow
def test_two_devices_train_and_stay_replicated(tmp_path):
  """On the cartpole: data parallelism is the trainer's, the same for every robot, and the
  duck compiles for minutes (the shared duck smoke run trains on one device per core)."""
  result = subprocess.run(
    [sys.executable, "-c", REPLICATION_CHECK],
    capture_output=True,
    text=True,
    timeout=900,
    env=_env(XLA_FLAGS=TWO_DEVICES),
    cwd=REPO_ROOT,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "REPLICATED 2048" in result.stdout and "SHARDED" in result.stdout


@pytest.mark.parametrize(
  "cores_and_batches, expected",
  [((8, 128, 32), 8), ((6, 128, 32), 4), ((2, 15, 8), 1), ((1, 16, 8), 1), ((64, 16, 8), 8)],
)
def test_auto_cpu_devices_is_one_per_core_dividing_every_batch(cores_and_batches, expected):
  assert distributed.auto_cpu_devices(*cores_and_batches) == expected


def test_cpu_devices_values():
  assert configs.parse_cpu_devices("auto") == "auto" and configs.parse_cpu_devices("4") == 4
  assert configs.parse_cpu_devices(None) is None
  for bad in ("0", "-2", "two", "1.5"):
    with pytest.raises(configs.ConfigError, match="'auto' or a positive integer"):
      configs.parse_cpu_devices(bad)


def test_auto_warns_when_jax_started_before_the_device_count_was_set(monkeypatch, caplog):
  """A JAX array made at import starts JAX early; `auto` then keeps JAX's count, and says so."""
  have = len(jax.devices("cpu"))  # JAX runs in this process
  monkeypatch.delenv(distributed.ENV_NUM_CPU_DEVICES, raising=False)
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  monkeypatch.setattr(distributed, "available_cores", lambda: have + 1)
  with caplog.at_level("WARNING", logger="playground"):
    assert distributed.configure_cpu_devices("auto", (have + 1,), False) is None
  assert f"keeps {have} CPU device(s) where {have + 1} would be faster" in caplog.text
  caplog.clear()
  monkeypatch.setattr(distributed, "available_cores", lambda: have)
  with caplog.at_level("WARNING", logger="playground"):
    distributed.configure_cpu_devices("auto", (have,), False)
  assert "would be faster" not in caplog.text  # the count it would choose: nothing to say


@pytest.mark.slow
def test_a_run_resumes_on_another_device_count(tmp_path):
  """The checkpoint holds the whole env batch, so --resume re-splits it over any device count.

  On the cartpole (the re-split is the trainer's, for every robot's env state).
  """
  common = ("--preset", "smoke", "--output_dir", tmp_path, "--exp_name", "split")
  first = run_cli(*common, "--num_timesteps", 2048, "--cpu_devices", 2, script=CARTPOLE)
  assert first.returncode == 0, first.stderr[-3000:]
  assert "on 2 cpu device(s)" in first.stderr
  resumed = run_cli(*common, "--resume", "--num_timesteps", 3072, "--cpu_devices", 1, script=CARTPOLE)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "on 1 cpu device(s)" in resumed.stderr and "start at 2,048" in resumed.stderr
  assert [int(p.name) for p in checkpoints.list_checkpoints(tmp_path / "split")][-1] == 3072


def test_num_envs_must_divide_evenly_over_devices(tmp_path):
  result = subprocess.run(
    [sys.executable, str(DUCK), "--preset", "smoke", "--num_envs", "15", "--output_dir", str(tmp_path)],
    capture_output=True,
    text=True,
    timeout=600,
    env=_env(XLA_FLAGS=TWO_DEVICES),
    cwd=REPO_ROOT,
  )
  assert result.returncode == 2
  assert "num_envs=15 must be divisible by the 2 devices" in result.stderr
  assert not list(tmp_path.iterdir())


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.mark.timeout(1500)
@pytest.mark.slow
def test_two_processes_on_loopback_train_one_run(tmp_path):
  """Two processes joined by jax.distributed train and checkpoint one run.

  The cartpole runner: its MuJoCo Playground env puts its model on process 0's
  device, which the trainer must move (`distributed.localize_model`); it also
  compiles in seconds where the duck takes minutes (the multi-process code is
  the same for every robot). (Resuming re-splits the saved global batch the
  same way for processes as for devices: `test_a_run_resumes_on_another_device_count`.)
  """
  port = _free_port()
  common = [
    sys.executable,
    str(CARTPOLE),
    "--preset",
    "smoke",
    "--output_dir",
    str(tmp_path),
    "--exp_name",
    "multi",
    "--coordinator_address",
    f"127.0.0.1:{port}",
    "--num_processes",
    "2",
  ]

  def run_both(*extra):
    procs = [
      subprocess.Popen(
        common + ["--process_id", str(i), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO_ROOT,
      )
      for i in range(2)
    ]
    outputs = [p.communicate(timeout=1000) for p in procs]
    for p, (_, err) in zip(procs, outputs):
      assert p.returncode == 0, err[-3000:]
    return [err for _, err in outputs]

  errs = run_both()
  assert "2 cpu device(s) in 2 process(es)" in errs[0]
  run_dir = tmp_path / "multi"
  steps = [int(p.name) for p in checkpoints.list_checkpoints(run_dir)]
  assert steps == [8192]
  assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1, "only process 0 writes TensorBoard"
  assert "eval/episode_reward" in read_scalars(run_dir)
  assert (run_dir / "000000008192" / "policy.onnx").is_file()
