"""What a robot's log tells: the runtime contract it speaks, setup faults, the servos, the file it ran.

`check` runs every check that needs no simulation, in report order, one
`robot_log.Finding` each:

- the contract: what the IMU slots hold and in which order, the joint
  velocity scale (against finite differences of the joint positions), the
  phase rule and whether the head commands are added to the targets; the
  targets' `init_pos` and action scale;
- setup faults: the IMU's mounting (gravity at rest against the model's
  upright), joint offsets at rest, foot switches that never or always read
  contact;
- the servos (`servo_tracking`).

`replay` checks that the logged actions are a policy file's outputs. The
thresholds are this module's constants; what each finding means on a robot
and its fix: docs/on-the-robot.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from playground.open_duck_mini_v2.evaluation import robot_log
from playground.open_duck_mini_v2.evaluation import runtime
from playground.open_duck_mini_v2.evaluation import servo_tracking
from playground.open_duck_mini_v2.evaluation.robot_log import Finding
from playground.open_duck_mini_v2.evaluation.robot_log import LogError
from playground.open_duck_mini_v2.evaluation.robot_log import Reference
from playground.open_duck_mini_v2.model import constants

_J = {name: i for i, name in enumerate(constants.ACTUATOR_NAMES)}
_HEAD = [_J[n] for n in constants.HEAD_JOINT_NAMES]
_NOT_HEAD = [i for i in range(len(constants.ACTUATOR_NAMES)) if i not in _HEAD]
#: The joints that move most while walking, for the velocity scale (the ankles' readings are the noisiest).
_BIG_JOINTS = [_J[n] for n in ("left_hip_pitch", "left_knee", "right_hip_pitch", "right_knee")]

#: |(vx, vy, yaw rate)| below which a frame counts as standing still.
STILL_COMMAND = 1e-3
#: A joint reading further than this from the pose it holds at rest is an error (rad; one
#: spline tooth of the STS3215's horn is 0.25 rad; the training randomizes +-0.03).
CALIBRATION_TOLERANCE = 0.15
#: The runtime's init_pos may differ from the file's home pose by this much (rad).
INIT_POS_TOLERANCE = 0.01
#: Gravity at rest further than this from the model's upright is a warning, then an error (deg).
IMU_TILT_WARN_DEG, IMU_TILT_ERROR_DEG = 15.0, 30.0
#: A measured joint-velocity scale within this factor of the file's matches it.
VEL_SCALE_FACTOR = 1.35


def _imu_kind(v: np.ndarray) -> str:
  """What a 3-float IMU slot holds: "accelerometer" (|a| ~ 9.8 m/s^2), "gravity" (|g| = 1) or "gyro"."""
  norm = np.linalg.norm(v, axis=1)
  if 4.0 < np.median(norm) < 20.0:
    return "accelerometer"
  if np.median(np.abs(norm - 1.0)) < 0.05:
    return "gravity"
  return "gyro"


def imu_findings(obs: np.ndarray, ref: Reference) -> list[Finding]:
  """The IMU's order, what its second slot holds, and its mounting (gravity at rest).

  A slot whose median norm is 4-20 holds the accelerometer (m/s^2), one
  whose norm stays within 0.05 of 1 the gravity direction, any other the
  gyro. The mounting: the mean of the accelerometer (or of the gravity
  direction) over the frames standing still (all frames if fewer than 25),
  against the model's upright at its home pose.
  """
  first, second = _imu_kind(obs[:, 0:3]), _imu_kind(obs[:, 3:6])
  norms = f"median |0:3| {np.median(np.linalg.norm(obs[:, 0:3], axis=1)):.2f}, |3:6| "
  norms += f"{np.median(np.linalg.norm(obs[:, 3:6], axis=1)):.2f}"
  out = []
  if first == "gyro" and second != "gyro":
    out.append(Finding("imu_order", "ok", f"gyro (slots 0:3), then the {second} (3:6) ({norms})"))
    measured, imu = second, obs[:, 3:6]
  elif second == "gyro" and first != "gyro":
    out.append(
      Finding(
        "imu_order",
        "error",
        f"the runtime puts the {first} (slots 0:3) before the gyro (3:6); the file observes the gyro first ({norms})",
      )
    )
    measured, imu = first, obs[:, 0:3]
  else:
    out.append(
      Finding(
        "imu_order",
        "error",
        f"neither IMU slot reads like an accelerometer (|a| ~ 9.8 m/s^2) or a gravity direction (|g| = 1): {norms}",
      )
    )
    return out
  expected = ref.contract.imu_slot
  what = {"accelerometer": "the raw accelerometer (m/s^2)", "gravity": "the projected gravity (a unit vector)"}
  if measured == expected:
    out.append(Finding("imu_slot", "ok", f"{what[measured]} (file: {expected})"))
  else:
    out.append(
      Finding("imu_slot", "error", f"the runtime observes {what[measured]} where the file expects {what[expected]}")
    )
  still = np.linalg.norm(robot_log.slot(obs, "command")[:, :3], axis=1) < STILL_COMMAND
  frames = imu[still] if still.sum() >= 25 else imu
  mean = frames.mean(axis=0)
  direction = mean / max(np.linalg.norm(mean), 1e-9)
  expected_dir = ref.gravity_at_rest if measured == "gravity" else -ref.gravity_at_rest
  angle = float(np.degrees(np.arccos(np.clip(direction @ expected_dir, -1.0, 1.0))))
  where = "standing still" if still.sum() >= 25 else "over the whole log"
  if angle > 150.0:
    out.append(
      Finding(
        "imu_mount",
        "error",
        f"upside down: gravity reads {angle:.0f} deg from the model's upright ({where}); "
        "set imu_upside_down in the runtime's duck_config.json, or turn the IMU over",
      )
    )
  elif angle > IMU_TILT_WARN_DEG:
    axis = np.cross(expected_dir, direction)
    about = "xyz"[int(np.argmax(np.abs(axis)))]
    level = "error" if angle > IMU_TILT_ERROR_DEG else "warn"
    what_is = "rotated" if level == "error" else "tilted"
    out.append(
      Finding(
        "imu_mount",
        level,
        f"{what_is}: gravity reads {angle:.0f} deg from the model's upright ({where}), about the IMU's {about} axis; "
        "mount the IMU as the model has it (or fix the runtime's axis remap)",
      )
    )
  else:
    out.append(Finding("imu_mount", "ok", f"gravity within {angle:.0f} deg of the model's upright ({where})"))
  return out


def velocity_scale(obs: np.ndarray, dt: float, window: int = 3) -> float | None:
  """The runtime's joint-velocity scale, from the joint positions' finite differences; None without motion.

  Over `window` steps, the change of the big leg joints' positions against the
  trapezoid integral of the observed velocities; the slope of the two is
  fitted symmetrically (the geometric mean of both regressions), as both are noisy.
  """
  pos, vel = robot_log.slot(obs, "joint_pos")[:, _BIG_JOINTS], robot_log.slot(obs, "joint_vel")[:, _BIG_JOINTS]
  if len(obs) <= window + 1 or np.std(robot_log.slot(obs, "motor_targets")[:, _BIG_JOINTS], axis=0).max() < 0.05:
    return None
  change = pos[window:] - pos[:-window]
  weights = np.ones(window + 1)
  weights[[0, -1]] = 0.5
  windows = np.lib.stride_tricks.sliding_window_view(vel, window + 1, axis=0)  # (T - window, joints, window + 1)
  integral = (windows * weights).sum(axis=-1) * dt
  x, y = change.ravel(), integral.ravel()
  xy = float(np.sum(x * y))
  if xy <= 0:
    return None
  return float(np.sqrt((xy / np.sum(x * x)) * (np.sum(y * y) / xy)))


def velocity_finding(obs: np.ndarray, ref: Reference) -> Finding:
  """The joint-velocity scale against the file's (`velocity_scale`)."""
  measured = velocity_scale(obs, ref.ctrl_dt)
  expected = ref.contract.joint_vel_scale
  if measured is None:
    return Finding("velocity_scale", "info", "the joints barely move in this log: walk the duck to measure it")
  nearest = min((0.05, 0.1, 1.0), key=lambda s: abs(np.log(measured / s)))
  if 1 / VEL_SCALE_FACTOR < measured / expected < VEL_SCALE_FACTOR:
    return Finding("velocity_scale", "ok", f"joint velocities x{measured:.3f} (file: x{expected:g})")
  return Finding(
    "velocity_scale",
    "error",
    f"the runtime scales joint velocities by about x{measured:.3f} (nearest x{nearest:g}); the file expects "
    f"x{expected:g}",
  )


