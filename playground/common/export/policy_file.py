"""Writing a trained policy as an ONNX file, checked against the JAX policy.

`export` builds the ONNX model (`onnx_graph`), verifies it against the Brax
network and writes it atomically; `policy_metadata` is what every policy
file says about its robot. Exporting a checkpoint from its run directory is
`playground/export.py`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import jax
import numpy as np

import playground
from playground.common.export import onnx_graph
from playground.common.runs import directories

if TYPE_CHECKING:
  from playground.common.export.contract import PolicyContract

POLICY_FILE = "policy.onnx"


def jax_policy_fn(network, normalizer, policy_params, obs_key: str | None):
  """numpy obs -> deterministic actions, computed by the Brax network in JAX."""
  dist = network.parametric_action_distribution

  @jax.jit
  def policy(obs):
    batch = {obs_key: obs} if obs_key else obs
    logits = network.policy_network.apply(normalizer, policy_params, batch)
    return dist.mode(logits)

  return lambda obs: np.asarray(policy(obs))


def export(
  path: Path,
  network,
  normalizer,
  policy_params: Mapping[str, Any],
  obs_key: str | None,
  action_size: int,
  activation: str,
  metadata: Mapping[str, Any],
  feedforward: Any = None,
  input_bounds: tuple[np.ndarray, np.ndarray] | None = None,
  probes: np.ndarray | None = None,
) -> float:
  """Writes the ONNX policy to `path` after the parity check; returns max |diff|.

  With `feedforward` (a `reference_motion.Feedforward`), the file outputs the
  network's action times its `residual_gain` plus the feed-forward, checked
  against the same sum in JAX.
  With `input_bounds` (low, high), the file clamps its input first; the JAX
  side of the check clamps the same way. `probes` are observations the
  check adds to its samples (e.g. the robot runtime's first frames): the
  file must match JAX on them and return finite actions.

  Raises:
    onnx_graph.ExportError: unknown layout or parity failure (nothing written).
  """
  mean = normalizer.mean[obs_key] if obs_key else normalizer.mean
  std = normalizer.std[obs_key] if obs_key else normalizer.std
  model = onnx_graph.build_model(
    np.asarray(mean), np.asarray(std), policy_params, action_size, activation, metadata, feedforward, input_bounds
  )
  network_policy = jax_policy_fn(network, normalizer, policy_params, obs_key)
  offsets = jax.jit(feedforward.from_obs_fn()) if feedforward is not None else None

  def policy(obs):
    if input_bounds is not None:
      obs = np.clip(obs, *input_bounds).astype(np.float32)
    actions = network_policy(obs)
    if offsets is None:
      return actions
    return float(feedforward.residual_gain) * actions + np.asarray(offsets(obs))

  diff = onnx_graph.verify_parity(model, policy, mean, std, probes=probes)
  directories.write_atomic(Path(path), model.SerializeToString())
  return diff


def check_policy_files(files: Sequence[Path], recorded: Mapping[str, str], commit: str | None = None) -> None:
  """Refuses to export when a file the policy embeds changed since the run recorded it.

  The files are the contract's `files` (e.g. the reference gait of a
  feed-forward); `recorded` is the run's `file_digests` ({path: sha256}). A
  recorded path matches the file itself, or, for a file inside the project,
  the same project-relative path in another checkout. Files the record does
  not name are not checked (runs recorded before the digests).

  Raises:
    directories.CheckpointError: one line naming the file, both digests and the fix.
  """
  for path in files:
    then = _recorded_digest(Path(path), recorded)
    if then is None:
      continue
    try:
      now = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
      now = "missing"
    if now != then:
      where = f"the project at commit {commit[:12]}" if commit else "the project version that trained it"
      raise directories.CheckpointError(
        f"{path} changed since the run trained with it (sha256 {then[:12]}... then, {now[:12]}... now), and the "
        f"policy file would carry the new contents; restore the file, or export with {where}"
      )


def _recorded_digest(path: Path, recorded: Mapping[str, str]) -> str | None:
  if str(path) in recorded:
    return recorded[str(path)]
  try:
    relative = path.resolve().relative_to(directories.REPO_ROOT).as_posix()
  except ValueError:
    return None
  for name, digest in recorded.items():
    if Path(name).as_posix().endswith("/" + relative):
      return digest
  return None


def export_contract(
  path: Path,
  contract: PolicyContract,
  robot: str,
  env_name: str,
  task: str,
  step: int,
  network,
  normalizer,
  policy_params: Mapping[str, Any],
  obs_key: str | None,
  action_size: int,
  activation: str,
  recorded_files: Mapping[str, str] | None = None,
  commit: str | None = None,
) -> float:
  """`export` with everything the robot's policy contract says about its policy file.

  Metadata (`policy_metadata`: the run's own, then the contract's), the
  feed-forward, the input bounds and the probe observations come from the
  contract (`RobotSpec.policy_contract`). With `recorded_files` (the run's
  `file_digests`), the files the policy embeds are checked against them
  first (`check_policy_files`; `commit`, the run's `git_commit`, goes into the error).
  """
  if recorded_files:
    check_policy_files(contract.files, recorded_files, commit)
  return export(
    Path(path),
    network,
    normalizer,
    policy_params,
    obs_key,
    action_size,
    activation,
    policy_metadata(robot, env_name, task, step, obs_key, contract.metadata),
    contract.feedforward,
    contract.input_bounds,
    contract.probe_observations,
  )


def policy_metadata(
  robot: str, env_name: str, task: str, step: int, obs_key: str | None, robot_metadata: Mapping[str, Any]
) -> dict[str, Any]:
  """Metadata written into every exported policy file: the run's, then the robot's (its contract's `metadata`)."""
  meta = {
    "robot": robot,
    "env": env_name,
    "task": task,
    "training_step": step,
    "project": "duck-playground",
    "project_version": playground.__version__,
    "input_name": "obs",
    "output_name": "continuous_actions",
    "observation_key": obs_key or "",
  }
  meta.update(robot_metadata)
  return meta


def write_constant_policy(path: Path, pre_tanh: np.ndarray, obs_size: int, metadata: Mapping[str, Any]) -> Path:
  """Writes a policy file whose action is tanh(`pre_tanh`) whatever it observes (a statue).

  A 2-layer network with zero weights and `pre_tanh` as the mean's output
  bias, in the same graph and with the same `metadata` as an exported
  policy, so every player reads it as one. For baselines (a posture held
  without a policy) and tests.
  """
  pre_tanh = np.asarray(pre_tanh, np.float32).reshape(-1)
  n = len(pre_tanh)
  out_bias = np.concatenate([pre_tanh, np.zeros(n, np.float32)])  # the mean's, then the scale's
  params = {
    "params": {
      "hidden_0": {"kernel": np.zeros((obs_size, 8), np.float32), "bias": np.zeros(8, np.float32)},
      "hidden_1": {"kernel": np.zeros((8, 2 * n), np.float32), "bias": out_bias},
    }
  }
  model = onnx_graph.build_model(np.zeros(obs_size), np.ones(obs_size), params, n, "swish", dict(metadata))
  path = Path(path)
  path.write_bytes(model.SerializeToString())
  return path
