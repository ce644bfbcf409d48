"""The robot's own log: the observations its runtime fed the policy, read safely, written, simulated.

The Open Duck runtime's `--save_obs` flag (`uv run walk`, `uv run walk-keyboard`,
`scripts/v2_rl_walk_mujoco.py`) keeps every observation its 50 Hz loop builds
and, when the walk ends, pickles the list to `robot_saved_obs.pkl` in its
working directory: one float64 array of 101 floats per control step, in the
runtime's order (gyro, accelerometer, 7 commands, joint positions minus
`init_pos`, joint velocities x 0.05, the last 3 actions, the targets it sent,
2 foot switches, the phase), each kept before the policy acts on it.

`load` reads such a file without running code (a restricted unpickler:
numpy arrays, lists and numbers only); `save` writes one in the same format;
`simulate` writes logs of this project's runtime loop in MuJoCo (`Recorder`
also serves the runtime-mode scorecard's `--save_obs`). A log is checked
against a policy file's `Reference` (`diagnosis.check`: one `Finding` per
check; `servo_tracking`; `sim_gap`); check_log.py is the command line and
docs/on-the-robot.md what each finding means on a robot.
"""

from __future__ import annotations

import codecs
import dataclasses
import io
import pickle
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from playground.common.evaluation.scorecard import Command
from playground.open_duck_mini_v2.evaluation import player
from playground.open_duck_mini_v2.evaluation import policy_io
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation.player import StepView
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import observations
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.model import servos

#: The runtime's file name (it writes to its working directory).
RUNTIME_LOG_NAME = "robot_saved_obs.pkl"
#: Slots of the runtime's 101 floats.
SLOTS = observations.STATE_LAYOUT.slices
SIZE = observations.STATE_LAYOUT.size
#: Finding levels; "error" makes check_log.py exit 1.
LEVELS = ("ok", "info", "warn", "error")
#: A larger file is refused unread (a 10-minute log at 50 Hz is about 2.5 MB).
MAX_LOG_BYTES = 256 * 2**20
#: Fewer frames (1 s at 50 Hz) is not a log to check.
MIN_FRAMES = 50


def slot(obs: np.ndarray, name: str) -> np.ndarray:
  """The named slot (`observations.STATE_LAYOUT`) of every frame [frames, size]."""
  return obs[:, SLOTS[name]]


class LogError(ValueError):
  """The log cannot be read (missing, not a pickle, refused types, wrong shape)."""


@dataclasses.dataclass(frozen=True)
class Finding:
  """One line of the check.

  Attributes:
    check: what was checked (`imu_slot`, `velocity_scale`, ...; see docs/on-the-robot.md).
    level: "ok", "info", "warn" or "error".
    message: what was found, with the numbers.
  """

  check: str
  level: str
  message: str

  def line(self) -> str:
    """The finding as check_log.py prints it."""
    return f"{self.level:<5} {self.check}: {self.message}"


# ---------------------------------------------------------------------------------------------------------------------
# Reading and writing logs


class _ArraysOnly(pickle.Unpickler):
  """An unpickler that builds numpy arrays, lists and numbers, and refuses every other global."""

  _ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): np.array(0.0).__reduce__()[0],
    ("numpy._core.multiarray", "_reconstruct"): np.array(0.0).__reduce__()[0],
    ("numpy.core.multiarray", "scalar"): np.float64(0.0).__reduce__()[0],
    ("numpy._core.multiarray", "scalar"): np.float64(0.0).__reduce__()[0],
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    # Protocol 5 (Python 3.14's default) rebuilds arrays from their buffer.
    ("numpy.core.numeric", "_frombuffer"): np.array(0.0).__reduce_ex__(5)[0],
    ("numpy._core.numeric", "_frombuffer"): np.array(0.0).__reduce_ex__(5)[0],
    # Protocols 0-2 write an array's bytes as `_codecs.encode(text, "latin1")`.
    ("_codecs", "encode"): codecs.encode,
  }

  def find_class(self, module: str, name: str) -> Any:
    try:
      return self._ALLOWED[(module, name)]
    except KeyError:
      raise LogError(f"refused: it asks for `{module}.{name}`") from None


