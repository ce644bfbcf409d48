"""Run management: exact resume, interruption, atomic checkpoints, restore modes.

Every training here is a real subprocess of a runner writing real Orbax
checkpoints. Resume and restore use the duck (`smoke` preset, 1280 env steps
per iteration); the NaN guard and most signal tests use the cartpole (`smoke`,
1024 per iteration): divergence, signal handling and atomic saves are the
trainer's, the same for every robot, and the cartpole starts in seconds where
the duck takes a minute.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from helpers import CARTPOLE
from helpers import DUCK
from helpers import REPO_ROOT
from helpers import assert_trees_equal
from helpers import run_cli
from helpers import subprocess_env

from playground.common import hyperparameters
from playground.common.runner import RunArgs
from playground.common.runs import checkpoints
from playground.common.runs import compatibility
from playground.common.runs import directories
from playground.common.runs.tensorboard import read_scalars
from playground.common.train import ppo
from playground.common.train import trainer
from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

SMOKE = ("--preset", "smoke")
#: Env steps per iteration of the cartpole's smoke preset (16 envs x 16 steps x 4 minibatches).
CARTPOLE_ITERATION = 1024


def load_tree(step_dir: Path):
  with ocp.StandardCheckpointer() as checkpointer:
    return checkpointer.restore(Path(step_dir) / "state")


def assert_leaves_equal(a, b):
  leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
  assert len(leaves_a) == len(leaves_b)
  for x, y in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def steps_of(run_dir: Path) -> list[int]:
  return [int(p.name) for p in checkpoints.list_checkpoints(run_dir)]


@pytest.mark.slow
def test_resume_is_bit_exact_seeded_runs_are_reproducible_and_the_step_cache_changes_no_result(tmp_path, smoke_run):
  full = run_cli(*SMOKE, "--output_dir", tmp_path, "--exp_name", "full", "--num_timesteps", 5120, "--no_step_cache")
  assert full.returncode == 0, full.stderr[-3000:]
  assert "training step compiled" in full.stderr
  # Same seed and config as the shared smoke run (2560 steps, through the step
  # cache): identical parameters and env states, traced here without the cache.
  smoke_dir, _ = smoke_run
  a, b = load_tree(tmp_path / "full" / "000000002560"), load_tree(smoke_dir / "000000002560")
  assert_trees_equal(a["training_state"], b["training_state"])
  assert_trees_equal(a["env_state"], b["env_state"])
  # --resume takes every other flag (preset, seed, ...) from the run's config.json
  # (--score is one of the flags a resume may change).
  shutil.copytree(smoke_dir, tmp_path / "half")
  resumed = run_cli(
    "--output_dir", tmp_path, "--exp_name", "half", "--resume", "--num_timesteps", 5120, "--score", "off"
  )  # fmt: skip
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "start at 2,560" in resumed.stderr
  # Same configuration as the runs before (only --num_timesteps differs, which
  # is not traced): the warm start reuses the lowered training step.
  assert "training step loaded from the step cache" in resumed.stderr
  a = load_tree(tmp_path / "full" / "000000005120")
  b = load_tree(tmp_path / "half" / "000000005120")
  assert_trees_equal(a["training_state"], b["training_state"])
  assert_trees_equal(a["env_state"], b["env_state"])
  assert int(a["training_state"]["env_steps"]["lo"]) == 5120
  # TensorBoard continues the x-axis: no step is logged twice.
  steps = [s for s, _ in read_scalars(tmp_path / "half")["episode/reward"]]
  assert steps == sorted(set(steps)) and steps[-1] == 5120 and 2560 in steps


@pytest.mark.slow
def test_run_directory_semantics(tmp_path, smoke_run):
  smoke_dir, _ = smoke_run
  run_dir = tmp_path / "smoke"
  shutil.copytree(smoke_dir, run_dir)
  before = sorted(str(p) for p in run_dir.rglob("*"))
  result = run_cli(*SMOKE, "--output_dir", tmp_path, "--exp_name", "smoke", timeout=300)
  assert result.returncode == 2
  assert "FileExistsError" in result.stderr and "--resume" in result.stderr and "--overwrite" in result.stderr
  assert sorted(str(p) for p in run_dir.rglob("*")) == before
  # --resume of a finished run: nothing to do, nothing changed.
  result = run_cli(*SMOKE, "--output_dir", tmp_path, "--exp_name", "smoke", "--resume", timeout=300)
  assert result.returncode == 0 and "nothing to do" in result.stderr
  # --resume without any checkpoint: clear error, no directory left behind.
  result = run_cli(*SMOKE, "--output_dir", tmp_path, "--exp_name", "ghost", "--resume", timeout=300)
  assert result.returncode == 2 and "does not exist" in result.stderr
  assert not (tmp_path / "ghost").exists()
  (tmp_path / "empty").mkdir()
  result = run_cli(*SMOKE, "--output_dir", tmp_path, "--exp_name", "empty", "--resume", timeout=300)
  assert result.returncode == 2 and "no complete checkpoint" in result.stderr
  # --overwrite starts over.
  marker = run_dir / "marker.txt"
  marker.write_text("old run")
  result = run_cli(*SMOKE, "--output_dir", tmp_path, "--exp_name", "smoke", "--overwrite", "--eval_every", 0)
  assert result.returncode == 0, result.stderr[-3000:]
  assert not marker.exists() and steps_of(run_dir) == [2560]
  assert (run_dir / directories.MARKER).is_file()


@pytest.mark.slow
def test_missing_corrupted_and_incompatible_checkpoints_are_one_line_errors(tmp_path, smoke_run):
  smoke_dir, _ = smoke_run

  def check(args, expected):
    result = run_cli(*SMOKE, "--output_dir", tmp_path / "out", "--exp_name", "x", *args, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr

  check(["--restore_checkpoint_path", tmp_path / "nowhere"], "does not exist")
  corrupted = tmp_path / "corrupted"
  shutil.copytree(smoke_dir, corrupted)
  for f in (corrupted / "000000002560" / "state").rglob("*"):
    if f.is_file() and f.stat().st_size > 100:
      f.write_bytes(b"garbage")
  result = run_cli(
    *SMOKE, "--output_dir", tmp_path / "out", "--exp_name", "y", "--restore_checkpoint_path", corrupted, timeout=600
  )
  assert result.returncode == 2 and "cannot load checkpoint" in result.stderr, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  incomplete = tmp_path / "incomplete" / "000000002560"
  shutil.copytree(smoke_dir / "000000002560", incomplete)
  (incomplete / "meta.json").unlink()
  check(["--restore_checkpoint_path", incomplete], "is incomplete")
  check(
    ["--restore_checkpoint_path", smoke_dir, "--set", "ppo.policy_hidden_layer_sizes=[64,64]"],
    "policy_hidden_layer_sizes is [32, 32] in the checkpoint but [64, 64]",
  )
  check(["--restore_checkpoint_path", smoke_dir, "--num_envs", 32], "num_envs is 16 in the checkpoint but 32")
  check(["--restore_checkpoint_path", smoke_dir, "--env", "standing"], "env is joystick in the checkpoint")
  check(
    ["--restore_checkpoint_path", smoke_dir, "--set", "ppo.max_grad_norm=0"],
    "gradient_clipping is True in the checkpoint but False",
  )


@pytest.mark.slow
def test_restore_modes_load_what_they_claim(smoke_run):
  smoke_dir, _ = smoke_run
  step_dir = smoke_dir / "000000002560"
  source = load_tree(step_dir)["training_state"]
  runner = OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain", preset="smoke"))
  session = trainer.build(runner, runner.resolve_config())
  fresh, _, _ = trainer.initial_state(runner, session, None, "all")
  fresh = jax.device_get(fresh)

  def arrays(tree):
    return jax.tree_util.tree_map(np.asarray, jax.device_get(tree))

  ts, _, step = trainer.initial_state(runner, session, step_dir, "all")
  assert step == 2560
  assert_trees_equal(arrays(ts.params.policy), source["params"]["policy"])
  assert_leaves_equal(ts.optimizer_state, source["optimizer_state"])
  np.testing.assert_array_equal(np.asarray(ts.key), source["key"])

  ts, _, step = trainer.initial_state(runner, session, step_dir, "model")
  assert step == 0 and int(ts.env_steps) == 0
  assert_trees_equal(arrays(ts.params.policy), source["params"]["policy"])
  assert_trees_equal(arrays(ts.params.value), source["params"]["value"])
  assert_trees_equal(arrays(ts.normalizer_params.mean), source["normalizer_params"]["mean"])
  assert_leaves_equal(ts.optimizer_state, fresh.optimizer_state)
  np.testing.assert_array_equal(np.asarray(ts.key), np.asarray(fresh.key))

  ts, _, step = trainer.initial_state(runner, session, step_dir, "except-critic")
  assert step == 0
  assert_trees_equal(arrays(ts.params.policy), source["params"]["policy"])
  assert_trees_equal(arrays(ts.params.value), arrays(fresh.params.value))
  with pytest.raises(AssertionError):
    assert_trees_equal(arrays(ts.params.value), source["params"]["value"])


@pytest.mark.slow
def test_fine_tuning_under_another_reward_set_takes_the_weights(smoke_run, tmp_path):
  # The smoke run has no fall penalty, so its env state carries no termination
  # reward; a fine-tune that adds one must still load the networks.
  smoke_dir, _ = smoke_run
  step_dir = smoke_dir / "000000002560"
  source = load_tree(step_dir)["training_state"]
  runner = OpenDuckMiniV2Runner(
    RunArgs(env="joystick", task="flat_terrain", preset="smoke", overrides=("reward_config.scales.termination=-200",))
  )
  session = trainer.build(runner, runner.resolve_config())
  # The whole state cannot match: the error says which restore mode can.
  with pytest.raises(trainer.RunError, match="its env state differs .* use --restore_mode model") as error:
    trainer.initial_state(runner, session, step_dir, "all")
  assert "\n" not in str(error.value)
  ts, _, step = trainer.initial_state(runner, session, step_dir, "model")
  assert step == 0
  weights = jax.tree_util.tree_map(np.asarray, jax.device_get(ts.params))
  assert_trees_equal(weights.policy, source["params"]["policy"])
  assert_trees_equal(weights.value, source["params"]["value"])
  # A network of another size is refused with the array and both shapes named.
  wider = jax.tree_util.tree_map(lambda x: np.zeros(np.shape(x)[:-1] + (2 * np.shape(x)[-1],)), source["params"])
  with pytest.raises(
    checkpoints.CheckpointError, match=r"\['hidden_0'\]\['bias'\] has shape \(32,\), this run's is \(64,\)"
  ):
    checkpoints.restore_parts(step_dir, {"training_state/params": wider})
  with pytest.raises(checkpoints.CheckpointError, match="it has no 'training_state/params/critic'"):
    checkpoints.restore_parts(step_dir, {"training_state/params/critic": wider})


@pytest.mark.slow
def test_a_fine_tune_whose_critic_observes_more_keeps_what_the_saved_critic_computed(smoke_run):
  # `critic_kick` appends 5 floats to the critic's observation: the saved value network and
  # statistics are widened (zero weights, neutral statistics for the new entries), not refused.
  smoke_dir, _ = smoke_run
  step_dir = smoke_dir / "000000002560"
  source = load_tree(step_dir)["training_state"]
  runner = OpenDuckMiniV2Runner(
    RunArgs(env="joystick", task="flat_terrain", preset="smoke", overrides=("critic_kick=true",))
  )
  session = trainer.build(runner, runner.resolve_config())
  saved_value = source["params"]["value"]["params"]
  old = saved_value["hidden_0"]["kernel"].shape[0]
  for mode in ("model", "except-critic"):
    ts, _, step = trainer.initial_state(runner, session, step_dir, mode)
    assert step == 0
    norm = jax.tree_util.tree_map(np.asarray, jax.device_get(ts.normalizer_params))
    assert_trees_equal(jax.tree_util.tree_map(np.asarray, jax.device_get(ts.params.policy)), source["params"]["policy"])
    np.testing.assert_array_equal(norm.mean["state"], source["normalizer_params"]["mean"]["state"])
    privileged = source["normalizer_params"]["mean"]["privileged_state"]
    assert norm.mean["privileged_state"].shape == (old + 5,)
    np.testing.assert_array_equal(norm.mean["privileged_state"][:old], privileged)
    np.testing.assert_array_equal(
      norm.std["privileged_state"][:old], source["normalizer_params"]["std"]["privileged_state"]
    )
    np.testing.assert_array_equal(norm.mean["privileged_state"][old:], 0.0)
    np.testing.assert_array_equal(norm.std["privileged_state"][old:], 1.0)
    value = jax.tree_util.tree_map(np.asarray, jax.device_get(ts.params.value))["params"]
    if mode == "model":
      kernel = value["hidden_0"]["kernel"]
      np.testing.assert_array_equal(kernel[:old], saved_value["hidden_0"]["kernel"])
      np.testing.assert_array_equal(kernel[old:], 0.0)
      np.testing.assert_array_equal(value["hidden_1"]["kernel"], saved_value["hidden_1"]["kernel"])
      # The widened critic computes what the saved one did, whatever the new inputs hold.
      obs = np.random.default_rng(0).normal(size=(4, old))
      wide = np.concatenate([obs, np.random.default_rng(1).normal(size=(4, 5))], axis=1)
      np.testing.assert_allclose(wide @ kernel, obs @ saved_value["hidden_0"]["kernel"], rtol=1e-5, atol=1e-5)
    else:
      assert value["hidden_0"]["kernel"].shape[0] == old + 5 and np.abs(value["hidden_0"]["kernel"][old:]).max() > 0

  # The fingerprint lets the grown critic through for `model` / `except-critic`, never for a full
  # restore, a narrower critic or a grown actor (refused before anything is built).
  def check(saved, current, mode, critic_key="privileged_state"):
    args = RunArgs(env="joystick", task="flat_terrain", restore_mode=mode)
    compatibility.check_compat(saved, current, args, critic_key=critic_key)

  def shapes(actor, critic):
    return {"observation_shapes": {"state": [actor], "privileged_state": [critic]}}

  for mode in ("model", "except-critic"):
    check(shapes(101, old), shapes(101, old + 5), mode)
  for saved, current, mode, critic_key in (
    (shapes(101, old), shapes(101, old + 5), "all", "privileged_state"),
    (shapes(101, old + 5), shapes(101, old), "model", "privileged_state"),  # a narrower critic
    (shapes(101, old), shapes(135, old), "model", "privileged_state"),  # the actor grew
    (shapes(101, old), shapes(101, old + 5), "model", None),  # no critic named
  ):
    with pytest.raises(trainer.RunError, match="observation_shapes"):
      check(saved, current, mode, critic_key)


def _start(tmp_path, name, *args, script=CARTPOLE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **env_vars):
  env = subprocess_env(**env_vars)
  return subprocess.Popen(
    [sys.executable, str(script), *SMOKE, "--output_dir", str(tmp_path), "--exp_name", name, *map(str, args)],
    stdout=stdout,
    stderr=stderr,
    text=True,
    env=env,
    cwd=REPO_ROOT,
  )


def _cartpole(*args, **kwargs):
  return run_cli(*SMOKE, *args, script=CARTPOLE, **kwargs)


def _wait_for(predicate, timeout, proc):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if predicate():
      return True
    if proc.poll() is not None:
      return False
    time.sleep(0.01)
  return False


def test_learning_rate_schedule_is_linear_in_env_steps_and_checked():
  cfg = hyperparameters.default_config()
  cfg.update(learning_rate=3e-4, learning_rate_decay_start=1000, learning_rate_decay_end=3000, final_learning_rate=1e-4)
  lr = [float(ppo.learning_rate_at(cfg, s)) for s in (0, 1000, 2000, 3000, 10_000)]
  np.testing.assert_allclose(lr, [3e-4, 3e-4, 2e-4, 1e-4, 1e-4], rtol=1e-6)
  cfg.learning_rate_decay_start = 0  # constant
  assert float(ppo.learning_rate_at(cfg, 10_000)) == pytest.approx(3e-4)
  cfg.update(learning_rate_decay_start=3000, learning_rate_decay_end=1000)
  with pytest.raises(ValueError, match="learning_rate_decay_start <= learning_rate_decay_end"):
    ppo.validate(cfg, 1)


@pytest.mark.slow
def test_learning_rate_steps_down_where_the_schedule_says(tmp_path):
  # A step down to almost nothing after env step 2048: the iteration that starts
  # at 2048 still learns, the one that starts at 3072 barely moves the weights.
  schedule = [f"ppo.{k}={v}" for k, v in (("learning_rate_decay_start", 2048), ("learning_rate_decay_end", 2048))]
  schedule += ["ppo.final_learning_rate=1e-9"]
  args = ("--num_timesteps", 4096, "--checkpoint_every", 1024, "--log_every", 1024, "--keep_last", 0)
  result = _cartpole("--output_dir", tmp_path, "--exp_name", "lr", *args, *[a for s in schedule for a in ("--set", s)])
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = tmp_path / "lr"
  policy = {s: load_tree(run_dir / f"{s:012d}")["training_state"]["params"]["policy"] for s in (2048, 3072, 4096)}

  def change(a, b):
    pairs = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in pairs)

  assert change(policy[2048], policy[3072]) > 1e-4  # full learning rate
  assert change(policy[3072], policy[4096]) < 1e-6  # 1e-9: Adam moves each weight at most ~lr per update
  initial = json.loads((run_dir / "config.json").read_text())["ppo_config"]["learning_rate"]
  logged = [v for _, v in read_scalars(run_dir)["train/learning_rate"]]  # one per iteration
  np.testing.assert_allclose(logged, [initial, initial, initial, 1e-9], rtol=1e-6)


@pytest.mark.slow
def test_nan_guard_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
  # On the cartpole: the guard is the trainer's, the same for every robot.
  base = _cartpole("--output_dir", tmp_path, "--exp_name", "base", "--num_timesteps", 2048)
  assert base.returncode == 0, base.stderr[-3000:]
  run_dir = tmp_path / "base"
  good = load_tree(run_dir / "000000002048")
  # --resume continues a run as recorded: another learning rate is refused...
  lr = ("--set", "ppo.learning_rate=1e39")
  refused = run_cli("--output_dir", tmp_path, "--exp_name", "base", "--resume", *lr, script=CARTPOLE, timeout=300)
  assert refused.returncode == 2 and "--set [ppo.learning_rate=1e39] conflicts with --set (none)" in refused.stderr
  # ... and taken by a new run that starts from the run's checkpoint.
  restore = ("--restore_checkpoint_path", run_dir)
  result = _cartpole("--output_dir", tmp_path, "--exp_name", "diverged", *restore, "--num_timesteps", 4096, *lr)
  assert result.returncode == 3, result.stderr[-3000:]
  assert "diverged at step 3,072" in result.stderr and "Traceback" not in result.stderr
  assert steps_of(tmp_path / "diverged") == [] and steps_of(run_dir) == [2048]
  assert_trees_equal(load_tree(run_dir / "000000002048"), good)
  config = json.loads((tmp_path / "diverged" / "config.json").read_text())
  assert config["ppo_config"]["learning_rate"] == 1e39


@pytest.mark.slow
def test_sigint_saves_a_resumable_checkpoint(tmp_path):
  proc = _start(tmp_path, "interrupted", "--num_timesteps", 1_000_000, "--checkpoint_every", 1_000_000)
  run_dir = tmp_path / "interrupted"
  started = _wait_for(lambda: len(read_scalars(run_dir).get("episode/reward", [])) >= 1, 600, proc)
  assert started, "training did not start"
  sent = time.monotonic()
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=60)
  assert proc.returncode == 0, stderr[-3000:]
  assert time.monotonic() - sent < 30
  assert "Resume with:" in stderr and "--resume" in stderr
  steps = steps_of(run_dir)
  assert len(steps) == 1 and 0 < steps[0] < 1_000_000
  resumed = _cartpole(
    "--output_dir", tmp_path, "--exp_name", "interrupted", "--resume",
    "--num_timesteps", steps[0] + CARTPOLE_ITERATION, "--checkpoint_every", 1_000_000,
  )  # fmt: skip
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert steps_of(run_dir)[-1] == steps[0] + CARTPOLE_ITERATION


@pytest.mark.slow
def test_sigkill_during_a_save_leaves_the_previous_checkpoint_loadable(tmp_path):
  run_dir = tmp_path / "killed"

  def saving_after_a_complete_one():
    if not run_dir.is_dir():
      return False
    tmp = [p for p in run_dir.iterdir() if p.name.startswith(".tmp-")]
    return bool(tmp) and len(steps_of(run_dir)) >= 1

  # A save takes a fraction of a second; if the kill lands just after the
  # rename, try again (each attempt resumes the same run).
  for attempt in range(4):
    args = ["--num_timesteps", 1_000_000, "--checkpoint_every", CARTPOLE_ITERATION, "--keep_last", 0]
    proc = _start(tmp_path, "killed", *args, *(["--resume"] if attempt else []))
    caught = _wait_for(saving_after_a_complete_one, 600, proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert caught, "never observed a checkpoint being written"
    if any(p.name.startswith(".tmp-") for p in run_dir.iterdir()):
      break
  else:
    pytest.fail("could not kill the process while it was writing a checkpoint")
  complete = steps_of(run_dir)
  assert complete, "the previous checkpoint must survive"
  last = run_dir / checkpoints.step_dir_name(complete[-1])
  assert load_tree(last)["training_state"]["params"]["policy"]
  assert checkpoints.latest_checkpoint(run_dir) == last
  resumed = _cartpole(
    "--output_dir", tmp_path, "--exp_name", "killed", "--resume",
    "--num_timesteps", complete[-1] + CARTPOLE_ITERATION, "--checkpoint_every", CARTPOLE_ITERATION,
  )  # fmt: skip
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"start at {complete[-1]:,}" in resumed.stderr
  assert not any(p.name.startswith(".tmp-") for p in run_dir.iterdir())
  assert steps_of(run_dir)[-1] == complete[-1] + CARTPOLE_ITERATION


@pytest.mark.slow
def test_sigterm_saves_and_the_resumed_run_is_bit_identical_keeping_the_last_k(tmp_path):
  # A scheduler's SIGTERM: checkpoint, flush, exit 0. --keep_last 2 keeps the two
  # newest complete checkpoints, also across the resume.
  every = ("--checkpoint_every", CARTPOLE_ITERATION, "--keep_last", 2, "--log_every", CARTPOLE_ITERATION)
  proc = _start(tmp_path, "term", "--num_timesteps", 1_000_000, *every)
  run_dir = tmp_path / "term"
  started = _wait_for(lambda: steps_of(run_dir) and steps_of(run_dir)[-1] >= 3 * CARTPOLE_ITERATION, 600, proc)
  assert started, "training did not reach 3 checkpoints"
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=60)
  assert proc.returncode == 0, stderr[-3000:]
  assert "SIGTERM received" in stderr and "Resume with:" in stderr
  stopped = steps_of(run_dir)
  assert len(stopped) == 2 and stopped[1] - stopped[0] == CARTPOLE_ITERATION, stopped
  assert "train/policy_loss" in read_scalars(run_dir)  # TensorBoard was flushed
  end = stopped[-1] + 2 * CARTPOLE_ITERATION
  resumed = run_cli("--output_dir", tmp_path, "--exp_name", "term", "--resume", "--num_timesteps", end, script=CARTPOLE)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert steps_of(run_dir) == [end - CARTPOLE_ITERATION, end]
  plain = _cartpole("--output_dir", tmp_path, "--exp_name", "plain", "--num_timesteps", end, "--checkpoint_every", end)
  assert plain.returncode == 0, plain.stderr[-3000:]
  a = load_tree(run_dir / checkpoints.step_dir_name(end))
  b = load_tree(tmp_path / "plain" / checkpoints.step_dir_name(end))
  assert_trees_equal(a["training_state"], b["training_state"])
  assert_trees_equal(a["env_state"], b["env_state"])


@pytest.mark.slow
def test_a_second_ctrl_c_exits_at_once_without_a_partial_checkpoint(tmp_path):
  # No periodic checkpoints: the first Ctrl-C, sent once the training step is
  # compiled, always leaves a whole new checkpoint to write (policy export,
  # Orbax save, scorecard), seconds of work, so the second one (0.7 s later)
  # lands while it is in progress. Waiting for a periodic checkpoint instead
  # raced: the duck could finish its pending save and exit 0 in between.
  # The duplicate window is shortened to 0.3 s so that the second keypress
  # (0.6 s later) lands well inside the seconds the save takes.
  run_dir = tmp_path / "twice"
  log = tmp_path / "stderr.txt"
  flags = ("--num_timesteps", 1_000_000, "--checkpoint_every", 1_000_000, "--keep_last", 0)
  window = 0.3
  with open(log, "w") as err:
    proc = _start(
      tmp_path, "twice", *flags, script=DUCK, stdout=subprocess.DEVNULL, stderr=err,
      PLAYGROUND_DUPLICATE_SIGNAL_S=str(window),
    )  # fmt: skip
    try:
      assert _wait_for(lambda: "training step" in log.read_text(), 600, proc), log.read_text()[-3000:]
      assert not steps_of(run_dir)
      proc.send_signal(signal.SIGINT)
      # Python runs a handler only between bytecodes: under load the first one may run late,
      # so the second keypress is timed from its acknowledgement, not from the first send
      # (two within the duplicate window count as one).
      assert _wait_for(lambda: "SIGINT received" in log.read_text(), 120, proc), log.read_text()[-3000:]
      time.sleep(2 * window)  # a second keypress, not the same one delivered twice
      assert proc.poll() is None, "the first Ctrl-C's save finished too soon to test a second one"
      sent = time.monotonic()
      proc.send_signal(signal.SIGINT)
      proc.wait(timeout=60)
    finally:
      if proc.poll() is None:
        proc.kill()
  stderr = log.read_text()
  assert proc.returncode == 130, stderr[-3000:]
  assert time.monotonic() - sent < 5
  assert "second signal" in stderr and "interrupted: saved checkpoint" not in stderr
  assert not any(p.name.startswith(".tmp-") for p in run_dir.iterdir())
  for step_dir in (p for p in run_dir.iterdir() if p.name.isdigit()):
    assert directories.is_complete(step_dir), step_dir


@pytest.mark.slow
def test_a_late_copy_of_the_ctrl_c_after_the_save_is_still_one_ctrl_c(tmp_path):
  """The forwarded copy of a Ctrl-C may arrive after the save, while the process shuts down.

  Delivered on purpose once the run has logged its saved checkpoint (the
  moment the trainer used to give SIGINT back to Python's default handler),
  inside the duplicate window, set long so that the timing is not a race:
  still one Ctrl-C, exit status 0, nothing removed.
  """
  log = tmp_path / "stderr.txt"
  run_dir = tmp_path / "late"
  flags = ("--num_timesteps", 1_000_000, "--checkpoint_every", CARTPOLE_ITERATION, "--keep_last", 0)
  window = 45  # s: longer than a warm save on a loaded 2-core machine
  with open(log, "w") as err:
    proc = _start(
      tmp_path, "late", *flags, stdout=subprocess.DEVNULL, stderr=err, PLAYGROUND_DUPLICATE_SIGNAL_S=str(window)
    )
    try:
      # After a first periodic checkpoint the save path is compiled: the stop's save is quick.
      assert _wait_for(lambda: steps_of(run_dir), 600, proc), log.read_text()[-3000:]
      proc.send_signal(signal.SIGINT)
      assert _wait_for(lambda: "interrupted: saved checkpoint" in log.read_text(), 60, proc), log.read_text()[-3000:]
      # Inside the window the process is still there (it used to be shutting down, or gone).
      assert proc.poll() is None, "the process ended inside the duplicate window"
      sent = time.monotonic()
      proc.send_signal(signal.SIGINT)  # the late copy
      proc.wait(timeout=60)
    finally:
      if proc.poll() is None:
        proc.kill()
  stderr = log.read_text()
  assert proc.returncode == 0, stderr[-3000:]
  assert "second signal" not in stderr and "Traceback" not in stderr
  assert time.monotonic() - sent < window + 5  # it waits out the window, no longer
  # The stop may land on the step just saved periodically (then no new directory is written):
  # the step it names is on disk, complete, and nothing was removed.
  steps = steps_of(run_dir)
  assert steps and f"saved checkpoint at step {max(steps):,}" in stderr, stderr[-3000:]
  assert all(directories.is_complete(run_dir / checkpoints.step_dir_name(s)) for s in steps)


@pytest.mark.slow
def test_one_ctrl_c_under_uv_run_saves_and_stops(tmp_path):
  """A terminal's Ctrl-C signals the whole foreground group: `uv run` and its child.

  uv also forwards the SIGINT to the child when its stdin is not a terminal
  (checked with uv 0.13.9, the version `.ci/run` installs: the copy follows
  200 ms later), so the trainer receives it twice; that must still be one
  Ctrl-C (save and stop, exit status 0), not two.
  """
  uv = shutil.which("uv")
  if uv is None:
    pytest.skip("uv is not on PATH")
  command = [uv, "run", "--frozen", str(CARTPOLE), *SMOKE, "--output_dir", str(tmp_path), "--exp_name", "uv"]
  command += ["--num_timesteps", "1000000", "--checkpoint_every", str(CARTPOLE_ITERATION), "--keep_last", "0"]
  env = subprocess_env()
  proc = subprocess.Popen(
    command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT, start_new_session=True
  )
  run_dir = tmp_path / "uv"
  assert _wait_for(lambda: len(steps_of(run_dir)) >= 1, 600, proc), "training did not start"
  os.killpg(proc.pid, signal.SIGINT)  # what the terminal does
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 0, stderr[-3000:]
  assert "interrupted: saved checkpoint" in stderr and "second signal" not in stderr
  for step_dir in (p for p in run_dir.iterdir() if p.name.isdigit()):
    assert directories.is_complete(step_dir), step_dir
