"""Mirror symmetry: signed permutations of observations and actions, and PPO batch augmentation.

A left/right symmetric robot that sees the mirror image of its situation
should act as the mirror image of what it does. For a robot whose
observations and actions are made of vectors, joint values and left/right
pairs, the mirror image of every vector is a *signed permutation*: entries
swap places (left and right legs, feet) and some change sign (lateral
velocity, yaw rate, roll joints). `SignedPermutation` is one such map;
`Mirror` holds the maps of a robot's observation blocks and its action.

`augment` appends the mirror image of every trajectory of a PPO batch
(`ppo.symmetry_augmentation`), as rsl_rl and Isaac Lab do: twice the data per
environment step and a policy pushed towards symmetric gaits. The mirrored
transitions keep the rewards, discounts, truncations and behaviour
log-probabilities of the originals (see `augment` for why that ratio is exact).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np


@dataclasses.dataclass(frozen=True)
class SignedPermutation:
  """y[..., i] = sign[i] * x[..., index[i]].

  Attributes:
    index: source entry of every output entry (a permutation).
    sign: +1 or -1 per output entry.
  """

  index: tuple[int, ...]
  sign: tuple[float, ...]

  def __post_init__(self):
    if sorted(self.index) != list(range(len(self.index))):
      raise ValueError(f"index must be a permutation of 0..{len(self.index) - 1}, got {self.index}")
    if len(self.sign) != len(self.index) or any(s not in (-1.0, 1.0) for s in self.sign):
      raise ValueError("sign must hold +1 or -1 for every entry")

  @property
  def size(self) -> int:
    return len(self.index)

  @classmethod
  def identity(cls, size: int) -> SignedPermutation:
    return cls(tuple(range(size)), (1.0,) * size)

  @classmethod
  def concat(cls, parts: Sequence[SignedPermutation]) -> SignedPermutation:
    """The block-diagonal map of `parts`, in order."""
    index, sign, start = [], [], 0
    for p in parts:
      index += [start + i for i in p.index]
      sign += list(p.sign)
      start += p.size
    return cls(tuple(index), tuple(sign))

  def unsigned(self) -> SignedPermutation:
    """The same permutation with every sign +1 (for values without a sign: scales, gains)."""
    return SignedPermutation(self.index, (1.0,) * self.size)

  def tile(self, times: int) -> SignedPermutation:
    """The same map on `times` consecutive copies of its input."""
    return SignedPermutation.concat([self] * times)

  def __call__(self, x: Any) -> Any:
    if x.shape[-1] != self.size:
      raise ValueError(f"expected {self.size} entries in the last axis, got {x.shape[-1]}")
    xp = jp if isinstance(x, jax.Array) else np
    return x[..., np.asarray(self.index)] * xp.asarray(self.sign, dtype=x.dtype)

  def matrix(self) -> np.ndarray:
    """The map as a matrix M with y = M @ x."""
    m = np.zeros((self.size, self.size))
    m[np.arange(self.size), np.asarray(self.index)] = self.sign
    return m


@dataclasses.dataclass(frozen=True)
class Mirror:
  """A robot's left/right mirror: one map per observation block and one for the action.

  Attributes:
    observation: observation key -> map (a dict observation), or one map.
    action: the action's map.
  """

  observation: Mapping[str, SignedPermutation] | SignedPermutation
  action: SignedPermutation

  def observe(self, obs: Any) -> Any:
    """The mirror image of an (un-normalized, batched) observation."""
    if isinstance(self.observation, SignedPermutation):
      return self.observation(obs)
    return {k: self.observation[k](v) if k in self.observation else v for k, v in obs.items()}

  def act(self, action: Any) -> Any:
    return self.action(action)


#: Reflection through the robot's sagittal (x-z) plane of a vector in a frame whose
#: y axis points to the robot's left: polar vectors (positions, linear velocities,
#: accelerations, gravity) and axial vectors (angular velocities).
POLAR = SignedPermutation((0, 1, 2), (1.0, -1.0, 1.0))
AXIAL = SignedPermutation((0, 1, 2), (-1.0, 1.0, -1.0))


def joint_mirror(model: mujoco.MjModel, joint_names: Sequence[str], partner: Callable[[str], str]) -> SignedPermutation:
  """The mirror map of per-joint values (positions, velocities, targets, actions).

  Each joint's value goes to its partner (`partner(name)`; itself for a joint on
  the plane of symmetry) with the sign that makes the same angle produce the
  mirror-image motion: a rotation about axis a is mirrored by one about
  (-a_x, a_y, -a_z), so a partner whose world axis (at the model's reference
  pose) is that vector takes +1 and one whose axis is its opposite takes -1.

  Raises:
    ValueError: a partner is missing, or its axis is not (minus) the mirrored
      axis within 1e-3 (the model is not left/right symmetric).
  """
  data = mujoco.MjData(model)
  mujoco.mj_kinematics(model, data)
  names = list(joint_names)
  index, sign = [], []
  for name in names:
    other = partner(name)
    if other not in names:
      raise ValueError(f"joint '{name}' has no mirror partner '{other}' among {names}")
    a = data.xaxis[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, other)]
    b = data.xaxis[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)]
    mirrored = AXIAL(np.asarray(a))
    if np.allclose(b, mirrored, atol=1e-3):
      s = 1.0
    elif np.allclose(b, -mirrored, atol=1e-3):
      s = -1.0
    else:
      raise ValueError(f"joint '{name}' axis {np.round(b, 4)} is not the mirror of '{other}' axis {np.round(a, 4)}")
    index.append(names.index(other))
    sign.append(s)
  return SignedPermutation(tuple(index), tuple(sign))


def augment(data: Any, mirror: Mirror) -> Any:
  """A PPO batch (brax `Transition`, leading axes [batch, time]) followed by its mirror image.

  Args:
    data: the collected transitions; `extras['policy_extras']` holds
      `raw_action` and `log_prob`.
    mirror: the robot's mirror.

  The mirrored transitions keep the behaviour log-probabilities of the
  originals: a mirror image is a signed permutation (|det| = 1), so the
  mirrored action has, under the mirror image of the collecting policy, the
  density the original had under that policy. PPO's ratio
  pi(mirror a | mirror o) / pi_old(a | o) is then the exact importance weight.
  For the same reason their behaviour distribution (`distribution_params`,
  read by the loss only for the `kl_mean` metric) is the mirror image of the
  original's; kept unmirrored, that metric compares each mirrored sample's
  new action mean with the unmirrored old one and reads as a KL of 1-13.
  """
  extras = data.extras["policy_extras"]
  policy_extras = dict(extras, raw_action=mirror.act(extras["raw_action"]))
  if "distribution_params" in extras:
    policy_extras["distribution_params"] = mirror_distribution_params(extras["distribution_params"], mirror.action)
  mirrored_obs = mirror.observe(data.observation)
  mirrored = data._replace(
    observation=mirrored_obs,
    next_observation=mirror.observe(data.next_observation),
    action=mirror.act(data.action),
    extras=dict(data.extras, policy_extras=policy_extras),
  )
  return jax.tree_util.tree_map(lambda a, b: jp.concatenate([a, b]), data, mirrored)


def mirror_distribution_params(params: Any, action: SignedPermutation) -> Any:
  """The mirror image of a Brax normal (or tanh-normal) policy's parameters [..., loc | raw scale].

  The mean maps as the action does; the scale, one per action, only moves
  with its action (a scale has no sign).
  """
  n = action.size
  if params.shape[-1] != 2 * n:
    raise ValueError(f"expected {2 * n} distribution parameters (loc, scale) for {n} actions, got {params.shape[-1]}")
  xp = jp if isinstance(params, jax.Array) else np
  return xp.concatenate([action(params[..., :n]), action.unsigned()(params[..., n:])], axis=-1)
