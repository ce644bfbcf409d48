"""Helpers shared by the tests (subprocess runs of the project's scripts)."""

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DUCK = REPO_ROOT / "playground" / "open_duck_mini_v2" / "runner.py"
CARTPOLE = REPO_ROOT / "playground" / "cartpole" / "runner.py"
EXPORT = REPO_ROOT / "playground" / "export.py"
PLAYBACK = REPO_ROOT / "playground" / "open_duck_mini_v2" / "playback.py"


#: XLA flags of the tests' subprocesses: half the CPU compile time of a
#: training step (measured on the smoke preset: 149 -> 67 s), several times
#: slower code. Test runs are short and compile-bound; a test that trains
#: for long (test_learning) passes fast_compile=False.
FAST_COMPILE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
#: The same, for one `jax.jit` in the test process (`jax.jit(f, compiler_options=...)`).
FAST_COMPILE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def subprocess_env(fast_compile=True, **extra):
  """The environment of a test's subprocess: quiet logs, fast compilation.

  An `XLA_FLAGS` in `extra` is added to (not replacing) the fast-compile flags.
  """
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  # The test process's own flags, less the fast-compile ones (which conftest adds to it).
  inherited = env.get("XLA_FLAGS", "").replace(FAST_COMPILE_XLA_FLAGS, "").strip()
  flags = [inherited, extra.pop("XLA_FLAGS", "")]
  if fast_compile:
    flags.append(FAST_COMPILE_XLA_FLAGS)
  env.update(extra)
  env["XLA_FLAGS"] = " ".join(f for f in flags if f)
  return env


def run_cli(*args, timeout=900, script=DUCK, env=None, fast_compile=True):
  """Runs a project script as a real subprocess (same interpreter, same cache)."""
  full_env = subprocess_env(fast_compile, **(env or {}))
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


def duck_contract(env_name="joystick", config=None, task="flat_terrain"):
  """The Open Duck Mini V2's policy contract for an env config (its default when None), from the built env."""
  from playground.common.runs.arguments import RunArgs
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  runner = OpenDuckMiniV2Runner(RunArgs(env=env_name, task=task))
  config = runner.default_env_config(env_name) if config is None else config
  return runner.policy_contract(runner.make_env(env_name, task, config), config)


def zero_readings(env):
  """The duck env's `Readings` with every field zero (shapes from the home pose, no physics compiled)."""
  import jax
  import jax.numpy as jp

  from playground.open_duck_mini_v2.model import observations

  ids, model = env.ids, env.mjx_model
  data = env.make_data(jp.asarray(ids.home_qpos), jp.zeros(model.nv), jp.asarray(ids.home_ctrl))
  shapes = jax.eval_shape(lambda d: observations.read(ids, model, d), data)
  return jax.tree_util.tree_map(lambda s: jp.zeros(s.shape, s.dtype), shapes)


def write_policy(path, metadata_changes=None, bias=None, history=0):
  """An Open Duck policy file whose action is tanh(bias) whatever it observes (zero: the home pose).

  The duck's statue (`benchmarks.statue`): zero weights, the joystick env's
  real metadata (changed by `metadata_changes`); with `history`, it observes
  that many earlier frames (`observation_history`).
  """
  from benchmarks import statue

  return statue.write_statue(path, bias, history, metadata_changes)