def phase_finding(obs: np.ndarray, ref: Reference) -> Finding:
  """The phase rule (free-running, or held at 0 while |command| <= 0.1) and the phase's period.

  Frames after the first whose command and the previous one are both small
  (|(vx, vy, yaw rate)| <= 0.1) tell the rule: held at (cos 1, sin 0), or
  advancing. The period: the median advance of the frames where it advances.
  """
  phase = robot_log.slot(obs, "phase")
  angle = np.arctan2(phase[:, 1], phase[:, 0])
  step = np.mod(np.diff(angle), 2 * np.pi)[1:]  # the first frame's (0, 0) has no angle
  advancing = (step > 1e-4) & (step < 2 * np.pi - 1e-4)
  small = np.linalg.norm(robot_log.slot(obs, "command")[:, :3], axis=1) <= runtime.PHASE_HOLD_BELOW + 1e-9
  both = small[1:-1] & small[2:]
  at_zero = np.all(np.abs(phase[2:] - [1.0, 0.0]) < 1e-4, axis=1)
  period = float(2 * np.pi / np.median(step[advancing])) if advancing.sum() >= 5 else None
  period_text = f"{period:.1f} steps per period" if period else "never advancing"
  if both.sum() < 10:
    rule = None
  elif np.mean(at_zero[both]) > 0.8:
    rule = "held"
  elif np.mean(advancing[both]) > 0.8:
    rule = "free-running"
  else:
    rule = "mixed"
  expected = ref.contract.phase_rule
  file_text = f"file: {expected}, {ref.period_steps:g} steps"
  if rule is None:
    level, message = "info", f"{period_text}; the log never stands still (|command| <= 0.1) to tell the rule"
  elif rule != expected:
    held = "held at 0 while |command| <= 0.1"
    level = "error"
    message = f"the runtime's phase is {held if rule == 'held' else rule}; the file expects it {expected}"
  else:
    level, message = "ok", f"{rule}, {period_text}"
  if level != "error" and period and abs(period / ref.period_steps - 1.0) > 0.03:
    level = "warn"
    message += (
      f"; it advances {ref.period_steps / period:.2f}x the file's rate (the LB button held, a d-pad offset, "
      "or another nb_steps_in_period in the runtime's polynomial_coefficients.pkl)"
    )
  return Finding("phase_rule", level, f"{message} ({file_text})")


