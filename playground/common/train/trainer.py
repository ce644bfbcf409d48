"""Training a robot's runner: its session, the loop, evaluation, checkpoints, callbacks and stop signals.

`run(runner, cfg)` is the whole of it, top to bottom: check the run directory
and the checkpoint to restore, build a `Session` (envs, learner, evaluator:
`build`), take the initial state (fresh from the seed or restored:
`initial_state`),
write the run's record, then run the jit-compiled PPO step in a worker
thread while the main thread waits for SIGINT/SIGTERM. The loop reports
through `Trainer.progress` (TensorBoard, the console line, then the robot's
`on_progress`) and `Trainer.save` (an atomic checkpoint with its ONNX
policy, then the robot's `on_checkpoint`).
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import jax
import numpy as np
from flax import serialization

from playground.common import configs
from playground.common.configs import ConfigError
from playground.common.errors import NonFiniteError
from playground.common.errors import RunError
from playground.common.export import policy_file
from playground.common.runs import checkpoints
from playground.common.runs import compatibility
from playground.common.runs import directories
from playground.common.runs import record
from playground.common.runs import resume
from playground.common.train import backend
from playground.common.train import critic_growth
from playground.common.train import distributed
from playground.common.train import progress
from playground.common.train import vec_env
from playground.common.train.evaluator import Evaluator
from playground.common.train.ppo import PPO
from playground.common.train.ppo import TrainingState
from playground.common.train.session import Session
from playground.common.train.step_cache import StepCache
from playground.common.train.stop_request import DUPLICATE_SIGNAL_S
from playground.common.train.stop_request import STOP_TIMEOUT_S
from playground.common.train.stop_request import StopRequest

if TYPE_CHECKING:
  from playground.common.export.contract import PolicyContract
  from playground.common.robot_spec import RobotSpec
  from playground.common.runs.arguments import ResolvedConfig

# Re-exported: tests and benchmarks build sessions and step caches through this module.
__all__ = [
  "DUPLICATE_SIGNAL_S",
  "STOP_TIMEOUT_S",
  "NonFiniteError",
  "RunError",
  "Session",
  "Trainer",
  "build",
  "initial_state",
  "make_step_cache",
  "run",
]

logger = logging.getLogger("playground")


def run(runner: RobotSpec, cfg: ResolvedConfig) -> int:
  """Trains `runner` with the resolved `cfg`; returns the process exit status.

  Everything that can be checked before compiling is checked first; the run
  directory is created only once the learner is built and any checkpoint to
  restore has been loaded.
  """
  a = runner.args
  try:
    multi = distributed.initialize(a.coordinator_address, a.num_processes, a.process_id)
    p, setting = cfg.ppo_config, configs.parse_cpu_devices(a.cpu_devices)
    if setting == "auto" and cfg.env_config.get("impl") == "warp":
      # warp-lang's CPU kernels do not overlap across devices: several CPU
      # devices train MuJoCo Warp about 2x slower than one (measured).
      setting = None
    distributed.configure_cpu_devices(setting, (p.num_envs, p.num_eval_envs), multi)
  except ValueError as e:
    raise ConfigError(str(e)) from None
  if jax.default_backend() == "cpu" and distributed.is_primary():
    note = runner.cpu_warning(int(cfg.ppo_config.num_timesteps))
    if note:
      logger.warning("%s", note)
  run_dir, restore_dir = record.prepare_run_dir(a, runner.run_dir_path())
  # Every process has checked the run directory before process 0 creates it.
  distributed.barrier("run_dir_checked")
  restore_meta = None
  if restore_dir is not None:
    restore_meta = record.read_restore_meta(restore_dir)
    # The config-level fingerprint, before anything is compiled.
    compatibility.check_compat(restore_meta.get("compat", {}), compatibility.config_fingerprint(runner, cfg), a)
  if a.overwrite and distributed.is_primary() and runner.run_dir_path().exists():
    # Everything that can be checked without building has been: start over.
    logger.warning("--overwrite: deleted %s", record.delete_for_overwrite(a, runner.run_dir_path()))
  backend.setup_compilation_cache(a.compilation_cache_dir)
  session = build(runner, cfg)
  if restore_meta is not None:
    compatibility.check_compat(
      restore_meta.get("compat", {}), session.compat, a, critic_key=session.ppo.config.value_obs_key
    )
  ts, env_state, start_step = initial_state(runner, session, restore_dir, compatibility.restore_mode(a))
  if distributed.is_primary():
    # Create (or reuse) the run directory only now that everything is valid.
    try:
      run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
      raise RunError(f"cannot create the run directory {run_dir}: {e.strerror}") from None
    directories.write_marker(run_dir, runner.robot)
    checkpoints.cleanup_incomplete(run_dir)
    record.write_config(
      run_dir,
      runner,
      cfg,
      session.versions,
      restore_dir,
      physics_impl=getattr(session.env, "impl", None),
      platform=jax.default_backend(),
      device_count=jax.device_count(),
    )
  trainer = Trainer(runner, session, run_dir, start_step)
  return trainer.train(ts, env_state, start_step)


class Trainer:
  """The training loop of one run, with its progress reporter, checkpoints and stop signals.

  The loop runs in a worker thread; the main thread handles SIGINT/SIGTERM:
  the first asks the loop to stop after the current step and save, a second
  exits at once (removing a checkpoint being written, keeping complete ones).
  A repeat within `DUPLICATE_SIGNAL_S` counts as the first: one Ctrl-C under
  `uv run` arrives twice.
  """

  def __init__(self, runner: RobotSpec, session: Session, run_dir: Path, start_step: int):
    self.runner = runner
    self.session = session
    # What the robot's hooks (`on_checkpoint` -> `score_checkpoint`) see of the run.
    self.run_dir = run_dir
    p = session.cfg.ppo_config
    self.total = int(p.num_timesteps)
    self.checkpoint_every = int(p.checkpoint_every) or self.total
    self.keep_last = int(p.keep_last)
    self.primary = distributed.is_primary()
    self.reporter = progress.ProgressReporter(
      run_dir if self.primary else None,
      self.total,
      start_step,
      steps_per_iteration=session.ppo.env_steps_per_iteration,
      eval_every=int(p.eval_every),
      checkpoint_every=self.checkpoint_every,
    )
    self.last_checkpoint_step: int | None = start_step if runner.args.resume else None
    self._stop = StopRequest(self._exit_now)
    self._overflow_reported = False
    # The input files as training read them: a policy file must not embed a later edit.
    self._file_digests = configs.named_file_digests(runner.named_files(session.cfg))

  def train(self, ts: TrainingState, env_state: vec_env.EnvState, start_step: int) -> int:
    """Trains from `start_step` to `num_timesteps`; returns the exit status (0, also when interrupted)."""
    s, a = self.session, self.runner.args
    logger.info(
      "run %s: %s/%s (MJX %s) on %d %s device(s) in %d process(es), %d envs, %s steps (%d per iteration), start at %s",
      self.run_dir,
      a.env,
      a.task,
      getattr(s.env, "impl", "jax"),
      len(s.ppo.devices),
      jax.devices()[0].platform,
      jax.process_count(),
      s.cfg.ppo_config.num_envs,
      f"{self.total:,}",
      s.ppo.env_steps_per_iteration,
      f"{start_step:,}",
    )
    if start_step >= self.total:
      logger.info(
        "nothing to do: the checkpoint is at step %s >= --num_timesteps %s", f"{start_step:,}", f"{self.total:,}"
      )
      self.reporter.close()
      return 0
    result: dict[str, Any] = {}

    def worker():
      try:
        result["status"] = self.loop(ts, env_state, start_step)
      except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
        result["error"] = e

    thread = threading.Thread(target=worker, name="training", daemon=True)
    self._stop.install()
    try:
      thread.start()
      while thread.is_alive():
        thread.join(0.2)
        if self._stop.overdue():
          logger.error(
            "could not finish the current step and save within %.0f s; exiting without a new "
            "checkpoint (the last complete one is kept)",
            STOP_TIMEOUT_S,
          )
          self.reporter.close()
          self._exit_now(1)
    finally:
      self._stop.release()
    self.reporter.close()
    if "error" in result:
      raise result["error"]
    if result.get("status") == "interrupted":
      logger.info(
        "interrupted: saved checkpoint at step %s. Resume with: %s",
        f"{self.last_checkpoint_step:,}",
        resume.resume_command(self.runner.run_dir_path()),
      )
    self._stop.outwait_duplicates()
    return 0

  def _exit_now(self, status: int) -> None:
    """Exits the process at once, removing a checkpoint being written (complete ones are kept)."""
    if self.primary:
      checkpoints.cleanup_incomplete(self.run_dir)
    os._exit(status)

  def loop(self, ts: TrainingState, env_state: vec_env.EnvState, start_step: int) -> str:
    """The training loop: "done", or "interrupted" after a stop request (both saved)."""
    s = self.session
    ppo, cache = s.ppo, s.step_cache
    p = ppo.config
    spi = ppo.env_steps_per_iteration
    step = start_step
    t0 = time.monotonic()
    compiled = cache.compile("train_step", ppo.train_step, ts, env_state, donate=True)
    compile_time = time.monotonic() - t0
    how = {"hit": "loaded from the step cache and compiled"}.get(cache.last_outcome, "compiled")
    logger.info("training step %s in %.1f s", how, compile_time)
    self.progress(step, {"perf/compile_time_s": compile_time})
    next_log = _next_multiple(step, p.log_every)
    evaluating = int(p.eval_every) > 0  # 0: no evaluation episodes (the scorecard still runs)
    next_eval = _next_multiple(step, p.eval_every) if evaluating else None
    next_ckpt = _next_multiple(step, self.checkpoint_every)
    if step == 0 and evaluating:
      self.evaluate(ts, step)
    sps_timer = (time.monotonic(), step)
    pending: list[dict] = []
    while step < self.total:
      # All processes stop at the same iteration (a collective when multi-process).
      if distributed.any_process(self._stop.is_set()):
        self.save(step, ts, env_state)
        return "interrupted"
      t_iteration = time.monotonic()
      ts, env_state, metrics = compiled(ts, env_state)
      step += spi
      finite = bool(distributed.host_local(metrics["train/finite"]))
      # Fetching `finite` waits for the step: this is the training time alone.
      self.reporter.record_iteration(spi, time.monotonic() - t_iteration)
      if not finite:
        raise NonFiniteError(
          f"training diverged at step {step:,}: the loss or the parameters are NaN/inf; "
          f"the last good checkpoint is kept (step {self.last_checkpoint_step})"
        )
      pending.append(metrics)
      if step >= next_log or step >= self.total:
        fetched = distributed.host_local(pending)
        pending = []
        merged = progress.merge_metrics(fetched)
        now = time.monotonic()
        merged["perf/sps"] = (step - sps_timer[1]) / max(now - sps_timer[0], 1e-9)
        sps_timer = (now, step)
        self.progress(step, merged)
        self.report_overflow(env_state)
        next_log = _next_multiple(step, p.log_every)
      if evaluating and (step >= next_eval or step >= self.total):
        self.evaluate(ts, step)
        next_eval = _next_multiple(step, p.eval_every)
        sps_timer = (time.monotonic(), step)
      if step >= next_ckpt and step < self.total:
        self.save(step, ts, env_state)
        next_ckpt = _next_multiple(step, self.checkpoint_every)
        sps_timer = (time.monotonic(), step)
    self.save(step, ts, env_state)
    return "done"

  def report_overflow(self, env_state: vec_env.EnvState) -> None:
    """Logs MuJoCo Warp's first contact/constraint buffer overflow, once per run, loudly."""
    if self._overflow_reported:
      return
    overflow = getattr(getattr(env_state.env.data, "_impl", None), "overflow", None)
    if overflow is None:  # the JAX implementation has no buffers to overflow
      self._overflow_reported = True
      return
    bits = backend.warp_buffer_overflow_bits(distributed.host_local(overflow))
    if bits:
      self._overflow_reported = True
      logger.error(
        "MuJoCo Warp dropped contacts or constraints (overflow bits %s): the physics is wrong from here on; "
        "raise --set naconmax_per_env=... or --set njmax=... and restart",
        bin(bits),
      )

  def progress(self, step: int, metrics: dict[str, float]) -> None:
    """Writes `metrics` to TensorBoard, prints the progress line and calls the robot's `on_progress`.

    Process 0 only; `on_progress` gets the finite scalars (what TensorBoard
    keeps), and an exception it raises is logged, not raised.
    """
    if not self.primary:
      return
    self.reporter.write(step, metrics)
    if "perf/sps" in metrics:
      self.reporter.console(step, metrics["perf/sps"])
    scalars = {name: float(np.asarray(value)) for name, value in metrics.items()}
    scalars = {name: value for name, value in scalars.items() if math.isfinite(value)}
    try:
      self.runner.on_progress(int(step), scalars)
    except Exception as e:  # noqa: BLE001 - a callback failure must not stop training
      logger.warning("on_progress at step %s failed: %s", f"{step:,}", _one_line(e))

  def evaluate(self, ts: TrainingState, step: int) -> None:
    """Runs the evaluation episodes and logs `eval/*` (every process simulates its share)."""
    metrics = self.session.evaluator.run(self.session.ppo.inference_params(ts))
    self.reporter.record_evaluation(metrics["eval/walltime"])
    self.progress(step, metrics)

  def save(self, step: int, ts: TrainingState, env_state: vec_env.EnvState) -> None:
    """Saves checkpoint `step` (once per step) with its policy file and score."""
    if self.last_checkpoint_step == step:
      return
    t0 = time.monotonic()
    self.checkpoint(step, ts, env_state)
    self.reporter.record_checkpoint(time.monotonic() - t0)

  def checkpoint(self, step: int, ts: TrainingState, env_state: vec_env.EnvState) -> Path:
    """Saves the complete training state (and policy files) as checkpoint `step`; prunes old ones."""
    s = self.session
    # Every process joins the gather; only process 0 writes.
    tree = {
      "training_state": distributed.host_local(ts),
      "env_state": distributed.gather(s.venv.compact(env_state)),
    }
    self.last_checkpoint_step = int(step)
    if not self.primary:
      return self.run_dir / checkpoints.step_dir_name(step)
    meta = {
      "step": int(step),
      "compat": s.compat,
      "versions": s.versions,
      "created": datetime.datetime.now().isoformat(timespec="seconds"),
      "config_file": f"../{directories.CONFIG_FILE}",
    }
    path = checkpoints.save(self.run_dir, step, tree, meta, extra=lambda d: self.export_policy(d, step, ts))
    checkpoints.prune(self.run_dir, self.keep_last)
    logger.info("checkpoint %s", path)
    if self._stop.is_set():
      self._stop.mark_saved()  # callbacks and scoring follow without a deadline
      logger.info("stopping after the checkpoint's callbacks (press Ctrl-C again to exit now; it is kept)")
    try:
      scalars = self.runner.on_checkpoint(int(step), path)
    except Exception as e:  # noqa: BLE001 - a scoring failure must not stop training
      logger.warning("scoring checkpoint %s failed: %s", path, _one_line(e))
      scalars = {}
    if scalars:
      self.reporter.write(step, scalars)
    return path

  def export_policy(self, directory: Path, step: int, ts: TrainingState) -> None:
    """Writes `policy.onnx` next to a checkpoint, verified against the JAX policy.

    A failure raises; the checkpoint writer logs it without stopping training.
    A file the policy embeds (e.g. the reference gait) that changed on disk
    since the run started is such a failure: no policy is written.
    """
    s = self.session
    ppo = s.ppo
    normalizer, policy_params, _ = ppo.inference_params(ts)
    obs_key = ppo.config.policy_obs_key if isinstance(ppo.obs_shapes, dict) else None
    policy_file.export_contract(
      Path(directory) / policy_file.POLICY_FILE,
      s.contract,
      self.runner.robot,
      s.env_name,
      s.task,
      step,
      ppo.network,
      normalizer,
      policy_params,
      obs_key,
      ppo.venv.action_size,
      ppo.config.activation,
      recorded_files=self._file_digests,
    )


