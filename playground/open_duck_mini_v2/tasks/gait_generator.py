"""Reference gait of the Open Duck Mini V2, generated from the project's own model.

    uv run playground/open_duck_mini_v2/tasks/gait_generator.py generate          # rewrite the built-in table
    uv run playground/open_duck_mini_v2/tasks/gait_generator.py generate --servo c001   # slowed to a servo profile
    uv run playground/open_duck_mini_v2/tasks/gait_generator.py plot --vx 0.1 --output gait.png

Method (no external planner):

1. Footstep pattern. One gait period T (default 0.54 s) is split by the
   double-support ratio d: the left foot swings for phase in [d/2, 1/2 - d/2],
   the right foot for [1/2 + d/2, 1 - d/2]; both feet are on the ground
   otherwise. Mid-stance is at phase 3/4 (left) and 1/4 (right).
2. Stance feet. A foot on the ground is fixed in the world, so seen from a
   base that moves at the commanded body velocity (vx, vy) and turns at the
   yaw rate wz, it moves by dr/dt = -v - w x r. This is integrated from the
   foot's nominal (home) position at mid-stance in both time directions, so
   each stance is symmetric about the nominal footprint; the foot's yaw
   relative to the base changes by -wz per second.
3. Swing feet travel back from lift-off to the next touch-down with a
   smoothstep in the plane, a (1 - cos) height profile of `swing_height`,
   and a smooth yaw change.
4. Centre of mass. A simple sway model shifts the base sideways over the
   stance foot, y_base = -A sin(2 pi phase) (amplitude A), which appears as
   the opposite shift of both feet in the base frame.
5. Leg inverse kinematics with MuJoCo. With the trunk `base_height_offset`
   above the home height (the crouched home pose leaves the knee too little
   range to lift a level foot), each leg's five joints are solved by damped least squares on
   `mj_jacSite` of the foot site: position and orientation (sole level, yaw
   as planned), clamped to the joint ranges, warm-started frame to frame.
   Head joints stay at home. Joint velocities are periodic central
   differences; base velocity is v plus the sway velocity.

The result is a `ReferenceTable` over a command grid (vx, vy, yaw rate),
stored as `.npz`, and evaluated in JAX with interpolation in command and
phase (see `playground.common.tasks.reference_motion`).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np
from ml_collections import config_dict

from playground.common.tasks import reference_motion
from playground.open_duck_mini_v2.model import constants
from playground.open_duck_mini_v2.model import robot_model
from playground.open_duck_mini_v2.model import servos
from playground.open_duck_mini_v2.tasks import gait_tables
from playground.open_duck_mini_v2.tasks.gait_tables import FRAME_LAYOUT

logger = logging.getLogger("playground")

LEGS = {
  "left": ("left_hip_yaw", "left_hip_roll", "left_hip_pitch", "left_knee", "left_ankle"),
  "right": ("right_hip_yaw", "right_hip_roll", "right_hip_pitch", "right_knee", "right_ankle"),
}
SITES = {"left": "left_foot", "right": "right_foot"}


def default_config() -> config_dict.ConfigDict:
  """Gait and grid parameters of the generated reference."""
  return config_dict.ConfigDict(
    dict(
      period=0.54,  # s, as the community's reference files
      fps=50,  # frames per second (the control rate)
      # No double support and no sway: played open loop through the servo
      # model (benchmarks/reference_openloop.py), this gait moves the duck at
      # 38-45% of a forward command; with 0.2 double support (0.16 s swings,
      # faster than the servos) and 8 mm of sway it moved at 7% (docs/results.md).
      double_support_ratio=0.0,
      swing_height=0.02,  # m (1.2 cm scuffs, 3.5 cm topples the duck)
      base_height_offset=0.01,  # m: walk 1 cm taller than the home pose (room for the swing; 0 topples it)
      sway_amplitude=0.0,  # m
      # Extra sway per m/s of sideways command (m per m/s), added to
      # sway_amplitude, so forward and turning gaits keep theirs. Negative:
      # the base sways away from the stance foot. With foot_roll_weight 0 the
      # policy steps sideways at 0.08 m/s at a 0.1 m/s command (until
      # 2026-12-04: 0 and 0.3, and it stepped at 0.02; docs/reference-gait.md).
      sideways_sway=-0.1,
      # Footsteps are planned for stride_gain x the commanded velocity (the
      # base velocities of the frames stay the command): feet that slip on
      # the ground need longer steps to carry the trunk at the command. Open
      # loop, 1.5 moves the duck at 68% of a 0.1 m/s command (38% at 1.0; 2.0
      # topples it); trained, 1.75 walks faster (docs/reference-gait.md).
      stride_gain=1.75,
      # Weight of the foot's roll in the leg IK (see `LegIK.solve`); 0 lets
      # the sole roll with the hip so a sideways footstep lands where planned.
      foot_roll_weight=0.0,
      vx=(-0.15, 0.15, 7),  # min, max, count
      vy=(-0.2, 0.2, 5),
      yaw_rate=(-1.0, 1.0, 5),
    )
  )


def fit_to_speed(cfg: config_dict.ConfigDict, max_velocity: float) -> config_dict.ConfigDict:
  """The gait config for servos of `max_velocity` rad/s: `cfg` slowed down to their speed, or `cfg` itself.

  Slower by `gait_tables.slowdown(max_velocity)` = k (1 for servos at least as
  fast as those the built-in gait was made for): the period k times longer,
  rounded up to whole frames (the runtime counts whole control steps per
  period), and footsteps planned for stride_gain / k of the command, so every
  footstep and swing has the built-in gait's shape and every joint moves k
  times slower. Nothing else changes.
  """
  k = gait_tables.slowdown(max_velocity)
  if k == 1.0:
    return cfg
  frames = math.ceil(float(cfg.period) * int(cfg.fps) * k - 1e-6)
  period = frames / int(cfg.fps)
  out = config_dict.ConfigDict(cfg.to_dict())
  out.stride_gain = float(cfg.get("stride_gain", 1.0)) * float(cfg.period) / period
  out.period = period
  return out


class LegIK:
  """Damped-least-squares IK of one leg on the MuJoCo model (trunk fixed)."""

  def __init__(self, model: mujoco.MjModel, home_qpos: np.ndarray):
    self.model = model
    self.data = mujoco.MjData(model)
    self.data.qpos[:] = home_qpos
    mujoco.mj_kinematics(model, self.data)
    mujoco.mj_comPos(model, self.data)
    self.home_qpos = home_qpos.copy()
    self.legs = {}
    for side, names in LEGS.items():
      joints = [model.joint(n).id for n in names]
      site = model.site(SITES[side]).id
      lower, upper = model.jnt_range[joints, 0].copy(), model.jnt_range[joints, 1].copy()
      # The knee bends one way: keep it on the home pose's side of straight,
      # or a target out of reach (the corners of the command grid) can flip
      # one leg's knee backwards and not its mirror partner's.
      knee = [i for i, n in enumerate(names) if n.endswith("_knee")]
      knee_home = home_qpos[model.jnt_qposadr[joints][knee]]
      lower[knee] = np.where(knee_home > 0, np.maximum(lower[knee], 0.0), lower[knee])
      upper[knee] = np.where(knee_home < 0, np.minimum(upper[knee], 0.0), upper[knee])
      self.legs[side] = dict(
        qpos=model.jnt_qposadr[joints],
        dof=model.jnt_dofadr[joints],
        lower=lower,
        upper=upper,
        site=site,
        home_pos=self.data.site_xpos[site].copy(),
        home_rot=self.data.site_xmat[site].reshape(3, 3).copy(),
      )

  def solve(
    self,
    side: str,
    target_pos: np.ndarray,
    yaw: float,
    q0: np.ndarray,
    iterations: int = 50,
    roll_weight: float = 0.3,
  ) -> np.ndarray:
    """Leg joints that put the foot site at `target_pos` with the sole level at heading `yaw`.

    The leg has five joints and no ankle roll, so the foot cannot both step
    sideways and stay level: the orientation error is weighted 0.3 against
    the position error (in metres), and its roll part (about the foot's
    forward axis) by `roll_weight`. With 0, the foot rolls with the hip and
    lands where it was planned.
    """
    leg = self.legs[side]
    c, s = np.cos(yaw), np.sin(yaw)
    heading = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    target_rot = heading @ leg["home_rot"]
    q = q0.copy()
    jacp = np.zeros((3, self.model.nv))
    jacr = np.zeros((3, self.model.nv))
    weights = np.array([1.0, 1.0, 1.0, roll_weight, 0.3, 0.3])
    for _ in range(iterations):
      self.data.qpos[leg["qpos"]] = q
      mujoco.mj_kinematics(self.model, self.data)
      mujoco.mj_comPos(self.model, self.data)
      pos = self.data.site_xpos[leg["site"]]
      rot = self.data.site_xmat[leg["site"]].reshape(3, 3)
      err_rot = np.zeros(3)
      quat_err = np.zeros(4)
      mujoco.mju_mat2Quat(quat_err, (target_rot @ rot.T).ravel())
      mujoco.mju_quat2Vel(err_rot, quat_err, 1.0)
      # Rotation error and Jacobian in the heading frame: x is the roll axis.
      err = np.concatenate([target_pos - pos, heading.T @ err_rot]) * weights
      if np.linalg.norm(err) < 1e-7:
        break
      mujoco.mj_jacSite(self.model, self.data, jacp, jacr, leg["site"])
      jac = np.concatenate([jacp[:, leg["dof"]], heading.T @ jacr[:, leg["dof"]]]) * weights[:, None]
      dq = np.linalg.solve(jac.T @ jac + 1e-6 * np.eye(5), jac.T @ err)
      q = np.clip(q + dq, leg["lower"], leg["upper"])
    return q

  def foot_position(self, side: str, q: np.ndarray) -> np.ndarray:
    leg = self.legs[side]
    self.data.qpos[leg["qpos"]] = q
    mujoco.mj_kinematics(self.model, self.data)
    return self.data.site_xpos[leg["site"]].copy()


def _stance_offsets(r_mid: np.ndarray, v: np.ndarray, wz: float, times: np.ndarray) -> np.ndarray:
  """Planar foot position in the base frame during stance, t=0 at mid-stance.

  Closed-form solution of dr/dt = -v - wz z x r with r(0) = r_mid:
  r(t) = R(-wz t) r_mid - (integral_0^t R(-wz s) ds) v.
  """
  out = np.zeros((len(times), 2))
  for i, t in enumerate(times):
    c, s = np.cos(wz * t), np.sin(wz * t)
    rot = np.array([[c, s], [-s, c]])  # R(-wz t)
    if abs(wz) < 1e-9:
      integral = t * np.eye(2)
    else:
      integral = np.array([[s, 1 - c], [c - 1, s]]) / wz
    out[i] = rot @ r_mid - integral @ v
  return out


def _smoothstep(s: np.ndarray) -> np.ndarray:
  return s * s * (3.0 - 2.0 * s)


def generate_cycle(ik: LegIK, command: Sequence[float], cfg: config_dict.ConfigDict) -> np.ndarray:
  """Frames [n_phase, FRAME_LAYOUT.size] of one period for (vx, vy, yaw_rate)."""
  vx, vy, wz = (float(c) for c in command)
  gain = float(cfg.get("stride_gain", 1.0))
  v = gain * np.array([vx, vy])
  wz_steps = gain * wz
  n = int(round(cfg.period * cfg.fps))
  phases = np.arange(n) / n
  dt = cfg.period / n
  ds = cfg.double_support_ratio
  swing = 0.5 - ds
  stance_time = (1.0 - swing) * cfg.period
  amplitude = cfg.sway_amplitude + cfg.sideways_sway * abs(vy)
  sway = -amplitude * np.sin(2 * np.pi * phases)
  sway_vel = -amplitude * 2 * np.pi / cfg.period * np.cos(2 * np.pi * phases)
  base_z = ik.home_qpos[2] + cfg.base_height_offset
  sl = FRAME_LAYOUT.slices
  frames = np.zeros((n, FRAME_LAYOUT.size))
  joint_pos = np.zeros((n, constants.ACTUATOR_NAMES.__len__()))
  joint_ids = {name: i for i, name in enumerate(constants.ACTUATOR_NAMES)}
  contacts = np.zeros((n, 2))
  for foot, (side, swing_start, mid_stance) in enumerate((("left", ds / 2, 0.75), ("right", 0.5 + ds / 2, 0.25))):
    leg = ik.legs[side]
    r_mid = leg["home_pos"][:2] - ik.home_qpos[:2]
    ends = _stance_offsets(r_mid, v, wz_steps, np.array([-stance_time / 2, stance_time / 2]))
    q = ik.home_qpos[leg["qpos"]].copy()
    positions, yaws = np.zeros((n, 3)), np.zeros(n)
    for k, phase in enumerate(phases):
      u = (phase - swing_start) % 1.0
      if u < swing:  # swing: from lift-off (end of stance) to touch-down (start of stance)
        s = u / swing
        blend = _smoothstep(np.array(s))
        xy = (1 - blend) * ends[1] + blend * ends[0]
        z = cfg.swing_height * 0.5 * (1 - np.cos(2 * np.pi * s))
        yaw = (1 - blend) * (-wz_steps * stance_time / 2) + blend * (wz_steps * stance_time / 2)
      else:
        contacts[k, foot] = 1.0
        t = ((phase - mid_stance + 0.5) % 1.0 - 0.5) * cfg.period
        xy = _stance_offsets(r_mid, v, wz_steps, np.array([t]))[0]
        z = 0.0
        yaw = -wz_steps * t
      # The trunk stays at the home pose in the IK: a taller walk lowers the feet.
      foot_z = leg["home_pos"][2] - cfg.base_height_offset + z
      target = np.array([ik.home_qpos[0] + xy[0], ik.home_qpos[1] + xy[1] - sway[k], foot_z])
      positions[k], yaws[k] = target, yaw
    # Two passes over the period so the warm start is periodic too.
    for _ in range(2):
      for k in range(n):
        q = ik.solve(side, positions[k], yaws[k], q, roll_weight=float(cfg.foot_roll_weight))
        for name, value in zip(LEGS[side], q):
          joint_pos[k, joint_ids[name]] = value
  for name in constants.HEAD_JOINT_NAMES:
    joint_pos[:, joint_ids[name]] = ik.home_qpos[ik.model.joint(name).qposadr[0]]
  joint_vel = (np.roll(joint_pos, -1, axis=0) - np.roll(joint_pos, 1, axis=0)) / (2 * dt)
  frames[:, sl["joint_pos"]] = joint_pos
  frames[:, sl["joint_vel"]] = joint_vel
  frames[:, sl["foot_contacts"]] = contacts
  frames[:, sl["base_linvel"]] = np.stack([np.full(n, vx), vy + sway_vel, np.zeros(n)], axis=-1)
  frames[:, sl["base_angvel"]] = np.stack([np.zeros(n), np.zeros(n), np.full(n, wz)], axis=-1)
  frames[:, sl["base_height"]] = base_z
  return frames


def make_ik(task: str = "flat_terrain") -> LegIK:
  model = robot_model.load_model(task)
  home = np.array(model.key(constants.HOME_KEYFRAME).qpos)
  return LegIK(model, home)


def generate(cfg: config_dict.ConfigDict | None = None) -> reference_motion.ReferenceTable:
  """The reference table over the configured command grid."""
  cfg = cfg or default_config()
  ik = make_ik()
  axes = tuple(np.linspace(lo, hi, int(count)) for lo, hi, count in (cfg.vx, cfg.vy, cfg.yaw_rate))
  n = int(round(cfg.period * cfg.fps))
  frames = np.zeros((len(axes[0]), len(axes[1]), len(axes[2]), n, FRAME_LAYOUT.size), np.float32)
  for i, vx in enumerate(axes[0]):
    for j, vy in enumerate(axes[1]):
      for k, wz in enumerate(axes[2]):
        frames[i, j, k] = generate_cycle(ik, (vx, vy, wz), cfg)
  source = (
    f"generated by gait_generator.py (period {cfg.period} s, double support {cfg.double_support_ratio}, "
    f"swing height {cfg.swing_height} m, sway {cfg.sway_amplitude} m, stride gain {cfg.get('stride_gain', 1.0)}, "
    f"foot roll weight {cfg.foot_roll_weight}, sideways sway {cfg.sideways_sway} m per m/s)"
  )
  return reference_motion.ReferenceTable(axes, frames, float(cfg.period), float(cfg.double_support_ratio), source)


def load_default() -> reference_motion.ReferenceTable:
  """The built-in table (generated once with `generate` and committed)."""
  return reference_motion.ReferenceTable.load(gait_tables.BUILTIN_TABLE)


def plot(
  table: reference_motion.ReferenceTable, command: Sequence[float], output: str | Path, samples: int = 200
) -> Path:
  """PNG of one period of the joint trajectories and foot contacts."""
  import matplotlib

  matplotlib.use("Agg")
  import jax
  import matplotlib.pyplot as plt

  lookup = jax.jit(jax.vmap(table.lookup_fn(), in_axes=(None, 0)))
  phases = np.linspace(0.0, 1.0, samples)
  frames = np.asarray(lookup(np.asarray(command, np.float32), phases))
  sl = FRAME_LAYOUT.slices
  fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
  for side, ax in zip(("left", "right"), axes[:2]):
    for name in LEGS[side]:
      ax.plot(phases * table.period, frames[:, sl["joint_pos"]][:, constants.ACTUATOR_NAMES.index(name)], label=name)
    ax.set_ylabel("joint position (rad)")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
  contacts = frames[:, sl["foot_contacts"]]
  axes[2].plot(phases * table.period, contacts[:, 0], label="left foot contact")
  axes[2].plot(phases * table.period, contacts[:, 1] * 0.95, label="right foot contact")
  axes[2].set_xlabel("time in the gait period (s)")
  axes[2].legend(loc="upper right", fontsize=8)
  vx, vy, wz = command
  fig.suptitle(f"Open Duck Mini V2 reference gait: vx={vx:g} m/s, vy={vy:g} m/s, yaw rate={wz:g} rad/s")
  fig.tight_layout()
  output = Path(output)
  fig.savefig(output, dpi=100)
  plt.close(fig)
  return output


def main(argv: Sequence[str] | None = None) -> int:
  """Command line: `generate` or `plot`."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
  parser = argparse.ArgumentParser(description="Generate or plot the Open Duck Mini V2 reference gait.")
  sub = parser.add_subparsers(dest="command", required=True)
  gen = sub.add_parser("generate", help="(re)generate the reference table")
  gen.add_argument("--output", help="default: the built-in table, or the --servo profile's")
  gen.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. period=0.6")
  gen.add_argument("--servo", help="slow the gait down to the speed of a servo profile's servos (`fit_to_speed`)")
  pl = sub.add_parser("plot", help="PNG of one period for a command")
  pl.add_argument("--reference", help="table (.npz); default: the built-in one")
  pl.add_argument("--vx", type=float, default=0.1)
  pl.add_argument("--vy", type=float, default=0.0)
  pl.add_argument("--yaw_rate", type=float, default=0.0)
  pl.add_argument("--output", default="reference_gait.png")
  args = parser.parse_args(argv)
  from playground.common import configs

  try:
    if args.command == "generate":
      cfg = configs.apply_overrides(default_config(), configs.parse_overrides(args.set))
      output = args.output or gait_tables.BUILTIN_TABLE
      if args.servo:
        cfg = fit_to_speed(cfg, servos.profile(args.servo).max_velocity)
        output = args.output or gait_tables.servo_table(args.servo)
      table = generate(cfg)
      Path(output).parent.mkdir(parents=True, exist_ok=True)
      table.save(output)
      logger.info(
        "wrote %s: %s commands x %d frames", output, "x".join(str(len(a)) for a in table.axes), table.num_phases
      )
    else:
      table = reference_motion.ReferenceTable.load(args.reference) if args.reference else load_default()
      out = plot(table, (args.vx, args.vy, args.yaw_rate), args.output)
      logger.info("wrote %s", out)
  except (configs.ConfigError, reference_motion.ReferenceError) as e:
    sys.stderr.write(f"error: {e}\n")
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
