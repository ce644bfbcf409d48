"""Sim-to-sim playback: run an ONNX policy (or a checkpoint) in MuJoCo C.

    uv run playground/open_duck_mini_v2/mujoco_infer.py --onnx policy.onnx --vx 0.1 --video walk.mp4
    uv run playground/open_duck_mini_v2/mujoco_infer.py --checkpoint checkpoints/<run> --viewer

The robot is simulated by MuJoCo's C engine on the project's model, not by
MJX. Observations, the action pipeline (delay, scaling, servo speed limit)
and the per-step bookkeeping are the training environment's own functions
(`base.read`, `env.apply_action`, `env.advance`, `env.observe`), applied to
the C simulation state: there is no second copy of the observation code.
Sensor noise, delays and pushes are off unless `--noise` / `--delays` ask
for the training settings.

Headless video needs an OpenGL backend: EGL (Debian: `libegl1
libgl1-mesa-dri`) or OSMesa (`libosmesa6`), selected with MUJOCO_GL=egl or
MUJOCO_GL=osmesa (default: egl).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("playground")

COMMAND_KEYS = ("vx", "vy", "yaw_rate", "neck_pitch", "head_pitch", "head_yaw", "head_roll")


def onnx_policy(path: str | Path, batched: bool = False) -> Callable[[np.ndarray], np.ndarray]:
  """obs (state size,) -> actions (14,) with onnxruntime, as on the robot.

  With `batched`, obs (N, state size) -> actions (N, 14) in one call.
  """
  import onnxruntime as ort

  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
  if batched:
    return lambda obs: session.run(None, {"obs": np.asarray(obs, np.float32)})[0]
  return lambda obs: session.run(None, {"obs": [np.asarray(obs, np.float32)]})[0][0]


class CommandSchedule:
  """Piecewise-constant commands: [(t_start, 7-vector), ...] sorted by time."""

  def __init__(self, entries: Sequence[tuple[float, np.ndarray]]):
    self._entries = sorted(entries, key=lambda e: e[0])

  @classmethod
  def constant(cls, values: Sequence[float]) -> CommandSchedule:
    return cls([(0.0, np.asarray(values, np.float32))])

  @classmethod
  def from_json(cls, path: str | Path) -> CommandSchedule:
    """[{"t": 0, "vx": 0.1}, {"t": 4, "yaw_rate": 0.5}, ...]; missing keys are 0."""
    raw = json.loads(Path(path).read_text())
    entries = []
    for item in raw:
      unknown = set(item) - {"t", *COMMAND_KEYS}
      if unknown:
        raise ValueError(f"{path}: unknown command keys {sorted(unknown)}; valid: t, {', '.join(COMMAND_KEYS)}")
      entries.append((float(item.get("t", 0.0)), np.array([float(item.get(k, 0.0)) for k in COMMAND_KEYS], np.float32)))
    if not entries:
      raise ValueError(f"{path}: the command script is empty")
    return cls(entries)

  def __call__(self, t: float) -> np.ndarray:
    current = self._entries[0][1]
    for start, values in self._entries:
      if t + 1e-9 >= start:
        current = values
    return current


class Playback:
  """A MuJoCo C simulation of the duck driven by a policy, with training's observation code.

  Args:
    policy: obs (state size,) -> action (14,).
    env_name: joystick or standing (its config defines the pipeline).
    task: scene (see `constants.TASKS`).
    noise: keep the training sensor noise (default off).
    delays: keep the training action/IMU delays (default off).
    seed: seed of the noise and delays.
    observation_history: earlier frames the policy observes (its metadata's
      layout, `observations.history_of`).
  """

  def __init__(
    self,
    policy: Callable[[np.ndarray], np.ndarray],
    env_name: str = "joystick",
    task: str = "flat_terrain",
    noise: bool = False,
    delays: bool = False,
    seed: int = 0,
    observation_history: int = 0,
  ):
    import jax
    import mujoco

    from playground.open_duck_mini_v2 import base
    from playground.open_duck_mini_v2.runner import env_class

    config = base.without_disturbances(
      env_class(env_name).default_config(), noise=noise, delays=delays, randomization=True
    )
    config.observation_history = observation_history
    self.env = env_class(env_name)(task=task, config=config)
    self.model = self.env.mj_model
    self.data = mujoco.MjData(self.model)
    self.policy = policy
    self._mujoco = mujoco
    self._key = jax.random.PRNGKey(seed)
    ids, model = self.env.ids, self.model
    self._read = jax.jit(lambda view: base.read(ids, model, view))
    self._apply = jax.jit(self.env.apply_action)
    self._advance = jax.jit(self.env.advance)
    self._observe = jax.jit(self.env.observe)
    self._initial_info = jax.jit(self.env.initial_info)
    self._jax = jax
    self.info: dict[str, Any] = {}
    self.obs: dict[str, np.ndarray] = {}
    self.time = 0.0

  def view(self) -> Any:
    """The fields of the C state that the observation code reads."""
    from playground.open_duck_mini_v2.base import DataView

    return DataView.from_mjdata(self.data)

  def _next_key(self):
    self._key, key = self._jax.random.split(self._key)
    return key

  def reset(self, command: np.ndarray) -> dict[str, np.ndarray]:
    """Home keyframe, fresh episode state, first observation."""
    mujoco = self._mujoco
    mujoco.mj_resetDataKeyframe(self.model, self.data, self.model.key("home").id)
    mujoco.mj_forward(self.model, self.data)
    readings = self._read(self.view())
    info = self._initial_info(self._next_key(), readings)
    info["command"] = np.asarray(command, np.float32)
    obs, info = self._observe(readings, info, self._next_key())
    self.info, self.obs, self.time = info, obs, 0.0
    return obs

  def step(self, command: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One control period: policy, action pipeline, physics, observation."""
    action = np.asarray(self.policy(np.asarray(self.obs["state"])), np.float32)
    info = self._apply(self.info, action, self._next_key())
    self.data.ctrl[:] = np.asarray(info["motor_targets"])
    self._mujoco.mj_step(self.model, self.data, nstep=self.env.n_substeps)
    readings = self._read(self.view())
    info, _ = self._advance(info, readings, action)
    info["command"] = np.asarray(command, np.float32)
    self.obs, info = self._observe(readings, info, self._next_key())
    self.info = info
    self.time += self.env.dt
    return action, self.obs

  def fallen(self) -> bool:
    cfg = self.env.config.termination
    readings = self._read(self.view())
    return bool(-readings.gravity[2] < cfg.min_up_z or readings.base_height[0] < cfg.min_base_height)


