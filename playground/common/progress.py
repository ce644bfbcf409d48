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


class ProgressReporter:
  """Writes scalars to TensorBoard and prints a progress line with speed and ETA.

  Args:
    log_dir: TensorBoard directory (the run directory); None disables it.
    total_steps: target env step count, for the bar and the ETA.
    start_step: env steps already done (non-zero when resuming).
  """

  def __init__(self, log_dir: Path | None, total_steps: int, start_step: int = 0):
    self._writer = SummaryWriter(logdir=str(log_dir), flush_secs=10) if log_dir else None
    self._total = total_steps
    self._start_step = start_step
    self._start_time = time.monotonic()
    self._last_step = start_step
    self._last_time = self._start_time
    self.last_eval_reward: float | None = None

  def steps_per_second(self, step: int) -> float:
    """Throughput since the previous call (resets the interval)."""
    now = time.monotonic()
    sps = (step - self._last_step) / max(now - self._last_time, 1e-9)
    self._last_step, self._last_time = step, now
    return sps

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    """Adds every finite scalar of `metrics` to TensorBoard at `step`."""
    if "eval/episode_reward" in metrics:
      self.last_eval_reward = float(metrics["eval/episode_reward"])
    if self._writer is None:
      return
    for name, value in metrics.items():
      value = float(np.asarray(value))
      if math.isfinite(value):
        self._writer.add_scalar(name, value, global_step=int(step))
    self._writer.flush()

  def console(self, step: int, sps: float, extra: str = "") -> None:
    done = step - self._start_step
    elapsed = time.monotonic() - self._start_time
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (self._total - step) / rate if rate > 0 else float("inf")
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