def _frames(value: Any) -> np.ndarray:
  """The (T, 101) float64 observations of an unpickled log, or LogError."""
  if isinstance(value, np.ndarray):
    rows = list(value) if value.ndim == 2 else [value]
  elif isinstance(value, (list, tuple)):
    rows = list(value)
  else:
    raise LogError(f"holds a {type(value).__name__}, not a list of observations")
  if not rows:
    raise LogError("holds no observation")
  out = []
  for i, row in enumerate(rows):
    if isinstance(row, np.ndarray) and row.dtype.kind not in "biuf":
      raise LogError(f"observation {i} holds {row.dtype} values, not numbers")
    try:
      row = np.asarray(row, np.float64)
    except (TypeError, ValueError):
      raise LogError(f"observation {i} is not a list of numbers") from None
    if row.shape != (SIZE,):
      raise LogError(
        f"observation {i} has shape {row.shape}, the Open Duck runtime's has ({SIZE},) (is this a runtime log?)"
      )
    out.append(row)
  return np.stack(out)


def load(path: str | Path) -> np.ndarray:
  """The observations of a runtime log [frames, 101] (float64).

  Loads numpy arrays, lists and numbers only: a pickle that asks for any other
  object (which could run code while loading) is refused before anything of
  it runs.

  Raises:
    LogError: (one line) a missing file, not a pickle, refused content, or
      observations that are not the runtime's 101 floats.
  """
  path = Path(path).expanduser()
  if not path.is_file():
    raise LogError(f"{path} does not exist (the runtime writes {RUNTIME_LOG_NAME} in its working directory)")
  size = path.stat().st_size
  if size > MAX_LOG_BYTES:
    raise LogError(f"{path} is {size / 2**20:.0f} MB, more than a runtime log ({MAX_LOG_BYTES // 2**20} MB at most)")
  try:
    value = _ArraysOnly(io.BytesIO(path.read_bytes())).load()
  except LogError as e:
    raise LogError(f"{path}: {e}; a runtime log holds only numpy arrays, lists and numbers") from None
  except Exception as e:  # a damaged or foreign file raises anything from UnpicklingError to MemoryError
    raise LogError(f"{path} is not a runtime log (a pickle of observations): {type(e).__name__}: {e}") from None
  try:
    return _frames(value)
  except LogError as e:
    raise LogError(f"{path}: {e}") from None


def save(path: str | Path, frames: Sequence[np.ndarray] | np.ndarray) -> Path:
  """Writes observations as the runtime does: a pickled list of float64 arrays of 101 floats."""
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  rows = [np.asarray(f, np.float64).copy() for f in frames]
  with open(path, "wb") as f:
    pickle.dump(rows, f)
  return path


@dataclasses.dataclass(frozen=True)
class Reference:
  """What a policy file expects of the runtime and the robot.

  Attributes:
    source: where it comes from, for the report.
    contract: the runtime contract the file is made for.
    home_pose: (14,) the file's home pose (the runtime's `init_pos` should be it).
    action_scale: motor targets are `init_pos + action_scale * action`.
    period_steps: control steps per gait period.
    ctrl_dt: control period (s).
    servo: where `servo_speed` comes from (the file's servo profile, or `max_motor_velocity`).
    servo_speed: rad/s, the servo speed the file trained with.
    gravity_at_rest: (3,) the gravity direction in the IMU's frame at the model's home pose.
    observation_size: the file's input size.
  """

  source: str
  contract: runtime.RuntimeContract
  home_pose: np.ndarray
  action_scale: float
  period_steps: float
  ctrl_dt: float
  servo: str
  servo_speed: float
  gravity_at_rest: np.ndarray
  observation_size: int = SIZE

  @classmethod
  def of_metadata(cls, metadata: Mapping[str, Any] | None, source: str) -> Reference:
    """The reference of a policy file's metadata; None: the project's own contract and defaults.

    Keys a file lacks (files from before they were written) take the project's values.
    """
    metadata = dict(metadata or {})
    model = robot_model.load_model(str(metadata.get("task") or "flat_terrain"))
    ids = robot_model.RobotIndices.from_model(model)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(constants.HOME_KEYFRAME).id)
    mujoco.mj_forward(model, data)
    gravity = data.site_xmat[ids.imu_site].reshape(3, 3).T @ np.array([0.0, 0.0, -1.0])
    ctrl_dt = float(metadata.get("control_period_s", 0.02))
    period = metadata.get("gait_period_steps") or 1.0 / (float(metadata.get("gait_frequency_hz", 1 / 0.54)) * ctrl_dt)
    home = np.asarray(metadata.get("home_pose", ids.home_ctrl), np.float64)
    if home.shape != ids.home_ctrl.shape:
      raise LogError(f"the file's home_pose has {home.size} joints; the duck has {ids.home_ctrl.size}")
    # The speed the file trained with (`max_motor_velocity`), else its profile's; files without either: the default.
    named = metadata.get("servo_profile")
    speed = metadata.get("max_motor_velocity")
    if speed is None:
      speed = servos.PROFILES.get(str(named), servos.PROFILES[servos.DEFAULT]).max_velocity
    return cls(
      source=source,
      contract=runtime.RuntimeContract.from_metadata(metadata),
      home_pose=home,
      action_scale=float(metadata.get("action_scale", 0.25)),
      period_steps=float(period),
      ctrl_dt=ctrl_dt,
      servo=f"servo profile {named}" if named else "max_motor_velocity",
      servo_speed=float(speed),
      gravity_at_rest=gravity,
      observation_size=int(metadata.get("observation_size", SIZE)),
    )


