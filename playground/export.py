"""Export a checkpoint's policy to ONNX: `uv run playground/export.py CHECKPOINT [-o FILE]`."""

import sys

from playground.common.export import main

if __name__ == "__main__":
  sys.exit(main())