def _next_multiple(step: int, every: int) -> int:
  return (step // every + 1) * every


def _one_line(e: Exception) -> str:
  """An exception's first line, at most 300 characters (its repr when it has no message)."""
  return str(e).splitlines()[0][:300] if str(e) else repr(e)


# ---- Setting up a run's session: envs, learner, evaluator, step cache, and its first state.

#: PPO keys read only by the Python loop, never traced (left out of the step cache key).
LOOP_ONLY_PPO_KEYS = ("num_timesteps", "eval_every", "log_every", "checkpoint_every", "keep_last")


def build(runner: RobotSpec, cfg: ResolvedConfig) -> Session:
  """Builds the environments, the policy contract, the PPO learner and the evaluator (no compilation)."""
  a, p = runner.args, cfg.ppo_config
  env = distributed.localize_model(runner.make_env(a.env, a.task, cfg.env_config))
  contract = runner.policy_contract(env, cfg.env_config)
  episode_length = int(cfg.env_config.episode_length) if "episode_length" in cfg.env_config else 1000
  randomizer = runner.make_randomizer(env, cfg.env_config)
  venv = vec_env.VecEnv(env, episode_length, randomizer, randomization_seed=a.seed)
  try:
    ppo = make_ppo(cfg, venv, contract)
  except ValueError as e:
    raise RunError(str(e)) from None
  eval_env = distributed.localize_model(runner.make_eval_env(a.env, a.task, cfg.env_config))
  eval_venv = vec_env.VecEnv(
    eval_env,
    episode_length,
    runner.make_randomizer(eval_env, cfg.env_config),
    randomization_seed=a.seed + 1_000_003,
  )
  cache = make_step_cache(runner, cfg)
  evaluator = Evaluator(eval_venv, ppo.make_policy, p.num_eval_envs, seed=a.seed + 17, step_cache=cache, mesh=ppo.mesh)
  return Session(
    cfg=cfg,
    env_name=a.env,
    task=a.task,
    env=env,
    venv=venv,
    contract=contract,
    ppo=ppo,
    evaluator=evaluator,
    compat=compatibility.compat_fingerprint(runner, cfg, ppo.obs_shapes, venv.action_size),
    step_cache=cache,
    versions=record.package_versions(),
  )


def make_ppo(cfg: ResolvedConfig, venv: vec_env.VecEnv, contract: PolicyContract) -> PPO:
  """The PPO learner of a run, with the contract's mirror when `ppo.symmetry_augmentation` asks for it.

  Raises:
    ValueError: an invalid PPO config, or symmetry asked of a robot without a mirror.
  """
  p = cfg.ppo_config
  return PPO(venv, p, mirror=contract.mirror if p.get("symmetry_augmentation") else None)


def make_step_cache(runner: RobotSpec, cfg: ResolvedConfig) -> StepCache:
  """The cache of lowered steps for this configuration.

  Entries live next to JAX's persistent compilation cache. Disabled with
  `--no_step_cache`, without a compilation cache, and in multi-process runs.
  """
  cache_dir = jax.config.jax_compilation_cache_dir
  if not runner.args.step_cache or not cache_dir or distributed.multi_process():
    return StepCache(None)
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
    "files": configs.named_file_digests(env_config),
  }
  return StepCache(Path(cache_dir) / "steps", material)


