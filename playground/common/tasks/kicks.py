"""Training kicks of a legged robot's trunk: direction, strength and an adaptive curriculum.

Pure functions, shared by every task that kicks its trunk. A kick is a
horizontal change of the floating base's velocity. Its direction is drawn in
the trunk's own heading frame, by sector: `SECTORS` names the four 90 degree
sectors (toward the trunk's front, left, back and right), and a task's
weights bias the draw toward some of them (uniform weights: any direction,
as likely as any other).

The adaptive curriculum keeps one kick strength per environment (`level`,
m/s). Each kick is drawn just below it; a kick the robot stays up through
for a judging window grows it, a fall within that window shrinks it. Each
environment's strength then settles where it falls on a fixed share of its
kicks (`settling_fall_share`): training stays at the edge of what the
policy can catch, and follows that edge as it moves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jp
import numpy as np

#: The heading sectors of `direction_weights`, in order; each spans 90 degrees around its centre.
SECTORS = ("forward", "left", "backward", "right")
#: Sector centres in the trunk's heading frame, radians (counter-clockwise from the front). NumPy, not
#: JAX: a JAX array made at import would start JAX before a runner chooses its CPU device count.
_CENTRES = np.array([0.0, 0.5 * np.pi, np.pi, 1.5 * np.pi], np.float32)


def check_direction_weights(weights: Sequence[float]) -> tuple[float, ...]:
  """The weights as floats; ValueError unless there are four, none negative, some positive."""
  values = tuple(float(w) for w in weights)
  if len(values) != len(SECTORS) or any(not math.isfinite(w) or w < 0.0 for w in values) or sum(values) <= 0.0:
    raise ValueError(
      f"needs {len(SECTORS)} non-negative weights, one per sector {SECTORS}, not all zero; got {weights!r}"
    )
  return values


def heading(quat: jax.Array) -> jax.Array:
  """Yaw of (w, x, y, z) orientations (last axis) about the world's z axis, radians."""
  w, x, y, z = quat[..., 0], quat[..., 1], quat[..., 2], quat[..., 3]
  return jp.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def direction(key: jax.Array, trunk_yaw: jax.Array, weights: Sequence[float]) -> jax.Array:
  """World-frame angle of a kick: a sector drawn by `weights`, then uniform within its 90 degrees."""
  k_sector, k_angle = jax.random.split(key)
  sector = jax.random.categorical(k_sector, jp.log(jp.asarray(weights, dtype=jp.float32)))
  offset = jax.random.uniform(k_angle, (), minval=-0.25 * jp.pi, maxval=0.25 * jp.pi)
  return trunk_yaw + jp.asarray(_CENTRES)[sector] + offset


def in_heading_frame(vector_xy: jax.Array, yaw: jax.Array) -> jax.Array:
  """A world-frame horizontal vector ((x, y), last axis) in the frame of a trunk heading `yaw` (x: its front)."""
  cos, sin = jp.cos(yaw), jp.sin(yaw)
  x, y = vector_xy[..., 0], vector_xy[..., 1]
  return jp.stack([cos * x + sin * y, -sin * x + cos * y], axis=-1)


def velocity_change(angle: jax.Array, magnitude: jax.Array) -> jax.Array:
  """The (x, y) change of the trunk's velocity for a kick at `angle` of `magnitude` m/s."""
  return magnitude * jp.stack([jp.cos(angle), jp.sin(angle)])


def magnitude_below(key: jax.Array, level: jax.Array, spread: float) -> jax.Array:
  """A kick strength drawn uniformly in [level * (1 - spread), level]."""
  return jax.random.uniform(key, (), minval=level * (1.0 - spread), maxval=level)


def next_level(
  level: jax.Array,
  survived: jax.Array,
  fell: jax.Array,
  *,
  grow: float,
  shrink: float,
  bounds: tuple[float, float],
) -> jax.Array:
  """The curriculum's next kick strength: x`grow` after a survived kick, x`shrink` after a fall, within `bounds`."""
  factor = jp.where(survived, grow, 1.0) * jp.where(fell, shrink, 1.0)
  return jp.clip(level * factor, bounds[0], bounds[1])


def settling_fall_share(grow: float, shrink: float) -> float:
  """The share of kicks that fall once a level stops moving: grow^(1-p) * shrink^p = 1."""
  return math.log(grow) / (math.log(grow) - math.log(shrink))
