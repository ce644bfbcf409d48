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
ENV_NUM_CPU_DEVICES = "JAX_NUM_CPU_DEVICES"
XLA_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


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
  from jax.experimental import multihost_utils

  return jax.tree_util.tree_map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


def any_process(flag: bool) -> bool:
  """True if `flag` is set on any process (a collective when multi-process)."""
  if not multi_process():
    return bool(flag)
  from jax.experimental import multihost_utils

  return bool(np.any(multihost_utils.process_allgather(np.array([flag], dtype=np.int32))))


def barrier(name: str) -> None:
  """Waits until every process reaches this point."""
  if multi_process():
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


# ---- CPU devices.


def available_cores() -> int:
  """CPU cores this process may use: its affinity mask, capped by a cgroup quota."""
  try:
    cores = len(os.sched_getaffinity(0))
  except (AttributeError, OSError):
    cores = os.cpu_count() or 1
  quota = _cgroup_cpu_quota()
  if quota is not None:
    cores = min(cores, max(1, int(quota)))
  return max(1, cores)


def _cgroup_cpu_quota() -> float | None:
  """CPUs granted by a cgroup v2 `cpu.max` or v1 CFS quota (None: no limit)."""
  try:
    quota, period = open("/sys/fs/cgroup/cpu.max", encoding="ascii").read().split()[:2]
    return None if quota == "max" else int(quota) / int(period)
  except (OSError, ValueError):
    pass
  try:
    quota = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="ascii").read())
    period = int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii").read())
    return quota / period if quota > 0 and period > 0 else None
  except (OSError, ValueError):
    return None


def auto_cpu_devices(cores: int, *batch_sizes: int) -> int:
  """The most CPU devices, at most one per core, that split every batch evenly."""
  return max(d for d in range(1, max(1, cores) + 1) if all(b % d == 0 for b in batch_sizes))


def configure_cpu_devices(setting: str | int | None, batch_sizes: tuple[int, ...], multi: bool) -> int | None:
  """Sets how many devices JAX's CPU backend has, before JAX starts.

  XLA runs a training step on about one core per CPU device, so one device
  per core is the fast setting on a CPU-only machine (the env batch is split
  over the devices like over GPUs). On a machine whose JAX runs on a GPU the
  setting has no effect on training.

  Args:
    setting: None leaves JAX's configuration alone; 'auto' uses
      `auto_cpu_devices(available_cores(), *batch_sizes)` unless the user
      already chose a count (`$JAX_NUM_CPU_DEVICES` or
      `XLA_FLAGS=--xla_force_host_platform_device_count=N`) or the run is
      multi-process; an integer sets that count.
    batch_sizes: env batches that must split evenly (training and evaluation).
    multi: whether this is one process of a multi-process run.

  Returns:
    The count that was set, or None when it was left alone.

  Raises:
    ValueError: an explicit count in a process whose JAX already started with
      another count.
  """
  if setting is None:
    return None
  if setting == "auto":
    if multi or os.environ.get(ENV_NUM_CPU_DEVICES) or XLA_DEVICE_COUNT_FLAG in os.environ.get("XLA_FLAGS", ""):
      return None
    count = auto_cpu_devices(available_cores(), *batch_sizes)
  else:
    count = int(setting)
  if jax.config.jax_num_cpu_devices == count:
    return count
  try:
    jax.config.update("jax_num_cpu_devices", count)
  except RuntimeError:
    # JAX already runs in this process (e.g. a library call after other JAX work).
    have = len(jax.devices("cpu"))
    if setting == "auto" and have != count:
      logger.warning(
        "--cpu_devices auto: JAX started before the device count was set, so this run keeps %d CPU device(s) "
        "where %d would be faster (something made a JAX array before the runner configured JAX)",
        have,
        count,
      )
    if setting == "auto" or have == count:
      return None
    raise ValueError(
      f"--cpu_devices {count}: JAX already started in this process with {have} CPU device(s); "
      "choose the count before any JAX operation"
    ) from None
  return count


def localize_model(env: Any) -> Any:
  """Moves an env's MJX model onto this process's first device, if it is on another process's.

  `mjx.put_model` without a device picks `jax.devices()[0]`, which is process
  0's device in a multi-process run; other processes could not use the arrays
  (MuJoCo Playground's own envs do this). Envs that place their model on
  `jax.local_devices()[0]` themselves are left alone. Returns `env`.
  """
  model = getattr(env, "_mjx_model", None)
  if model is None or not multi_process():
    return env
  here = jax.process_index()
  leaves = [x for x in jax.tree_util.tree_leaves(model) if isinstance(x, jax.Array)]
  if any(d.process_index != here for x in leaves for d in x.devices()):
    from mujoco import mjx

    # Rebuilt from the MuJoCo model: arrays cannot be copied across processes.
    env._mjx_model = mjx.put_model(env.mj_model, impl=model.impl, device=jax.local_devices()[0])
  return env
