#!/usr/bin/env bash
# GPU benchmark, sized to finish in under 8 minutes on one H100/H200-class GPU.
# Run from the repository root on a machine with an NVIDIA GPU:
#   uv sync --extra cuda && bash benchmarks/gpu.sh > gpu_results.json
# Prints one JSON document per benchmark (env throughput at 8192 envs for
# both MJX implementations, then training throughput of the full preset).
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=3 XLA_PYTHON_CLIENT_PREALLOCATE=false
uv run --extra cuda python -m benchmarks.env_throughput --num_envs 8192 --impl jax warp --steps_per_call 20
uv run --extra cuda python -m benchmarks.train_throughput --preset full --repeats 5 --rounds 2 --impl jax warp
