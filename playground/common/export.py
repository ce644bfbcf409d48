"""Writing a trained policy as an ONNX file, checked against the JAX policy.

`export` builds the ONNX model (`onnx_export`), verifies it against the Brax
network and writes it atomically; `policy_metadata` is what every policy
file says about its robot. Exporting a checkpoint from its run directory is
`playground/export.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import jax
import numpy as np

import playground
from playground.common import onnx_export
from playground.common import run_dirs

if TYPE_CHECKING:
  from ml_collections import config_dict

  from playground.common.runner import BaseRunner

POLICY_FILE = "policy.onnx"


def jax_policy_fn(network, normalizer, policy_params, obs_key: str | None):
  """numpy obs -> deterministic actions, computed by the Brax network in JAX."""
  dist = network.parametric_action_distribution

  @jax.jit
  def policy(obs):
    batch = {obs_key: obs} if obs_key else obs
    logits = network.policy_network.apply(normalizer, policy_params, batch)
    return dist.mode(logits)

  return lambda obs: np.asarray(policy(obs))


def export(
  path: Path,
  network,
  normalizer,
  policy_params: Mapping[str, Any],
  obs_key: str | None,
  action_size: int,
  activation: str,
  metadata: Mapping[str, Any],
  feedforward: Any = None,
) -> float:
  """Writes the ONNX policy to `path` after the parity check; returns max |diff|.

  With `feedforward` (a `reference.Feedforward`), the file outputs the
  network's action plus the feed-forward, checked against the same sum in JAX.

  Raises:
    onnx_export.ExportError: unknown layout or parity failure (nothing written).
  """
  mean = normalizer.mean[obs_key] if obs_key else normalizer.mean
  std = normalizer.std[obs_key] if obs_key else normalizer.std
  model = onnx_export.build_model(
    np.asarray(mean), np.asarray(std), policy_params, action_size, activation, metadata, feedforward
  )
  policy = jax_policy_fn(network, normalizer, policy_params, obs_key)
  if feedforward is not None:
    offsets = jax.jit(feedforward.from_obs_fn())
    network_policy = policy
    policy = lambda obs: network_policy(obs) + np.asarray(offsets(obs))  # noqa: E731
  diff = onnx_export.verify_parity(model, policy, mean, std)
  run_dirs.write_atomic(Path(path), model.SerializeToString())
  return diff


def policy_metadata(
  runner_cls: type[BaseRunner],
  env_name: str,
  task: str,
  env_config: config_dict.ConfigDict,
  step: int,
  obs_key: str | None,
) -> dict[str, Any]:
  """Metadata written into every exported policy file."""
  meta = {
    "robot": runner_cls.robot,
    "env": env_name,
    "task": task,
    "training_step": step,
    "project": "duck-playground",
    "project_version": playground.__version__,
    "input_name": "obs",
    "output_name": "continuous_actions",
    "observation_key": obs_key or "",
  }
  meta.update(runner_cls.policy_metadata(env_name, task, env_config))
  return meta
