"""The same env on MJX's JAX and Warp implementations, from the same state."""

import jax
import numpy as np
import pytest

from playground.open_duck_mini_v2.model.observations import STATE_LAYOUT
from playground.open_duck_mini_v2.tasks import base
from playground.open_duck_mini_v2.tasks import joystick

#: Agreement after one control step (10 physics steps) from the same state.
#: Measured (CPU, jax 0.9.2, mujoco-mjx 3.17, warp 1.19), max |jax - warp| over
#: three random actions: gyro 0.042 rad/s, joint_pos 1.9e-3 rad, joint_vel
#: (x0.05) 5.6e-3, accelerometer 0.93 m/s^2, everything else exact. The
#: accelerometer follows each implementation's constraint solve (different
#: solver iterations), so it is compared loosely; the rest about 2x the measure.
TOLERANCE = {
  "gyro": 0.1,
  "joint_pos": 5e-3,
  "joint_vel": 0.015,
  "feet_contacts": 0.0,
  "command": 1e-6,
  "last_actions": 1e-6,
  "motor_targets": 1e-6,
  "phase": 1e-6,
  "accelerometer": 1.5,
}


def _env(impl):
  # (domain randomization is applied by a VecEnv, not by the env itself)
  config = base.keeping_disturbances(joystick.default_config(), randomization=True)
  config.impl = impl
  config.naconmax_per_env = 64
  return joystick.Joystick("flat_terrain", config)


@pytest.fixture(scope="module")
def rollouts():
  actions = 0.3 * jax.random.uniform(jax.random.PRNGKey(1), (3, 14), minval=-1, maxval=1)
  out = {}
  for impl in ("jax", "warp"):
    env = _env(impl)

    @jax.jit
    def run(key, env=env):
      state = env.reset(key)

      def step(carry, action):
        # Every action is applied to the same reset state: one step at a time.
        return carry, env.step(carry, action).obs["state"]

      return state.obs["state"], jax.lax.scan(step, state, actions)[1], state.data.qpos

    out[impl] = jax.device_get(run(jax.random.PRNGKey(0)))
  return out


def test_reset_observations_agree(rollouts):
  obs_jax, _, qpos_jax = rollouts["jax"]
  obs_warp, _, qpos_warp = rollouts["warp"]
  np.testing.assert_allclose(qpos_jax, qpos_warp, atol=1e-6)
  split_j, split_w = STATE_LAYOUT.split(obs_jax), STATE_LAYOUT.split(obs_warp)
  for name in ("gyro", "joint_pos", "joint_vel", "command", "motor_targets", "phase", "feet_contacts"):
    np.testing.assert_allclose(split_j[name], split_w[name], atol=TOLERANCE.get(name, 1e-5), err_msg=name)


def test_one_control_step_agrees_within_the_stated_tolerance(rollouts):
  _, steps_jax, _ = rollouts["jax"]
  _, steps_warp, _ = rollouts["warp"]
  for k in range(steps_jax.shape[0]):
    split_j, split_w = STATE_LAYOUT.split(steps_jax[k]), STATE_LAYOUT.split(steps_warp[k])
    for name, tol in TOLERANCE.items():
      np.testing.assert_allclose(split_j[name], split_w[name], atol=tol, err_msg=f"step {k}: {name}")
