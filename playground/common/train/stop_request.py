"""Stop requests during training: Ctrl-C and SIGTERM, one keypress counted once.

The first SIGINT/SIGTERM asks the training loop to stop after the current
step and save; a second exits at once. A repeat within the duplicate window
is the same keypress delivered twice: the terminal signals the whole
foreground process group, and `uv run`, in that group, forwards its copy to
the child 200 ms later when its stdin is not a terminal (uv 0.13.9; later on
a loaded machine).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("playground")

#: Seconds a stop request may take to finish the step and write its checkpoint
#: before the process exits without it (a first save compiles the policy
#: export, which took 26 s on a loaded 2-core machine). The checkpoint's
#: callbacks (the duck's in-run scorecard) run after it without a deadline.
STOP_TIMEOUT_S = 120.0
#: A second SIGINT this soon after the first is the same Ctrl-C delivered
#: twice. The environment variable `PLAYGROUND_DUPLICATE_SIGNAL_S` changes it
#: (seconds, e.g. for a wrapper that forwards later still).
DUPLICATE_SIGNAL_S = 1.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def duplicate_signal_s() -> float:
  """`DUPLICATE_SIGNAL_S`, or the seconds in `PLAYGROUND_DUPLICATE_SIGNAL_S` when set to a number >= 0."""
  try:
    value = float(os.environ.get("PLAYGROUND_DUPLICATE_SIGNAL_S", DUPLICATE_SIGNAL_S))
  except ValueError:
    return DUPLICATE_SIGNAL_S
  return value if value >= 0 else DUPLICATE_SIGNAL_S


class StopRequest:
  """The stop state of one training run and the SIGINT/SIGTERM handler that sets it.

  Args:
    exit_now: exits the process with a status at once (after removing a
      checkpoint being written): 130 for a second Ctrl-C.
  """

  def __init__(self, exit_now: Callable[[int], None]):
    self._exit_now = exit_now
    self._event = threading.Event()
    self._requested_at: float | None = None
    self._saved = False
    self._previous: dict[int, Any] = {}

  def is_set(self) -> bool:
    """Whether a stop was requested."""
    return self._event.is_set()

  def install(self) -> None:
    """Handles SIGINT and SIGTERM from now on (call from the main thread)."""
    self._previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    for sig in _SIGNALS:
      signal.signal(sig, self._on_signal)

  def release(self) -> None:
    """Gives the signals back to their previous handlers, unless a stop was requested.

    After a stop request the handler stays for the rest of the process: a
    late copy of the same Ctrl-C is still ignored, a real second one still
    exits at once (130), even while the process shuts down.
    """
    if self._requested_at is None:
      for sig, handler in self._previous.items():
        signal.signal(sig, handler)

  def mark_saved(self) -> None:
    """The stop's checkpoint is complete: what follows is no longer under `STOP_TIMEOUT_S`."""
    self._saved = True

  def overdue(self) -> bool:
    """Whether finishing the step and saving has taken longer than `STOP_TIMEOUT_S`."""
    return self._requested_at is not None and not self._saved and time.monotonic() - self._requested_at > STOP_TIMEOUT_S

  def outwait_duplicates(self) -> None:
    """After a stop request, stays alive until its duplicate window has passed.

    Python gives SIGINT back to the system's default action while the
    interpreter shuts down, so a forwarded copy of the Ctrl-C that arrived
    then would kill a process that had saved cleanly (status 130). Waiting
    here, with the handler installed, lets every copy within the window meet
    it; the save usually takes longer than the window, so this rarely waits.
    """
    if self._requested_at is None:
      return
    left = self._requested_at + duplicate_signal_s() - time.monotonic()
    if left > 0:
      time.sleep(left)

  def _on_signal(self, signum: int, frame: Any) -> None:
    del frame
    if self._event.is_set():
      if time.monotonic() - self._requested_at < duplicate_signal_s():
        return  # the same Ctrl-C, forwarded by `uv run`
      logger.warning("second signal: exiting immediately without saving")
      self._exit_now(130)
    logger.warning(
      "%s received: finishing the current step and saving a checkpoint (press Ctrl-C again to exit without saving)",
      signal.Signals(signum).name,
    )
    self._requested_at = time.monotonic()
    self._event.set()
