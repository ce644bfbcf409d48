"""Multi-device and multi-host helpers on JAX's own distributed runtime.

One process per host runs the same program. `initialize` connects them with
`jax.distributed.initialize` (coordinator address, process count and id from
flags or the usual environment variables); afterwards `jax.devices()` lists
the devices of every host, the PPO mesh spans all of them, and the
environment batch is split evenly: each process simulates
`num_envs / process_count` environments on its local devices.

Only process 0 writes logs, TensorBoard files, checkpoints and ONNX files;
every process restores from the same checkpoint directory (a shared file
system, or the same path copied to every host).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import jax
import numpy as np

logger = logging.getLogger("playground")

ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"


def initialize(
  coordinator_address: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
) -> bool:
  """Starts JAX's distributed runtime when a multi-process run is requested.

  Arguments default to $JAX_COORDINATOR_ADDRESS, $JAX_NUM_PROCESSES and
  $JAX_PROCESS_ID. Returns True if the runtime was initialized.
  """
  coordinator_address = coordinator_address or os.environ.get(ENV_COORDINATOR)
  if num_processes is None and os.environ.get(ENV_NUM_PROCESSES):
    num_processes = int(os.environ[ENV_NUM_PROCESSES])
  if process_id is None and os.environ.get(ENV_PROCESS_ID):
    process_id = int(os.environ[ENV_PROCESS_ID])
  if not coordinator_address and (num_processes or 1) <= 1:
    return False
  if not coordinator_address or num_processes is None or process_id is None:
    raise ValueError(
      "a multi-process run needs --coordinator_address, --num_processes and --process_id "
      f"(or ${ENV_COORDINATOR}, ${ENV_NUM_PROCESSES}, ${ENV_PROCESS_ID})"
    )
  # Cross-process collectives on CPU (used by tests and CPU clusters).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
    coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id
  )
  logger.info(
    "distributed: process %d of %d, %d local / %d global devices",
    jax.process_index(),
    jax.process_count(),
    jax.local_device_count(),
    jax.device_count(),
  )
  return True


def is_primary() -> bool:
  """True on the process that writes files (process 0)."""
  return jax.process_index() == 0


def multi_process() -> bool:
  return jax.process_count() > 1


def host_local(tree: Any) -> Any:
  """numpy copies of (replicated) arrays, readable on every process."""

  def fetch(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      return np.asarray(x.addressable_shards[0].data)
    return np.asarray(jax.device_get(x))

  return jax.tree_util.tree_map(fetch, tree)


def to_global(local_tree: Any, sharding: jax.sharding.Sharding) -> Any:
  """Global arrays from each process's local part (the whole value if replicated)."""
  return jax.tree_util.tree_map(lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), local_tree)


def gather(tree: Any) -> Any:
  """numpy arrays of the whole batch on every process (a collective)."""
  if not multi_process():
    return jax.tree_util.tree_map(lambda x: np.asarray(jax.device_get(x)), tree)
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel

  return jax.tree_util.tree_map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


def any_process(flag: bool) -> bool:
  """True if `flag` is set on any process (a collective when multi-process)."""
  if not multi_process():
    return bool(flag)
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel

  return bool(np.any(multihost_utils.process_allgather(np.array([flag], dtype=np.int32))))


def barrier(name: str) -> None:
  """Waits until every process reaches this point."""
  if multi_process():
    from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel

    multihost_utils.sync_global_devices(name)
