"""Model-building helpers on `mujoco.MjSpec`: backlash joints and terrain."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np


def add_backlash(
  spec: mujoco.MjSpec,
  joint_names: Sequence[str],
  half_range: float,
  damping: float,
  armature: float,
) -> mujoco.MjSpec:
  """Adds a small passive hinge in series with each named joint.

  The passive joint `<name>_backlash` sits in the same body, on the same axis,
  right after the actuated joint, and is limited to +-`half_range` rad: the
  link can rattle that much around the servo's output shaft. Keyframes get
  zeros for the new joints.

  Args:
    spec: the model spec, modified in place and returned.
    joint_names: actuated hinge joints to give backlash.
    half_range: half of the backlash play, in radians.
    damping: damping of the passive joints.
    armature: armature (reflected inertia) of the passive joints.
  """
  before = spec.compile()
  old_qpos = {
    before.joint(j).name: (before.jnt_qposadr[j], _qpos_width(before.jnt_type[j])) for j in range(before.njnt)
  }
  keys = [np.array(k.qpos) for k in spec.keys]
  for name in joint_names:
    joint = spec.joint(name)
    if joint is None:
      raise ValueError(f"add_backlash: no joint named '{name}'")
    body = joint.parent
    body.add_joint(
      name=f"{name}_backlash",
      type=mujoco.mjtJoint.mjJNT_HINGE,
      axis=joint.axis,
      pos=joint.pos,
      range=[-half_range, half_range],
      limited=mujoco.mjtLimited.mjLIMITED_TRUE,
      damping=damping,
      armature=armature,
      frictionloss=0.0,
    )
  after = spec.compile()
  for key, qpos in zip(spec.keys, keys):
    if qpos.size == 0:
      continue
    new = np.zeros(after.nq)
    for j in range(after.njnt):
      name = after.joint(j).name
      adr, width = after.jnt_qposadr[j], _qpos_width(after.jnt_type[j])
      if name in old_qpos:
        src, _ = old_qpos[name]
        new[adr : adr + width] = qpos[src : src + width]
    key.qpos = new
  return spec


def _qpos_width(jnt_type: int) -> int:
  return {0: 7, 1: 4, 2: 1, 3: 1}[int(jnt_type)]


def procedural_heightfield(
  nrow: int,
  ncol: int,
  seed: int,
  flat_radius: float = 0.15,
  smoothing: int = 2,
) -> np.ndarray:
  """Seeded rough terrain as elevations in [0, 1], shape (nrow, ncol).

  White noise is box-filtered `smoothing` times (gentle bumps rather than
  spikes), normalized to [0, 1], and blended to 0 inside a disc of
  `flat_radius` (a fraction of the field's half-width) around the centre so
  that robots spawn on flat ground.
  """
  rng = np.random.default_rng(seed)
  h = rng.uniform(0.0, 1.0, size=(nrow, ncol))
  for _ in range(smoothing):
    padded = np.pad(h, 1, mode="edge")
    h = sum(padded[1 + dr : 1 + dr + nrow, 1 + dc : 1 + dc + ncol] for dr in (-1, 0, 1) for dc in (-1, 0, 1)) / 9.0
  h = (h - h.min()) / max(h.max() - h.min(), 1e-9)
  y, x = np.meshgrid(np.linspace(-1, 1, nrow), np.linspace(-1, 1, ncol), indexing="ij")
  r = np.sqrt(x**2 + y**2)
  blend = np.clip((r - flat_radius) / flat_radius, 0.0, 1.0)
  return (h * blend).astype(np.float32)
