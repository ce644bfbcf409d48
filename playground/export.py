"""Export a checkpoint's policy to ONNX for the robot.

    uv run playground/export.py checkpoints/<run>[/<step>] [--output policy.onnx]
    uv run playground/export.py checkpoints/<run> --untrained 0 --output untrained.onnx   # baseline

The checkpoint's run directory holds `config.json`, which names the robot,
env, task and network settings; the network is rebuilt from it (the robot's
runner is found in `registry`), exported with `common.export`, and checked
against the JAX policy before it is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
from brax.training.acme import running_statistics
from ml_collections import config_dict

from playground import registry
from playground.common import checkpointing
from playground.common import export
from playground.common import onnx_export
from playground.common import ppo as ppo_lib

logger = logging.getLogger("playground")


def export_checkpoint(
  checkpoint: str | Path, output: str | Path | None = None, untrained_seed: int | None = None
) -> tuple[Path, float]:
  """Exports the policy of a checkpoint (step directory or run directory).

  Args:
    checkpoint: step directory, or run directory (its latest step).
    output: file to write (default: `policy.onnx` in the step directory).
    untrained_seed: if set, the same network with the policy weights PPO
      initializes from this seed (the run's own initial policy for the run's
      seed), behind the checkpoint's observation normalizer: the untrained
      baseline a scorecard compares a trained policy with. Its metadata says
      training step 0.

  Returns:
    (path written, max |onnx - jax| of the parity check).
  """
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
  except Exception as e:  # noqa: BLE001 - Orbax raises many types; all mean unloadable
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
  policy_params = ts["params"]["policy"]
  step = int(meta["step"])
  if untrained_seed is not None:
    _, key_policy, _ = jax.random.split(jax.random.PRNGKey(untrained_seed), 3)  # as PPO.init_training_state
    policy_params = ppo_lib.init_policy_head(
      network.policy_network.init(key_policy),
      compat["action_size"],
      ppo_cfg.init_noise_std,
      ppo_cfg.init_action_mean_scale,
    )
    step = 0
  out = Path(output) if output else step_dir / export.POLICY_FILE
  diff = export.export_for_runner(
    out,
    runner_cls,
    config["env"],
    config["task"],
    env_cfg,
    step,
    network,
    normalizer,
    policy_params,
    obs_key,
    compat["action_size"],
    ppo_cfg.activation,
  )
  return out, diff


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point of `playground/export.py`."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  # force: importing the training stack may already have configured the root logger.
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr, force=True)
  for noisy in ("absl", "jax._src", "orbax", "etils"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
  parser = argparse.ArgumentParser(description="Export a checkpoint's policy to ONNX.")
  parser.add_argument("checkpoint", help="checkpoint step directory, or a run directory (latest step)")
  parser.add_argument("--output", "-o", help=f"output file (default: <step dir>/{export.POLICY_FILE})")
  parser.add_argument(
    "--untrained",
    type=int,
    metavar="SEED",
    help="export the same network with freshly initialized policy weights (a baseline to score); needs --output",
  )
  args = parser.parse_args(argv)
  if args.untrained is not None and not args.output:
    parser.error("--untrained needs --output (the checkpoint's own policy.onnx stays the trained one)")
  try:
    path, diff = export_checkpoint(args.checkpoint, args.output, args.untrained)
  except (checkpointing.CheckpointError, onnx_export.ExportError, KeyError) as e:
    sys.stderr.write(f"error: {str(e).strip(chr(39))}\n")
    return 2
  logger.info("wrote %s (max |onnx - jax| = %.2g over 1000 observations)", path, diff)
  return 0


if __name__ == "__main__":
  sys.exit(main())