class Recorder:
  """Keeps one log per recorded episode of `player.play` (its `on_step`), while the episode runs.

  Args:
    episodes: indices of the played episodes to record.
  """

  def __init__(self, episodes: Sequence[int]):
    self.episodes = list(episodes)
    self.frames: dict[int, list[np.ndarray]] = {i: [] for i in self.episodes}

  def on_step(self, view: StepView) -> None:
    """`player.play`'s `on_step`: appends the observation each recorded running episode acted on."""
    for i in self.episodes:
      if view.running[i]:
        self.frames[i].append(np.asarray(view.seen[i], np.float64).copy())

  def log(self, episode: int) -> np.ndarray:
    """The frames [T, 101] recorded of `episode`."""
    return np.stack(self.frames[episode]) if self.frames[episode] else np.zeros((0, SIZE))


def commands_of(obs: np.ndarray, dt: float, name: str = "log") -> Command:
  """A command schedule that replays the log's commands (one entry per change), as long as the log."""
  cmd = slot(obs, "command")
  schedule = [(0.0, *cmd[0].tolist())]
  for t in range(1, len(cmd)):
    if np.abs(cmd[t] - cmd[t - 1]).max() > 1e-6:
      schedule.append((t * dt, *cmd[t].tolist()))
  return Command(name, tuple(schedule), duration=len(cmd) * dt)


def simulate(
  policy_path: str | Path,
  command: Command,
  robots: int = 1,
  seed: int = 0,
  env_config: dict[str, Any] | None = None,
  overrides: Sequence[tuple[str, str]] = (),
  runtime_options: runtime.RuntimeOptions | None = None,
  clean: bool = False,
) -> list[np.ndarray]:
  """Logs of the file played as the robot runtime runs it (the runtime-mode player), one per robot.

  Each robot plays `command` on its own randomized model, with the training
  env's sensor noise and delays (`clean`: none of the three), from seed
  `seed`; a log ends where its robot falls.

  Args:
    policy_path: the `.onnx` file.
    command: the command schedule (`commands_of` for a log's).
    robots: logs to write.
    seed: base seed of the models, noise and delays.
    env_config: the run's env config (default: the file's env's defaults).
    overrides: `(key, value)` changes of the env config (`--set`).
    runtime_options: the runtime loop's settings (default: the runtime's defaults and the contract the
      file's metadata names).
    clean: no randomization, noise or delays.

  Raises:
    ScoreError: a file that is not an Open Duck Mini V2 policy of this project (`policy_io.check_contract`).
  """
  metadata = policy_io.read_metadata(policy_path)
  on = not clean
  config = policy_io.play_config(metadata, env_config, noise=on, delays=on, randomization=on, overrides=overrides)
  task = metadata.get("task") or "flat_terrain"
  ids = robot_model.RobotIndices.from_model(robot_model.load_model(task))
  policy_io.check_contract(metadata, ids.home_ctrl, float(config.ctrl_dt))
  recorder = Recorder(range(robots))
  player.play(
    policy_io.onnx_policy(policy_path, batched=True),
    metadata["env"],
    task,
    config,
    metadata,
    [(command, i) for i in range(robots)],
    seed,
    "runtime",
    runtime_options,
    on_step=recorder.on_step,
  )
  return [recorder.log(i) for i in range(robots)]


def exit_status(findings: Sequence[Finding]) -> int:
  """1 when any finding is an error, else 0."""
  return int(any(f.level == "error" for f in findings))
