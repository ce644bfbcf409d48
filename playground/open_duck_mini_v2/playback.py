"""Sim-to-sim playback: one episode of an ONNX policy (or a checkpoint) in MuJoCo C.

    uv run playground/open_duck_mini_v2/playback.py --onnx policy.onnx --vx 0.1 --video walk.mp4
    uv run playground/open_duck_mini_v2/playback.py --onnx policy.onnx --vx 0.1 --runtime --pushes
    uv run playground/open_duck_mini_v2/playback.py --checkpoint checkpoints/<run> --viewer

Playback is the scorecard's player (`player.play`) with one episode: the
same physics, action pipeline, command schedule, pushes and fall check, and
the policy's own run configuration (`config.json` next to it: action scale,
gait frequency, history), its contract checked as the scorecard does. The
observations come from the training env's functions, or with `--runtime`
from the Open Duck runtime's loop (`runtime.py`). Sensor noise, delays,
domain randomization and pushes are off unless `--noise`, `--delays`,
`--randomize` or `--pushes` ask for the training settings. The episode ends
at the first fall, or at a non-finite action, named in the summary.

Headless video needs an OpenGL backend: EGL (Debian: `libegl1
libgl1-mesa-dri`) or OSMesa (`libosmesa6`), selected with MUJOCO_GL=egl or
MUJOCO_GL=osmesa (default: egl).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from playground.common import configs
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.model import constants

# MuJoCo picks its OpenGL backend from MUJOCO_GL when it is first imported, so
# the modules that load MuJoCo (the player, the model, the policy checks) are
# imported inside the functions, after `main` has set MUJOCO_GL.

logger = logging.getLogger("playground")


def command_from_json(path: str | Path, duration: float):
  """A `scorecard.Command` from a script [{"t": 0, "vx": 0.1}, {"t": 4, "yaw_rate": 0.5}, ...]; missing keys are 0."""
  from playground.common.evaluation.scorecard import Command

  raw = json.loads(Path(path).read_text())
  entries = []
  for item in raw:
    unknown = set(item) - {"t", *commands.NAMES}
    if unknown:
      raise ValueError(f"{path}: unknown command keys {sorted(unknown)}; valid: t, {', '.join(commands.NAMES)}")
    entries.append((float(item.get("t", 0.0)), *(float(item.get(k, 0.0)) for k in commands.NAMES)))
  if not entries:
    raise ValueError(f"{path}: the command script is empty")
  return Command("script", tuple(sorted(entries, key=lambda e: e[0])), duration)


class Playback:
  """One episode of a policy file, played by `player.play` under its run's configuration.

  Args:
    policy_path: the `.onnx` file (a run's `config.json` next to it is used).
    task: scene (default: the policy's own).
    source: "env" or "runtime" (observations as the robot runtime builds them).
    noise, delays, randomize: the training sensor noise, action/IMU delays
      and domain randomization (default off).
    pushes: the training env's kicks (default off).
    seed: seed of the model, noise, delays and pushes.
    runtime_options: `runtime.RuntimeOptions` for `source="runtime"`.

  Raises:
    policy_io.ScoreError: a missing or foreign policy file.
  """

  def __init__(
    self,
    policy_path: str | Path,
    task: str | None = None,
    source: str = "env",
    noise: bool = False,
    delays: bool = False,
    randomize: bool = False,
    pushes: bool = False,
    seed: int = 0,
    runtime_options: Any = None,
  ):
    from playground.open_duck_mini_v2.evaluation import policy_io
    from playground.open_duck_mini_v2.model import robot_model

    self.policy_path, env_config, _ = policy_io.resolve_policy(policy_path)
    self.metadata = policy_io.read_metadata(self.policy_path)
    self.task = task or self.metadata.get("task") or "flat_terrain"
    ids = robot_model.RobotIndices.from_model(robot_model.load_model(self.task))
    policy_io.check_contract(self.metadata, ids.home_ctrl, float((env_config or {}).get("ctrl_dt", 0.02)))
    self.config = policy_io.play_config(self.metadata, env_config, noise=noise, delays=delays, randomization=randomize)
    self.pushes = pushes
    self.source = source
    self.seed = seed
    self.runtime_options = runtime_options
    self.policy = policy_io.onnx_policy(self.policy_path, batched=True)

  def play(self, command, on_step=None) -> dict[str, Any]:
    """Plays `command` (a `scorecard.Command`); returns the episode's raw metrics (`player.play`)."""
    from playground.open_duck_mini_v2.evaluation import player

    if self.pushes and command.pushes is None:
      command = dataclasses.replace(command, pushes=player.Pushes.of_config(self.config.push_config))
    (episode,) = player.play(
      self.policy,
      self.metadata["env"],
      self.task,
      self.config,
      self.metadata,
      [(command, 0)],
      self.seed,
      self.source,
      self.runtime_options,
      on_step=on_step,
    )
    return episode


def run(
  playback: Playback,
  command,
  video: str | None = None,
  record: str | None = None,
  width: int = 640,
  height: int = 480,
) -> dict[str, Any]:
  """Plays one episode headless; returns the summary (distance, tracking, fall and why)."""
  import mujoco

  from playground.common.evaluation import scorecard

  renderer = None
  frames = []
  log: dict[str, list] = {k: [] for k in ("time", "obs", "action", "motor_targets", "command", "qpos")}

  def on_step(view) -> None:
    nonlocal renderer
    data = view.datas[0]
    log["time"].append(view.time_s - playback.config.ctrl_dt)
    log["obs"].append(view.seen[0])
    log["command"].append(view.command[0])
    log["action"].append(view.action[0])
    log["motor_targets"].append(view.ctrl[0])
    log["qpos"].append(data.qpos.copy())
    if video:
      if renderer is None:
        renderer = mujoco.Renderer(view.models[0], height=height, width=width)
      renderer.update_scene(data, camera="track")
      frames.append(renderer.render())

  episode = playback.play(command, on_step)
  if renderer is not None:
    renderer.close()
  if video:
    import imageio.v2 as imageio

    imageio.mimwrite(video, frames, fps=int(round(1.0 / playback.config.ctrl_dt)), codec="libx264", macro_block_size=1)
  if record:
    from playground.open_duck_mini_v2.model import observations

    np.savez(
      record,
      **{k: np.asarray(v) for k, v in log.items()},
      observation_layout=json.dumps(observations.state_layout(playback.config.observation_history).to_json()),
      control_period_s=playback.config.ctrl_dt,
      source=playback.source,
    )
  window = max(1, int(round(scorecard.TRACKING_WINDOW_S / playback.config.ctrl_dt)))
  card = scorecard.summarize([episode], [command], window)["commands"][command.name]
  return {
    "seconds": round(float(episode["survival_s"]), 3),
    "distance_m": round(episode["distance_m"], 3),
    "achieved": card["achieved"],
    "mean_lin_vel_error_mps": card["lin_vel_error_mps"],
    "mean_yaw_rate_error_radps": card["yaw_rate_error_radps"],
    "falls": int(episode["fell"]),
    "fall_cause": episode["fall_cause"],
    "pushes": episode["pushes"],
    "source": playback.source,
  }


def interactive(playback: Playback, start: np.ndarray) -> None:
  """Passive viewer; arrows: vx / yaw rate, , and . : vy, space: stop. A fall starts a new episode."""
  import mujoco.viewer

  from playground.common.evaluation.scorecard import Command

  command = np.array(start, np.float32)
  keys = {265: (0, 0.05), 264: (0, -0.05), 263: (2, 0.2), 262: (2, -0.2), 44: (1, 0.05), 46: (1, -0.05)}

  def on_key(keycode):
    if keycode == 32:
      command[:3] = 0.0
    elif keycode in keys:
      index, delta = keys[keycode]
      command[index] += delta
    logger.info("command vx=%.2f vy=%.2f yaw=%.2f", *command[:3])

  class Live(Command):
    def at(self, t: float, size: int | None = None) -> np.ndarray:
      del t, size
      return command.copy()

  live = Live("live", ((0.0, 0.0, 0.0, 0.0),), 3600.0)
  viewer = None
  started = [time.monotonic()]

  shown = [None]

  def on_step(view) -> bool:
    nonlocal viewer
    if shown[0] is not view.datas[0]:  # a new episode after a fall: a new simulation to show
      if viewer is not None:
        viewer.close()
      viewer = mujoco.viewer.launch_passive(view.models[0], view.datas[0], key_callback=on_key)
      shown[0] = view.datas[0]
    viewer.sync()
    time.sleep(max(0.0, playback.config.ctrl_dt - (time.monotonic() - started[0])))
    started[0] = time.monotonic()
    return viewer.is_running()

  while viewer is None or viewer.is_running():
    playback.play(live, on_step)


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  os.environ.setdefault("MUJOCO_GL", "egl")
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
  parser = argparse.ArgumentParser(description="Play an Open Duck Mini V2 policy in MuJoCo C (sim-to-sim).")
  source = parser.add_mutually_exclusive_group(required=True)
  source.add_argument("--onnx", help="exported policy file")
  source.add_argument("--checkpoint", help="checkpoint step or run directory (exported on the fly)")
  parser.add_argument("--task", help="scene (default: the policy's own)")
  for key in commands.NAMES:
    parser.add_argument(f"--{key}", type=float, default=0.0, help=f"constant command {key}")
  parser.add_argument("--script", help='JSON command script: [{"t": 0, "vx": 0.1}, {"t": 4, "yaw_rate": 0.5}]')
  parser.add_argument("--duration", type=float, default=10.0, help="seconds to simulate headless")
  parser.add_argument("--video", help="write an MP4 (offscreen rendering)")
  parser.add_argument("--record", help="save observations/actions to an .npz file")
  parser.add_argument("--viewer", action="store_true", help="interactive viewer (needs a display)")
  parser.add_argument("--runtime", action="store_true", help="observe as the Open Duck runtime does (runtime.py)")
  parser.add_argument("--noise", action="store_true", help="keep the training sensor noise")
  parser.add_argument("--delays", action="store_true", help="keep the training action/IMU delays")
  parser.add_argument("--randomize", action="store_true", help="a domain-randomized model, as in training")
  parser.add_argument("--pushes", action="store_true", help="the training env's kicks")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)

  from playground.common.evaluation.scorecard import Command
  from playground.common.export import onnx_graph
  from playground.common.runs import checkpoints
  from playground.open_duck_mini_v2.evaluation import policy_io

  try:
    if args.task is not None:
      configs.check_choice("--task", args.task, constants.TASKS)
    if not args.duration > 0:
      raise ValueError(f"--duration must be positive seconds, got {args.duration}")
    constant = [getattr(args, k) for k in commands.NAMES]
    command = (
      command_from_json(args.script, args.duration)
      if args.script
      else Command("command", ((0.0, *constant),), args.duration)
    )
    with tempfile.TemporaryDirectory() as tmp:
      path = args.onnx
      if args.checkpoint:
        from playground.checkpoint_policy import export_checkpoint  # loads the training stack

        step_dir = checkpoints.resolve(Path(args.checkpoint))
        path = step_dir / policy_io.POLICY_FILE
        if not path.is_file():
          path, _ = export_checkpoint(step_dir, Path(tmp) / policy_io.POLICY_FILE)
      if not Path(path).is_file():
        raise FileNotFoundError(f"policy file {path} does not exist")
      playback = Playback(
        path,
        args.task,
        "runtime" if args.runtime else "env",
        args.noise,
        args.delays,
        args.randomize,
        args.pushes,
        args.seed,
      )
    if args.viewer:
      if not os.environ.get("DISPLAY") and sys.platform.startswith("linux"):
        raise RuntimeError("--viewer needs a display (DISPLAY is not set); use --video for headless runs")
      interactive(playback, command.at(0.0, commands.SIZE))
      return 0
    summary = run(playback, command, args.video, args.record)
  except (
    configs.ConfigError,
    checkpoints.CheckpointError,
    onnx_graph.ExportError,
    policy_io.ScoreError,
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
  return 0 if summary["fall_cause"] != "non-finite action" else 1


if __name__ == "__main__":
  sys.exit(main())
