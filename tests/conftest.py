"""Shared test setup: quiet XLA logs and a persistent compilation cache.

Every test process (pytest workers and the CLI subprocesses they start) uses
the same JAX persistent cache, so a configuration is compiled once per test
run instead of once per test.
"""

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = REPO_ROOT / ".tmp" / "jax_cache"

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("PLAYGROUND_JAX_CACHE", str(CACHE_DIR))

from helpers import FAST_COMPILE_XLA_FLAGS  # noqa: E402
from helpers import run_cli  # noqa: E402

# The test processes compile as their subprocesses do (`helpers.subprocess_env`):
# tests are compile-bound, and the same flags let them share cache entries.
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE_XLA_FLAGS}".strip()

import jax  # noqa: E402

CACHE_DIR.mkdir(parents=True, exist_ok=True)
jax.config.update("jax_compilation_cache_dir", str(CACHE_DIR))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
  """One `--preset smoke` training run shared by the tests that read its output (scored).

  Shared by every pytest-xdist worker: the first one trains under a file lock
  in the session's common temp dir, the others wait and read its record.
  Tests copy the run before changing it.
  """
  shared = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    shared = shared.parent  # the session's dir, above each worker's own
  out = shared / "shared_smoke"
  record = shared / "shared_smoke.json"
  with open(shared / "shared_smoke.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not record.exists():
      result = run_cli("--preset", "smoke", "--output_dir", out, "--exp_name", "smoke", "--score", "on")
      record.write_text(json.dumps(dict(returncode=result.returncode, stdout=result.stdout, stderr=result.stderr)))
    done = json.loads(record.read_text())
  result = subprocess.CompletedProcess(args=["smoke"], **done)
  assert result.returncode == 0, result.stderr[-3000:]
  return out / "smoke", result


#: The longest tests (seconds in the last clean-clone run on 2 cores), run
#: first so that pytest-xdist spreads them over both workers instead of one
#: worker finishing a long test alone at the end.
SLOW_FIRST = (
  # The shared smoke run first: started early, no later reader waits for it.
  "test_smoke_run_logs_tensorboard_scalars",
  "test_a_briefly_trained_policy_survives_head_motion_and_pushes_that_topple_the_untrained_one",
  "test_training_with_a_converted_community_file_logs_imitation_components",
  "test_training_runs_on_the_warp_backend",
  "test_doctor_json_reports_backend_versions_and_throughput",
  "test_cartpole_balance_reaches_a_learned_return",
)


def pytest_collection_modifyitems(config, items):
  """Moves the tests of `SLOW_FIRST` to the front, in that order."""
  del config
  rank = {name: i for i, name in enumerate(SLOW_FIRST)}
  items.sort(key=lambda item: rank.get(item.originalname, len(rank)))
