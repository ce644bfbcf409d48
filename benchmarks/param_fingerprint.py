"""Fingerprint of a short fixed-seed training run: a digest of the policy it exports.

    uv run python -m benchmarks.param_fingerprint [--robot duck|cartpole] [--env NAME] [--iterations 2]

Trains through the command line (`runner.py --preset smoke --seed 0`), then
reads the exported `policy.onnx` with `onnx` alone (no project code) and
digests its weights (every initializer: normalizer statistics and layers)
and its metadata. Two commits that give the same digests on one machine
trained bit-identical parameters; it is how a restructuring of the code is
shown to change no result. Prints JSON (see `benchmarks/common.py`).
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import common

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {
  "duck": (REPO_ROOT / "playground" / "open_duck_mini_v2" / "runner.py", 1280),
  "cartpole": (REPO_ROOT / "playground" / "cartpole" / "runner.py", 1024),
}


def digests(policy: Path) -> dict[str, str]:
  """sha256 of the file's weights (initializers in name order) and of its metadata."""
  import onnx
  from onnx import numpy_helper

  model = onnx.load(str(policy))
  weights = hashlib.sha256()
  for init in sorted(model.graph.initializer, key=lambda t: t.name):
    weights.update(init.name.encode())
    weights.update(numpy_helper.to_array(init).tobytes())
  meta = hashlib.sha256()
  for prop in sorted(model.metadata_props, key=lambda p: p.key):
    meta.update(f"{prop.key}={prop.value}\n".encode())
  return {"weights_sha256": weights.hexdigest(), "metadata_sha256": meta.hexdigest()}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--robot", choices=tuple(SCRIPTS), default="duck")
  parser.add_argument("--env", help="the robot's --env (default: its default env)")
  parser.add_argument("--iterations", type=int, default=2, help="training iterations (smoke preset)")
  args = parser.parse_args()
  script, per_iteration = SCRIPTS[args.robot]
  with tempfile.TemporaryDirectory() as tmp:
    steps = args.iterations * per_iteration
    cmd = [sys.executable, str(script), "--preset", "smoke", "--seed", "0", "--num_timesteps", str(steps)]
    cmd += ["--checkpoint_every", str(steps), "--output_dir", tmp, "--exp_name", "fp", "--no_step_cache"]
    if args.robot == "duck":
      cmd += ["--score", "off"]
    if args.env:
      cmd += ["--env", args.env]
    subprocess.run(cmd, check=True, cwd=REPO_ROOT, stdout=sys.stderr)
    policies = sorted(Path(tmp, "fp").glob("*/policy.onnx"))
    result = {"robot": args.robot, "env": args.env, "env_steps": steps, "policy": policies[-1].parent.name}
    result.update(digests(policies[-1]))
  commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT)
  result["commit"] = commit.stdout.strip()
  result["machine"] = common.machine()
  common.emit(result)


if __name__ == "__main__":
  main()
