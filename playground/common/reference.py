"""Reference-motion tables: storage, coverage checks, JAX lookup, and import.

A `ReferenceTable` holds one gait period of reference frames for every
command of a regular grid over (vx, vy, yaw rate). Each frame is a flat
vector laid out by `FRAME_LAYOUT`. The table is stored as `.npz` with its
metadata as JSON (never pickle) and evaluated in JAX with trilinear
interpolation in the command and linear interpolation in the gait phase, so
the reference changes continuously with the command.

`from_polynomial_pickle` converts the Open Duck community's
`polynomial_coefficients.pkl` (polynomials in the normalized phase per
command) into a table. Pickle files can run code when loaded: the caller must
opt in explicitly.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from playground.common.config import ConfigError
from playground.common.observation import ObservationLayout

logger = logging.getLogger("playground")

NUM_JOINTS = 14

#: Layout of one reference frame.
FRAME_LAYOUT = ObservationLayout(
  (
    ("joint_pos", NUM_JOINTS),
    ("joint_vel", NUM_JOINTS),
    ("foot_contacts", 2),
    ("base_linvel", 3),
    ("base_angvel", 3),
    ("base_height", 1),
  )
)
COMMAND_AXES = ("vx", "vy", "yaw_rate")


class ReferenceError(ConfigError):
  """A reference table is malformed, incomplete, or does not cover a range."""


@dataclasses.dataclass(frozen=True)
class ReferenceTable:
  """Gait frames over a regular command grid.

  Attributes:
    axes: grid values of (vx, vy, yaw_rate), each sorted and evenly spaced.
    frames: [n_vx, n_vy, n_yaw, n_phase, FRAME_LAYOUT.size]; frame k is at
      phase k / n_phase of the period (the period is periodic: phase 1 = 0).
    period: gait period in seconds.
    double_support_ratio: share of the period with both feet on the ground.
    source: a description of where the table came from.
  """

  axes: tuple[np.ndarray, np.ndarray, np.ndarray]
  frames: np.ndarray
  period: float
  double_support_ratio: float
  source: str = ""

  def __post_init__(self):
    shape = tuple(len(a) for a in self.axes)
    if self.frames.ndim != 5 or self.frames.shape[:3] != shape or self.frames.shape[4] != FRAME_LAYOUT.size:
      raise ReferenceError(
        f"reference frames have shape {self.frames.shape}, expected {shape} + (n_phase, {FRAME_LAYOUT.size})"
      )
    for name, axis in zip(COMMAND_AXES, self.axes):
      if len(axis) > 1:
        steps = np.diff(axis)
        if np.any(steps <= 0) or not np.allclose(steps, steps[0], rtol=1e-3, atol=1e-6):
          raise ReferenceError(f"reference axis {name} must be sorted and evenly spaced, got {axis}")

  @property
  def num_phases(self) -> int:
    return self.frames.shape[3]

  @property
  def frequency(self) -> float:
    return 1.0 / self.period

  # ---- Storage.

  def save(self, path: str | Path) -> Path:
    """Writes `.npz` (arrays) with JSON metadata; no pickle involved."""
    path = Path(path)
    meta = {
      "format": "duck-playground reference v1",
      "period": self.period,
      "double_support_ratio": self.double_support_ratio,
      "source": self.source,
      "frame_layout": FRAME_LAYOUT.to_json(),
      "command_axes": list(COMMAND_AXES),
    }
    with open(path, "wb") as f:
      np.savez_compressed(
        f,
        vx=self.axes[0],
        vy=self.axes[1],
        yaw_rate=self.axes[2],
        frames=self.frames.astype(np.float32),
        meta=np.array(json.dumps(meta)),
      )
    return path

  @classmethod
  def load(cls, path: str | Path) -> ReferenceTable:
    """Reads a table written by `save` (pickle disabled)."""
    try:
      with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        axes = (np.array(data["vx"]), np.array(data["vy"]), np.array(data["yaw_rate"]))
        frames = np.array(data["frames"])
    except (OSError, KeyError, ValueError) as e:
      raise ReferenceError(f"cannot read reference table {path}: {e}") from e
    if meta.get("frame_layout") != FRAME_LAYOUT.to_json():
      raise ReferenceError(f"{path} has a different frame layout than this version expects")
    return cls(axes, frames, float(meta["period"]), float(meta["double_support_ratio"]), meta.get("source", ""))

  # ---- Checks.

  def uncovered(self, ranges: Mapping[str, Sequence[float]]) -> str | None:
    """Names the first command range the grid does not cover, or None."""
    for name, axis in zip(COMMAND_AXES, self.axes):
      lo, hi = ranges[name]
      if lo < axis[0] - 1e-6 or hi > axis[-1] + 1e-6:
        return f"{name} range [{lo:g}, {hi:g}] exceeds the reference grid [{axis[0]:g}, {axis[-1]:g}]"
    return None

  # ---- Evaluation.

  def lookup_fn(self) -> Callable[[Any, Any], Any]:
    """`fn(command[3], phase) -> frame` in JAX (phase in [0, 1), wraps around).

    Trilinear in the command (clamped to the grid) and linear in the phase.
    """
    import jax.numpy as jp

    frames = jp.asarray(self.frames)
    lows = jp.asarray([a[0] for a in self.axes], dtype=jp.float32)
    steps = jp.asarray([(a[1] - a[0]) if len(a) > 1 else 1.0 for a in self.axes], dtype=jp.float32)
    sizes = np.array([len(a) for a in self.axes])
    n_phase = self.num_phases

    def lookup(command, phase):
      u = (jp.asarray(command[:3], jp.float32) - lows) / steps
      u = jp.clip(u, 0.0, jp.asarray(sizes - 1, jp.float32))
      i0 = jp.minimum(jp.floor(u).astype(jp.int32), jp.asarray(np.maximum(sizes - 2, 0)))
      w = u - i0
      p = jp.mod(phase, 1.0) * n_phase
      k0 = jp.floor(p).astype(jp.int32) % n_phase
      k1 = (k0 + 1) % n_phase
      wp = p - jp.floor(p)
      out = 0.0
      for dx in (0, 1):
        for dy in (0, 1):
          for dz in (0, 1):
            ix = jp.minimum(i0[0] + dx, sizes[0] - 1)
            iy = jp.minimum(i0[1] + dy, sizes[1] - 1)
            iz = jp.minimum(i0[2] + dz, sizes[2] - 1)
            weight = (w[0] if dx else 1 - w[0]) * (w[1] if dy else 1 - w[1]) * (w[2] if dz else 1 - w[2])
            frame = (1 - wp) * frames[ix, iy, iz, k0] + wp * frames[ix, iy, iz, k1]
            out = out + weight * frame
      return out

    return lookup


# ---- The community's polynomial format.

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
  import pickle

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
  import hashlib

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
