"""Atomic, step-numbered Orbax checkpoints of the complete training state.

Layout of a run directory::

    <run_dir>/
      config.json                 effective configuration of the run
      events.out.tfevents.*       TensorBoard
      000001048576/               one directory per checkpoint, named by env step
        meta.json                 step, compatibility fingerprint, versions
        state/                    Orbax checkpoint: TrainingState + EnvState
        policy.onnx               the policy for the robot (when exported)

A checkpoint is written into a hidden `.tmp-*` directory and renamed into
place only when complete, so a process killed at any moment leaves the
previous checkpoints intact; incomplete directories are never listed and are
removed on the next start.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import serialization

# Finding and naming checkpoints needs no JAX: it lives in `directories`.
from playground.common.runs.directories import META_FILE
from playground.common.runs.directories import STATE_DIR
from playground.common.runs.directories import CheckpointError
from playground.common.runs.directories import latest_checkpoint
from playground.common.runs.directories import list_checkpoints
from playground.common.runs.directories import read_meta
from playground.common.runs.directories import resolve
from playground.common.runs.directories import step_dir_name

__all__ = [
  "META_FILE",
  "STATE_DIR",
  "CheckpointError",
  "abstract",
  "cleanup_incomplete",
  "fit_parts",
  "latest_checkpoint",
  "list_checkpoints",
  "prune",
  "read_meta",
  "resolve",
  "restore",
  "restore_parts",
  "save",
  "step_dir_name",
]

logger = logging.getLogger(__name__)


def cleanup_incomplete(run_dir: Path) -> None:
  """Removes leftovers of checkpoint writes that were killed."""
  run_dir = Path(run_dir)
  if not run_dir.is_dir():
    return
  for p in run_dir.iterdir():
    if p.name.startswith(".tmp-"):
      logger.warning("removing incomplete checkpoint %s", p)
      shutil.rmtree(p, ignore_errors=True)


def save(
  run_dir: Path,
  step: int,
  tree: Any,
  meta: dict[str, Any],
  extra: Callable[[Path], None] | None = None,
) -> Path:
  """Writes checkpoint `step` atomically and returns its directory.

  Args:
    run_dir: the run directory.
    step: env step count, names the directory.
    tree: pytree to store with Orbax (arrays may live on any device).
    meta: JSON-serializable metadata.
    extra: optional `fn(tmp_dir)` writing more files (e.g. the ONNX policy)
      before the directory is published; its exceptions are logged, not raised.
  """
  run_dir = Path(run_dir)
  final = run_dir / step_dir_name(step)
  if final.exists():
    return final
  tmp = run_dir / f".tmp-{step_dir_name(step)}-{os.getpid()}"
  shutil.rmtree(tmp, ignore_errors=True)
  tmp.mkdir(parents=True)
  checkpointer = _checkpointer()
  checkpointer.save(tmp / STATE_DIR, _host_state_dict(tree))
  checkpointer.wait_until_finished()
  checkpointer.close()
  if extra is not None:
    try:
      extra(tmp)
    except Exception:  # noqa: BLE001 - extra files must not stop training
      logger.exception("writing extra checkpoint files failed at step %d (training continues)", step)
  (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
  _fsync_dir(tmp)
  os.rename(tmp, final)
  _fsync_dir(run_dir)
  return final


def restore(step_dir: Path, abstract_tree: Any) -> Any:
  """Restores the Orbax state of `step_dir` into the structure of `abstract_tree`.

  Raises:
    CheckpointError: if the files are missing, truncated or do not match.
  """
  try:
    with _checkpointer() as checkpointer:
      state = checkpointer.restore(Path(step_dir).absolute() / STATE_DIR, serialization.to_state_dict(abstract_tree))
    return serialization.from_state_dict(abstract_tree, state)
  except Exception as e:  # noqa: BLE001 - Orbax raises many types; all mean unloadable
    raise CheckpointError(f"cannot load checkpoint {step_dir}: {_reason(e)}") from e


def restore_parts(step_dir: Path, parts: dict[str, Any]) -> dict[str, Any]:
  """Restores only some subtrees of `step_dir`'s state, whatever the rest holds.

  Args:
    step_dir: checkpoint step directory.
    parts: path in the saved tree ("training_state/params") -> abstract tree
      (or a template) of what it must hold.

  Returns:
    path -> the restored subtree, in the structure of its template.

  Raises:
    CheckpointError: unreadable files, a missing part, or a part whose
      structure or array shapes differ from the template's (named).
  """
  return fit_parts(step_dir, read_parts(step_dir, list(parts)), parts)


def fit_parts(step_dir: Path, saved: dict[str, Any], parts: dict[str, Any]) -> dict[str, Any]:
  """Subtrees read by `read_parts`, checked against templates and put in their structure.

  Args:
    step_dir: the checkpoint they were read from (named in errors).
    saved: path -> subtree as saved (`read_parts`).
    parts: path -> abstract tree (or a template) of what it must hold.

  Raises:
    CheckpointError: a part whose structure or array shapes differ from the
      template's (named).
  """
  out = {}
  for path, template in parts.items():
    node = saved[path]
    expected = serialization.to_state_dict(template)
    want = jax.tree_util.tree_flatten_with_path(expected)[0]
    got = dict(jax.tree_util.tree_flatten_with_path(node)[0])
    for key_path, leaf in want:
      name = path + jax.tree_util.keystr(key_path)
      if key_path not in got:
        raise CheckpointError(f"cannot load checkpoint {step_dir}: it has no {name}")
      if tuple(np.shape(got[key_path])) != tuple(np.shape(leaf)):
        raise CheckpointError(
          f"cannot load checkpoint {step_dir}: {name} has shape {tuple(np.shape(got[key_path]))}, "
          f"this run's is {tuple(np.shape(leaf))} (another network size?)"
        )
    if len(got) != len(want):
      raise CheckpointError(f"cannot load checkpoint {step_dir}: {path} holds other arrays than this run's")
    out[path] = serialization.from_state_dict(template, node)
  return out


def read_parts(step_dir: Path, paths: list[str]) -> dict[str, Any]:
  """Subtrees of `step_dir`'s state as saved (nested dicts of numpy arrays), with no template.

  Raises:
    CheckpointError: unreadable files or a missing part (named).
  """
  try:
    with _checkpointer() as checkpointer:
      saved = checkpointer.restore(Path(step_dir).absolute() / STATE_DIR)
  except Exception as e:  # noqa: BLE001 - Orbax raises many types; all mean unloadable
    raise CheckpointError(f"cannot load checkpoint {step_dir}: {_reason(e)}") from e
  out = {}
  for path in paths:
    node = saved
    for key in path.split("/"):
      if not isinstance(node, dict) or key not in node:
        raise CheckpointError(f"cannot load checkpoint {step_dir}: it has no '{path}'")
      node = node[key]
    out[path] = node
  return out


def _reason(e: Exception) -> str:
  """An exception's message on one line, at most 300 characters."""
  return " ".join(str(e).split())[:300] or type(e).__name__


def prune(run_dir: Path, keep_last: int) -> None:
  """Deletes all but the newest `keep_last` complete checkpoints (0 keeps all)."""
  if keep_last <= 0:
    return
  for old in list_checkpoints(run_dir)[:-keep_last]:
    shutil.rmtree(old, ignore_errors=True)


def abstract(tree: Any) -> Any:
  """ShapeDtypeStructs describing `tree`, restored onto this process's first device."""
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), tree)


def _host_state_dict(tree: Any) -> Any:
  """Nested dicts of numpy arrays (what the checkpoint stores).

  Plain numpy leaves can be written by one process of a multi-host run;
  `restore` rebuilds the original structure with `from_state_dict`.
  """
  return jax.tree_util.tree_map(lambda x: np.asarray(jax.device_get(x)), serialization.to_state_dict(tree))


def _checkpointer() -> ocp.StandardCheckpointer:
  """An Orbax checkpointer that involves this process only.

  In a multi-process run only process 0 writes (the state is gathered to it
  first), and every process restores on its own: no cross-process barriers.
  """
  me = jax.process_index()
  return ocp.StandardCheckpointer(
    multiprocessing_options=ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
  )


def _fsync_dir(path: Path) -> None:
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)
