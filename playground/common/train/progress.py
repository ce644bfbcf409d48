"""Progress reporting: TensorBoard scalars and a console progress line."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter

logger = logging.getLogger("playground")


def format_duration(seconds: float) -> str:
  if not math.isfinite(seconds) or seconds < 0:
    return "?"
  seconds = int(round(seconds))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def progress_bar(fraction: float, width: int = 20) -> str:
  fraction = min(max(fraction, 0.0), 1.0)
  filled = int(round(fraction * width))
  return "[" + "#" * filled + "-" * (width - filled) + "]"


def eta_seconds(
  remaining_steps: int,
  train_steps_per_s: float,
  remaining_evals: int = 0,
  eval_s: float = 0.0,
  remaining_checkpoints: int = 0,
  checkpoint_s: float = 0.0,
) -> float:
  """Seconds until the run ends: training at its own throughput plus the pauses still to come.

  Args:
    remaining_steps: env steps still to train.
    train_steps_per_s: throughput of the training step alone (no evaluation,
      checkpoint or compile time in it).
    remaining_evals: evaluations still to run (see `remaining_events`).
    eval_s: the measured time of one evaluation.
    remaining_checkpoints: checkpoints still to write.
    checkpoint_s: the measured time of one checkpoint.
  """
  if remaining_steps <= 0:
    return 0.0
  if train_steps_per_s <= 0 or not math.isfinite(train_steps_per_s):
    return float("inf")
  return remaining_steps / train_steps_per_s + remaining_evals * eval_s + remaining_checkpoints * checkpoint_s


def remaining_events(step: int, total: int, every: int, steps_per_iteration: int) -> int:
  """How many evaluations (or checkpoints) the loop still runs after `step`.

  The loop takes iterations of `steps_per_iteration` env steps until it
  reaches `total`; an event fires after the first iteration at or past each
  multiple of `every`, and once more at the end (the final evaluation or save).
  """
  if step >= total or every <= 0 or steps_per_iteration <= 0:
    return 0
  iterations = -(-(total - step) // steps_per_iteration)
  before_last = step + (iterations - 1) * steps_per_iteration
  return min(iterations - 1, before_last // every - step // every) + 1


def merge_metrics(batch: list[dict]) -> dict[str, float]:
  """Averages the metrics of several training iterations; episode stats weighted by episode count.

  `train/finite` is dropped; episode stats are NaN when no episode ended.
  """
  out: dict[str, float] = {}
  counts = np.array([float(m.get("episode/count", 0.0)) for m in batch])
  for key in batch[0]:
    values = np.array([float(m[key]) for m in batch])
    if key == "episode/count":
      out[key] = float(values.sum())
    elif key.startswith("episode/"):
      out[key] = float((values * counts).sum() / counts.sum()) if counts.sum() > 0 else float("nan")
    elif key != "train/finite":
      out[key] = float(values.mean())
  return out


def _typical(durations: list[float]) -> float:
  """One event's cost: the mean after the first (which compiles), else the first."""
  if len(durations) > 1:
    return sum(durations[1:]) / (len(durations) - 1)
  return durations[0] if durations else 0.0


