"""Per-environment domain randomization of an MJX model, resolved by name.

`make_randomization_fn` returns a function with the signature Brax and MuJoCo
Playground use, `fn(model, keys) -> (batched_model, in_axes)`: one randomized
copy of the listed model fields per key, and an `in_axes` tree that tells
`jax.vmap` which fields carry the environment axis. Every body, geom, joint
and actuator is looked up by name in the MuJoCo model when the function is
built, so a renamed or missing element is a clear error, not a silent wrong id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from ml_collections import config_dict
from mujoco import mjx

#: `fn(mjx_model, keys) -> (batched_model, in_axes)`: what a randomizer returns.
RandomizationFn = Callable[[mjx.Model, jax.Array], tuple[mjx.Model, Any]]

#: The model fields that `make_randomization_fn` writes (one copy per env).
RANDOMIZED_FIELDS = (
  "geom_friction",
  "dof_frictionloss",
  "dof_armature",
  "body_ipos",
  "body_mass",
  "body_inertia",
  "qpos0",
  "actuator_gainprm",
  "actuator_biasprm",
)
#: The model fields it also writes when their ranges (`damping_scale`,
#: `forcerange_scale`, `gear_scale`, `duck_forcerange_scale`) are not (1, 1); otherwise every env shares the model's.
SERVO_FIELDS = ("dof_damping", "actuator_forcerange")


def default_config() -> config_dict.ConfigDict:
  """Randomization ranges; each (low, high) is sampled uniformly per env."""
  return config_dict.ConfigDict(
    dict(
      enabled=True,
      # Sliding friction of the floor; the floor geom has priority over the
      # soles, so this is the friction every foot contact uses.
      floor_friction=(0.5, 1.0),
      frictionloss_scale=(0.8, 1.2),  # x joint frictionloss
      armature_scale=(1.0, 1.05),  # x joint armature
      # m, +-U on each axis of the trunk's centre of mass: the upstream Open
      # Duck Playground's +-5 cm (battery, head and wiring placement vary).
      com_offset=0.05,
      # m added to `com_offset` in training only: the policy trains on a wider
      # range than the scorecard judges it on (`policy_io.play_config` drops it).
      com_offset_margin=0.0,
      link_mass_scale=(0.9, 1.1),  # x mass (and inertia) of every link
      trunk_extra_mass=(-0.1, 0.1),  # kg added to the trunk
      joint_offset=0.03,  # rad, +-U servo zero offset (qpos0 + servo bias)
      kp_scale=(0.9, 1.1),  # x servo position gain (with matching bias), every servo
      # Extra x on the head servos' gain: their kp is extrapolated from the
      # runtime's lower P coefficient (8 vs 30), so it is less certain.
      head_kp_scale=(0.8, 1.2),
      damping_scale=(1.0, 1.0),  # x joint damping of every servo
      forcerange_scale=(1.0, 1.0),  # x servo force limit
    )
  )


#: Config key (not in `default_config`; a servo profile adds it, see
#: `open_duck_mini_v2.model.servos`): (low, high) of one gear factor g drawn
#: per env for all its servos at once, as if each were the identified servo
#: behind a gearbox g times slower: kp and force limit x g, joint damping and
#: armature x g² (reflected through the gearbox), on top of the per-servo draws.
GEAR_SCALE = "gear_scale"
#: Config keys (not in `default_config`; a servo profile adds them): (low, high)
#: of one factor drawn per env for all its servos at once, on the position gain
#: (`DUCK_KP_SCALE`) and on the force limit (`DUCK_FORCERANGE_SCALE`), on top of
#: the per-servo draws: what is unknown about a servo model (a supply voltage,
#: a stall torque) is the same for every servo of one duck.
DUCK_KP_SCALE = "duck_kp_scale"
DUCK_FORCERANGE_SCALE = "duck_forcerange_scale"


@dataclasses.dataclass(frozen=True)
class RandomizationTargets:
  """Names of the elements to randomize.

  Attributes:
    floor_geom: geom whose friction is randomized.
    trunk_body: body that receives the centre-of-mass jitter and extra mass.
    actuators: position actuators whose joints get zero offsets, friction,
      armature, damping, kp and force-limit randomization.
    head_actuators: the subset of `actuators` whose kp is also scaled by
      `head_kp_scale`.
  """

  floor_geom: str
  trunk_body: str
  actuators: Sequence[str]
  head_actuators: Sequence[str] = ()


def _name_to_id(mj_model: mujoco.MjModel, objtype: mujoco.mjtObj, name: str) -> int:
  idx = mujoco.mj_name2id(mj_model, objtype, name)
  if idx < 0:
    kind = mujoco.mju_type2Str(objtype.value) if hasattr(mujoco, "mju_type2Str") else str(objtype)
    raise ValueError(f"randomization: the model has no {kind} named '{name}'")
  return idx


def make_randomization_fn(
  mj_model: mujoco.MjModel,
  targets: RandomizationTargets,
  config: config_dict.ConfigDict,
) -> RandomizationFn:
  """Builds the per-env randomization function for `mj_model`.

  Args:
    mj_model: the compiled MuJoCo model the environment simulates.
    targets: names of the floor geom, trunk body and actuators.
    config: ranges, see `default_config()`.

  Returns:
    fn(mjx_model, keys[num_envs]) -> (batched mjx model, in_axes).
  """
  floor = _name_to_id(mj_model, mujoco.mjtObj.mjOBJ_GEOM, targets.floor_geom)
  trunk = _name_to_id(mj_model, mujoco.mjtObj.mjOBJ_BODY, targets.trunk_body)
  act_ids = np.array([_name_to_id(mj_model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in targets.actuators])
  joint_ids = mj_model.actuator_trnid[act_ids, 0]
  dof_ids = mj_model.jnt_dofadr[joint_ids]
  qpos_ids = mj_model.jnt_qposadr[joint_ids]
  n_act = len(act_ids)
  head = np.array([name in tuple(targets.head_actuators) for name in targets.actuators])
  c = config
  com_offset = float(c.com_offset) + float(c.get("com_offset_margin", 0.0))  # a run recorded before the margin has none
  # Runs recorded before these ranges have none.
  damping_scale = tuple(float(x) for x in c.get("damping_scale", (1.0, 1.0)))
  forcerange_scale = tuple(float(x) for x in c.get("forcerange_scale", (1.0, 1.0)))
  gear_scale = tuple(float(x) for x in c.get(GEAR_SCALE, (1.0, 1.0)))
  geared = gear_scale != (1.0, 1.0)
  duck_kp_scale = tuple(float(x) for x in c.get(DUCK_KP_SCALE, (1.0, 1.0)))
  duck_force_scale = tuple(float(x) for x in c.get(DUCK_FORCERANGE_SCALE, (1.0, 1.0)))
  per_duck = duck_kp_scale != (1.0, 1.0) or duck_force_scale != (1.0, 1.0)

  def sample(model: mjx.Model, key: jax.Array) -> dict[str, jax.Array]:
    k = jax.random.split(key, 9)
    u = lambda key, lo_hi, shape=(): jax.random.uniform(  # noqa: E731
      key, shape, minval=lo_hi[0], maxval=lo_hi[1]
    )
    geom_friction = model.geom_friction.at[floor, 0].set(u(k[0], c.floor_friction))
    dof_frictionloss = model.dof_frictionloss.at[dof_ids].multiply(u(k[1], c.frictionloss_scale, (n_act,)))
    dof_armature = model.dof_armature.at[dof_ids].multiply(u(k[2], c.armature_scale, (n_act,)))
    body_ipos = model.body_ipos.at[trunk].add(u(k[3], (-com_offset, com_offset), (3,)))
    mass_scale = u(k[4], c.link_mass_scale, (model.nbody,))
    body_mass = model.body_mass * mass_scale
    extra = u(k[5], c.trunk_extra_mass)
    trunk_scale = (body_mass[trunk] + extra) / body_mass[trunk]
    body_mass = body_mass.at[trunk].add(extra)
    inertia_scale = mass_scale.at[trunk].multiply(trunk_scale)
    body_inertia = model.body_inertia * inertia_scale[:, None]
    offset = u(k[6], (-c.joint_offset, c.joint_offset), (n_act,))
    qpos0 = model.qpos0.at[qpos_ids].add(offset)
    kp = model.actuator_gainprm[act_ids, 0] * u(k[7], c.kp_scale, (n_act,))
    if head.any():
      kp = kp * jp.where(head, u(k[8], c.head_kp_scale, (n_act,)), 1.0)
    # One gear factor per env, from a key of its own (the draws above stay those of configs before it).
    gear = 1.0
    if geared:
      gear = u(jax.random.fold_in(key, 10), gear_scale)
      kp = kp * gear
      dof_armature = dof_armature.at[dof_ids].multiply(gear**2)
    # One gain and one force-limit factor per env, from keys of their own likewise.
    duck_force = 1.0
    if per_duck:
      k_duck_kp, k_duck_force = jax.random.split(jax.random.fold_in(key, 11))
      kp = kp * u(k_duck_kp, duck_kp_scale)
      duck_force = u(k_duck_force, duck_force_scale)
    gainprm = model.actuator_gainprm.at[act_ids, 0].set(kp)
    # A servo whose zero is off by `offset` pushes towards ctrl + offset:
    # force = kp * ctrl + kp * offset - kp * q.
    biasprm = model.actuator_biasprm.at[act_ids, 1].set(-kp)
    biasprm = biasprm.at[act_ids, 0].set(kp * offset)
    fields = {}
    # Drawn from keys of their own, so the draws above stay those of configs before them.
    k_damping, k_force = jax.random.split(jax.random.fold_in(key, 9))
    if damping_scale != (1.0, 1.0) or geared:
      damping = u(k_damping, damping_scale, (n_act,)) * gear**2
      fields["dof_damping"] = model.dof_damping.at[dof_ids].multiply(damping)
    if forcerange_scale != (1.0, 1.0) or geared or duck_force_scale != (1.0, 1.0):
      force = u(k_force, forcerange_scale, (n_act,)) * gear * duck_force
      fields["actuator_forcerange"] = model.actuator_forcerange.at[act_ids].multiply(force[:, None])
    return dict(
      geom_friction=geom_friction,
      dof_frictionloss=dof_frictionloss,
      dof_armature=dof_armature,
      body_ipos=body_ipos,
      body_mass=body_mass,
      body_inertia=body_inertia,
      qpos0=qpos0,
      actuator_gainprm=gainprm,
      actuator_biasprm=biasprm,
      **fields,
    )

  def randomize(model: mjx.Model, keys: jax.Array) -> tuple[mjx.Model, mjx.Model]:
    fields = jax.vmap(lambda key: sample(model, key))(keys)
    in_axes = jax.tree_util.tree_map(lambda _: None, model)
    in_axes = in_axes.tree_replace({name: 0 for name in fields})
    return model.tree_replace(fields), in_axes

  return randomize
