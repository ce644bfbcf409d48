"""The settings every Open Duck Mini V2 task shares, and copies keeping only some disturbances."""

from __future__ import annotations

import copy

from ml_collections import config_dict

from playground.common import randomize
from playground.open_duck_mini_v2 import servos

MIN_NACONMAX = 64


def warp_contact_buffer(per_env: int, batch_size: int) -> int:
  """Size of MuJoCo Warp's contact buffer, which one vmapped batch shares."""
  return max(int(per_env) * int(batch_size), MIN_NACONMAX)


def base_config() -> config_dict.ConfigDict:
  """Settings shared by all Open Duck Mini V2 tasks."""
  return config_dict.ConfigDict(
    dict(
      ctrl_dt=0.02,
      sim_dt=0.002,
      episode_length=1000,
      impl="auto",  # auto | jax | warp (auto: warp on NVIDIA GPUs, jax elsewhere)
      # Warp only: contacts per env in the batch's shared contact buffer (the
      # buffer holds naconmax_per_env x envs per device, at least 64). Measured
      # with random actions: at most 3.0 (flat) and 4.4 (rough) per env.
      naconmax_per_env=12,
      njmax=96,  # warp only: constraint rows per env
      action_scale=0.25,
      # The servos (`servos.PROFILES`, docs/servos.md): gains, limits, their randomization, the reference gait.
      servo_profile=servos.DEFAULT,
      max_motor_velocity=None,  # rad/s; None: the servo profile's (`servos.speed_limit`)
      gait_frequency=1.0 / 0.54,  # Hz, advances the phase observation
      # Earlier control steps of gyro, accelerometer and joint position and
      # velocity appended to the actor's observation (observations.state_layout).
      # 0 keeps the 101-float layout that the Open Duck runtime builds; more
      # needs a runtime that keeps the same history.
      observation_history=0,
      # True: the critic also observes the physical parameters domain
      # randomization drew for its env (`dynamics_params`), an asymmetric
      # actor-critic as in rsl_rl/Isaac Lab. The actor's observation and the
      # exported policy do not change.
      critic_dynamics=False,
      reset=dict(
        xy_range=0.5,  # m, +-U spawn position
        joint_noise=0.05,  # rad, +-U around the home pose
        base_vel_noise=0.05,  # m/s and rad/s, +-U
      ),
      # Sensor noise: value + level * scale * U(-1, 1). The joint levels are the
      # upstream Open Duck Playground's (hip 0.03, knee 0.05, ankle 0.08 rad,
      # joint velocity 2.5 rad/s, gyro 0.1 rad/s, accelerometer 0.05 g-units):
      # at least what the robot's STS3215 encoders and IMU show.
      noise_config=dict(
        level=1.0,
        scales=dict(
          gyro=0.1,
          accelerometer=0.05,
          joint_pos_hip=0.03,
          joint_pos_knee=0.05,
          joint_pos_ankle=0.08,
          joint_pos_head=0.03,
          joint_vel=2.5,
        ),
      ),
      delay=dict(
        # Action delay in control steps, redrawn at every step (<= 3): the
        # upstream project's 0-2 steps of servo-bus and inference latency.
        action_steps=(0, 2),
        imu_steps=(0, 1),  # min, max control steps of IMU delay, per episode (<= 3)
      ),
      push_config=dict(
        enable=True,
        interval_range=(5.0, 10.0),  # s between pushes
        # m/s velocity kick of the base: the upstream project's 0.1-1.0 m/s.
        magnitude_range=(0.1, 1.0),
        # Seconds after each kick during which the reward lets the duck step
        # off its gait: imitation, stand_still and feet_air_time are waived
        # (`StepContext.recovering`). 0: off. The actor observes nothing of it.
        recovery_s=0.0,
      ),
      termination=dict(
        min_base_height=0.08,  # m of trunk above the lowest foot
        min_up_z=0.5,  # trunk z axis must stay within 60 deg of vertical
      ),
      domain_randomization=randomize.default_config(),
    )
  )


def keeping_disturbances(
  config: config_dict.ConfigDict,
  *,
  noise: bool = False,
  delays: bool = False,
  randomization: bool = False,
  pushes: bool = False,
) -> config_dict.ConfigDict:
  """A copy of a task config keeping only the disturbances named True; the others are off.

  `keeping_disturbances(config)` is the clean env; `keeping_disturbances(config,
  noise=True)` keeps the sensor noise only. For playback, scoring and checks
  that must see the policy or the physics without (some of) sensor noise,
  action/IMU delays, domain randomization and random pushes.
  """
  config = copy.deepcopy(config)
  if not noise:
    config.noise_config.level = 0.0
  if not delays:
    config.delay.action_steps = (0, 0)
    config.delay.imu_steps = (0, 0)
  if not randomization:
    config.domain_randomization.enabled = False
  if not pushes:
    config.push_config.enable = False
  return config
