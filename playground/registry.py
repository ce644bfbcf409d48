"""Robot name -> runner class, for commands that start from a run directory."""

from __future__ import annotations

import importlib

RUNNERS = {
  "open_duck_mini_v2": "playground.open_duck_mini_v2.runner:OpenDuckMiniV2Runner",
  "cartpole": "playground.cartpole.runner:CartpoleRunner",
}


def runner_class(robot: str):
  """The `BaseRunner` subclass registered for `robot`.

  Raises:
    KeyError: with the valid robot names.
  """
  if robot not in RUNNERS:
    raise KeyError(f"unknown robot '{robot}'; registered: {', '.join(RUNNERS)}")
  module, name = RUNNERS[robot].split(":")
  return getattr(importlib.import_module(module), name)
