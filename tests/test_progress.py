"""The progress line's ETA: training throughput plus the pauses still to come."""

import logging

import pytest

from playground.common.train import progress


def test_eta_is_training_time_plus_remaining_evaluations_and_checkpoints():
  assert progress.eta_seconds(10_000, 1_000.0) == pytest.approx(10.0)
  assert progress.eta_seconds(10_000, 1_000.0, 3, 2.0, 1, 0.5) == pytest.approx(10.0 + 6.0 + 0.5)
  assert progress.eta_seconds(0, 1_000.0, 3, 2.0) == 0.0
  assert progress.eta_seconds(10, 0.0) == float("inf")


@pytest.mark.parametrize(
  "step, total, every, spi, expected",
  [
    (0, 5120, 2560, 1280, 2),  # at 2560 and the final one at 5120
    (0, 5120, 1280, 1280, 4),
    (2560, 5120, 2560, 1280, 1),
    (0, 2560, 500, 1280, 2),  # iterations longer than `every`: one per iteration
    (0, 10_000, 3000, 1000, 4),  # 3000, 6000, 9000 and the end
    (0, 10_000, 20_000, 1000, 1),  # only the final one
    (5120, 5120, 2560, 1280, 0),
  ],
)
def test_remaining_events_counts_what_the_loop_runs(step, total, every, spi, expected):
  assert progress.remaining_events(step, total, every, spi) == expected


def test_compile_and_evaluation_time_do_not_inflate_the_eta(caplog):
  """A run of 10 iterations of 1000 steps at 100 steps/s (10 s each), evaluated every 5000 steps
  (2 s each, the first one 20 s with its compilation), after a 60 s compile."""
  reporter = progress.ProgressReporter(None, 10_000, 0, steps_per_iteration=1000, eval_every=5000)
  reporter.write(0, {"perf/compile_time_s": 60.0})
  reporter.record_evaluation(20.0)  # at step 0, compiling the evaluation
  reporter.record_iteration(1000, 15.0)  # the first iteration: set apart
  for _ in range(3):
    reporter.record_iteration(1000, 10.0)
  assert reporter.train_steps_per_second() == pytest.approx(100.0)
  # 6000 steps at 100/s, plus evaluations at 5000 and 10000 costing the only measurement so far (20 s).
  assert reporter.eta_s(4000) == pytest.approx(60.0 + 2 * 20.0)
  reporter.record_iteration(1000, 10.0)
  reporter.record_evaluation(2.0)  # at 5000: later evaluations cost 2 s
  assert reporter.eta_s(5000) == pytest.approx(50.0 + 1 * 2.0)
  with caplog.at_level(logging.INFO, logger="playground"):
    reporter.console(5000, 100.0)
    reporter.console(6000, 100.0)
  first, second = (r.getMessage() for r in caplog.records)
  assert "ETA 52s" in first and "compiled in 60.0 s + first evaluation 20.0 s" in first
  assert "compiled" not in second


def test_without_reports_the_eta_uses_the_overall_rate():
  reporter = progress.ProgressReporter(None, 1000, 0)
  assert reporter.train_steps_per_second() == 0.0
  assert reporter.eta_s(0) == float("inf")