def _targets_fit(obs: np.ndarray, ref: Reference) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
  """(init_pos estimate or None when the targets are not init_pos + scale * action, residuals, head commands,
  fitted scale per joint)."""
  action = robot_log.slot(obs, "last_actions")[1:, :14]
  targets = robot_log.slot(obs, "motor_targets")[1:]
  commands = robot_log.slot(obs, "command")[:-1, 3:7]
  residual = targets - ref.action_scale * action
  spread = np.std(residual[:, _NOT_HEAD], axis=0).max()
  var = np.var(action, axis=0)
  cov = np.mean((targets - targets.mean(0)) * (action - action.mean(0)), axis=0)
  scale = np.where(var > 1e-8, cov / np.maximum(var, 1e-12), np.nan)
  if spread > 2e-3:
    return None, residual, commands, scale
  init = np.median(residual, axis=0)
  return init, residual, commands, scale


def targets_findings(obs: np.ndarray, ref: Reference) -> tuple[list[Finding], np.ndarray]:
  """The targets (`init_pos + action_scale * action`), the runtime's init_pos, and the head mix.

  The targets each frame observes were sent after the previous frame's action
  (the newest of its last actions): their residual `targets - scale * action`
  is the runtime's `init_pos` on the leg joints, plus the head command on the
  head joints when the runtime adds it. Returns the findings and the
  runtime's init_pos (the file's home pose when it cannot be read).
  """
  init, residual, commands, scale = _targets_fit(obs, ref)
  if init is None:
    fitted = float(np.nanmedian(scale[_NOT_HEAD]))
    level = "warn" if abs(fitted / ref.action_scale - 1.0) < 0.1 else "error"
    return [
      Finding(
        "targets",
        level,
        f"the targets are not init_pos + {ref.action_scale:g} x action: fitted x{fitted:.3f} (another -a action "
        "scale, or the runtime's --cutoff_frequency filter)",
      ),
      Finding("head_mix", "info", "cannot be read when the targets are filtered or scaled otherwise"),
    ], ref.home_pose
  out = []
  # The head joints' residual: init_pos + mix * command.
  varied = np.var(commands, axis=0) > 1e-4
  if varied.any():
    c = commands[:, varied]
    r = residual[:, _HEAD][:, varied]
    slope = np.mean((r - r.mean(0)) * (c - c.mean(0)), axis=0) / np.var(c, axis=0)
    mix = float(np.median(slope))
    head_init = init[_HEAD].copy()
    head_init[varied] = (r - slope * c).mean(0)
  elif np.abs(commands).max() > 0.05:
    big = np.abs(commands) > 0.05
    mix = float(np.median(((residual[:, _HEAD] - ref.home_pose[_HEAD]) / np.where(big, commands, 1.0))[big]))
    head_init = ref.home_pose[_HEAD]
  else:
    mix, head_init = None, init[_HEAD]
  init[_HEAD] = head_init
  expected = ref.contract.head_mix
  file_mix = "added" if expected else "left out"
  if mix is None:
    out.append(Finding("head_mix", "info", "the log has no head command: cannot tell whether the runtime adds them"))
  elif (mix > 0.5) == expected:
    added = "added to the head targets" if mix > 0.5 else "not added to the targets"
    out.append(Finding("head_mix", "ok", f"head commands {added} (slope {mix:.2f}; file: {file_mix})"))
  else:
    out.append(
      Finding(
        "head_mix",
        "error",
        f"the runtime {'adds' if mix > 0.5 else 'does not add'} the head commands to the head targets (slope "
        f"{mix:.2f}); the file expects them {'added' if expected else 'left out'}",
      )
    )
  off = init - ref.home_pose
  bad = [i for i in np.argsort(-np.abs(off)) if abs(off[i]) > INIT_POS_TOLERANCE]
  if bad:
    listed = ", ".join(f"{constants.ACTUATOR_NAMES[i]} {off[i]:+.3f}" for i in bad[:4])
    out.insert(
      0,
      Finding(
        "targets",
        "error",
        f"the runtime's init_pos differs from the file's home pose: {listed} rad (the runtime's hardware "
        "interface init_pos, or its offsets)",
      ),
    )
  else:
    out.insert(
      0,
      Finding(
        "targets",
        "ok",
        f"init_pos + {ref.action_scale:g} x action, init_pos = the file's home pose (within "
        f"{np.abs(off).max():.3f} rad)",
      ),
    )
  return out, init


