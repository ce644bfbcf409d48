"""Compatibility of checkpoints: the fingerprint a checkpoint carries and a restore must match.

`config_fingerprint` is known before anything is built, `compat_fingerprint`
adds the built env's shapes; `check_compat` refuses the first key that
differs, naming both values. No JAX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from playground.common.configs import jsonable
from playground.common.errors import RunError

if TYPE_CHECKING:
  from playground.common.robot_spec import RobotSpec
  from playground.common.runs.arguments import ResolvedConfig
  from playground.common.runs.arguments import RunArgs

#: Fingerprint keys that only a full resume (or --restore_mode all) must match.
RUN_KEYS = ("robot", "env", "task", "num_envs", "gradient_clipping", "seed")


def config_fingerprint(runner: RobotSpec, cfg: ResolvedConfig) -> dict[str, Any]:
  """The part of the compatibility fingerprint known before anything is built."""
  p = cfg.ppo_config
  return {
    "robot": runner.robot,
    "env": runner.args.env,
    "task": runner.args.task,
    "policy_hidden_layer_sizes": list(p.policy_hidden_layer_sizes),
    "value_hidden_layer_sizes": list(p.value_hidden_layer_sizes),
    "activation": p.activation,
    "normalize_observations": bool(p.normalize_observations),
    "gradient_clipping": bool(p.max_grad_norm),
    "num_envs": int(p.num_envs),
    # Checkpoints written before the seed was recorded have no such key (compatible).
    "seed": int(runner.args.seed),
  }


def compat_fingerprint(runner: RobotSpec, cfg: ResolvedConfig, obs_shapes: Any, action_size: int) -> dict[str, Any]:
  """What a checkpoint must agree on to be restored into this run."""
  return {
    **config_fingerprint(runner, cfg),
    "observation_shapes": jsonable(obs_shapes),
    "action_size": int(action_size),
  }


def restore_mode(args: RunArgs) -> str:
  """What a restore takes: everything for `--resume`, else `--restore_mode`."""
  return "all" if args.resume else args.restore_mode


def check_compat(saved: dict[str, Any], current: dict[str, Any], args: RunArgs, critic_key: str | None = None) -> None:
  """Raises RunError on the first fingerprint key that differs (keys absent from `saved` pass).

  Args:
    saved: the checkpoint's fingerprint (`meta.json` "compat").
    current: this run's fingerprint.
    args: the run's flags (`--resume`, `--restore_mode`, `--allow_seed_change`).
    critic_key: the critic's observation key (PPO's `value_obs_key`): with
      `--restore_mode model` or `except-critic` it may have grown along its
      last axis (the trainer widens what it restores, `critic_growth`);
      every other observation must keep its shape.
  """
  mode = restore_mode(args)
  for key, value in current.items():
    if mode != "all" and key in RUN_KEYS:
      continue
    if key == "seed" and args.allow_seed_change:
      continue
    if mode != "all" and key == "observation_shapes" and key in saved and _only_grew(saved[key], value, critic_key):
      continue  # a critic that observes more: the trainer widens what it restores (`critic_growth`)
    if key in saved and saved[key] != value:
      hint = (
        "; or use --restore_mode model to take only the weights"
        if key in ("env", "task", "num_envs") and not args.resume
        else ""
      )
      if key == "seed" and not args.resume:
        hint = f"; or pass --allow_seed_change to continue it with seed {value}"
      raise RunError(
        f"incompatible checkpoint: {key} is {saved[key]} in the checkpoint but {value} "
        f"in this run; use the checkpoint's value{hint}"
      )


def _only_grew(saved: Any, current: Any, critic_key: str | None) -> bool:
  """Whether observation shapes are the saved ones but `critic_key`'s, grown along its last axis."""
  if critic_key is None or not isinstance(saved, dict) or not isinstance(current, dict):
    return False
  if saved.keys() != current.keys() or critic_key not in current:
    return False
  if any(saved[key] != shape for key, shape in current.items() if key != critic_key):
    return False
  old, shape = saved[critic_key], current[critic_key]
  if not isinstance(old, list) or not isinstance(shape, list) or len(old) != len(shape) or not shape:
    return False
  return old[:-1] == shape[:-1] and old[-1] < shape[-1]
