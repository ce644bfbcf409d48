"""The runner's callbacks `on_progress` and `on_checkpoint`, seen from a robot during a real training run.

One short in-process cartpole run (smoke preset, 2 iterations of 1,024 env
steps, no evaluation episodes; about half a minute, most of it compiling).
"""

import math
from pathlib import Path

import pytest

from playground.cartpole.runner import CartpoleRunner
from playground.common.runner import RunArgs
from playground.common.runs import directories
from playground.common.runs.directories import META_FILE
from playground.common.runs.directories import STATE_DIR
from playground.common.runs.tensorboard import read_scalars

pytestmark = pytest.mark.slow

#: The metrics of a progress line (the training metrics with the throughput it prints).
PROGRESS_KEYS = ("perf/sps", "train/policy_loss", "train/v_loss", "train/entropy_loss", "train/learning_rate")


class RecordingRunner(CartpoleRunner):
  """A cartpole runner that records what its callbacks receive."""

  def __init__(self, args):
    super().__init__(args)
    self.progress_calls: list[tuple[int, dict[str, float]]] = []
    self.checkpoint_calls: list[dict] = []
    self.scored: list[tuple[int, Path, dict]] = []

  def on_progress(self, step, metrics):
    self.progress_calls.append((step, dict(metrics)))
    if "perf/compile_time_s" in metrics:
      raise RuntimeError("a broken callback")  # logged; training goes on

  def on_checkpoint(self, step, step_dir):
    step_dir = Path(step_dir)
    self.checkpoint_calls.append(
      {
        "step": step,
        "step_dir": step_dir,
        "state": (step_dir / STATE_DIR).is_dir() and any((step_dir / STATE_DIR).iterdir()),
        "policy": (step_dir / "policy.onnx").is_file() and (step_dir / "policy.onnx").stat().st_size > 0,
        "meta": (step_dir / META_FILE).is_file(),
        "published": step_dir.parent.name == "cb" and not step_dir.name.startswith("."),
      }
    )
    # The default scores the checkpoint with `score_checkpoint`, which reads the run's record.
    return {**super().on_checkpoint(step, step_dir), "callback/step_seen": float(step)}

  def score_checkpoint(self, step_dir, step):
    self.scored.append((step, Path(step_dir), directories.read_record(Path(step_dir).parent)))
    return {"callback/scored": 1.0}


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
  out = tmp_path_factory.mktemp("callbacks")
  args = RunArgs(
    env="balance",
    task="default",
    preset="smoke",
    num_timesteps=2048,
    log_every=1024,
    checkpoint_every=1024,
    eval_every=0,
    output_dir=str(out),
    exp_name="cb",
  )
  runner = RecordingRunner(args)
  assert runner.run() == 0
  return runner, out / "cb"


def test_on_progress_gets_the_real_metrics_of_every_progress_line(recorded_run):
  runner, _ = recorded_run
  steps = [step for step, _ in runner.progress_calls]
  assert steps == sorted(steps) and steps[0] == 0, steps
  lines = [(step, m) for step, m in runner.progress_calls if "perf/sps" in m]
  assert [step for step, _ in lines] == [1024, 2048]
  for step, metrics in lines:
    for key in PROGRESS_KEYS:
      assert key in metrics, (step, sorted(metrics))
    for key, value in metrics.items():
      assert type(value) is float and math.isfinite(value), (step, key, value)
    assert metrics["perf/sps"] > 0
  compile_calls = [m for _, m in runner.progress_calls if "perf/compile_time_s" in m]
  assert len(compile_calls) == 1 and compile_calls[0]["perf/compile_time_s"] > 0


def test_on_checkpoint_runs_once_per_complete_checkpoint_and_its_scalars_reach_tensorboard(recorded_run):
  runner, run_dir = recorded_run
  calls = runner.checkpoint_calls
  assert [c["step"] for c in calls] == [1024, 2048]
  for c in calls:
    assert c["state"] and c["policy"] and c["meta"] and c["published"], c
    assert c["step_dir"] == run_dir.resolve() / f"{c['step']:012d}"
  # The default `on_checkpoint` called `score_checkpoint` on each complete checkpoint, whose run record is there.
  assert [(step, path) for step, path, _ in runner.scored] == [(c["step"], c["step_dir"]) for c in calls]
  for _, _, record in runner.scored:
    assert record["env"] == "balance" and record["task"] == "default" and record["env_config"]
  scalars = read_scalars(run_dir)
  assert scalars["callback/step_seen"] == [(1024, 1024.0), (2048, 2048.0)]
  assert [step for step, _ in scalars["callback/scored"]] == [1024, 2048]
