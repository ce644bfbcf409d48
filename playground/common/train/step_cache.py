"""A disk cache of traced and lowered steps (`jax.export`), for fast warm starts.

JAX's persistent compilation cache skips XLA's work on a warm start, but not
the Python tracing and lowering that come before it: for an MJX training step
(10 physics substeps, an in-step reset, the PPO update) that is about 10 s on a
CPU, most of a warm start. `StepCache.compile` keeps the lowered step as a
serialized `jax.export.Exported`. A warm start deserializes it and hands it to
XLA, whose own persistent cache then answers, so neither tracing nor XLA
compilation runs again.

An entry is only reused when everything that can change the traced program is
the same. Its key hashes:

* the caller's key material (the runner passes the resolved configuration, the
  environment, task and seed);
* the name, tree structure, shapes, dtypes and shardings of the arguments;
* the bytes of every imported module that is not part of an installed
  distribution, and of every file in those modules' top-level packages (the
  project's code, MJCF and data files, or a user's own robot package);
* the name and version of every installed distribution, the Python version,
  the devices, and the JAX flags that change tracing.

Steps that cannot be exported (for example MuJoCo Warp's custom calls) fall
back to ordinary compilation; the cache remembers that, so the second start
does not try again. An unreadable entry is removed and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pickle
import re
import sys
import sysconfig
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import jax

from playground.common.runs import directories

logger = logging.getLogger("playground")

FORMAT_VERSION = 1
DEFAULT_KEEP = 16
_UNSUPPORTED = b"unsupported\n"
_ENVIRONMENT_DIGEST: str | None = None


class StepCache:
  """Compiles jitted functions, reusing their lowered form from `directory`.

  Args:
    directory: where entries live (`None` disables the cache: plain
      `lower().compile()`).
    key_material: JSON-serializable facts that change the traced program and
      are not visible in the arguments (configuration, seeds baked into the
      trace, ...).
    keep: entries kept per step name; the least recently used ones are
      deleted when a new one is written, so editing the code does not grow
      the cache without bound.
  """

  def __init__(
    self,
    directory: str | os.PathLike | None,
    key_material: dict[str, Any] | None = None,
    keep: int = DEFAULT_KEEP,
  ):
    self.directory = Path(directory) if directory is not None else None
    self.keep = keep
    self._material = json.dumps(key_material or {}, sort_keys=True, default=str)
    #: What the last `compile` did: "disabled", "hit", "miss" or "unsupported".
    self.last_outcome = ""

  def compile(self, name: str, fn: Callable[..., Any], *args: Any, donate: bool = False) -> Callable[..., Any]:
    """A compiled version of the jitted `fn` for `args` (pytrees of arrays).

    The result takes and returns the same pytrees as `fn`. `donate` donates
    every argument buffer (pass it when `fn` was jitted with donation).
    """
    if self.directory is None:
      self.last_outcome = "disabled"
      return _fitting(fn.lower(*args).compile())
    leaves, in_tree = jax.tree_util.tree_flatten(args)
    specs = [_spec(x) for x in leaves]
    path = self.directory / f"{name}-{self._key(name, in_tree, specs)[:32]}.jaxexport"
    entry = _read(path)
    if entry is None:
      entry = self._export(name, fn, in_tree, specs, path)
      self.last_outcome = "miss"
    else:
      self.last_outcome = "hit"
      with contextlib.suppress(OSError):
        os.utime(path)  # recently used entries survive pruning
    if entry is _UNSUPPORTED:
      self.last_outcome = "unsupported"
      return _fitting(fn.lower(*args).compile())
    exported, out_tree = entry
    _prepare_cpu_kernels()
    donate_argnums = tuple(range(len(leaves))) if donate else ()
    compiled = _fitting(jax.jit(exported.call, donate_argnums=donate_argnums).lower(*leaves).compile())

    def call(*call_args: Any) -> Any:
      return jax.tree_util.tree_unflatten(out_tree, compiled(*jax.tree_util.tree_leaves(call_args)))

    return call

  def _key(self, name: str, in_tree: Any, specs: list[jax.ShapeDtypeStruct]) -> str:
    h = hashlib.sha256()
    for part in (
      f"v{FORMAT_VERSION}",
      name,
      self._material,
      # Object addresses in static pytree data (e.g. MJX's wrapped NumPy arrays)
      # differ between processes; what they hold follows from the model files
      # and the configuration, which the key covers.
      re.sub(r" at 0x[0-9a-fA-F]+", "", str(in_tree)),
      repr([(s.shape, str(s.dtype), s.weak_type, str(s.sharding)) for s in specs]),
      environment_digest(),
    ):
      h.update(part.encode())
      h.update(b"\0")
    return h.hexdigest()

  def _export(self, name: str, fn, in_tree, specs, path: Path):
    out_tree = {}

    def flat(*xs):
      out = fn(*jax.tree_util.tree_unflatten(in_tree, xs))
      out_leaves, out_tree["tree"] = jax.tree_util.tree_flatten(out)
      return out_leaves

    start = time.monotonic()
    try:
      exported = jax.export.export(jax.jit(flat))(*specs)
      payload = pickle.dumps(
        {"version": FORMAT_VERSION, "out_tree": out_tree["tree"], "exported": bytes(exported.serialize())}
      )
    except Exception as e:  # noqa: BLE001  (any export limitation means: compile without the cache)
      logger.info("%s cannot be kept in the step cache (%s); compiling it each start", name, _first_line(e))
      _write(path, _UNSUPPORTED)
      return _UNSUPPORTED
    _write(path, payload)
    _prune(path.parent, name, self.keep)
    logger.debug("%s traced and exported in %.1f s (%s)", name, time.monotonic() - start, path)
    return exported, out_tree["tree"]


def _fitting(compiled: jax.stages.Compiled) -> Callable[..., Any]:
  """`compiled`, first placing each argument the way the executable expects.

  A compiled multi-device step returns empty (size-0) leaves replicated even
  where it takes them sharded, so its outputs do not fit its next call as
  they are. Moving those costs nothing; every other leaf already matches and
  passes through untouched.
  """
  shardings = compiled.input_shardings[0]  # None where an argument is unused

  def call(*args: Any) -> Any:
    leaves, tree = jax.tree_util.tree_flatten(args)
    fitted = [_fit(x, s) for x, s in zip(leaves, tree.flatten_up_to(shardings), strict=True)]
    return compiled(*jax.tree_util.tree_unflatten(tree, fitted))

  return call


def _fit(x: Any, sharding: jax.sharding.Sharding | None) -> Any:
  if isinstance(x, jax.Array) and x.is_deleted():
    # jax 0.9.2 checks this for one device only; a multi-device executable
    # given a donated (deleted) buffer crashes the process.
    raise ValueError(
      "a compiled step was given an array an earlier call donated (deleted); pass the arrays the last call returned"
    )
  if sharding is None or not isinstance(x, jax.Array) or x.sharding == sharding:
    return x
  if not x.sharding.is_equivalent_to(sharding, x.ndim):
    return jax.device_put(x, sharding)
  return x


def _prepare_cpu_kernels() -> None:
  """Makes jaxlib's CPU LAPACK kernels callable before a loaded step runs.

  jaxlib fills in its LAPACK function pointers when a linear-algebra op is
  lowered, not when a module that calls them is deserialized. A loaded MJX
  step (Cholesky in the constraint solver) would crash the process in one
  that never lowered such an op. Lowering a tiny Cholesky (no compilation)
  does the initialization.
  """
  if any(d.platform == "cpu" for d in jax.local_devices()):
    jax.jit(jax.numpy.linalg.cholesky).lower(jax.ShapeDtypeStruct((2, 2), jax.numpy.float32))


def _spec(x: Any) -> jax.ShapeDtypeStruct:
  sharding = x.sharding if isinstance(x, jax.Array) else None
  return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding, weak_type=getattr(x, "weak_type", False))


def _read(path: Path):
  """(exported, out_tree), `_UNSUPPORTED`, or None when absent or unreadable."""
  try:
    data = path.read_bytes()
  except OSError:
    return None
  if data == _UNSUPPORTED:
    return _UNSUPPORTED
  try:
    entry = pickle.loads(data)
    if entry["version"] != FORMAT_VERSION:
      raise ValueError(f"format {entry['version']}")
    return jax.export.deserialize(bytearray(entry["exported"])), entry["out_tree"]
  except Exception as e:  # noqa: BLE001  (a damaged entry is rebuilt)
    logger.warning("step cache entry %s is unreadable (%s); rebuilding it", path, _first_line(e))
    path.unlink(missing_ok=True)
    return None


def _write(path: Path, data: bytes) -> None:
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    directories.write_atomic(path, data)
  except OSError as e:
    logger.warning("could not write step cache entry %s: %s", path, e)


def _prune(directory: Path, name: str, keep: int) -> None:
  """Deletes all but the `keep` most recently written or loaded entries of `name`."""
  entries = []
  for path in directory.glob(f"{name}-*.jaxexport"):
    try:
      entries.append((path.stat().st_mtime, path))
    except OSError:
      continue
  for _, path in sorted(entries, reverse=True)[keep:]:
    path.unlink(missing_ok=True)


def _first_line(e: BaseException) -> str:
  text = str(e).strip().splitlines()
  return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def environment_digest() -> str:
  """Hash of the code, data, installed packages, devices and JAX flags (once per process)."""
  global _ENVIRONMENT_DIGEST
  if _ENVIRONMENT_DIGEST is None:
    h = hashlib.sha256()
    h.update(sys.version.encode())
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    h.update("\n".join(dists).encode())
    h.update(repr([(d.platform, d.device_kind, d.id, d.process_index) for d in jax.devices()]).encode())
    for flag in ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion"):
      h.update(f"{flag}={getattr(jax.config, flag, None)}".encode())
    for path in sorted(_project_files()):
      h.update(str(path).encode())
      h.update(hashlib.sha256(path.read_bytes()).digest())
    _ENVIRONMENT_DIGEST = h.hexdigest()
  return _ENVIRONMENT_DIGEST


def _project_files() -> set[Path]:
  """Imported modules outside installed distributions, and their packages' files."""
  library_roots = {
    Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib") if (p := sysconfig.get_paths().get(key))
  }
  library_roots |= {Path(p).resolve() for p in sys.path if "site-packages" in p or "dist-packages" in p}
  files: set[Path] = set()
  roots: set[Path] = set()
  for module in list(sys.modules.values()):
    file = getattr(module, "__file__", None)
    if not file:
      continue
    path = Path(file).resolve()
    if not path.is_file() or any(path.is_relative_to(root) for root in library_roots):
      continue
    files.add(path)
    top = module.__name__.split(".", 1)[0]
    top_module = sys.modules.get(top)
    top_file = getattr(top_module, "__file__", None)
    if top_file and Path(top_file).name == "__init__.py":
      roots.add(Path(top_file).resolve().parent)
  for root in roots:
    for path in root.rglob("*"):
      if path.is_file() and "__pycache__" not in path.parts and not path.name.startswith("."):
        files.add(path)
  return files