def initial_state(
  runner: RobotSpec, session: Session, restore_dir: Path | None, mode: str
) -> tuple[TrainingState, vec_env.EnvState, int]:
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
  session: Session, ts: TrainingState, restore_dir: Path, mode: str
) -> tuple[TrainingState, vec_env.EnvState, int]:
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
    tree = checkpoints.restore(restore_dir, checkpoints.abstract(template))
  except checkpoints.CheckpointError as e:
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


def _networks_load(restore_dir: Path, local_ts: TrainingState) -> bool:
  """Whether `restore_dir` holds a policy, value and normalizer of this run's shapes."""
  wanted = {
    "training_state/params": local_ts.params,
    "training_state/normalizer_params": local_ts.normalizer_params,
  }
  try:
    checkpoints.restore_parts(restore_dir, checkpoints.abstract(wanted))
  except checkpoints.CheckpointError:
    return False
  return True


def _grown_critic(raw: dict[str, Any], wanted: dict[str, Any], value_key: str, mode: str) -> dict[str, Any] | None:
  """`wanted` from the parts of a checkpoint whose critic observed fewer floats (`critic_growth.widen`), or None.

  Args:
    raw: path -> subtree as saved (`checkpoints.read_parts`).
    wanted: path -> this run's part (the shapes to reach).
    value_key: the critic's observation key.
    mode: `model` (the value network is restored and widened) or `except-critic`.
  """
  normalizer, value = "training_state/normalizer_params", "training_state/params/value"
  state_dicts = {path: serialization.to_state_dict(jax.device_get(part)) for path, part in wanted.items()}
  grown = critic_growth.widen(
    raw, state_dicts, value_key, normalizer_path=normalizer, value_path=value if mode == "model" else None
  )
  if grown is None:
    return None
  before = np.shape(raw[normalizer]["mean"][value_key])[0]
  after = np.shape(state_dicts[normalizer]["mean"][value_key])[0]
  logger.info(
    "the critic observes %d floats, the checkpoint's %d: the new entries start neutral%s",
    after,
    before,
    " and weigh nothing in the value network yet" if mode == "model" else "",
  )
  device = jax.local_devices()[0]
  return {path: jax.device_put(serialization.from_state_dict(wanted[path], grown[path]), device) for path in wanted}


def _restore_weights(
  session: Session, local_ts: TrainingState, restore_dir: Path, mode: str
) -> tuple[TrainingState, vec_env.EnvState, int]:
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
    raw = checkpoints.read_parts(restore_dir, list(wanted))
  except checkpoints.CheckpointError as e:
    raise RunError(str(e)) from None
  try:
    saved = checkpoints.fit_parts(restore_dir, raw, checkpoints.abstract(wanted))
  except checkpoints.CheckpointError as e:
    saved = _grown_critic(raw, wanted, ppo.config.value_obs_key, mode)
    if saved is None:
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
