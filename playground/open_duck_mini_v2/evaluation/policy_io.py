"""A policy file and what it is played with: load, check its contract, the env config to play it.

Shared by the scorecard (`score.py`) and playback (`playback.py`):
both find a policy the same way, refuse the same foreign files and play it
under its run's own configuration (action scale, gait frequency, history).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ml_collections import config_dict

from playground.common import configs
from playground.common.export import onnx_graph
from playground.common.export import policy_file
from playground.common.runs import checkpoints
from playground.common.runs import directories
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.tasks import base
from playground.open_duck_mini_v2.tasks.registry import ENVS
from playground.open_duck_mini_v2.tasks.registry import env_class

#: A checkpoint step's policy file (re-exported for the scorecard and playback).
POLICY_FILE = policy_file.POLICY_FILE


class ScoreError(ValueError):
  """The policy cannot be played (missing file, mismatched contract)."""


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


def read_metadata(path: str | Path) -> dict[str, Any]:
  """The file's metadata; ScoreError (one line) for a file that is not ONNX."""
  try:
    return onnx_graph.read_metadata(path)
  except Exception as e:  # onnx raises protobuf's DecodeError for a file that is not ONNX
    first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    raise ScoreError(f"{path} is not a readable ONNX policy: {first}") from None


def resolve_policy(path: str | Path) -> tuple[Path, dict[str, Any] | None, Path]:
  """(ONNX file, the run's env config or None, default output directory) for PATH.

  PATH is an `.onnx` file, a checkpoint step directory or a run directory
  (its latest checkpoint). A checkpoint without `policy.onnx` is exported. An
  `.onnx` file next to a run's `config.json` (`best_policy.onnx`) takes the
  run's env config.
  """
  path = Path(path).expanduser()
  if not path.exists():
    raise ScoreError(f"{path} does not exist (expected a run directory, a checkpoint directory or an .onnx file)")
  if path.is_file():
    if path.suffix != ".onnx":
      raise ScoreError(f"{path} is not an .onnx file, a checkpoint directory or a run directory")
    env_config = None
    record = path.parent / directories.CONFIG_FILE
    if record.is_file():
      try:
        env_config = json.loads(record.read_text()).get("env_config")
      except (ValueError, AttributeError):  # not a run's record: play with the defaults
        env_config = None
    return path, env_config, path.parent
  step_dir = checkpoints.resolve(path)
  onnx_path = step_dir / POLICY_FILE
  if not onnx_path.is_file():
    from playground.checkpoint_policy import export_checkpoint  # loads the training stack

    onnx_path, _ = export_checkpoint(step_dir)
  config_path = step_dir.parent / directories.CONFIG_FILE
  env_config = json.loads(config_path.read_text())["env_config"] if config_path.is_file() else None
  return onnx_path, env_config, step_dir


def check_contract(metadata: dict[str, Any], home_ctrl: np.ndarray, ctrl_dt: float) -> None:
  """Refuses (ScoreError, one line) a policy whose contract differs from the model's."""
  differences = []
  if metadata.get("robot") != "open_duck_mini_v2":
    differences.append(f"robot is '{metadata.get('robot')}', not 'open_duck_mini_v2'")
  if metadata.get("env") not in ENVS:
    differences.append(f"env '{metadata.get('env')}' is not one of {', '.join(ENVS)}")
  if observations.history_of(metadata.get("observation_layout")) is None:
    differences.append(
      f"observation layout differs ({metadata.get('observation_size', '?')} inputs; "
      f"the model observes {observations.STATE_LAYOUT.size}, plus "
      f"{observations.HISTORY_FRAME_LAYOUT.size} per history frame)"
    )
  if list(metadata.get("action_names", [])) != list(constants.ACTUATOR_NAMES):
    differences.append("action order differs from the model's actuators")
  period = metadata.get("control_period_s")
  if period is None or abs(float(period) - ctrl_dt) > 1e-9:
    differences.append(f"control period is {period} s, the env runs at {ctrl_dt} s")
  home = metadata.get("home_pose")
  if home is None or len(home) != len(home_ctrl) or not np.allclose(home, home_ctrl, atol=1e-4):
    differences.append("home pose differs from the model's home keyframe")
  if differences:
    raise ScoreError("the policy does not match the Open Duck Mini V2 model: " + "; ".join(differences))


