"""The CPU limit: MuJoCo C (`mujoco.rollout`, all cores) on the same model.

Steps `num_envs` copies of the Open Duck Mini V2 for `steps` control steps
(10 physics steps each) with position targets held at the home pose, using
MuJoCo's multi-threaded rollout. Prints JSON (control steps per second).

    uv run python -m benchmarks.mujoco_c --num_envs 1024
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine


def run(task: str, num_envs: int, steps: int) -> dict:
  import mujoco
  from mujoco import rollout

  from playground.open_duck_mini_v2.model import robot_model

  model = robot_model.load_model(task)
  data = mujoco.MjData(model)
  mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
  spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
  state = np.zeros(mujoco.mj_stateSize(model, spec))
  mujoco.mj_getState(model, data, state, spec)
  n_sub = 10
  initial = np.tile(state, (num_envs, 1))
  control = np.tile(model.key("home").ctrl, (num_envs, steps * n_sub, 1))
  threads = os.cpu_count() or 1
  datas = [mujoco.MjData(model) for _ in range(threads)]
  with rollout.Rollout(nthread=threads) as r:
    r.rollout(model, datas, initial, control[:, :n_sub])  # warm-up
    start = time.perf_counter()
    r.rollout(model, datas, initial, control)
    elapsed = time.perf_counter() - start
  return {
    "task": task,
    "num_envs": num_envs,
    "threads": threads,
    "control_steps_per_s": round(num_envs * steps / elapsed, 1),
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--task", default="flat_terrain")
  parser.add_argument("--num_envs", type=int, nargs="+", default=[1024])
  parser.add_argument("--steps", type=int, default=50)
  args = parser.parse_args()
  emit(
    {"benchmark": "mujoco_c", "machine": machine(), "results": [run(args.task, n, args.steps) for n in args.num_envs]}
  )


if __name__ == "__main__":
  main()