class ProgressReporter:
  """Writes scalars to TensorBoard and prints a progress line with speed and ETA.

  Args:
    log_dir: TensorBoard directory (the run directory); None disables it.
    total_steps: target env step count, for the bar and the ETA.
    start_step: env steps already done (non-zero when resuming).
    steps_per_iteration: env steps of one training iteration.
    eval_every: env steps between evaluations (None: none counted in the ETA).
    checkpoint_every: env steps between checkpoints (None: none counted).

  The training loop reports what each part took (`record_iteration`,
  `record_evaluation`, `record_checkpoint`); the ETA is the remaining steps at
  the training step's own throughput (without the first, compiling iteration)
  plus the measured cost of the evaluations and checkpoints still to come.
  Without such reports it falls back to the overall rate since the start.
  """

  def __init__(
    self,
    log_dir: Path | None,
    total_steps: int,
    start_step: int = 0,
    steps_per_iteration: int = 0,
    eval_every: int | None = None,
    checkpoint_every: int | None = None,
  ):
    self._writer = SummaryWriter(logdir=str(log_dir), flush_secs=10) if log_dir else None
    self._total = total_steps
    self._start_step = start_step
    self._start_time = time.monotonic()
    self._steps_per_iteration = steps_per_iteration
    self._eval_every = eval_every
    self._checkpoint_every = checkpoint_every
    self._first_iteration: tuple[int, float] | None = None
    self._train_steps = 0
    self._train_time = 0.0
    self._eval_times: list[float] = []
    self._checkpoint_times: list[float] = []
    self._consoled = False
    self.compile_time_s: float | None = None
    self.last_eval_reward: float | None = None

  def record_iteration(self, steps: int, seconds: float) -> None:
    """One training iteration of `steps` env steps took `seconds` (the first one is set apart)."""
    if self._first_iteration is None:
      self._first_iteration = (steps, seconds)
    else:
      self._train_steps += steps
      self._train_time += seconds

  def record_evaluation(self, seconds: float) -> None:
    """One evaluation took `seconds` (the first one includes its compilation)."""
    self._eval_times.append(seconds)

  def record_checkpoint(self, seconds: float) -> None:
    """Writing one checkpoint took `seconds`."""
    self._checkpoint_times.append(seconds)

  def train_steps_per_second(self) -> float:
    """Throughput of the training step alone; 0 when nothing was recorded yet."""
    if self._train_time > 0:
      return self._train_steps / self._train_time
    if self._first_iteration is not None and self._first_iteration[1] > 0:
      return self._first_iteration[0] / self._first_iteration[1]
    return 0.0

  def eta_s(self, step: int) -> float:
    """Estimated seconds until `total_steps` (see the class docstring)."""
    rate = self.train_steps_per_second()
    if rate <= 0:
      done = step - self._start_step
      elapsed = time.monotonic() - self._start_time
      rate = done / elapsed if elapsed > 0 else 0.0
      return (self._total - step) / rate if rate > 0 else float("inf")
    spi = self._steps_per_iteration
    evals = remaining_events(step, self._total, self._eval_every, spi) if self._eval_every else 0
    checkpoints = remaining_events(step, self._total, self._checkpoint_every, spi) if self._checkpoint_every else 0
    return eta_seconds(
      self._total - step,
      rate,
      evals,
      _typical(self._eval_times),
      checkpoints,
      _typical(self._checkpoint_times),
    )

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    """Adds every finite scalar of `metrics` to TensorBoard at `step`."""
    if "eval/episode_reward" in metrics:
      self.last_eval_reward = float(metrics["eval/episode_reward"])
    if "perf/compile_time_s" in metrics:
      self.compile_time_s = float(metrics["perf/compile_time_s"])
    if self._writer is None:
      return
    for name, value in metrics.items():
      value = float(np.asarray(value))
      if math.isfinite(value):
        self._writer.add_scalar(name, value, global_step=int(step))
    self._writer.flush()

  def console(self, step: int, sps: float, extra: str = "") -> None:
    """Logs the progress line; the first one also says how long compilation took."""
    eta = self.eta_s(step)
    if not self._consoled and self.compile_time_s is not None:
      first_eval = f" + first evaluation {self._eval_times[0]:.1f} s" if self._eval_times else ""
      extra = f" | compiled in {self.compile_time_s:.1f} s{first_eval}{extra}"
    self._consoled = True
    reward = f" | eval reward {self.last_eval_reward:.3f}" if self.last_eval_reward is not None else ""
    logger.info(
      "%s %5.1f%% step %s/%s | %s steps/s | ETA %s%s%s",
      progress_bar(step / max(self._total, 1)),
      100.0 * step / max(self._total, 1),
      f"{step:,}",
      f"{self._total:,}",
      f"{sps:,.0f}",
      format_duration(eta),
      reward,
      extra,
    )

  def close(self) -> None:
    if self._writer is not None:
      self._writer.flush()
      self._writer.close()
