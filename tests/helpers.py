"""Helpers shared by the tests (subprocess runs of the project's scripts)."""

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DUCK = REPO_ROOT / "playground" / "open_duck_mini_v2" / "runner.py"
CARTPOLE = REPO_ROOT / "playground" / "cartpole" / "runner.py"
EXPORT = REPO_ROOT / "playground" / "export.py"
PLAYBACK = REPO_ROOT / "playground" / "open_duck_mini_v2" / "mujoco_infer.py"


def run_cli(*args, timeout=900, script=DUCK, env=None):
  """Runs a project script as a real subprocess (same interpreter, same cache)."""
  full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {}))
  return subprocess.run(
    [sys.executable, str(script), *map(str, args)],
    capture_output=True,
    text=True,
    timeout=timeout,
    env=full_env,
    cwd=REPO_ROOT,
  )


def assert_trees_equal(a, b):
  """Same tree structure and bit-identical leaves."""
  import jax
  import numpy as np

  leaves_a, tree_a = jax.tree_util.tree_flatten(a)
  leaves_b, tree_b = jax.tree_util.tree_flatten(b)
  assert tree_a == tree_b
  for x, y in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
