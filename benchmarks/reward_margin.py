"""The arithmetic of the joystick reward: does following the command beat standing?

    uv run python -m benchmarks.reward_margin

For each command of the scorecard suite, the mean weighted reward per second of
an idealized duck that stands still in the home pose, and of one that follows
the command exactly with the reference gait (`joystick.ideal_reward_per_second`),
under the current default reward and under the reward before the rework
(alive 20, tracking 2.5 / 6.0 with one sigma of 0.01, imitation off).
"""

from __future__ import annotations

import jax.numpy as jp

from benchmarks.common import emit
from playground.open_duck_mini_v2.tasks import joystick

COMMANDS = {
  "stand": (0.0, 0.0, 0.0),
  "forward_0.1": (0.1, 0.0, 0.0),
  "forward_0.15": (0.15, 0.0, 0.0),
  "backward_0.1": (-0.1, 0.0, 0.0),
  "left_0.1": (0.0, 0.1, 0.0),
  "turn_left_0.5": (0.0, 0.0, 0.5),
}


def previous_config():
  """The joystick reward before the walking rework (imitation as good as off)."""
  c = joystick.default_config()
  s = c.reward_config.scales
  s.tracking_lin_vel, s.tracking_ang_vel, s.alive = 2.5, 6.0, 20.0
  s.imitation = 1e-9  # loads the reference (for the walking motion) but pays nothing
  c.reward_config.ang_tracking_sigma = 0.01
  return c


def main() -> None:
  results = {}
  for name, config in (("current", joystick.default_config()), ("previous", previous_config())):
    env = joystick.Joystick("flat_terrain", config)
    rows = {}
    for command_name, (vx, vy, wz) in COMMANDS.items():
      command = jp.array([vx, vy, wz, 0.0, 0.0, 0.0, 0.0])
      walk = joystick.ideal_reward_per_second(env, command, walking=True)
      stand = joystick.ideal_reward_per_second(env, command, walking=False)
      rows[command_name] = {"walking": round(walk, 3), "standing": round(stand, 3), "ratio": round(walk / stand, 3)}
    results[name] = rows
  emit({"benchmark": "reward_margin", "unit": "reward per second", "results": results})


if __name__ == "__main__":
  main()
