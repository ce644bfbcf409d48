"""Turn any checkpoint into an ONNX policy file for the robot.

    uv run playground/export.py checkpoints/<run>[/<step>] [--output policy.onnx]

The checkpoint's run directory holds `config.json`, which names the robot,
env, task and network settings; the network is rebuilt from it, exported
with `onnx_export`, and checked against the JAX policy before it is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("playground")

POLICY_FILE = "policy.onnx"


def jax_policy_fn(network, normalizer, policy_params, obs_key: str | None):
  """numpy obs -> deterministic actions, computed by the Brax network in JAX."""
  import jax  # pylint: disable=import-outside-toplevel

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
) -> float:
  """Writes the ONNX policy to `path` after the parity check; returns max |diff|.

  Raises:
    onnx_export.ExportError: unknown layout or parity failure (nothing written).
  """
  from playground.common import onnx_export  # pylint: disable=import-outside-toplevel

  mean = normalizer.mean[obs_key] if obs_key else normalizer.mean
  std = normalizer.std[obs_key] if obs_key else normalizer.std
  model = onnx_export.build_model(np.asarray(mean), np.asarray(std), policy_params, action_size, activation, metadata)
  diff = onnx_export.verify_parity(model, jax_policy_fn(network, normalizer, policy_params, obs_key), mean, std)
  path = Path(path)
  tmp = path.with_name(f".{path.name}.tmp")
  tmp.write_bytes(model.SerializeToString())
  os.replace(tmp, path)
  return diff


def export_checkpoint(checkpoint: str | Path, output: str | Path | None = None) -> tuple[Path, float]:
  """Exports the policy of a checkpoint (step directory or run directory).

  Returns:
    (path written, max |onnx - jax| of the parity check).
  """
  import jax  # pylint: disable=import-outside-toplevel
  import orbax.checkpoint as ocp  # pylint: disable=import-outside-toplevel
  from brax.training.acme import running_statistics  # pylint: disable=import-outside-toplevel
  from ml_collections import config_dict  # pylint: disable=import-outside-toplevel

  from playground import registry  # pylint: disable=import-outside-toplevel
  from playground.common import checkpointing  # pylint: disable=import-outside-toplevel
  from playground.common import ppo as ppo_lib  # pylint: disable=import-outside-toplevel

  step_dir = checkpointing.resolve(checkpoint)
  meta = checkpointing.read_meta(step_dir)
  config_path = step_dir.parent / "config.json"
  if not config_path.is_file():
    raise checkpointing.CheckpointError(f"{config_path} is missing: cannot tell which network to export")
  config = json.loads(config_path.read_text())
  runner_cls = registry.runner_class(config["robot"])
  ppo_cfg = config_dict.ConfigDict(config["ppo_config"])
  env_cfg = config_dict.ConfigDict(config["env_config"])
  compat = meta["compat"]
  shapes = compat["observation_shapes"]
  obs_is_dict = isinstance(shapes, dict)
  obs_shapes = {k: tuple(v) for k, v in shapes.items()} if obs_is_dict else tuple(shapes)
  obs_key = ppo_cfg.policy_obs_key if obs_is_dict else None
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      tree = checkpointer.restore(step_dir / checkpointing.STATE_DIR)
  except Exception as e:  # pylint: disable=broad-except
    raise checkpointing.CheckpointError(f"cannot load checkpoint {step_dir}: {str(e).splitlines()[0][:300]}") from e
  ts = tree["training_state"]
  norm = ts["normalizer_params"]
  normalizer = running_statistics.RunningStatisticsState(
    count=norm["count"], mean=norm["mean"], summed_variance=norm["summed_variance"], std=norm["std"]
  )
  normalizer = jax.tree_util.tree_map(np.asarray, normalizer)
  network = ppo_lib.network_factory(ppo_cfg, obs_is_dict)(
    obs_shapes,
    compat["action_size"],
    preprocess_observations_fn=running_statistics.normalize if ppo_cfg.normalize_observations else (lambda x, y: x),
  )
  metadata = policy_metadata(runner_cls, config["env"], config["task"], env_cfg, int(meta["step"]), obs_key)
  out = Path(output) if output else step_dir / POLICY_FILE
  diff = export(
    out, network, normalizer, ts["params"]["policy"], obs_key, compat["action_size"], ppo_cfg.activation, metadata
  )
  return out, diff


def policy_metadata(runner_cls, env_name: str, task: str, env_config, step: int, obs_key) -> dict[str, Any]:
  """Metadata written into every exported policy file."""
  import playground  # pylint: disable=import-outside-toplevel

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


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point of `playground/export.py`."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
  parser = argparse.ArgumentParser(description="Export a checkpoint's policy to ONNX.")
  parser.add_argument("checkpoint", help="checkpoint step directory, or a run directory (latest step)")
  parser.add_argument("--output", "-o", help=f"output file (default: <step dir>/{POLICY_FILE})")
  args = parser.parse_args(argv)
  from playground.common import checkpointing  # pylint: disable=import-outside-toplevel
  from playground.common import onnx_export  # pylint: disable=import-outside-toplevel

  try:
    path, diff = export_checkpoint(args.checkpoint, args.output)
  except (checkpointing.CheckpointError, onnx_export.ExportError, KeyError) as e:
    sys.stderr.write(f"error: {str(e).strip(chr(39))}\n")
    return 2
  logger.info("wrote %s (max |onnx - jax| = %.2g over 1000 observations)", path, diff)
  return 0