def calibration_finding(obs: np.ndarray, init_pos: np.ndarray) -> Finding:
  """Joint offsets at rest: each joint's reading against the pose it holds (`init_pos`) before the policy acts.

  The log's first frame, when no action has been taken yet (the runtime has
  held `init_pos` for 2 s); otherwise the median over the frames standing
  still of the reading against the target sent.
  """
  pos = robot_log.slot(obs, "joint_pos") + init_pos
  targets = robot_log.slot(obs, "motor_targets")
  if not np.any(robot_log.slot(obs, "last_actions")[0]):
    offset, where = pos[0] - targets[0], "in the first frame, holding init_pos"
  else:
    still = np.flatnonzero(np.linalg.norm(robot_log.slot(obs, "command")[:, :3], axis=1) < STILL_COMMAND)
    if len(still) < 25:
      return Finding("calibration", "info", "the log neither starts at rest nor stands still for 0.5 s")
    offset, where = np.median(pos[still] - targets[still], axis=0), "standing still"
  worst = np.argsort(-np.abs(offset))
  bad = [i for i in worst if abs(offset[i]) > CALIBRATION_TOLERANCE]
  if bad:
    listed = ", ".join(f"{constants.ACTUATOR_NAMES[i]} {offset[i]:+.2f}" for i in bad[:4])
    return Finding(
      "calibration",
      "error",
      f"joints read away from the pose they hold at rest ({where}): {listed} rad; recalibrate their offsets "
      "(find_soft_offsets), or free a joint that cannot reach it",
    )
  i = worst[0]
  return Finding(
    "calibration",
    "ok",
    f"joints within {CALIBRATION_TOLERANCE} rad of the pose they hold at rest ({where}; largest "
    f"{constants.ACTUATOR_NAMES[i]} {offset[i]:+.3f})",
  )


