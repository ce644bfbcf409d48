"""Fine-tuning a policy whose critic now observes more: the saved networks, widened.

A fine-tune may give the critic new privileged blocks, appended at the end of
its observation (for example the duck's `critic_kick`). The checkpoint's value
network and observation statistics are then narrower than the run's. `widen`
fits them: the saved statistics fill the leading entries and the new entries
start neutral (mean 0, standard deviation 1); the value network's input layer
gets zero weights for the new entries. The widened critic computes exactly
what the saved one did, and learns to use the new inputs from there.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

#: Saved normalizer fields of one observation key, and the neutral value of a new entry.
_NEUTRAL = {"mean": 0.0, "std": 1.0}


def _count(normalizer: dict[str, Any]) -> float:
  """The normalizer's sample count (a scalar, or Brax's 64-bit count saved as {'hi', 'lo'})."""
  count = normalizer["count"]
  if isinstance(count, dict):
    return float(np.asarray(count["hi"], np.float64) * 2.0**32 + np.asarray(count["lo"], np.float64))
  return float(np.asarray(count))


def widen(
  saved: dict[str, Any], wanted: dict[str, Any], value_key: str, *, normalizer_path: str, value_path: str | None
) -> dict[str, Any] | None:
  """The saved parts fitted to `wanted`'s shapes, or None if a grown critic observation is not the difference.

  Args:
    saved: path -> subtree as saved (`checkpoints.read_parts`).
    wanted: path -> this run's state dict of the same part (the shapes to reach).
    value_key: the critic's observation key in the normalizer (e.g. "privileged_state").
    normalizer_path: the path of the observation statistics in both.
    value_path: the path of the value network's parameters, or None when it is
      not restored (`except-critic`).

  Returns:
    path -> a state dict with `wanted`'s shapes, when the only differences are
    the critic observation's statistics (saved shorter, by `growth` entries)
    and, with `value_path`, the value network's input kernel (as many rows
    fewer); None otherwise.
  """
  normalizer = saved[normalizer_path]
  try:
    old = np.shape(normalizer["mean"][value_key])[0]
    new = np.shape(wanted[normalizer_path]["mean"][value_key])[0]
  except (KeyError, TypeError, IndexError):
    return None
  growth = new - old
  if growth <= 0:
    return None
  count = _count(normalizer)
  out = {}
  for path, template in wanted.items():
    got = dict(jax.tree_util.tree_flatten_with_path(saved[path])[0])
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    fitted = []
    for key_path, leaf in leaves:
      if key_path not in got:
        return None
      have, want = np.asarray(got[key_path]), np.shape(leaf)
      names = [getattr(k, "key", None) for k in key_path]
      if have.shape == tuple(want):
        fitted.append(have)
        continue
      grown_input = have.ndim >= 1 and have.shape[0] + growth == want[0] and have.shape[1:] == tuple(want[1:])
      if not grown_input:
        return None
      if path == normalizer_path and value_key in names and names[0] in (*_NEUTRAL, "summed_variance"):
        fill = count if names[0] == "summed_variance" else _NEUTRAL[names[0]]
      elif path == value_path and have.ndim == 2:
        fill = 0.0  # the input layer's kernel: new inputs weigh nothing yet
      else:
        return None
      fitted.append(np.concatenate([have, np.full((growth, *have.shape[1:]), fill, have.dtype)]))
    out[path] = jax.tree_util.tree_unflatten(treedef, fitted)
  return out
