"""Training a robot's runner: build, restore, the loop, evaluation, checkpoints and stop signals.

`run(runner, cfg)` is the whole of it, top to bottom: check the run directory
and the checkpoint to restore, build a `Session` (envs, learner, evaluator),
take the initial state (fresh from the seed or restored), write the run's
record, then run the jit-compiled PPO step in a worker thread while the main
thread waits for SIGINT/SIGTERM. The loop calls two callbacks:
`Trainer.progress` (TensorBoard and the console line) and `Trainer.save`
(an atomic checkpoint with its ONNX policy and score).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import jax
import numpy as np
from mujoco_playground import MjxEnv

from playground.common import backend
from playground.common import checkpointing
from playground.common import config as config_lib
from playground.common import distributed
from playground.common import evaluation
from playground.common import export
from playground.common import ppo as ppo_lib
from playground.common import progress
from playground.common import run_dirs
from playground.common import run_record
from playground.common import step_cache as step_cache_lib
from playground.common import training_env
from playground.common.config import ConfigError
from playground.common.run_record import NonFiniteError
from playground.common.run_record import RunError

if TYPE_CHECKING:
  from playground.common.runner import BaseRunner
  from playground.common.runner import ResolvedConfig

logger = logging.getLogger("playground")

#: Seconds a stop request may take (finish the step, save) before the process exits without saving.
STOP_TIMEOUT_S = 30.0
#: A second SIGINT this soon after the first is the same Ctrl-C delivered twice:
#: the terminal signals the whole foreground process group, and `uv run`, in
#: that group, forwards it to its child as well.
DUPLICATE_SIGNAL_S = 0.5
#: PPO keys read only by the Python loop, never traced (left out of the step cache key).
LOOP_ONLY_PPO_KEYS = ("num_timesteps", "eval_every", "log_every", "checkpoint_every", "keep_last")


@dataclasses.dataclass
class Session:
  """What a run trains with: envs, learner, evaluator and its fingerprint."""

  cfg: ResolvedConfig
  env_name: str
  task: str
  env: MjxEnv
  venv: training_env.VecEnv
  ppo: ppo_lib.PPO
  evaluator: evaluation.Evaluator
  #: The compatibility fingerprint written into every checkpoint.
  compat: dict[str, Any]
  step_cache: step_cache_lib.StepCache
  #: Package versions written into the record and every checkpoint.
  versions: dict[str, str]


def run(runner: BaseRunner, cfg: ResolvedConfig) -> int:
  """Trains `runner` with the resolved `cfg`; returns the process exit status.

  Everything that can be checked before compiling is checked first; the run
  directory is created only once the learner is built and any checkpoint to
  restore has been loaded.
  """
  a = runner.args
  try:
    multi = distributed.initialize(a.coordinator_address, a.num_processes, a.process_id)
    p, setting = cfg.ppo_config, config_lib.parse_cpu_devices(a.cpu_devices)
    if setting == "auto" and cfg.env_config.get("impl") == "warp":
      # warp-lang's CPU kernels do not overlap across devices: several CPU
      # devices train MuJoCo Warp about 2x slower than one (measured).
      setting = None
    distributed.configure_cpu_devices(setting, (p.num_envs, p.num_eval_envs), multi)
  except ValueError as e:
    raise ConfigError(str(e)) from None
  if a.preset == "full" and jax.default_backend() == "cpu" and distributed.is_primary():
    warn_full_preset_on_cpu(int(cfg.ppo_config.num_timesteps))
  run_dir, restore_dir = run_record.prepare_run_dir(a, runner.run_dir_path())
  # Every process has checked the run directory before process 0 creates it.
  distributed.barrier("run_dir_checked")
  restore_meta = None
  if restore_dir is not None:
    restore_meta = run_record.read_restore_meta(restore_dir)
    # The config-level fingerprint, before anything is compiled.
    run_record.check_compat(restore_meta.get("compat", {}), run_record.config_fingerprint(runner, cfg), a)
  if a.overwrite and distributed.is_primary() and runner.run_dir_path().exists():
    # Everything that can be checked without building has been: start over.
    logger.warning("--overwrite: deleted %s", run_record.delete_for_overwrite(a, runner.run_dir_path()))
  backend.setup_compilation_cache(a.compilation_cache_dir)
  session = build(runner, cfg)
  if restore_meta is not None:
    run_record.check_compat(restore_meta.get("compat", {}), session.compat, a)
  ts, env_state, start_step = initial_state(runner, session, restore_dir, run_record.restore_mode(a))
  if distributed.is_primary():
    # Create (or reuse) the run directory only now that everything is valid.
    try:
      run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
      raise RunError(f"cannot create the run directory {run_dir}: {e.strerror}") from None
    run_dirs.write_marker(run_dir, runner.robot)
    checkpointing.cleanup_incomplete(run_dir)
    run_record.write_config(
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


def warn_full_preset_on_cpu(num_timesteps: int) -> None:
  """One line with the estimated hours of a GPU-sized run on this CPU, and the CPU preset."""
  sps, source = backend.cpu_training_estimate()
  logger.warning(
    "--preset full is sized for a GPU: %s steps on this CPU would take about %.0f h (estimate at %s "
    "training steps/s, %s); --preset cpu trains a walking policy in a few hours",
    f"{num_timesteps:,}",
    num_timesteps / sps / 3600,
    f"{sps:,.0f}",
    source,
  )


def build(runner: BaseRunner, cfg: ResolvedConfig) -> Session:
  """Builds the environments, the PPO learner and the evaluator (no compilation)."""
  a, p = runner.args, cfg.ppo_config
  env = distributed.localize_model(runner.make_env(a.env, a.task, cfg.env_config))
  episode_length = int(cfg.env_config.episode_length) if "episode_length" in cfg.env_config else 1000
  randomizer = runner.make_randomizer(env, cfg.env_config)
  venv = training_env.VecEnv(env, episode_length, randomizer, randomization_seed=a.seed)
  try:
    ppo = ppo_lib.PPO(venv, p)
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
    compat=run_record.compat_fingerprint(runner, cfg, ppo.obs_shapes, venv.action_size),
    step_cache=cache,
    versions=run_record.package_versions(),
  )


def make_step_cache(runner: BaseRunner, cfg: ResolvedConfig) -> step_cache_lib.StepCache:
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
  runner: BaseRunner, session: Session, restore_dir: Path | None, mode: str
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


class Trainer:
  """The training loop of one run, with its progress reporter, checkpoints and stop signals.

  The loop runs in a worker thread; the main thread handles SIGINT/SIGTERM:
  the first asks the loop to stop after the current step and save, a second
  exits at once (removing a checkpoint being written, keeping complete ones).
  A repeat within `DUPLICATE_SIGNAL_S` counts as the first: one Ctrl-C under
  `uv run` arrives twice.
  """

  def __init__(self, runner: BaseRunner, session: Session, run_dir: Path, start_step: int):
    self.runner = runner
    self.session = session
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
    self._stop = threading.Event()
    self._overflow_reported = False
    self._stop_requested_at: float | None = None

  def train(self, ts: ppo_lib.TrainingState, env_state: training_env.EnvState, start_step: int) -> int:
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
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
      signal.signal(sig, self._on_signal)
    try:
      thread.start()
      while thread.is_alive():
        thread.join(0.2)
        if self._stop_requested_at is not None and time.monotonic() - self._stop_requested_at > STOP_TIMEOUT_S:
          logger.error(
            "could not finish the current step and save within %.0f s; exiting without a new "
            "checkpoint (the last complete one is kept)",
            STOP_TIMEOUT_S,
          )
          self.reporter.close()
          self._exit_now(1)
    finally:
      for sig, handler in previous.items():
        signal.signal(sig, handler)
    self.reporter.close()
    if "error" in result:
      raise result["error"]
    if result.get("status") == "interrupted":
      logger.info(
        "interrupted: saved checkpoint at step %s. Resume with: %s",
        f"{self.last_checkpoint_step:,}",
        run_record.resume_command(self.runner.run_dir_path()),
      )
    return 0

  def _on_signal(self, signum: int, frame: Any) -> None:
    del frame
    if self._stop.is_set():
      if time.monotonic() - self._stop_requested_at < DUPLICATE_SIGNAL_S:
        return  # the same Ctrl-C, forwarded by `uv run`
      logger.warning("second signal: exiting immediately without saving")
      self._exit_now(130)
    logger.warning(
      "%s received: finishing the current step and saving a checkpoint (press Ctrl-C again to exit without saving)",
      signal.Signals(signum).name,
    )
    self._stop_requested_at = time.monotonic()
    self._stop.set()

  def _exit_now(self, status: int) -> None:
    """Exits the process at once, removing a checkpoint being written (complete ones are kept)."""
    if self.primary:
      checkpointing.cleanup_incomplete(self.run_dir)
    os._exit(status)

  def loop(self, ts: ppo_lib.TrainingState, env_state: training_env.EnvState, start_step: int) -> str:
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
        merged = _merge_metrics(fetched)
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

  def report_overflow(self, env_state: training_env.EnvState) -> None:
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
    """Writes `metrics` to TensorBoard and prints the progress line (process 0 only)."""
    if not self.primary:
      return
    self.reporter.write(step, metrics)
    if "perf/sps" in metrics:
      self.reporter.console(step, metrics["perf/sps"])

  def evaluate(self, ts: ppo_lib.TrainingState, step: int) -> None:
    """Runs the evaluation episodes and logs `eval/*` (every process simulates its share)."""
    metrics = self.session.evaluator.run(self.session.ppo.inference_params(ts))
    self.reporter.record_evaluation(metrics["eval/walltime"])
    self.progress(step, metrics)

  def save(self, step: int, ts: ppo_lib.TrainingState, env_state: training_env.EnvState) -> None:
    """Saves checkpoint `step` (once per step) with its policy file and score."""
    if self.last_checkpoint_step == step:
      return
    t0 = time.monotonic()
    self.checkpoint(step, ts, env_state)
    self.reporter.record_checkpoint(time.monotonic() - t0)

  def checkpoint(self, step: int, ts: ppo_lib.TrainingState, env_state: training_env.EnvState) -> Path:
    """Saves the complete training state (and policy files) as checkpoint `step`; prunes old ones."""
    s = self.session
    # Every process joins the gather; only process 0 writes.
    tree = {
      "training_state": distributed.host_local(ts),
      "env_state": distributed.gather(s.venv.compact(env_state)),
    }
    self.last_checkpoint_step = int(step)
    if not self.primary:
      return self.run_dir / checkpointing.step_dir_name(step)
    meta = {
      "step": int(step),
      "compat": s.compat,
      "versions": s.versions,
      "created": datetime.datetime.now().isoformat(timespec="seconds"),
      "config_file": "../config.json",
    }
    path = checkpointing.save(self.run_dir, step, tree, meta, extra=lambda d: self.export_policy(d, step, ts))
    checkpointing.prune(self.run_dir, self.keep_last)
    logger.info("checkpoint %s", path)
    try:
      scalars = self.runner.score_checkpoint(path, int(step), s)
    except Exception as e:  # noqa: BLE001 - a scoring failure must not stop training
      logger.warning("scoring checkpoint %s failed: %s", path, str(e).splitlines()[0][:300] if str(e) else repr(e))
      scalars = {}
    if scalars:
      self.reporter.write(step, scalars)
    return path

  def export_policy(self, directory: Path, step: int, ts: ppo_lib.TrainingState) -> None:
    """Writes `policy.onnx` next to a checkpoint, verified against the JAX policy.

    A failure raises; the checkpoint writer logs it without stopping training.
    """
    s = self.session
    ppo = s.ppo
    normalizer, policy_params, _ = ppo.inference_params(ts)
    obs_key = ppo.config.policy_obs_key if isinstance(ppo.obs_shapes, dict) else None
    export.export_for_runner(
      Path(directory) / export.POLICY_FILE,
      type(self.runner),
      s.env_name,
      s.task,
      s.cfg.env_config,
      step,
      ppo.network,
      normalizer,
      policy_params,
      obs_key,
      ppo.venv.action_size,
      ppo.config.activation,
    )


def _next_multiple(step: int, every: int) -> int:
  return (step // every + 1) * every


def _merge_metrics(batch: list[dict]) -> dict[str, float]:
  """Averages per-iteration metrics; episode stats weighted by episode count."""
  out: dict[str, float] = {}
  counts = np.array([float(m.get("episode/count", 0.0)) for m in batch])
  for key in batch[0]:
    values = np.array([float(m[key]) for m in batch])
    if key == "episode/count":
      out[key] = float(values.sum())
    elif key.startswith("episode/"):
      out[key] = float((values * counts).sum() / counts.sum()) if counts.sum() > 0 else float("nan")
    elif key != "train/finite":
      out[key] = float(values.mean())
  return out
