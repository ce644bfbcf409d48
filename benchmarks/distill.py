"""Distils a teacher that observes the kick (`actor_kick`) into a policy file the robot runtime can feed.

    uv run python -m benchmarks.distill checkpoints/TEACHER/STEP --out checkpoints/STUDENT --iterations 20

The teacher is a checkpoint of a run trained with `actor_kick=true`: its
actor saw the privileged kick state (`observations.KICK_FIELDS`) after its
101 runtime inputs. The student is the same network on the 101 inputs
alone, started from the teacher's weights without the kick's, behind the
teacher's observation normalizer without the kick's entries.

DAgger: each iteration, `--envs` envs of the teacher's own env (its config:
randomization, sensor noise, delays and kicks as it trained) play
`--steps` control steps, each env driven by the teacher with probability
`beta` (1 at the first iteration, falling linearly to 0 at the half) and by
the student otherwise; every observation is labelled with the teacher's
action (the tanh of its mean). The student's action is fitted to all the
labels gathered so far (the newest `--buffer`) by mean squared error.

Printed per iteration: the student's gap to the teacher on the newly
gathered observations before it is fitted to them (`gap_fresh`, mean
squared action difference summed over the 14 actions), the fit after, and per driver the share of kicks followed
by a fall within a second (from the steps the student or the teacher drove
alone: `beta` 0 or 1 envs). At the end the student is exported with the
contract of the teacher's env without `actor_kick` (the runtime's 101
inputs), checked against JAX as every export is, to `OUT/policy.onnx`, with
`OUT/config.json` holding that env config so that the players take it.
`OUT` is also a run directory: with a teacher checkpoint, the student is
saved as a checkpoint at the teacher's step (the student's policy and
normalizer, the teacher's critic), which `benchmarks.checkpoint_kicks`
scores and `--restore_checkpoint_path OUT --restore_mode model` fine-tunes
with PPO on the runtime's inputs.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from pathlib import Path

import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine

logger = logging.getLogger("playground")

#: The runtime's inputs: the student observes the first 101 floats of the teacher's `state`.
RUNTIME_INPUTS = 101


def load_teacher(step_dir: Path) -> dict:
  """The teacher as `distill` takes it, from a checkpoint (`checkpoint_policy.load_policy`)."""
  from playground import checkpoint_policy

  p = checkpoint_policy.load_policy(step_dir)
  return make_teacher(p.record, p.env_config, p.ppo_config, p.step, p.obs_shapes, p.normalizer, p.policy_params)


def make_teacher(record: dict, env_cfg, ppo_cfg, step: int, shapes: dict, normalizer, policy_params) -> dict:
  """The teacher as `distill` takes it: its run record (`env`, `task`), env and PPO configs, step,
  observation shapes, observation normalizer and policy parameters."""
  import jax
  from brax.training.acme import running_statistics

  from playground.common.train import ppo

  if not env_cfg.get("actor_kick", False):
    raise ValueError("the teacher was not trained with actor_kick=true: there is nothing to distil")
  factory = ppo.network_factory(ppo_cfg, True)
  return {
    "record": record,
    "env_config": env_cfg,
    "ppo_config": ppo_cfg,
    "step": step,
    "shapes": shapes,
    "factory": factory,
    "network": factory(shapes, 14, preprocess_observations_fn=running_statistics.normalize),
    "normalizer": jax.tree_util.tree_map(np.asarray, normalizer),
    "policy": jax.tree_util.tree_map(np.asarray, policy_params),
  }


def student_of(teacher: dict, fresh_seed: int | None = None) -> tuple:
  """(network, normalizer, params) of the student: the teacher without its kick inputs, or with
  `fresh_seed` the same network freshly initialized (behind the same normalizer)."""
  import jax
  from brax.training.acme import running_statistics

  shapes = {**teacher["shapes"], "state": (RUNTIME_INPUTS,)}
  network = teacher["factory"](shapes, 14, preprocess_observations_fn=running_statistics.normalize)
  n = teacher["normalizer"]
  cut = lambda tree: {**tree, "state": np.asarray(tree["state"])[:RUNTIME_INPUTS]}  # noqa: E731
  normalizer = n.replace(mean=cut(n.mean), std=cut(n.std), summed_variance=cut(n.summed_variance))
  if fresh_seed is not None:
    return network, normalizer, network.policy_network.init(jax.random.PRNGKey(fresh_seed))
  params = jax.tree_util.tree_map(np.array, teacher["policy"])
  first = params["params"]["hidden_0"]
  first["kernel"] = first["kernel"][:RUNTIME_INPUTS]
  return network, normalizer, params


def distill(
  teacher: dict, *, iterations: int, envs: int, steps: int, buffer: int, epochs: int, seed: int, fresh: bool = False
) -> dict:
  """Runs DAgger (see the module); returns {"params", "network", "normalizer", "history"}.

  `fresh`: the student starts from its own initialization (seeded `seed`), not the teacher's weights."""
  import jax
  import jax.numpy as jp
  import optax

  from playground.common.runner import RunArgs
  from playground.common.train import vec_env
  from playground.open_duck_mini_v2.model import observations
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  record = teacher["record"]
  runner = OpenDuckMiniV2Runner(RunArgs(env=record["env"], task=record["task"]))
  env_cfg = teacher["env_config"]
  env = runner.make_env(record["env"], record["task"], env_cfg)
  venv = vec_env.VecEnv(env, int(env_cfg.episode_length), runner.make_randomizer(env, env_cfg), randomization_seed=seed)
  models = venv.models(jp.arange(envs))
  s_network, s_normalizer, s_params = student_of(teacher, seed if fresh else None)
  t_apply = teacher["network"].policy_network.apply
  s_apply = s_network.policy_network.apply
  t_norm, t_params = teacher["normalizer"], teacher["policy"]
  since_slice = env.state_layout.slices["since_kick"]
  memory_steps = int(round(observations.KICK_MEMORY_S / float(env.dt)))  # since_kick reads 1 from then on

  def student_obs(obs):
    return {"state": obs["state"][..., :RUNTIME_INPUTS]}

  reset = jax.jit(lambda k: venv.reset(jax.random.split(k, envs), models))

  @jax.jit
  def rollout(params, state, reset_state, key, beta):
    drivers = jax.random.uniform(key, (envs,)) < beta  # True: the teacher drives this env

    def body(s, _):
      obs = s.env.obs
      target = jp.tanh(t_apply(t_norm, t_params, obs)[..., :14])
      own = jp.tanh(s_apply(s_normalizer, params, student_obs(obs))[..., :14])
      action = jp.where(drivers[:, None], target, own)
      s, result = venv.step(s, action, models, reset_state)
      fell = result.done * (1.0 - result.truncation)
      return s, (obs["state"], target, obs["state"][..., since_slice.start], fell)

    state, (obs, target, since, fell) = jax.lax.scan(body, state, None, length=steps)
    return state, obs, target, since, fell, drivers

  def loss_fn(params, obs, target):
    own = jp.tanh(s_apply(s_normalizer, params, {"state": obs[..., :RUNTIME_INPUTS]})[..., :14])
    return jp.mean(jp.sum((own - target) ** 2, axis=-1))

  loss_jit = jax.jit(loss_fn)
  opt = optax.adam(3e-4)
  opt_state = opt.init(s_params)

  @jax.jit
  def update(params, opt_state, obs, target):
    loss, grad = jax.value_and_grad(loss_fn)(params, obs, target)
    updates, opt_state = opt.update(grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  key = jax.random.PRNGKey(seed)
  key, k0 = jax.random.split(key)
  state = reset(k0)
  data_obs, data_target = [], []
  history = []
  rng = np.random.default_rng(seed)
  for it in range(iterations):
    started = time.perf_counter()
    beta = max(0.0, 1.0 - it / max(1, iterations // 2)) if it else 1.0
    key, k_reset, k_roll = jax.random.split(key, 3)
    state, obs, target, since, fell, drivers = rollout(s_params, state, reset(k_reset), k_roll, beta)
    obs, target = np.asarray(obs).reshape(-1, obs.shape[-1]), np.asarray(target).reshape(-1, 14)
    unseen = rng.permutation(len(obs))[:4096]
    gap_fresh = float(loss_jit(s_params, obs[unseen], target[unseen]))  # on states it has not been fitted to
    data_obs.append(obs)
    data_target.append(target)
    all_obs = np.concatenate(data_obs)[-buffer:]
    all_target = np.concatenate(data_target)[-buffer:]
    data_obs, data_target = [all_obs], [all_target]
    losses = []
    batch = min(4096, len(all_obs))
    for _ in range(epochs):
      order = rng.permutation(len(all_obs))
      for start in range(0, len(order) - batch + 1, batch):
        idx = order[start : start + batch]
        s_params, opt_state, loss = update(s_params, opt_state, all_obs[idx], all_target[idx])
        losses.append(float(loss))
    history.append(
      {
        "iteration": it,
        "beta": round(beta, 3),
        "gap_fresh": round(gap_fresh, 5),
        "fit_mse": round(float(np.mean(losses[-10:])) if losses else float("nan"), 5),
        "samples": len(all_obs),
        **kick_falls(np.asarray(since), np.asarray(fell), np.asarray(drivers), memory_steps),
        "seconds": round(time.perf_counter() - started, 1),
      }
    )
    logger.info("distill %s", json.dumps(history[-1]))
  return {"params": s_params, "network": s_network, "normalizer": s_normalizer, "history": history}


def kick_falls(since: np.ndarray, fell: np.ndarray, drivers: np.ndarray, memory_steps: int) -> dict:
  """Per driver: kicks seen (`since_kick` back to 0) and the share followed by a fall within its memory.

  `since` [T, envs] is the observed `since_kick` (0 at a kick, 1 a second later or with none).
  """
  out = {}
  for name, mask in (("teacher", drivers), ("student", ~drivers)):
    kicks = falls = 0
    for e in np.flatnonzero(mask):
      starts = np.flatnonzero((since[:, e] == 0.0) & (np.r_[1.0, since[:-1, e]] != 0.0))
      for t in starts:
        if t + memory_steps > len(since):
          continue
        kicks += 1
        falls += bool(fell[t : t + memory_steps, e].any())
    out[f"{name}_kicks"] = kicks
    out[f"{name}_fall_share"] = round(falls / kicks, 3) if kicks else None
  return out


def export_student(teacher: dict, student: dict, out: Path) -> float:
  """Writes `out/policy.onnx` (the runtime's contract) and `out/config.json`; returns the export's parity gap."""
  from ml_collections import config_dict

  from playground.common.export import policy_file
  from playground.common.runner import RunArgs
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  record = teacher["record"]
  env_cfg = config_dict.ConfigDict(teacher["env_config"].to_dict())
  env_cfg.actor_kick = False
  runner = OpenDuckMiniV2Runner(RunArgs(env=record["env"], task=record["task"]))
  contract = runner.policy_contract(runner.make_env(record["env"], record["task"], env_cfg), env_cfg)
  out.mkdir(parents=True, exist_ok=True)
  diff = policy_file.export_contract(
    out / policy_file.POLICY_FILE,
    contract,
    "open_duck_mini_v2",
    record["env"],
    record["task"],
    teacher["step"],
    student["network"],
    student["normalizer"],
    student["params"],
    teacher["ppo_config"].policy_obs_key,
    14,
    teacher["ppo_config"].activation,
  )
  ppo_cfg = teacher["ppo_config"].to_dict()
  (out / "config.json").write_text(
    json.dumps({**record, "env_config": env_cfg.to_dict(), "ppo_config": ppo_cfg, "distilled_from": True})
  )
  return diff


def save_student_checkpoint(teacher_dir: Path, teacher: dict, student: dict, out: Path) -> Path:
  """Writes the student as a checkpoint of run directory `out` (see the module); returns its step directory.

  The teacher's critic (its value network and the normalizer's privileged entries) is kept as it is:
  the student's run observes the same privileged state.
  """
  import jax

  from playground.common.runs import checkpoints

  teacher_dir = checkpoints.resolve(teacher_dir)
  meta = checkpoints.read_meta(teacher_dir)
  value = checkpoints.read_parts(teacher_dir, ["training_state/params/value"])["training_state/params/value"]
  tree = {
    "training_state": {
      "params": {"policy": jax.tree_util.tree_map(np.asarray, student["params"]), "value": value},
      "normalizer_params": student["normalizer"],
    }
  }
  shapes = dict(meta["compat"]["observation_shapes"])
  shapes["state"] = [RUNTIME_INPUTS]
  meta = {**meta, "compat": {**meta["compat"], "observation_shapes": shapes}, "distilled_from": str(teacher_dir)}
  shutil.rmtree(out / checkpoints.step_dir_name(teacher["step"]), ignore_errors=True)  # a student distilled again
  return checkpoints.save(out, teacher["step"], tree, meta)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("teacher", type=Path, help="checkpoint (or run) directory of an actor_kick run")
  parser.add_argument("--out", type=Path, required=True, help="directory for the student's policy.onnx")
  parser.add_argument("--iterations", type=int, default=20)
  parser.add_argument("--envs", type=int, default=128)
  parser.add_argument("--steps", type=int, default=200, help="control steps per iteration and env")
  parser.add_argument("--buffer", type=int, default=400_000, help="newest labelled observations kept")
  parser.add_argument("--epochs", type=int, default=2, help="passes over the buffer per iteration")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--fresh", action="store_true", help="start the student from its own initialization")
  args = parser.parse_args()
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  if not args.teacher.exists():
    raise SystemExit(f"error: no such checkpoint or run: {args.teacher}")
  from playground.common.runs import checkpoints

  try:
    teacher = load_teacher(args.teacher)
  except (ValueError, OSError, checkpoints.CheckpointError) as e:
    raise SystemExit(f"error: {e}") from None
  student = distill(
    teacher,
    iterations=args.iterations,
    envs=args.envs,
    steps=args.steps,
    buffer=args.buffer,
    epochs=args.epochs,
    seed=args.seed,
    fresh=args.fresh,
  )
  diff = export_student(teacher, student, args.out)
  step_dir = save_student_checkpoint(args.teacher, teacher, student, args.out)
  emit(
    {
      "benchmark": "distill",
      "teacher": str(args.teacher),
      "out": str(args.out / "policy.onnx"),
      "checkpoint": str(step_dir),
      "export_parity_gap": diff,
      "iterations": student["history"],
      "machine": machine(),
    }
  )


if __name__ == "__main__":
  main()
