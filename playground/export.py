"""Export a checkpoint's policy to ONNX for the robot.

    uv run playground/export.py checkpoints/<run>[/<step>] [--output policy.onnx]
    uv run playground/export.py checkpoints/<run> --untrained 0 --output untrained.onnx   # baseline

The network is rebuilt from the run's `config.json` and checked against the
JAX policy before it is written (`playground.checkpoint_policy`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from playground.checkpoint_policy import export_checkpoint
from playground.common.export import onnx_graph
from playground.common.export import policy_file
from playground.common.runs import checkpoints

logger = logging.getLogger("playground")


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point of `playground/export.py`."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  # force: importing the training stack may already have configured the root logger.
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr, force=True)
  for noisy in ("absl", "jax._src", "orbax", "etils"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
  parser = argparse.ArgumentParser(description="Export a checkpoint's policy to ONNX.")
  parser.add_argument("checkpoint", help="checkpoint step directory, or a run directory (latest step)")
  parser.add_argument("--output", "-o", help=f"output file (default: <step dir>/{policy_file.POLICY_FILE})")
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
  except (checkpoints.CheckpointError, onnx_graph.ExportError, KeyError) as e:
    sys.stderr.write(f"error: {str(e).strip(chr(39))}\n")
    return 2
  logger.info("wrote %s (max |onnx - jax| = %.2g over 1000 observations)", path, diff)
  return 0


if __name__ == "__main__":
  sys.exit(main())