def run(
  playback: Playback,
  schedule: CommandSchedule,
  duration: float,
  video: str | None = None,
  record: str | None = None,
  width: int = 640,
  height: int = 480,
) -> dict[str, Any]:
  """Runs `duration` seconds headless; returns the summary (distance, tracking error, falls)."""
  mujoco = playback._mujoco
  renderer = mujoco.Renderer(playback.model, height=height, width=width) if video else None
  frames = []
  log: dict[str, list] = {k: [] for k in ("time", "obs", "action", "motor_targets", "command", "qpos")}
  obs = playback.reset(schedule(0.0))
  start_xy = playback.data.qpos[0:2].copy()
  distance, falls, errors, yaw_errors = 0.0, 0, [], []
  steps = int(round(duration / playback.env.dt))
  for _ in range(steps):
    command = schedule(playback.time)
    log["time"].append(playback.time)
    log["obs"].append(np.asarray(obs["state"]))
    log["command"].append(command)
    action, obs = playback.step(command)
    log["action"].append(action)
    log["motor_targets"].append(np.asarray(playback.info["motor_targets"]))
    log["qpos"].append(playback.data.qpos.copy())
    state = obs["privileged_state"]
    from playground.open_duck_mini_v2.observations import PRIVILEGED_LAYOUT

    linvel = np.asarray(state[PRIVILEGED_LAYOUT.slices["local_linvel"]])
    gyro = np.asarray(state[PRIVILEGED_LAYOUT.slices["gyro_clean"]])
    errors.append(float(np.linalg.norm(command[:2] - linvel[:2])))
    yaw_errors.append(float(abs(command[2] - gyro[2])))
    if renderer is not None:
      renderer.update_scene(playback.data, camera="track")
      frames.append(renderer.render())
    if playback.fallen():
      falls += 1
      distance += float(np.linalg.norm(playback.data.qpos[0:2] - start_xy))
      obs = playback.reset(command)
      start_xy = playback.data.qpos[0:2].copy()
  distance += float(np.linalg.norm(playback.data.qpos[0:2] - start_xy))
  if renderer is not None:
    renderer.close()
    import imageio.v2 as imageio

    imageio.mimwrite(video, frames, fps=int(round(1.0 / playback.env.dt)), codec="libx264", macro_block_size=1)
  if record:
    np.savez(
      record,
      **{k: np.asarray(v) for k, v in log.items()},
      observation_layout=json.dumps(playback.env.state_layout.to_json()),
      control_period_s=playback.env.dt,
    )
  return {
    "seconds": round(steps * playback.env.dt, 3),
    "distance_m": round(distance, 3),
    "mean_lin_vel_error_mps": round(float(np.mean(errors)), 4),
    "mean_yaw_rate_error_radps": round(float(np.mean(yaw_errors)), 4),
    "falls": falls,
  }


