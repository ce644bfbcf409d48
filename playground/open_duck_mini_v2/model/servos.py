"""Servo profiles: the servos a duck is built with, as named data.

A profile is one choice (env config key `servo_profile`) that flows to the
simulated actuators (`robot_model.load_model`), the speed limit of the motor
targets (`speed_limit`), the randomization around them (`domain_randomization`),
the reference gait (`gait_tables.table_path`: the built-in gait clipped by the
speed limit, or with `reference.servo_gait="slowed"` one slowed down to it by
`gait_generator.fit_to_speed`), the policy file's metadata and the scorecard
(`score.py --servo NAME`).

Every value and its source is in docs/servos.md. What is not known about a
servo is not guessed: the profile takes the nominal value of the identified
7.4 V STS3215 and randomizes it over a wide range (the `*_range` fields).

JAX-free: the runner's command line checks a profile name before JAX loads.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from ml_collections import config_dict

from playground.common import configs

#: The profile of configs that name none (runs recorded before the option).
DEFAULT = "sts3215_7v4"

#: Which reference gait servos slower than the default play (env config key
#: `reference.servo_gait`): "builtin", the built-in gait, whose fastest moments
#: the servos' speed limit clips; or "slowed", the built-in gait slowed down to
#: their speed (`gait_generator.fit_to_speed`). Slowed for the C001, the gait
#: does not lift its feet (it moves the duck at 0.01 m/s played open loop,
#: against 0.025-0.031 for the clipped built-in one) and the policies trained
#: on it stood still: docs/servos.md.
SERVO_GAITS = ("builtin", "slowed")


@dataclasses.dataclass(frozen=True)
class ServoProfile:
  """One kind of servo, as the simulation models it.

  The leg servos get `kp`; the head servos `kp` times the MJCF's head/leg gain
  ratio (the runtime's P coefficient 8 against 30). Each `*_range` is a
  (low, high) factor drawn per env and servo on top of the generic domain
  randomization (`randomize.default_config`): (1, 1) where the value was
  identified. `gear_range` is drawn once per env for all its servos
  (`randomize.GEAR_SCALE`): the identified servo behind a gearbox g times
  slower, kp and torque x g, damping and armature x g². `duck_kp_range` and
  `duck_torque_range` are also drawn once per env for all its servos
  (`randomize.DUCK_KP_SCALE`, `randomize.DUCK_FORCERANGE_SCALE`): what is
  unknown about the servo model is the same for every servo of a duck.
  """

  name: str
  #: What the servo is, in a few words.
  description: str
  #: rad/s: the fastest the servo moves its output; each motor target's change
  #: per control step is clipped to `max_velocity * ctrl_dt`.
  max_velocity: float
  #: N·m/rad: the leg servos' position gain (MuJoCo position actuator kp).
  kp: float
  #: N·m·s/rad: joint damping (back-EMF kt²/R plus viscous friction).
  damping: float
  #: kg·m²: rotor inertia seen at the joint.
  armature: float
  #: N·m: dry friction of the joint.
  frictionloss: float
  #: N·m: the actuator's force limit (stall torque).
  max_torque: float
  #: rad: half the gearbox play (the `_backlash` scenes' backlash joint range).
  backlash: float
  #: x `kp`, per env.
  kp_range: tuple[float, float] = (1.0, 1.0)
  #: x `damping`, per env.
  damping_range: tuple[float, float] = (1.0, 1.0)
  #: x `armature`, per env.
  armature_range: tuple[float, float] = (1.0, 1.0)
  #: x `max_torque`, per env.
  torque_range: tuple[float, float] = (1.0, 1.0)
  #: gear factor g, one per env for every servo: kp, torque x g; damping, armature x g².
  gear_range: tuple[float, float] = (1.0, 1.0)
  #: x `kp`, one per env for every servo (an unknown of the servo model, e.g. its supply voltage).
  duck_kp_range: tuple[float, float] = (1.0, 1.0)
  #: x `max_torque`, one per env for every servo (e.g. an unknown supply voltage or stall torque).
  duck_torque_range: tuple[float, float] = (1.0, 1.0)


#: Feetech STS3215 at 7.4 V, identified by the Open Duck project with BAM
#: (Rhoban/bam, branch feetech_sts3215_update_params, params/feetech_sts3215_7_4V/m1.json:
#: kt 1.1826 N·m/A, R 2.7156 Ω, viscous friction 0.0446, dry friction 0.0679,
#: armature 0.0274, max_velocity 5.242 rad/s; Open_Duck_Mini_Runtime#7).
_STS3215_7V4 = ServoProfile(
  name="sts3215_7v4",
  description="Feetech STS3215, 7.4 V (19 kg·cm): the servo the Open Duck Mini V2 was identified with",
  max_velocity=5.24,
  kp=13.37,
  damping=0.56,
  armature=0.027,
  frictionloss=0.068,
  max_torque=3.23,
  backlash=math.radians(0.5),
)

# The 12 V STS3215 identified by the Open Duck project with BAM (Rhoban/bam,
# branch add_sts3215_12v_params, params/feetech_sts3215_12V/m1.json): kt 1.4440,
# R 2.0296, viscous friction 0.0305, dry friction 0.1959, armature 0.0325. The
# supply voltage of its recordings is not published (BAM's recorder defaults to
# 15 V); at 12 V, kp and the stall torque are 2.65x the 7.4 V servo's.
_KP_12V_RATIO = (12.0 * 1.443985897804671 / 2.0295624974250366) / (7.4 * 1.1825652989380575 / 2.7155614266127666)
_STS3215_12V = ServoProfile(
  name="sts3215_12v",
  description="Feetech STS3215, 12 V (30 kg·cm), identified by the Open Duck project",
  # Datasheet no-load speed 0.222 s/60° at 12 V (46 rpm measured, SO-ARM100#134);
  # BAM's 14.6 rad/s is the firmware's target-speed limit, which does not bind.
  max_velocity=math.radians(60.0) / 0.222,
  kp=round(13.37 * _KP_12V_RATIO, 2),
  damping=round(0.03047350651248057 + 1.443985897804671**2 / 2.0295624974250366, 3),
  armature=0.0325,
  frictionloss=0.196,
  max_torque=round(12.0 * 1.443985897804671 / 2.0295624974250366, 2),
  backlash=math.radians(0.5),
  # Unknown recording voltage: kp and torque could be up to 15/12 higher; the
  # stall torque measured at 12 V is 35 kg·cm (3.43 N·m, SO-ARM100#134), 0.4x the model's.
  # Both are one value for all the servos of a duck (until 2026-12-07 drawn per
  # servo), which vary around it by +-10% in torque and by the generic kp draw.
  torque_range=(0.9, 1.1),
  duck_kp_range=(0.8, 1.25),
  duck_torque_range=(0.4, 1.25),
)

# Feetech STS3215-C001 (1:345 gearbox): about 2.7 rad/s at 7.4 V
# (Open_Duck_Mini#48). Nothing else about it is identified: it is modelled as
# the identified 7.4 V servo behind a slower gearbox. The speeds give a factor
# 5.24/2.7 = 1.94; the catalogue's faster variants (1:191 and 1:147, the issue
# above) give 345/191 = 1.81 and 345/147 = 2.35. One factor per duck from 1.6
# to 2.35 (all its servos are one model): kp and torque x g, damping and
# armature x g², so a duck's servos are slow and heavily damped together, as a
# gearbox makes them; each servo varies around it by the generic draws and
# +-10% damping and torque.
_C001 = dataclasses.replace(
  _STS3215_7V4,
  name="c001",
  description="Feetech STS3215-C001, 7.4 V (1:345 gearbox): about 2.7 rad/s; not identified",
  max_velocity=2.7,
  damping_range=(0.9, 1.1),
  torque_range=(0.9, 1.1),
  gear_range=(1.6, 345 / 147),
)

#: Every profile by name.
PROFILES: Mapping[str, ServoProfile] = {p.name: p for p in (_STS3215_7V4, _STS3215_12V, _C001)}


def profile(name: str) -> ServoProfile:
  """The profile called `name`; `ConfigError` (one line naming the valid choices) if there is none."""
  configs.check_choice("servo profile", name, tuple(PROFILES))
  return PROFILES[name]


def name_of(config: Any) -> str:
  """The servo profile an env config names (`servo_profile`; configs from before the option: `DEFAULT`)."""
  return str(config.get("servo_profile", DEFAULT))


def of_config(config: Any) -> ServoProfile:
  """The servo profile of an env config (see `name_of`)."""
  return profile(name_of(config))


def gait_of(config: Any) -> str:
  """Which gait an env config's servos play (`SERVO_GAITS`); `ConfigError` naming the choices if unknown.

  Configs recorded before the key (2026-12-05) played the slowed gait.
  """
  reference = config.get("reference")
  value = str(reference.get("servo_gait", "slowed")) if reference is not None else "builtin"
  configs.check_choice("reference.servo_gait", value, SERVO_GAITS)
  return value


def speed_limit(config: Any) -> float:
  """rad/s: the servo speed an env built from `config` simulates.

  `max_motor_velocity` when the config sets it (every config recorded before
  the profiles did: 5.24), else the profile's `max_velocity`.
  """
  value = config.get("max_motor_velocity")
  return float(value) if value is not None else of_config(config).max_velocity


def select(config: config_dict.ConfigDict, name: str) -> config_dict.ConfigDict:
  """A copy of an env config with the servos of profile `name` (its speed limit included).

  For playing a policy with other servos than it was trained with: a run's
  recorded `max_motor_velocity` is dropped in favour of the profile's.
  """
  profile(name)
  config = config_dict.ConfigDict(config.to_dict())
  config.servo_profile = name
  config.max_motor_velocity = None
  return config


def domain_randomization(config: Any) -> config_dict.ConfigDict:
  """The env config's `domain_randomization` with the servo profile's ranges folded in.

  Each servo range of the config (`kp_scale`, `armature_scale`, `damping_scale`,
  `forcerange_scale`) is multiplied by the profile's (`kp_range`, ...), end by
  end, and the profile's `gear_range`, `duck_kp_range` and `duck_torque_range`
  become `randomize.GEAR_SCALE`, `DUCK_KP_SCALE` and `DUCK_FORCERANGE_SCALE` (each
  absent when (1, 1)). The default profile's are all (1, 1): it leaves every range as it is.
  """
  servo = of_config(config)
  out = config_dict.ConfigDict(config.domain_randomization.to_dict())
  for key, factor in (
    ("kp_scale", servo.kp_range),
    ("armature_scale", servo.armature_range),
    ("damping_scale", servo.damping_range),  # configs recorded before the key have none: (1, 1)
    ("forcerange_scale", servo.torque_range),
  ):
    low, high = out.get(key, (1.0, 1.0))
    out[key] = (float(low) * factor[0], float(high) * factor[1])
  for key, value in (  # randomize.GEAR_SCALE, DUCK_KP_SCALE, DUCK_FORCERANGE_SCALE (JAX-free here)
    ("gear_scale", servo.gear_range),
    ("duck_kp_scale", servo.duck_kp_range),
    ("duck_forcerange_scale", servo.duck_torque_range),
  ):
    if tuple(value) != (1.0, 1.0):
      out[key] = tuple(float(x) for x in value)
  return out
