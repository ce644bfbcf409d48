"""Setting up a run's `Session`: envs, learner, evaluator, step cache, and its first state.

`build` constructs what a run trains with (nothing is compiled yet);
`initial_state` takes the training state fresh from the seed or restored
from a checkpoint (everything for `--resume`, only the weights for
`--restore_mode model` / `except-critic`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import jax

from playground.common import checkpointing
from playground.common import compat as compat_lib
from playground.common import config as config_lib
from playground.common import distributed
from playground.common import evaluation
from playground.common import ppo as ppo_lib
from playground.common import run_record
from playground.common import step_cache as step_cache_lib
from playground.common import training_env
from playground.common.errors import RunError
from playground.common.session import Session

if TYPE_CHECKING:
  from playground.common.robot_spec import RobotSpec
  from playground.common.run_args import ResolvedConfig

logger = logging.getLogger("playground")

#: PPO keys read only by the Python loop, never traced (left out of the step cache key).
LOOP_ONLY_PPO_KEYS = ("num_timesteps", "eval_every", "log_every", "checkpoint_every", "keep_last")


def build(runner: RobotSpec, cfg: ResolvedConfig) -> Session:
  """Builds the environments, the PPO learner and the evaluator (no compilation)."""
  a, p = runner.args, cfg.ppo_config
  env = distributed.localize_model(runner.make_env(a.env, a.task, cfg.env_config))
  episode_length = int(cfg.env_config.episode_length) if "episode_length" in cfg.env_config else 1000
  randomizer = runner.make_randomizer(env, cfg.env_config)
  venv = training_env.VecEnv(env, episode_length, randomizer, randomization_seed=a.seed)
  try:
    ppo = make_ppo(runner, cfg, venv)
  except ValueError as e:
    raise RunError(str(e)) from None
  eval_env = distributed.localize_model(runner.make_eval_env(a.env, a.task, cfg.env_config))
  eval_venv = training_env.VecEnv(
    eval_env,
    episode_length,
    runner.make_randomizer(eval_env, cfg.env_config),
    randomization_seed=a.seed + 1_000_003,
  )
  cache = make_step_cache(runner, cfg)
  evaluator = evaluation.Evaluator(
    eval_venv, ppo.make_policy, p.num_eval_envs, seed=a.seed + 17, step_cache=cache, mesh=ppo.mesh
  )
  return Session(
    cfg=cfg,
    env_name=a.env,
    task=a.task,
    env=env,
    venv=venv,
    ppo=ppo,
    evaluator=evaluator,
    compat=compat_lib.compat_fingerprint(runner, cfg, ppo.obs_shapes, venv.action_size),
    step_cache=cache,
    versions=run_record.package_versions(),
  )


def make_ppo(runner: RobotSpec, cfg: ResolvedConfig, venv: training_env.VecEnv) -> ppo_lib.PPO:
  """The PPO learner of a run, with the robot's mirror when `ppo.symmetry_augmentation` asks for it.

  Raises:
    ValueError: an invalid PPO config, or symmetry asked of a robot without a mirror.
  """
  p, a = cfg.ppo_config, runner.args
  mirror = runner.policy_mirror(a.env, a.task, cfg.env_config) if p.get("symmetry_augmentation") else None
  return ppo_lib.PPO(venv, p, mirror=mirror)


def make_step_cache(runner: RobotSpec, cfg: ResolvedConfig) -> step_cache_lib.StepCache:
  """The cache of lowered steps for this configuration.

  Entries live next to JAX's persistent compilation cache. Disabled with
  `--no_step_cache`, without a compilation cache, and in multi-process runs.
  """
  cache_dir = jax.config.jax_compilation_cache_dir
  if not runner.args.step_cache or not cache_dir or distributed.multi_process():
    return step_cache_lib.StepCache(None)
  ppo_config = cfg.ppo_config.to_dict()
  for key in LOOP_ONLY_PPO_KEYS:
    ppo_config.pop(key, None)
  env_config = cfg.env_config.to_dict()
  material = {
    "runner": f"{type(runner).__module__}.{type(runner).__qualname__}",
    "env": runner.args.env,
    "task": runner.args.task,
    "seed": runner.args.seed,
    "env_config": env_config,
    "ppo_config": ppo_config,
    # Files named in the config (e.g. a reference motion) are baked into the trace.
    "files": config_lib.named_file_digests(env_config),
  }
  return step_cache_lib.StepCache(Path(cache_dir) / "steps", material)


def initial_state(
  runner: RobotSpec, session: Session, restore_dir: Path | None, mode: str
) -> tuple[ppo_lib.TrainingState, training_env.EnvState, int]:
  """(TrainingState, EnvState, start step): fresh from the seed, or restored.

  Args:
    runner: the runner (its seed).
    session: what `build` returned.
    restore_dir: checkpoint step directory to restore, or None.
    mode: "all" (everything, the step counter too), "model" (policy, value
      and normalizer) or "except-critic" (policy and normalizer).
  """
  ts = session.ppo.init_training_state(runner.args.seed)
  if restore_dir is None:
    return ts, session.ppo.init_env_state(), 0
  return restore(session, ts, restore_dir, mode)


def restore(
  session: Session, ts: ppo_lib.TrainingState, restore_dir: Path, mode: str
) -> tuple[ppo_lib.TrainingState, training_env.EnvState, int]:
  """Loads checkpoint `restore_dir` into a fresh training state `ts` (see `initial_state`)."""
  ppo, venv = session.ppo, session.venv
  # Every process reads the whole checkpoint onto its first device, then
  # keeps the replicated training state and its own share of the envs.
  local_ts = distributed.host_local(ts)
  if mode != "all":
    return _restore_weights(session, local_ts, restore_dir, mode)
  placeholder = ppo.env_state_template()
  template = {"training_state": local_ts, "env_state": venv.compact(placeholder)}
  try:
    tree = checkpointing.restore(restore_dir, checkpointing.abstract(template))
  except checkpointing.CheckpointError as e:
    if _networks_load(restore_dir, local_ts):
      # The networks fit; what differs is the saved env state (its reward
      # terms, randomization or observations): the config changed.
      raise RunError(
        f"--restore_mode all cannot restore {restore_dir}: its env state differs from this run's (another "
        "reward set, randomization or env config); to fine-tune from its networks use --restore_mode model "
        "(or except-critic)"
      ) from None
    raise RunError(str(e)) from None
  saved_ts = tree["training_state"]
  full = venv.expand(tree["env_state"], placeholder)
  me, count = jax.process_index(), jax.process_count()
  local = jax.tree_util.tree_map(lambda x: x[x.shape[0] * me // count : x.shape[0] * (me + 1) // count], full)
  step = int(saved_ts.env_steps)
  logger.info("resumed everything from %s at step %s", restore_dir, f"{step:,}")
  return (
    distributed.to_global(saved_ts, ppo.replicated),
    distributed.to_global(local, ppo.sharded),
    step,
  )


def _networks_load(restore_dir: Path, local_ts: ppo_lib.TrainingState) -> bool:
  """Whether `restore_dir` holds a policy, value and normalizer of this run's shapes."""
  wanted = {
    "training_state/params": local_ts.params,
    "training_state/normalizer_params": local_ts.normalizer_params,
  }
  try:
    checkpointing.restore_parts(restore_dir, checkpointing.abstract(wanted))
  except checkpointing.CheckpointError:
    return False
  return True


