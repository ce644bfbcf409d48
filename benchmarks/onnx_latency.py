"""ONNX policy latency with onnxruntime: batch 1, one thread (as on the robot).

Exports a policy with the full preset's network sizes (random weights: the
latency does not depend on the values) and times `session.run`. Prints JSON.

    uv run python -m benchmarks.onnx_latency
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine


def run(preset: str, iterations: int) -> dict:
  import jax
  import onnxruntime as ort
  from brax.training.acme import running_statistics

  from playground.common.export import policy_file
  from playground.common.train import ppo
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.runner import ppo_config

  cfg = ppo_config("joystick", preset)
  shapes = {"state": (observations.STATE_LAYOUT.size,), "privileged_state": (observations.PRIVILEGED_LAYOUT.size,)}
  network = ppo.network_factory(cfg, obs_is_dict=True)(
    shapes, observations.NUM_ACTIONS, preprocess_observations_fn=running_statistics.normalize
  )
  params = network.policy_network.init(jax.random.PRNGKey(0))
  mean = {k: np.zeros(v, np.float32) for k, v in shapes.items()}
  std = {k: np.ones(v, np.float32) for k, v in shapes.items()}
  normalizer = running_statistics.RunningStatisticsState(count=np.ones(()), mean=mean, summed_variance=std, std=std)
  with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "policy.onnx"
    policy_file.export(path, network, normalizer, params, "state", observations.NUM_ACTIONS, cfg.activation, {})
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(0).normal(size=(1, observations.STATE_LAYOUT.size)).astype(np.float32)
    for _ in range(100):
      session.run(None, {"obs": obs})
    times = []
    for _ in range(iterations):
      start = time.perf_counter()
      session.run(None, {"obs": obs})
      times.append(time.perf_counter() - start)
    size = path.stat().st_size
  times = np.array(times) * 1e6
  return {
    "preset": preset,
    "policy_hidden_layer_sizes": list(cfg.policy_hidden_layer_sizes),
    "file_bytes": size,
    "latency_us_median": round(float(np.median(times)), 1),
    "latency_us_p99": round(float(np.percentile(times, 99)), 1),
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--preset", nargs="+", default=["full", "quick"])
  parser.add_argument("--iterations", type=int, default=5000)
  args = parser.parse_args()
  emit({"benchmark": "onnx_latency", "machine": machine(), "results": [run(p, args.iterations) for p in args.preset]})


if __name__ == "__main__":
  main()