def feet_finding(obs: np.ndarray) -> Finding:
  """Foot switches that never read contact, or always while the duck walks (1 s or more of commands)."""
  feet = robot_log.slot(obs, "feet_contacts") > 0.5
  share = feet.mean(axis=0)
  walking = int((np.linalg.norm(robot_log.slot(obs, "command")[:, :3], axis=1) > 0.05).sum())
  faults = []
  for side, s in zip(("left", "right"), share):
    if s < 0.01:
      faults.append(f"the {side} switch never reads contact (unplugged, broken, or read on the wrong pin)")
    elif s > 0.99 and walking >= robot_log.MIN_FRAMES:
      faults.append(f"the {side} switch reads contact in every frame while the duck walks (stuck or shorted)")
  text = f"contact in {100 * share[0]:.0f}% (left) and {100 * share[1]:.0f}% (right) of frames"
  if faults:
    return Finding("foot_switches", "error", "; ".join(faults) + f" ({text})")
  return Finding("foot_switches", "ok", text)


def replay(obs: np.ndarray, policy: Callable[[np.ndarray], np.ndarray]) -> Finding:
  """Plays the policy on the logged observations: its outputs must be the logged last actions.

  `policy` maps a batch [n, 101] to actions [n, 14] (`policy_io.onnx_policy(path, batched=True)`).
  """
  try:
    actions = np.asarray(policy(obs[:-1].astype(np.float32)), np.float64)
  except Exception as e:  # onnxruntime's errors for an input the file does not take
    first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return Finding("replay", "error", f"the file cannot be run on the logged observations: {first}")
  logged = robot_log.slot(obs, "last_actions")[1:, :14]
  diff = np.abs(actions - logged).max(axis=1)
  worst = float(diff.max())
  if worst < 1e-3:
    return Finding(
      "replay",
      "ok",
      f"the logged actions are this file's outputs (max |diff| {worst:.1e} over {len(diff)} steps): the robot ran it "
      "on the logged observations",
    )
  return Finding(
    "replay",
    "error",
    f"the logged actions are not this file's outputs ({int((diff >= 1e-3).sum())} of {len(diff)} steps differ, "
    f"max |diff| {worst:.2f}): the robot ran another file, or fed it other observations than it logged",
  )


def describe(obs: np.ndarray, ref: Reference) -> Finding:
  """The log itself: frames, duration and the commands seen."""
  cmd = robot_log.slot(obs, "command")
  head = "head commands seen" if np.abs(cmd[:, 3:]).max() > 1e-3 else "no head command"
  return Finding(
    "log",
    "info",
    f"{len(obs)} frames ({len(obs) * ref.ctrl_dt:.1f} s at {1 / ref.ctrl_dt:.0f} Hz); vx {cmd[:, 0].min():+.2f}.."
    f"{cmd[:, 0].max():+.2f} m/s, vy {cmd[:, 1].min():+.2f}..{cmd[:, 1].max():+.2f}, yaw rate "
    f"{cmd[:, 2].min():+.2f}..{cmd[:, 2].max():+.2f} rad/s; {head}; compared with {ref.source}",
  )


def check(obs: np.ndarray, ref: Reference) -> list[Finding]:
  """Every check of a log that needs no simulation (see the module docstring), in report order.

  Raises:
    LogError: too short a log, or one the file cannot have been fed.
  """
  if len(obs) < robot_log.MIN_FRAMES:
    needed = robot_log.MIN_FRAMES
    raise LogError(f"the log has {len(obs)} frames; checking it needs {needed} ({needed * ref.ctrl_dt:g} s)")
  if ref.observation_size != robot_log.SIZE:
    raise LogError(
      f"the policy observes {ref.observation_size} floats; the runtime builds {robot_log.SIZE} "
      "(it cannot have run this file)"
    )
  if not np.all(np.isfinite(obs)):
    bad = sorted({name for name, sl in robot_log.SLOTS.items() if not np.all(np.isfinite(obs[:, sl]))})
    raise LogError(f"the log holds non-finite values in {', '.join(bad)}")
  out = [describe(obs, ref)]
  out += imu_findings(obs, ref)
  out.append(velocity_finding(obs, ref))
  out.append(phase_finding(obs, ref))
  targets, init_pos = targets_findings(obs, ref)
  out += targets
  out.append(calibration_finding(obs, init_pos))
  out.append(feet_finding(obs))
  out.append(servo_tracking.finding(obs, init_pos, ref))
  return out
