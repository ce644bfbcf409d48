"""A recovery reference: searched leg motions that catch a kicked standing robot, as a reward's target.

`benchmarks.catch_search --shared` searches, per kick direction, one open-loop
motion of the leg servos that keeps a kicked standing robot up on several
randomized models at once: a piecewise-linear path of motor targets through a
few knots, starting a reaction time after the kick. A `CatchReference` holds
those motions (read from that JSON, data only, checked) and gives, for any
kick and time since it, the motor targets the reward compares the policy's
with (`reward_config.scales.catch_imitation`).

For a kick, the motion of the table's nearest direction is used when it lies
within `half_width` of the kick's (else none: the stance is held). Its
excursion from the stance it was searched from is scaled by the kick's
velocity component along that direction over the searched kick strength
(clipped to [0, `max_scale`]), so a light kick asks for a small motion. The
motion is played about the env's own stance.

A robot that is its own mirror image can catch a kick with either foot, and
a batch with mirrored samples (`ppo.symmetry_augmentation`) pays each mirror
image of an action the reward of the original. So the reward compares with
both the motion for the kick and the mirror image of the motion for the
mirrored kick (`mirrored_targets`), and pays the nearer: the term is then
the same for a sample and its mirror image, as the augmentation assumes.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jp
import numpy as np

from playground.common.configs import ConfigError


def knot_segment(t, steps_per_knot: int, n_knots: int, xp=np):
  """Where a knot motion is `t` control steps into it (0: the first step after the reaction time).

  Returns (i, w): the targets lie `w` of the way from point i to point i + 1 of
  the path [origin, knot 1, ..., knot n_knots], reaching knot k after k x
  `steps_per_knot` steps and holding the last knot after that. `xp` is numpy
  (`benchmarks.catch_search` plays a population) or jax.numpy (the reward).
  """
  u = xp.clip((t + 1) / steps_per_knot, 0.0, float(n_knots))
  i = xp.minimum(xp.floor(u).astype(xp.int32), n_knots - 1)
  return i, u - i


@dataclasses.dataclass(frozen=True)
class CatchReference:
  """Catching motions per kick direction (rad from home, in the env's leg-joint order).

  Attributes:
    directions: [D] kick directions, rad counter-clockwise from the trunk's heading.
    knots: [D, K, J] each motion's knots, rad from home.
    origin: [J] the stance the motions start from, rad from home.
    kick_mps: the kick strength the motions were searched for.
    react_steps: control steps the stance is held after the kick.
    steps_per_knot: control steps from one knot to the next.
    half_width: rad; kicks further than this from every direction get no motion.
    max_scale: the largest factor on a motion's excursion.
  """

  directions: np.ndarray
  knots: np.ndarray
  origin: np.ndarray
  kick_mps: float
  react_steps: int
  steps_per_knot: int
  half_width: float = math.pi / 4
  max_scale: float = 1.5

  @classmethod
  def load(cls, path: str | Path, joint_names: Sequence[str], ctrl_dt: float, reach: float = 1.0) -> CatchReference:
    """The motions of a `catch_search --shared` JSON at `reach` (action units); ConfigError if it is not one."""

    def bad(why: str) -> ConfigError:
      return ConfigError(f"push_config.catch_reference {path}: {why}; make one with benchmarks.catch_search --shared")

    try:
      doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
      raise bad(f"cannot be read as JSON ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("benchmark") != "catch_search" or not doc.get("shared"):
      raise bad("is no catch_search --shared result")
    try:
      kick = float(doc["kick_mps"])
      span, n_knots, react = float(doc["span_s"]), int(doc["knots"]), float(doc["react_s"])
      start = doc["start_pose"]
      offsets = start["offset_rad"] if isinstance(start, dict) else {}
      origin = np.array([float(offsets.get(name, 0.0)) for name in joint_names], np.float32)
      directions, knots = [], []
      for cell, result in doc["results"].items():
        words = cell.split()  # "kick 180 deg, reach 1"
        if len(words) != 5 or float(words[4]) != float(reach):
          continue
        path_rad = np.asarray(result["best_knots_rad"], np.float32)
        if path_rad.shape != (n_knots, len(joint_names)):
          raise ValueError(f"knots of shape {path_rad.shape}, not {(n_knots, len(joint_names))}")
        directions.append(math.radians(float(words[1])))
        knots.append(path_rad)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      raise bad(f"malformed ({type(e).__name__}: {e})") from None
    if not directions:
      raise bad(f"has no motion at reach {reach:g}")
    knots_arr = np.stack(knots)
    if not (np.isfinite(knots_arr).all() and np.isfinite(origin).all() and kick > 0.0 and span > 0.0 and react >= 0):
      raise bad("holds non-finite or non-positive values")
    return cls(
      directions=np.asarray(directions, np.float32),
      knots=knots_arr,
      origin=origin,
      kick_mps=kick,
      react_steps=int(round(react / ctrl_dt)),
      steps_per_knot=max(1, int(round(span / ctrl_dt / n_knots))),
    )

  def targets(self, kick: jax.Array, since: jax.Array, stance: jax.Array) -> jax.Array:
    """Motor targets (rad from home, [J]) `since` control steps after a `kick` ((x, y) m/s in the heading frame).

    `since` 0 is the step the kick is applied at. Before the reaction time, and
    for kicks no motion covers, the targets are `stance`.
    """
    angle = jp.arctan2(kick[1], kick[0])
    diff = angle - jp.asarray(self.directions)
    gap = jp.abs(jp.arctan2(jp.sin(diff), jp.cos(diff)))
    nearest = jp.argmin(gap)
    along = jp.linalg.norm(kick) * jp.cos(gap[nearest])
    scale = jp.clip(along / self.kick_mps, 0.0, self.max_scale) * (gap[nearest] <= self.half_width)
    path = jp.concatenate([jp.asarray(self.origin)[None], jp.asarray(self.knots)[nearest]], axis=0)
    i, w = knot_segment(since - self.react_steps, self.steps_per_knot, self.knots.shape[1], jp)
    pose = (1.0 - w) * path[i] + w * path[i + 1]
    moving = since >= self.react_steps
    return stance + jp.where(moving, scale * (pose - jp.asarray(self.origin)), 0.0)

  def mirrored_targets(self, kick: jax.Array, since: jax.Array, stance: jax.Array, mirror) -> jax.Array:
    """The mirror image of `targets` for the mirrored kick: the same catch on the other side.

    `mirror` maps leg-joint values to their mirror image (a
    `symmetry.SignedPermutation` over the table's joints, an involution); the
    kick (x forward, y left) mirrors to (x, -y). For a table whose motions for
    mirrored kicks are each other's mirror images this equals `targets`.
    """
    mirrored_kick = jp.stack([kick[0], -kick[1]])
    return mirror(self.targets(mirrored_kick, since, mirror(stance)))
