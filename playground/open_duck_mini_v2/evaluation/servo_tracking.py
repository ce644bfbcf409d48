"""How a robot's servos follow their targets, fitted from its log, against the file's servo profile.

One servo model for every joint whose targets move: the target arrives
`delay` control steps late, a setpoint moves toward it at most `speed`
rad/s, and the joint follows the setpoint first-order with time constant
`tau`. `fit` searches a grid of the three for the model closest to the
logged positions; `finding` compares the fitted speed with the profile's
(`servos.PROFILES`, or the file's `max_motor_velocity`). In the runtime-mode
simulation of a walking policy, the profile's 5.24 rad/s fits within 7% of
the best fit; servos limited to 1.5 rad/s make it fit 13-22% worse, at
1 rad/s 30-43% (6 seeds each, 5.5 s logs of the walker fixture).
"""

from __future__ import annotations

import numpy as np

from playground.open_duck_mini_v2.evaluation import robot_log
from playground.open_duck_mini_v2.evaluation.robot_log import Finding
from playground.open_duck_mini_v2.evaluation.robot_log import Reference

#: The servos are slower than the profile when the profile's speed fits this much worse than the best.
FIT_MARGIN = 1.10
#: A fitted lag above this is a warning (s).
LAG_WARN_S = 0.2


def _follow_error(
  sent: np.ndarray, measured: np.ndarray, start: np.ndarray, dt: float, taus: np.ndarray, speeds: np.ndarray, delay: int
) -> np.ndarray:
  """Mean squared distance [taus, speeds] between `measured` positions and servos that follow the `sent`
  targets `delay` steps late, move their setpoint at most `speed` rad/s and lag it first-order (`tau`)."""
  gain = np.where(taus > 0, 1.0 - np.exp(-dt / np.maximum(taus, 1e-9)), 1.0)[:, None, None]
  step = (speeds * dt)[None, :, None]
  setpoint = np.broadcast_to(start, (len(taus), len(speeds), len(start))).copy()
  position = setpoint.copy()
  total = np.zeros((len(taus), len(speeds)))
  for t in range(len(sent)):
    setpoint += np.clip(sent[max(t - delay, 0)] - setpoint, -step, step)
    position += (setpoint - position) * gain
    total += np.mean((position - measured[t]) ** 2, axis=-1)
  return total / len(sent)


def fit(obs: np.ndarray, init_pos: np.ndarray, dt: float, profile_speed: float) -> dict[str, float] | None:
  """How the joints follow the targets: the delay, lag and speed limit that fit them best.

  Every joint whose targets move (std > 0.05 rad) is fitted at once with one
  servo model (`_follow_error`) over a grid of delays (0-5 steps), time constants
  (0-0.14 s) and speed limits (0.5 rad/s to unlimited, and the profile's).
  Returns the best fit's `delay_s`, `tau_s`, `lag_s` (their sum), `speed`
  and `error`, and `profile_error` (the best fit at the profile's speed);
  None when no joint moves enough.
  """
  pos = robot_log.slot(obs, "joint_pos") + init_pos
  sent = robot_log.slot(obs, "motor_targets")[1:]
  moving = np.std(sent, axis=0) > 0.05
  if not moving.any() or len(sent) < robot_log.MIN_FRAMES:
    return None
  sent, measured, start = sent[:, moving], pos[1:, moving], pos[0, moving]
  taus = np.array([0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.14])
  speeds = np.unique(np.array([0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0, 10.0, 1e6, profile_speed]))
  errors = np.empty((6, len(taus), len(speeds)))
  for delay in range(6):
    errors[delay] = _follow_error(sent, measured, start, dt, taus, speeds, delay)
  d, t, s = np.unravel_index(np.argmin(errors), errors.shape)
  at_profile = errors[:, :, int(np.flatnonzero(speeds == profile_speed)[0])].min()
  return dict(
    delay_s=d * dt,
    tau_s=float(taus[t]),
    lag_s=d * dt + float(taus[t]),
    speed=float(speeds[s]),
    error=float(errors[d, t, s]),
    profile_error=float(at_profile),
  )


def finding(obs: np.ndarray, init_pos: np.ndarray, ref: Reference) -> Finding:
  """The fitted servo (`fit`) against the file's servo profile's speed.

  Slower than the profile when the profile's speed fits more than 10% worse
  than the best fit and the best is slower; a lag over 0.2 s is a warning.
  """
  result = fit(obs, init_pos, ref.ctrl_dt, ref.servo_speed)
  profile = f"the file's {ref.servo_speed:.2f} rad/s ({ref.servo})"
  if result is None:
    return Finding("servos", "info", "no joint target moves enough in this log to measure the servos")
  speed = "unlimited" if result["speed"] > 100 else f"{result['speed']:g} rad/s"
  ms = {k: round(1000 * result[k]) for k in ("lag_s", "delay_s", "tau_s")}
  lag = f"lag {ms['lag_s']} ms ({ms['delay_s']} ms delay + {ms['tau_s']} ms)"
  worse = result["profile_error"] / max(result["error"], 1e-12)
  if worse > FIT_MARGIN and result["speed"] < ref.servo_speed:
    return Finding(
      "servos",
      "error",
      f"slower than the servos the file trained with: the joints follow their targets at about {speed}, {profile} fits "
      f"{100 * (worse - 1):.0f}% worse; {lag}",
    )
  if worse > FIT_MARGIN:
    return Finding("servos", "warn", f"faster than {profile}: best fit {speed}; {lag}")
  if result["lag_s"] > LAG_WARN_S:
    return Finding("servos", "warn", f"{lag}: the servos follow their targets late; speed consistent with {profile}")
  return Finding("servos", "ok", f"{lag}; speed consistent with {profile} (best fit {speed})")
