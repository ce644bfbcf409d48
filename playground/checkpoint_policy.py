"""A checkpoint's policy as an ONNX file: the network rebuilt from the run's record, exported and checked.

The checkpoint's run directory holds `config.json`, which names the robot,
env, task and network settings; the network is rebuilt from it (the robot's
runner is found in `registry`), exported with `common.policy_file`, and
checked against the JAX policy before it is written. The command line is
`playground/export.py`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from brax.training.acme import running_statistics
from ml_collections import config_dict

from playground import registry
from playground.common.export import policy_file
from playground.common.runs import checkpoints
from playground.common.runs import directories
from playground.common.runs.arguments import RunArgs
from playground.common.train import ppo


@dataclasses.dataclass(frozen=True)
class CheckpointPolicy:
  """A checkpoint's policy, rebuilt from its run record.

  Attributes:
    step_dir: the checkpoint's step directory.
    record: the run's `config.json` (robot, env, task, configs, ...).
    runner_cls: the robot's runner class (`registry`).
    env_config, ppo_config: the run's configs.
    step: the training step of the checkpoint.
    obs_shapes: observation shapes the network was built for (a dict for a dict observation).
    obs_key: the policy's observation key (None for an array observation).
    action_size: outputs of the policy.
    factory: the run's network factory (`ppo.network_factory`).
    network: the PPO networks built from it.
    normalizer: the observation normalizer (numpy arrays).
    policy_params: the policy network's parameters.
  """

  step_dir: Path
  record: dict[str, Any]
  runner_cls: Any
  env_config: config_dict.ConfigDict
  ppo_config: config_dict.ConfigDict
  step: int
  obs_shapes: Any
  obs_key: str | None
  action_size: int
  factory: Any
  network: Any
  normalizer: Any
  policy_params: Any


def load_policy(checkpoint: str | Path) -> CheckpointPolicy:
  """The policy of a checkpoint (step directory, or run directory: its latest step).

  Raises `checkpoints.CheckpointError` (one line) when the run record is
  missing or Orbax cannot load the state.
  """
  step_dir = checkpoints.resolve(checkpoint)
  meta = checkpoints.read_meta(step_dir)
  config_path = step_dir.parent / directories.CONFIG_FILE
  if not config_path.is_file():
    raise checkpoints.CheckpointError(f"{config_path} is missing: cannot tell which network to export")
  config = json.loads(config_path.read_text())
  ppo_cfg = config_dict.ConfigDict(config["ppo_config"])
  compat = meta["compat"]
  shapes = compat["observation_shapes"]
  obs_is_dict = isinstance(shapes, dict)
  obs_shapes = {k: tuple(v) for k, v in shapes.items()} if obs_is_dict else tuple(shapes)
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      tree = checkpointer.restore(step_dir / checkpoints.STATE_DIR)
  except Exception as e:  # noqa: BLE001 - Orbax raises many types; all mean unloadable
    raise checkpoints.CheckpointError(f"cannot load checkpoint {step_dir}: {str(e).splitlines()[0][:300]}") from e
  ts = tree["training_state"]
  norm = ts["normalizer_params"]
  normalizer = running_statistics.RunningStatisticsState(
    count=norm["count"], mean=norm["mean"], summed_variance=norm["summed_variance"], std=norm["std"]
  )
  factory = ppo.network_factory(ppo_cfg, obs_is_dict)
  network = factory(
    obs_shapes,
    compat["action_size"],
    preprocess_observations_fn=running_statistics.normalize if ppo_cfg.normalize_observations else (lambda x, y: x),
  )
  return CheckpointPolicy(
    step_dir=step_dir,
    record=config,
    runner_cls=registry.runner_class(config["robot"]),
    env_config=config_dict.ConfigDict(config["env_config"]),
    ppo_config=ppo_cfg,
    step=int(meta["step"]),
    obs_shapes=obs_shapes,
    obs_key=ppo_cfg.policy_obs_key if obs_is_dict else None,
    action_size=int(compat["action_size"]),
    factory=factory,
    network=network,
    normalizer=jax.tree_util.tree_map(np.asarray, normalizer),
    policy_params=ts["params"]["policy"],
  )


def export_checkpoint(
  checkpoint: str | Path, output: str | Path | None = None, untrained_seed: int | None = None
) -> tuple[Path, float]:
  """Exports the policy of a checkpoint (step directory or run directory).

  Args:
    checkpoint: step directory, or run directory (its latest step).
    output: file to write (default: `policy.onnx` in the step directory).
    untrained_seed: if set, the same network with the policy weights PPO
      initializes from this seed (the run's own initial policy for the run's
      seed), behind the checkpoint's observation normalizer: the untrained
      baseline a scorecard compares a trained policy with. Its metadata says
      training step 0.

  Returns:
    (path written, max |onnx - jax| of the parity check).
  """
  loaded = load_policy(checkpoint)
  config, env_cfg, ppo_cfg = loaded.record, loaded.env_config, loaded.ppo_config
  runner_cls = loaded.runner_cls
  runner = runner_cls(RunArgs(env=config["env"], task=config["task"]))
  policy_params = loaded.policy_params
  step = loaded.step
  if untrained_seed is not None:
    _, key_policy, _ = jax.random.split(jax.random.PRNGKey(untrained_seed), 3)  # as PPO.init_training_state
    policy_params = ppo.init_policy_head(
      loaded.network.policy_network.init(key_policy),
      loaded.action_size,
      ppo_cfg.init_noise_std,
      ppo_cfg.init_action_mean_scale,
    )
    step = 0
  out = Path(output) if output else loaded.step_dir / policy_file.POLICY_FILE
  # The run's env, built once from its record: the contract comes from it.
  contract = runner.policy_contract(runner.make_env(config["env"], config["task"], env_cfg), env_cfg)
  diff = policy_file.export_contract(
    out,
    contract,
    runner_cls.robot,
    config["env"],
    config["task"],
    step,
    loaded.network,
    loaded.normalizer,
    policy_params,
    loaded.obs_key,
    loaded.action_size,
    ppo_cfg.activation,
    recorded_files=config.get("file_digests") or {},
    commit=config.get("git_commit"),
  )
  return out, diff