def _restore_weights(
  session: Session, local_ts: ppo_lib.TrainingState, restore_dir: Path, mode: str
) -> tuple[ppo_lib.TrainingState, training_env.EnvState, int]:
  """`model` / `except-critic`: the networks and normalizer only.

  Only those parts are read, so a checkpoint whose env state differs (another
  reward set, randomization or env) still fine-tunes: the envs start fresh.
  """
  ppo = session.ppo
  wanted = {"training_state/params/policy": local_ts.params.policy}
  wanted["training_state/normalizer_params"] = local_ts.normalizer_params
  if mode == "model":
    wanted["training_state/params/value"] = local_ts.params.value
  try:
    saved = checkpointing.restore_parts(restore_dir, checkpointing.abstract(wanted))
  except checkpointing.CheckpointError as e:
    raise RunError(str(e)) from None
  params = local_ts.params.replace(policy=saved["training_state/params/policy"])
  if mode == "model":
    params = params.replace(value=saved["training_state/params/value"])
  ts = local_ts.replace(
    params=params,
    normalizer_params=saved["training_state/normalizer_params"],
    optimizer_state=ppo.optimizer.init(params),
  )
  logger.info(
    "restored %s weights and normalizer from %s; step counter starts at 0",
    "policy+value" if mode == "model" else "policy",
    restore_dir,
  )
  return distributed.to_global(ts, ppo.replicated), ppo.init_env_state(), 0