def play_config(
  metadata: dict[str, Any],
  env_config: dict[str, Any] | None,
  *,
  noise: bool,
  delays: bool,
  randomization: bool,
  overrides: Sequence[tuple[str, str]] = (),
  servo: str | None = None,
) -> config_dict.ConfigDict:
  """The env config to play a policy with: the run's (or the env's default), as the policy was trained.

  The action scale, gait frequency and observation history come from the
  file's metadata, and without a run's config so do the trunk offset range
  (`trunk_offset_m`) and the servos (`servo_profile`, `max_motor_velocity`).
  The trunk offset's training margin is dropped (see
  `randomize.default_config`). `overrides` (`configs.parse_overrides` pairs)
  change it first, as `--set` does for training; an unknown key raises
  `ConfigError`. `servo` names other servos to play it with (`servos.select`,
  before `overrides`; None: those it trained with). Pushes are the player's
  job (`player.Pushes`), never the env's.
  """
  config = env_class(metadata["env"]).default_config()
  if env_config is not None:
    config = config_dict.ConfigDict(env_config)
  else:
    config = _file_trained_with(config, metadata, servo)
  # Judged at the randomization's nominal ranges: the trunk offset's training
  # margin (`com_offset_margin`) is left out, unless `overrides` set it again.
  if config.domain_randomization.get("com_offset_margin", 0.0):
    config.domain_randomization.com_offset_margin = 0.0
  if servo is not None:
    config = servos.select(config, servo)
  if overrides:
    config = configs.apply_overrides(config, overrides)
  config.action_scale = float(metadata.get("action_scale", config.action_scale))
  frames = observations.history_of(metadata.get("observation_layout"))
  if frames is not None:
    with config.unlocked():  # a run's config from before the option has no such key
      config.observation_history = frames
  # The phase advances at the frequency the policy was trained with (written at
  # export); the reference itself is not needed to play.
  config.gait_frequency = float(metadata.get("gait_frequency_hz", config.gait_frequency))
  if config.get("gait_frequency_spread", 0.0):
    config.gait_frequency_spread = 0.0  # the runtime's clock does not vary
  if "imitation" in config.reward_config.scales:
    config.reward_config.scales.imitation = 0.0
  # The player feeds the file's output to `apply_action` as the runtime does (never `step`).
  file_output_is_the_action(config)
  if "reference" in config and "residual_gain" in config.reference and "stand_pose" in config.reward_config:
    # A stance beyond the unit gain's reach would now be refused; players
    # read no reward, so the stance stand_still pulls to is dropped.
    for name in list(config.reward_config.stand_pose):
      config.reward_config.stand_pose[name] = 0.0
  return base.keeping_disturbances(config, noise=noise, delays=delays, randomization=randomization)


def file_output_is_the_action(config: config_dict.ConfigDict) -> config_dict.ConfigDict:
  """Turns off, in place, what the env would add to a policy file's output; returns `config`.

  A residual policy's ONNX adds the reference gait (and, with
  `reference.feedforward_stand_pose`, the stance) itself, and scales its
  residual (`reference.residual_gain`) inside: an env that plays the file's
  output as its action must add nothing and scale by 1. Configs of runs from
  before an option lack its key and are left as they are.
  """
  if "reference" in config:
    config.reference.feedforward = False
    if "feedforward_stand_pose" in config.reference:
      config.reference.feedforward_stand_pose = False
    if "residual_gain" in config.reference:
      config.reference.residual_gain = 1.0
  return config


def _file_trained_with(
  config: config_dict.ConfigDict, metadata: dict[str, Any], servo: str | None
) -> config_dict.ConfigDict:
  """The env's default config with what a file alone says it trained with.

  Its trunk offset range (`trunk_offset_m`; files exported before the key:
  the env's default, the upstream +-5 cm), its servo profile
  (`servo_profile`; before the key: the default) and the servo speed it
  was trained for (`max_motor_velocity`, kept only where it differs from the
  profile's). A profile this version does not know is a `ScoreError`
  naming the known ones, unless `servo` names the servos to play it with.
  """
  if "trunk_offset_m" in metadata:
    config.domain_randomization.com_offset = float(metadata["trunk_offset_m"])
  if "servo_profile" in metadata:
    name = str(metadata["servo_profile"])
    if name not in servos.PROFILES and servo is None:
      raise ScoreError(
        f"the file was trained for servo profile '{name}', which this version does not know "
        f"(known: {', '.join(servos.PROFILES)}); pass --servo NAME to play it with one of them"
      )
    config.servo_profile = name if name in servos.PROFILES else servos.DEFAULT
  speed = metadata.get("max_motor_velocity")
  if speed is not None and abs(float(speed) - servos.speed_limit(config)) > 1e-6:
    config.max_motor_velocity = float(speed)
  return config


def observation_history(onnx_path: str | Path) -> int:
  """Earlier frames an exported policy observes, from its metadata.

  A file without an `observation_layout` (e.g. exported by another project
  for the Open Duck runtime) is taken to observe the runtime's 101 floats.

  Raises:
    ScoreError: not an ONNX file, or its layout is not one of this robot's.
  """
  metadata = read_metadata(onnx_path)
  if "observation_layout" not in metadata:
    return 0
  frames = observations.history_of(metadata["observation_layout"])
  if frames is None:
    raise ScoreError(
      f"{onnx_path}: its observation layout ({metadata.get('observation_size', '?')} inputs) is not the Open Duck "
      f"Mini V2's ({observations.STATE_LAYOUT.size} inputs, "
      f"plus {observations.HISTORY_FRAME_LAYOUT.size} per history frame)"
    )
  return frames
