"""The compute backend: the MJX implementation ("jax" or MuJoCo Warp) and JAX's compilation cache.

Import-light (no JAX at import time): the command line and `doctor` read the
defaults here before JAX is loaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from playground.common.configs import ConfigError
from playground.common.runs.directories import REPO_ROOT

DEFAULT_CACHE_DIR = REPO_ROOT / ".tmp" / "jax_cache"
#: Environment variable naming the compilation cache (overridden by --compilation_cache_dir).
CACHE_ENV = "PLAYGROUND_JAX_CACHE"

#: Values accepted by the `impl` config key.
IMPLS = ("auto", "jax", "warp")


def validate_impl(impl: str) -> None:
  """Raises ConfigError naming the valid choices for an unknown `impl`."""
  if impl not in IMPLS:
    raise ConfigError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")


def resolve_impl(impl: str, platform: str | None = None) -> str:
  """The implementation to use: `auto` picks the faster correct one here.

  `auto` is MuJoCo Warp on NVIDIA GPUs (MuJoCo's documentation reports it
  well ahead of the JAX implementation there) and the JAX implementation
  elsewhere: on a CPU it is about 3.5x faster than Warp for the Open Duck
  Mini V2 (docs/results.md), and Warp runs on no other accelerator.

  Args:
    impl: "auto", "jax" or "warp".
    platform: JAX platform to decide for (default: `jax.default_backend()`).
  """
  validate_impl(impl)
  if impl != "auto":
    return impl
  if platform is None:
    import jax  # only when asked about this machine: the CLI imports this module

    platform = jax.default_backend()
  return "warp" if platform in ("gpu", "cuda") else "jax"


def compilation_cache_dir(cache_dir: str | None = None) -> Path:
  """The persistent compilation cache: `cache_dir`, else $PLAYGROUND_JAX_CACHE, else `.tmp/jax_cache`."""
  return Path(cache_dir or os.environ.get(CACHE_ENV, DEFAULT_CACHE_DIR)).expanduser()


def setup_compilation_cache(cache_dir: str | None) -> Path:
  """Enables JAX's persistent compilation cache in `cache_dir` (or the default); returns it."""
  import jax  # configures JAX; the CLI imports this module before JAX is needed

  path = compilation_cache_dir(cache_dir)
  path.mkdir(parents=True, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", str(path))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


#: Where `playground/doctor.py` keeps its throughput measurement.
PROBE_FILE = REPO_ROOT / ".tmp" / "doctor.json"


def write_probe(result: dict) -> None:
  """Keeps doctor's measurement (`training_steps_per_s`, `backend`) for the runner's estimate."""
  PROBE_FILE.parent.mkdir(parents=True, exist_ok=True)
  PROBE_FILE.write_text(json.dumps(result, indent=2) + "\n")


def cpu_training_estimate(measured_sps: float) -> tuple[float, str]:
  """(training env steps/s on this CPU, where the number comes from): doctor's probe, else
  `measured_sps`, the robot's figure for a 2-core CPU in docs/results.md."""
  try:
    probe = json.loads(PROBE_FILE.read_text())
    if probe.get("backend") == "cpu" and float(probe["training_steps_per_s"]) > 0:
      return float(probe["training_steps_per_s"]), f"measured by playground/doctor.py ({PROBE_FILE})"
  except (OSError, ValueError, KeyError, TypeError):
    pass
  return measured_sps, "2-core CPU in docs/results.md; run playground/doctor.py to measure this machine"


#: MuJoCo Warp's overflow bits that mean dropped contacts or constraints: all
#: of its OverflowType (NEFC ... EPA_HORIZON = bits 0-8, TACTILE = bit 11)
#: except the solver and line-search iteration limits (bits 9 and 10).
WARP_BUFFER_OVERFLOW_BITS = 0b1111_1111_1111 & ~(0b11 << 9)


def warp_buffer_overflow_bits(overflow) -> int:
  """The buffer-overflow bits of MuJoCo Warp's per-world overflow masks, OR-ed over worlds.

  `overflow` is `data._impl.overflow` of a (batched) Warp `mjx.Data`; the
  solver iteration-limit bits are dropped.
  """
  import numpy as np

  bits = np.asarray(overflow).astype(np.int64).ravel()
  return int(np.bitwise_or.reduce(bits, initial=0)) & WARP_BUFFER_OVERFLOW_BITS


def duration_text(seconds: float) -> str:
  """`seconds` as a rounded duration: "40 min" under 2 hours, else "6 h"."""
  if seconds < 7200:
    return f"{max(1, round(seconds / 60))} min"
  return f"{seconds / 3600:.0f} h"
