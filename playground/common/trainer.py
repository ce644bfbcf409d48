"""Training a robot's runner: the loop, evaluation, checkpoints, callbacks and stop signals.

`run(runner, cfg)` is the whole of it, top to bottom: check the run directory
and the checkpoint to restore, build a `Session` (envs, learner, evaluator;
`session_setup`), take the initial state (fresh from the seed or restored),
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

from playground.common import backend
from playground.common import checkpointing
from playground.common import compat as compat_lib
from playground.common import config as config_lib
from playground.common import distributed
from playground.common import policy_file
from playground.common import ppo as ppo_lib
from playground.common import progress
from playground.common import resume
from playground.common import run_dirs
from playground.common import run_record
from playground.common import training_env
from playground.common.config import ConfigError
from playground.common.errors import NonFiniteError
from playground.common.errors import RunError
from playground.common.session import Session
from playground.common.session_setup import build
from playground.common.session_setup import initial_state
from playground.common.session_setup import make_step_cache
from playground.common.stop_request import DUPLICATE_SIGNAL_S
from playground.common.stop_request import STOP_TIMEOUT_S
from playground.common.stop_request import StopRequest

if TYPE_CHECKING:
  from playground.common.robot_spec import RobotSpec
  from playground.common.run_args import ResolvedConfig

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
    compat_lib.check_compat(restore_meta.get("compat", {}), compat_lib.config_fingerprint(runner, cfg), a)
  if a.overwrite and distributed.is_primary() and runner.run_dir_path().exists():
    # Everything that can be checked without building has been: start over.
    logger.warning("--overwrite: deleted %s", run_record.delete_for_overwrite(a, runner.run_dir_path()))
  backend.setup_compilation_cache(a.compilation_cache_dir)
  session = build(runner, cfg)
  if restore_meta is not None:
    compat_lib.check_compat(restore_meta.get("compat", {}), session.compat, a)
  ts, env_state, start_step = initial_state(runner, session, restore_dir, compat_lib.restore_mode(a))
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
  """One line with the estimated time of a GPU-sized run on this CPU, and the CPU preset."""
  sps, source = backend.cpu_training_estimate()
  logger.warning(
    "--preset full is sized for a GPU: %s steps on this CPU would take about %s (estimate at %s "
    "training steps/s, %s); --preset cpu trains a walking policy in 1-1.5 h on 2 cores",
    f"{num_timesteps:,}",
    duration_text(num_timesteps / sps),
    f"{sps:,.0f}",
    source,
  )


def duration_text(seconds: float) -> str:
  """`seconds` as a rounded duration: "40 min" under 2 hours, else "6 h"."""
  if seconds < 7200:
    return f"{max(1, round(seconds / 60))} min"
  return f"{seconds / 3600:.0f} h"


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
    runner.session = session
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
    self._file_digests = config_lib.named_file_digests(runner.named_files(session.cfg))

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
      "config_file": f"../{run_dirs.CONFIG_FILE}",
    }
    path = checkpointing.save(self.run_dir, step, tree, meta, extra=lambda d: self.export_policy(d, step, ts))
    checkpointing.prune(self.run_dir, self.keep_last)
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

  def export_policy(self, directory: Path, step: int, ts: ppo_lib.TrainingState) -> None:
    """Writes `policy.onnx` next to a checkpoint, verified against the JAX policy.

    A failure raises; the checkpoint writer logs it without stopping training.
    A file the policy embeds (e.g. the reference gait) that changed on disk
    since the run started is such a failure: no policy is written.
    """
    s = self.session
    ppo = s.ppo
    normalizer, policy_params, _ = ppo.inference_params(ts)
    obs_key = ppo.config.policy_obs_key if isinstance(ppo.obs_shapes, dict) else None
    policy_file.export_for_runner(
      Path(directory) / policy_file.POLICY_FILE,
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
      recorded_files=self._file_digests,
    )


def _next_multiple(step: int, every: int) -> int:
  return (step // every + 1) * every


def _one_line(e: Exception) -> str:
  """An exception's first line, at most 300 characters (its repr when it has no message)."""
  return str(e).splitlines()[0][:300] if str(e) else repr(e)
