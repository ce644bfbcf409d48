"""Helpers shared by the benchmark scripts (JSON output, timing, machine facts)."""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Only the JSON goes to stdout: libraries (MuJoCo Warp's banner and kernel-load
# lines, XLA) print there too, so file descriptor 1 is pointed at stderr and the
# result is written to a duplicate of the original stdout.
sys.stdout.flush()
_JSON_OUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)


def machine() -> dict[str, Any]:
  """Facts about the machine the numbers come from."""
  import jax

  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  return {
    "cpu": cpu,
    "cores": os.cpu_count(),
    "jax_backend": jax.default_backend(),
    "devices": [str(d) for d in jax.devices()],
    "python": sys.version.split()[0],
    "jax": jax.__version__,
  }


#: Env overrides for a kick experiment: the nominal model with no noise and no
#: delays, no feed-forward (a policy file adds its own), and the env's own kicks
#: never firing, so that the kicks a script applies are the only ones.
KICK_ONLY_OVERRIDES = (
  "reference.feedforward=False",
  "noise_config.level=0.0",
  "delay.action_steps=(0,0)",
  "delay.imu_steps=(0,0)",
  "push_config.enable=True",
  "push_config.interval_range=(100000.0,100000.0)",
)


def kicked_qvel(qpos: Any, qvel: Any, strength: float, directions_deg: Any) -> Any:
  """A copy of a batch's `qvel` ([n, nv]) with each trunk kicked horizontally.

  Each row gets `strength` m/s at its `directions_deg` (degrees from the trunk's
  heading, 90: to the left), the heading being the yaw of a level trunk from
  the free joint's quaternion in `qpos` ([n, nq]).
  """
  import numpy as np

  qpos, qvel = np.asarray(qpos), np.array(qvel)
  heading = 2 * np.arctan2(qpos[:, 6], qpos[:, 3])
  angle = heading + np.radians(np.broadcast_to(np.asarray(directions_deg, float), heading.shape))
  qvel[:, 0:2] += strength * np.stack([np.cos(angle), np.sin(angle)], axis=1)
  return qvel


def hold_command(state: Any, commands: Any) -> Any:
  """A batch of env states whose command is `commands` ([n, 7], or zeros when None) for good:
  the command timer is parked so that the episode never draws another one."""
  import jax.numpy as jp

  n = state.info["command"].shape[0]
  commands = jp.zeros_like(state.info["command"]) if commands is None else jp.asarray(commands, jp.float32)
  return state.replace(info={**state.info, "command": commands, "command_timer": jp.full(n, 10**9, jp.int32)})


def trunk_up_z(qpos: Any) -> Any:
  """World z of the trunk's z axis ([n]) from the free joint's quaternion (w, x, y, z) in `qpos` ([n, nq])."""
  q = qpos[:, 3:7]
  return 1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)


def trunk_pitch_deg(qpos: Any, xp: Any = None) -> Any:
  """Trunk pitch ([n], degrees, nose-down positive) from the free joint's quaternion (w, x, y, z) in `qpos` ([n, nq]).

  `xp` is numpy (default) or jax.numpy (inside a jitted function).
  """
  import numpy as np

  xp = np if xp is None else xp
  w, x, y, z = (qpos[:, i] for i in range(3, 7))
  return xp.degrees(xp.arcsin(xp.clip(2.0 * (w * y - z * x), -1.0, 1.0)))


def build_env(env_name: str, task: str, overrides: list[str], preset: str = "full", num_envs: int | None = None):
  """The Open Duck Mini V2 runner's own env, randomizer and VecEnv for a configuration.

  Goes through `resolve_config`, so overrides get the runner's validation.
  Returns (runner, env, venv, resolved config).
  """
  from playground.common.runner import RunArgs
  from playground.common.train import vec_env
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  runner = OpenDuckMiniV2Runner(RunArgs(env=env_name, task=task, preset=preset, num_envs=num_envs, overrides=overrides))
  cfg = runner.resolve_config()
  env = runner.make_env(env_name, task, cfg.env_config)
  venv = vec_env.VecEnv(env, cfg.env_config.episode_length, runner.make_randomizer(env, cfg.env_config))
  return runner, env, venv, cfg


@functools.cache
def batched(env: Any) -> tuple[Callable, Callable]:
  """An env's batched `reset` and `step`, jitted once per env object (several calls share the compilation)."""
  import jax

  return jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))


def time_call(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> float:
  """Seconds per call of a jitted `fn`, after `warmup` calls (the 2nd may recompile)."""
  import jax

  for _ in range(warmup):
    jax.block_until_ready(fn())
  start = time.perf_counter()
  for _ in range(repeats):
    out = fn()
  jax.block_until_ready(out)
  return (time.perf_counter() - start) / repeats


def emit(result: dict[str, Any]) -> None:
  """Prints the result as one JSON document on stdout."""
  _JSON_OUT.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
  _JSON_OUT.flush()
