"""The Open Duck Mini V2's reference frames, and the community's reference file.

`FRAME_LAYOUT` is the layout of one frame of the duck's reference tables (its
14 joints). `from_polynomial_pickle` converts the Open Duck community's
`polynomial_coefficients.pkl` (polynomials in the normalized phase per
command) into a `ReferenceTable`. Pickle files can run code when loaded: the
caller must opt in explicitly.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from playground.common import configs
from playground.common.tasks.reference_motion import ReferenceError
from playground.common.tasks.reference_motion import ReferenceTable
from playground.common.tasks.reference_motion import frame_layout
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import servos

logger = logging.getLogger("playground")

#: The duck's joints, in action order, are the joints of its reference frames.
NUM_JOINTS = len(constants.ACTUATOR_NAMES)
#: Layout of one frame of the duck's reference tables.
FRAME_LAYOUT = frame_layout(NUM_JOINTS)
#: The built-in generated gait (`gait_generator.py generate`), used when
#: `reference.path` is empty (`table_path`).
BUILTIN_TABLE = constants.ROOT_PATH / "data" / "reference_gait.npz"
#: rad/s: the servo speed the built-in gait was made and trained for (the default servo profile's).
BUILTIN_SERVO_SPEED = servos.PROFILES[servos.DEFAULT].max_velocity


def slowdown(max_velocity: float) -> float:
  """How many times slower than the built-in gait a gait must move for servos of `max_velocity` rad/s.

  The built-in gait asks of the default servo what it was trained with, so a
  servo at least as fast runs it as it is (1.0); a slower one needs every joint
  `BUILTIN_SERVO_SPEED / max_velocity` times slower (`gait_generator.fit_to_speed`).
  """
  return max(1.0, BUILTIN_SERVO_SPEED / float(max_velocity))


def servo_table(profile_name: str) -> Path:
  """The generated gait for the servos of a profile: the built-in one, or one slowed down to their speed."""
  if slowdown(servos.profile(profile_name).max_velocity) == 1.0:
    return BUILTIN_TABLE
  return constants.ROOT_PATH / "data" / f"reference_gait_{profile_name}.npz"


def feedforward_on(config: Any) -> bool:
  """Whether a joystick env built from `config` adds the reference gait to the action
  (configs older than the option have no such key: off)."""
  return bool(config.reference.get("feedforward", False))


def step_in_place(config: Any) -> bool:
  """Whether a joystick env built from `config` steps in place at a zero command
  (`reference.step_in_place`; older configs have no such key: off)."""
  return bool(config.reference.get("step_in_place", False))


def stand_pose_in_feedforward(config: Any) -> bool:
  """Whether the feed-forward adds `reward_config.stand_pose` at a zero command
  (`reference.feedforward_stand_pose`; older configs have no such key: off)."""
  return bool(config.reference.get("feedforward_stand_pose", False))


def residual_gain(config: Any) -> float:
  """What a joystick env built from `config` multiplies the policy's residual by before adding
  the gait (`reference.residual_gain`; older configs have no such key: 1). A gain that is not
  positive is a `ConfigError`."""
  gain = float(config.reference.get("residual_gain", 1.0))
  if not gain > 0.0:
    raise configs.ConfigError(f"reference.residual_gain must be positive, got {gain}")
  return gain


def uses_reference(config: Any) -> bool:
  """Whether a joystick env built from `config` loads the reference gait (imitation or feed-forward)."""
  return config.reward_config.scales.imitation != 0.0 or feedforward_on(config)


def table_path(config: Any) -> Path:
  """The reference table a joystick env built from `config` reads: `reference.path`, else the
  built-in gait, or with `reference.servo_gait="slowed"` the one slowed down to its servos (`servo_table`)."""
  if config.reference.path:
    return Path(config.reference.path)
  if servos.gait_of(config) == "builtin":
    return BUILTIN_TABLE
  return servo_table(servos.name_of(config))


#: Index of our 14 joints among the community file's 16 (antennas dropped).
COMMUNITY_JOINTS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15)


def _parse_key(key: str) -> tuple[float, float, float]:
  try:
    dx, dy, dth = (float(v) for v in key.split("_"))
  except ValueError as e:
    raise ReferenceError(f"reference entry '{key}' is not named dx_dy_dtheta") from e
  return dx, dy, dth


#: The community writes each command into its entry name rounded to 3 decimals
#: ("-0.074_-0.037_-0.333"), so grid values are off by up to half of 0.001.
KEY_ROUNDING = 1e-3


def regular_axis(values: np.ndarray) -> np.ndarray:
  """The evenly spaced grid that `values` (sorted, from rounded entry names) were rounded from.

  Returns `values` unchanged when they are already even, and an exact
  `linspace` over their range when every value is within `KEY_ROUNDING` of
  it; otherwise unchanged (the table then rejects an uneven axis).
  """
  if len(values) < 3:
    return values
  even = np.linspace(values[0], values[-1], len(values))
  if np.max(np.abs(values - even)) <= KEY_ROUNDING:
    return even
  return values


def from_polynomial_entries(entries: Mapping[str, Mapping[str, Any]], source: str = "") -> ReferenceTable:
  """Converts the community's per-command polynomial entries into a table.

  Each entry has `coefficients` (`dim_0`..`dim_39`, lowest degree first, in
  the phase normalized to [0, 1]), `period`, `fps`, `nb_steps_in_period` and
  `startend_double_support_ratio`. Dims: joint positions of 16 joints (5
  left leg, 4 head, 2 antennas, 5 right leg), their 16 velocities, 2 foot
  contacts, base linear velocity 3, base angular velocity 3.

  Raises:
    ReferenceError: malformed entries or an incomplete command grid (naming
      the missing commands).
  """
  if not entries:
    raise ReferenceError("the reference file has no entries")
  commands = {key: _parse_key(key) for key in entries}
  axes = tuple(regular_axis(np.array(sorted({c[i] for c in commands.values()}))) for i in range(3))
  cell = {key: tuple(int(np.argmin(np.abs(axes[i] - v))) for i, v in enumerate(c)) for key, c in commands.items()}
  filled = set(cell.values())
  missing = [
    f"{x:.3f}_{y:.3f}_{t:.3f}"
    for i, x in enumerate(axes[0])
    for j, y in enumerate(axes[1])
    for k, t in enumerate(axes[2])
    if (i, j, k) not in filled
  ]
  if missing:
    shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    raise ReferenceError(f"the reference grid is incomplete: missing commands {shown}")
  first = next(iter(entries.values()))
  period = float(first["period"])
  n_phase = int(first["nb_steps_in_period"])
  phases = np.arange(n_phase) / n_phase
  frames = np.zeros((len(axes[0]), len(axes[1]), len(axes[2]), n_phase, FRAME_LAYOUT.size), np.float32)
  sl = FRAME_LAYOUT.slices
  for key, entry in entries.items():
    coefficients = entry["coefficients"]
    dims = [f"dim_{i}" for i in range(40)]
    absent = [d for d in dims if d not in coefficients]
    if absent:
      raise ReferenceError(f"reference entry '{key}' lacks {absent[0]}")
    values = np.stack([np.polynomial.polynomial.polyval(phases, np.asarray(coefficients[d])) for d in dims], -1)
    ix, iy, it = cell[key]
    frame = frames[ix, iy, it]
    frame[:, sl["joint_pos"]] = values[:, list(COMMUNITY_JOINTS)]
    frame[:, sl["joint_vel"]] = values[:, [16 + j for j in COMMUNITY_JOINTS]]
    frame[:, sl["foot_contacts"]] = np.clip(values[:, 32:34], 0.0, 1.0)
    frame[:, sl["base_linvel"]] = values[:, 34:37]
    frame[:, sl["base_angvel"]] = values[:, 37:40]
    # base_height is not part of the community format and stays 0.
  return ReferenceTable(axes, frames, period, float(first.get("startend_double_support_ratio", 0.0)), source)


def from_polynomial_pickle(path: str | Path, allow_pickle: bool) -> ReferenceTable:
  """Loads the community's `polynomial_coefficients.pkl`.

  Args:
    path: the pickle file.
    allow_pickle: must be True: unpickling can execute code from the file,
      so only load files you trust. Convert once with `save` and use the
      `.npz` afterwards.
  """
  if not allow_pickle:
    raise ReferenceError(
      f"{path} is a pickle, which can run code when loaded; pass --allow_pickle if you trust it "
      "(it is converted once to a safe .npz)"
    )
  logger.warning("loading pickle %s: only do this for files you trust", path)
  with open(path, "rb") as f:
    entries = pickle.load(f)  # noqa: S301 - explicit opt-in above
  if not isinstance(entries, Mapping):
    raise ReferenceError(f"{path} does not hold a dict of reference entries")
  return from_polynomial_entries(entries, source=f"converted from {Path(path).name}")


def prepare(path: str | Path, allow_pickle: bool, cache_dir: str | Path) -> Path:
  """A safe `.npz` table for `path` (an `.npz`, or a community pickle converted once).

  Converted pickles are cached in `cache_dir` by content hash, so each file is
  unpickled only once.
  """
  path = Path(path).expanduser().resolve()
  if not path.is_file():
    raise ReferenceError(f"reference file {path} does not exist")
  if path.suffix == ".npz":
    ReferenceTable.load(path)
    return path
  if path.suffix not in (".pkl", ".pickle"):
    raise ReferenceError(f"reference {path}: expected a .npz table or a community .pkl file")
  if not allow_pickle:
    from_polynomial_pickle(path, allow_pickle=False)  # raises the explanation
  digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
  out = Path(cache_dir) / f"{path.stem}-{digest}.npz"
  if not out.is_file():
    table = from_polynomial_pickle(path, allow_pickle)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.save(out)
    logger.info("converted %s to %s", path, out)
  return out