def observation_history(onnx_path: str | Path) -> int:
  """Earlier frames an exported policy observes, from its metadata.

  A file without an `observation_layout` (e.g. exported by another project
  for the Open Duck runtime) is taken to observe the runtime's 101 floats.

  Raises:
    ValueError: the file's observation layout is not one of this robot's.
  """
  from playground.common import onnx_export
  from playground.open_duck_mini_v2 import observations as obs_lib

  try:
    metadata = onnx_export.read_metadata(onnx_path)
  except Exception as e:  # onnx raises protobuf's DecodeError for a file that is not ONNX
    raise ValueError(f"{onnx_path} is not an ONNX policy file ({type(e).__name__}: {e})".replace("\n", " ")) from None
  if "observation_layout" not in metadata:
    return 0
  frames = obs_lib.history_of(metadata["observation_layout"])
  if frames is None:
    raise ValueError(
      f"{onnx_path}: its observation layout ({metadata.get('observation_size', '?')} inputs) is not the Open Duck "
      f"Mini V2's ({obs_lib.STATE_LAYOUT.size} inputs, plus {obs_lib.HISTORY_FRAME_LAYOUT.size} per history frame)"
    )
  return frames


def interactive(playback: Playback, schedule: CommandSchedule) -> None:
  """Passive viewer; arrows: vx / yaw rate, , and . : vy, space: stop."""
  import time

  import mujoco.viewer

  command = np.array(schedule(0.0), np.float32)
  keys = {265: (0, 0.05), 264: (0, -0.05), 263: (2, 0.2), 262: (2, -0.2), 44: (1, 0.05), 46: (1, -0.05)}

  def on_key(keycode):
    if keycode == 32:
      command[:3] = 0.0
    elif keycode in keys:
      index, delta = keys[keycode]
      command[index] += delta
    logger.info("command vx=%.2f vy=%.2f yaw=%.2f", *command[:3])

  playback.reset(command)
  with mujoco.viewer.launch_passive(playback.model, playback.data, key_callback=on_key) as viewer:
    while viewer.is_running():
      started = time.monotonic()
      playback.step(command)
      if playback.fallen():
        playback.reset(command)
      viewer.sync()
      time.sleep(max(0.0, playback.env.dt - (time.monotonic() - started)))


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  os.environ.setdefault("MUJOCO_GL", "egl")
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
  parser = argparse.ArgumentParser(description="Play an Open Duck Mini V2 policy in MuJoCo C (sim-to-sim).")
  source = parser.add_mutually_exclusive_group(required=True)
  source.add_argument("--onnx", help="exported policy file")
  source.add_argument("--checkpoint", help="checkpoint step or run directory (exported on the fly)")
  parser.add_argument("--env", default="joystick", choices=("joystick", "standing"))
  parser.add_argument("--task", default="flat_terrain")
  for key in COMMAND_KEYS:
    parser.add_argument(f"--{key}", type=float, default=0.0, help=f"constant command {key}")
  parser.add_argument("--script", help='JSON command script: [{"t": 0, "vx": 0.1}, {"t": 4, "yaw_rate": 0.5}]')
  parser.add_argument("--duration", type=float, default=10.0, help="seconds to simulate headless")
  parser.add_argument("--video", help="write an MP4 (offscreen rendering)")
  parser.add_argument("--record", help="save observations/actions to an .npz file")
  parser.add_argument("--viewer", action="store_true", help="interactive viewer (needs a display)")
  parser.add_argument("--noise", action="store_true", help="keep the training sensor noise")
  parser.add_argument("--delays", action="store_true", help="keep the training action/IMU delays")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)

  from playground.common import checkpointing
  from playground.common import config as config_lib
  from playground.common import onnx_export
  from playground.export import export_checkpoint
  from playground.open_duck_mini_v2 import constants as consts

  try:
    config_lib.check_choice("--task", args.task, consts.TASKS)
    schedule = (
      CommandSchedule.from_json(args.script)
      if args.script
      else CommandSchedule.constant([getattr(args, k) for k in COMMAND_KEYS])
    )
    with tempfile.TemporaryDirectory() as tmp:
      path = args.onnx
      if args.checkpoint:
        path, _ = export_checkpoint(args.checkpoint, Path(tmp) / "policy.onnx")
      if not Path(path).is_file():
        raise FileNotFoundError(f"policy file {path} does not exist")
      history = observation_history(path)
      playback = Playback(onnx_policy(path), args.env, args.task, args.noise, args.delays, args.seed, history)
    if args.viewer:
      if not os.environ.get("DISPLAY") and sys.platform.startswith("linux"):
        raise RuntimeError("--viewer needs a display (DISPLAY is not set); use --video for headless runs")
      interactive(playback, schedule)
      return 0
    summary = run(playback, schedule, args.duration, args.video, args.record)
  except (
    config_lib.ConfigError,
    checkpointing.CheckpointError,
    onnx_export.ExportError,
    FileNotFoundError,
    ValueError,
    RuntimeError,
  ) as e:
    sys.stderr.write(f"error: {e}\n")
    return 2
  logger.info("summary %s", json.dumps(summary))
  if args.video:
    logger.info("video: %s", args.video)
  if args.record:
    logger.info("record: %s", args.record)
  return 0


if __name__ == "__main__":
  sys.exit(main())
