"""Reference-motion tables: storage, coverage checks and JAX lookup.

A `ReferenceTable` holds one gait period of reference frames for every
command of a regular grid over (vx, vy, yaw rate). Each frame is a flat
vector laid out by `frame_layout(num_joints)`. The table is stored as `.npz`
with its metadata as JSON (never pickle) and evaluated in JAX with trilinear
interpolation in the command and linear interpolation in the gait phase, so
the reference changes continuously with the command. Robot-specific file
formats (e.g. the Open Duck community's pickle) are converted in the robot's
package.
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

from playground.common.configs import ConfigError
from playground.common.tasks.observation_layout import ObservationLayout

logger = logging.getLogger("playground")


def frame_layout(num_joints: int) -> ObservationLayout:
  """Layout of one reference frame of a robot with `num_joints` joints."""
  return ObservationLayout(
    (
      ("joint_pos", num_joints),
      ("joint_vel", num_joints),
      ("foot_contacts", 2),
      ("base_linvel", 3),
      ("base_angvel", 3),
      ("base_height", 1),
    )
  )


#: Frame entries besides the joints' positions and velocities.
_NON_JOINT_SIZE = frame_layout(0).size

COMMAND_AXES = ("vx", "vy", "yaw_rate")


class ReferenceError(ConfigError):
  """A reference table is malformed, incomplete, or does not cover a range."""


@dataclasses.dataclass(frozen=True)
class ReferenceTable:
  """Gait frames over a regular command grid.

  Attributes:
    axes: grid values of (vx, vy, yaw_rate), each sorted and evenly spaced.
    frames: [n_vx, n_vy, n_yaw, n_phase, frame size]; frame k is at
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
    size = self.frames.shape[-1] if self.frames.ndim == 5 else -1
    if (
      self.frames.ndim != 5 or self.frames.shape[:3] != shape or size < _NON_JOINT_SIZE or (size - _NON_JOINT_SIZE) % 2
    ):
      raise ReferenceError(
        f"reference frames have shape {self.frames.shape}, expected {shape} + (n_phase, 2 x joints + {_NON_JOINT_SIZE})"
      )
    for name, axis in zip(COMMAND_AXES, self.axes):
      if len(axis) > 1:
        steps = np.diff(axis)
        if np.any(steps <= 0) or not np.allclose(steps, steps[0], rtol=1e-3, atol=1e-6):
          raise ReferenceError(f"reference axis {name} must be sorted and evenly spaced, got {axis}")

  @property
  def num_joints(self) -> int:
    return (self.frames.shape[-1] - _NON_JOINT_SIZE) // 2

  @property
  def layout(self) -> ObservationLayout:
    """The layout of one frame of this table."""
    return frame_layout(self.num_joints)

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
      "frame_layout": self.layout.to_json(),
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
    if meta.get("frame_layout") != frame_layout((frames.shape[-1] - _NON_JOINT_SIZE) // 2).to_json():
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
    return interpolate_fn(self.axes, self.frames)


def grid_origin_and_steps(axes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
  """First value and spacing (1 for a single value) of each grid axis, float32."""
  lows = np.array([a[0] for a in axes], np.float32)
  steps = np.array([(a[1] - a[0]) if len(a) > 1 else 1.0 for a in axes], np.float32)
  return lows, steps


def interpolate_fn(axes: Sequence[np.ndarray], frames: np.ndarray) -> Callable[[Any, Any], Any]:
  """`fn(command[3], phase) -> frames[..., :]` interpolated, in JAX.

  `frames` is [n_vx, n_vy, n_yaw, n_phase, size] over the regular grid `axes`:
  trilinear in the command (clamped to the grid), linear in the phase (in
  [0, 1), periodic).
  """
  import jax.numpy as jp

  frames = jp.asarray(frames)
  lows, steps = (jp.asarray(x) for x in grid_origin_and_steps(axes))
  sizes = np.array([len(a) for a in axes])
  n_phase = frames.shape[3]

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


@dataclasses.dataclass(frozen=True)
class Feedforward:
  """A reference gait added to the policy's action (the policy learns a residual).

  `action = residual_gain * policy(obs) + gate * offsets(command, phase)`, where `offsets` is
  interpolated as `interpolate_fn` does, `command` (vx, vy, yaw rate) and the
  phase (from its cos, sin) are read from the observation, and `gate` is 1
  while `|command| > gate_threshold`, else 0 (standing is the policy's job);
  with `gate_threshold=None` the gate is always 1 (the reference's gait at a
  zero command, e.g. stepping in place, is added too).
  The env adds it in `step`; the exported ONNX adds the same, so a robot
  runtime that sends `home + action_scale * output` is unchanged.

  Attributes:
    axes: grid of (vx, vy, yaw rate), as in `ReferenceTable`.
    offsets: [n_vx, n_vy, n_yaw, n_phase, action_size], in action units.
    command_index: observation index of vx (vy, yaw rate follow).
    phase_index: observation index of cos(phase) (sin follows).
    gate_threshold: command norm below which nothing is added; None: no gate.
    residual_gain: the policy's action (a tanh, in [-1, 1]) is multiplied by
      it before the gait is added: the residual's reach, in action units.
    standing: [action_size] offsets added while the gate is 0 (a standing
      pose, so that the residual is centred on it); None: nothing is added
      there. Needs a gate.
  """

  axes: tuple[np.ndarray, np.ndarray, np.ndarray]
  offsets: np.ndarray
  command_index: int
  phase_index: int
  gate_threshold: float | None = 0.01
  residual_gain: float = 1.0
  standing: np.ndarray | None = None

  def __post_init__(self):
    if self.standing is not None and self.gate_threshold is None:
      raise ValueError("Feedforward.standing is added while the gate is off: it needs a gate_threshold")

  def jax_fn(self) -> Callable[[Any, Any], Any]:
    """`fn(command, phase_radians) -> action offset` in JAX (one env)."""
    import jax.numpy as jp

    lookup = interpolate_fn(self.axes, self.offsets)

    def fn(command, phase):
      offset = lookup(command[:3], phase / (2 * jp.pi))
      if self.gate_threshold is None:
        return offset
      gate = (jp.linalg.norm(command[:3]) > self.gate_threshold).astype(jp.float32)
      if self.standing is None:
        return gate * offset
      return gate * offset + (1.0 - gate) * jp.asarray(self.standing, jp.float32)

    return fn

  def from_obs_fn(self) -> Callable[[Any], Any]:
    """`fn(obs[batch, obs_size]) -> offsets[batch, action_size]` in JAX, reading command and phase."""
    import jax
    import jax.numpy as jp

    one = self.jax_fn()

    def fn(obs):
      command = obs[:, self.command_index : self.command_index + 3]
      phase = jp.arctan2(obs[:, self.phase_index + 1], obs[:, self.phase_index])
      return jax.vmap(one)(command, phase)

    return fn
