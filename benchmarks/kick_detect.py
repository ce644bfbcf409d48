"""Can a policy file's inputs tell that it was kicked, and which way, under the card's noise and delays?

    uv run python -m benchmarks.kick_detect checkpoints/RUN/STEP/policy.onnx
    uv run python -m benchmarks.kick_detect tests/fixtures/walker/policy.onnx --runtime --frames 1 3

The file plays `--episodes` episodes per command with randomization, sensor
noise and delays on (the scorecard's conditions; `--runtime`: observed as the
robot runtime does). From `--first` s on, every `--interval` s (drawn
uniformly) its trunk is kicked `--kick` m/s in a direction drawn uniformly
around the heading. Every observation the file received is kept, in the
file's own normalizer's units, with the control steps since the last kick
(0: the first observation that shows it).

Detectors are then trained on the observations of half the episodes and
scored on the other half, one per command:

- `detect`: a logistic regression (`linear`) and a network with one hidden
  layer of 64 tanh units (`mlp`) told "kicked at most `--positive` steps
  ago" from "quiet" (no kick for 1 s, and 1 s into the episode). Reported:
  the share of kicks found at each step after the kick, at the threshold
  that raises an alarm on `--false_alarm` of the quiet steps (0.01: about
  once per 2 s at 50 Hz), and the area under the ROC curve of the
  positive steps against the quiet ones.
- `direction`: the same two models fitted to the kick's direction (cos,
  sin, in the heading frame) from the positive steps; reported as the
  median angle error and the share within 45 deg, per step after the kick
  (a uniform guess: 90 deg and 25%).

`--frames F` gives the detectors the last F observations side by side
(F - 1 earlier control steps), what a file with memory would see; the
runtime's 101-float layout is F = 1. A detector fitted to data bounds what
a policy can read from its inputs from below: if a detector finds the kick
at a given step, the information is there for a policy to act on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine

#: Control steps after the kick reported.
STEPS_AFTER = 8
#: s without a kick, and into the episode, before a step counts as quiet.
QUIET_S = 1.0
#: s before a fall whose steps are left out (the fall itself is not a kick).
BEFORE_FALL_S = 1.0
HIDDEN = 64


def play_kicked(path: Path, commands: list[float], *, episodes: int, duration: float, kick: float,
                first: float, interval: tuple[float, float], runtime: bool, seed: int) -> dict:  # fmt: skip
  """Per command (vx): {"z": [episodes, T, obs] normalized inputs, "since": [episodes, T] steps since
  the last kick (-1: none yet; kept steps only, the rest NaN), "heading_deg": [episodes, T] the last
  kick's direction, "fell": [episodes]}."""
  from benchmarks.kick_signal import normalizer
  from playground.common.evaluation.scorecard import Command
  from playground.open_duck_mini_v2.evaluation import player
  from playground.open_duck_mini_v2.evaluation import policy_io

  policy_path, env_config, _ = policy_io.resolve_policy(path)
  metadata = policy_io.read_metadata(policy_path)
  config = policy_io.play_config(metadata, env_config, noise=True, delays=True, randomization=True)
  mean, std = normalizer(policy_path)
  policy = policy_io.onnx_policy(policy_path, batched=True)
  dt = float(config.ctrl_dt)
  steps = int(round(duration / dt))
  out = {}
  for vx in commands:
    rng = np.random.default_rng(seed)
    played_eps = [(Command(f"vx_{vx}", ((0.0, vx, 0.0, 0.0),), duration=duration), s) for s in range(episodes)]
    next_kick = np.rint((first + rng.uniform(0, interval[1], episodes)) / dt).astype(int)
    last_kick = np.full(episodes, -(10**9))
    heading = np.zeros(episodes)
    z = np.full((episodes, steps, mean.size), np.nan, np.float32)
    since = np.full((episodes, steps), np.nan)
    head_deg = np.full((episodes, steps), np.nan)

    def on_step(view, rng=rng, next_kick=next_kick, last_kick=last_kick, heading=heading, z=z, since=since,
                head_deg=head_deg) -> None:  # fmt: skip
      t = view.t
      run = view.running
      z[run, t] = ((view.seen[run] - mean) / std).astype(np.float32)
      # A kick applied after step t first shows in the observation acted on at t + 2.
      since[run, t] = np.where(last_kick[run] > -(10**8), t - (last_kick[run] + 2), -1)
      head_deg[run, t] = np.degrees(heading[run])
      for i in np.flatnonzero(run & (next_kick == t)):
        heading[i] = rng.uniform(-np.pi, np.pi)
        view.kick(i, heading[i], kick)
        last_kick[i] = t
        next_kick[i] = t + int(round(rng.uniform(*interval) / dt))

    played = player.play(policy, metadata["env"], metadata.get("task") or "flat_terrain", config, metadata,
                         played_eps, seed=seed, source="runtime" if runtime else "env", on_step=on_step)  # fmt: skip
    fell = np.array([e["fell"] for e in played])
    survival = np.array([e["survival_s"] for e in played])
    for i in np.flatnonzero(fell):  # the last second before a fall is the fall, not the kick
      cut = max(0, int(round((survival[i] - BEFORE_FALL_S) / dt)))
      since[i, cut:] = np.nan
    out[f"{vx:g}"] = {"z": z, "since": since, "heading_deg": head_deg, "fell": fell}
  return out


def stack_frames(z: np.ndarray, frames: int) -> np.ndarray:
  """[episodes, T, obs] -> [episodes, T, frames * obs]: each step with its `frames - 1` predecessors, newest first
  (the episode's first observation repeated before its start)."""
  parts = [z]
  for k in range(1, frames):
    shifted = np.concatenate([np.repeat(z[:, :1], k, axis=1), z[:, :-k]], axis=1)
    parts.append(shifted)
  return np.concatenate(parts, axis=-1)


def fit(x: np.ndarray, y: np.ndarray, *, hidden: int, loss: str, weight: np.ndarray | None = None,
        steps: int = 1500, seed: int = 0):  # fmt: skip
  """A linear model (`hidden` 0) or one tanh hidden layer, fitted full-batch with Adam and a small L2.

  `loss`: "logistic" (y in {0, 1}, one output) or "squared" (y [n, k]). Returns `predict(x) -> [n, k]`.
  """
  import jax
  import jax.numpy as jp
  import optax

  x = jp.asarray(x, jp.float32)
  y = jp.asarray(y, jp.float32).reshape(len(x), -1)
  w = jp.ones(len(x)) if weight is None else jp.asarray(weight, jp.float32)
  k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
  width = hidden or x.shape[1]
  params = {
    "w1": jax.random.normal(k1, (x.shape[1], width)) / np.sqrt(x.shape[1]) if hidden else None,
    "b1": jp.zeros(width) if hidden else None,
    "w2": jax.random.normal(k2, (width, y.shape[1])) * 0.01,
    "b2": jp.zeros(y.shape[1]),
  }
  params = {k: v for k, v in params.items() if v is not None}

  def forward(p, x):
    h = jp.tanh(x @ p["w1"] + p["b1"]) if "w1" in p else x
    return h @ p["w2"] + p["b2"]

  def objective(p):
    out = forward(p, x)
    if loss == "logistic":
      per = optax.sigmoid_binary_cross_entropy(out, y).sum(-1)
    else:
      per = ((out - y) ** 2).sum(-1)
    l2 = sum(jp.sum(v**2) for n, v in p.items() if n.startswith("w"))
    return jp.sum(w * per) / jp.sum(w) + 1e-4 * l2

  opt = optax.adam(3e-3)
  state = opt.init(params)

  @jax.jit
  def update(p, s):
    g = jax.grad(objective)(p)
    u, s = opt.update(g, s, p)
    return optax.apply_updates(p, u), s

  for _ in range(steps):
    params, state = update(params, state)
  return lambda xs: np.asarray(forward(params, jp.asarray(xs, jp.float32)))


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
  """Area under the ROC curve: the chance a positive scores above a negative (ties count half)."""
  from scipy.stats import rankdata

  ranks = rankdata(np.concatenate([pos, neg]))
  return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def evaluate(data: dict, *, frames: int, positive: int, false_alarm: float, dt: float) -> dict:
  """The detectors' scores on one command's play (see the module)."""
  z, since, heading = data["z"], data["since"], data["heading_deg"]
  x_all = stack_frames(np.nan_to_num(z), frames)
  episodes = z.shape[0]
  train_ep = np.arange(episodes) < episodes // 2
  quiet_steps = int(round(QUIET_S / dt))
  t_index = np.broadcast_to(np.arange(z.shape[1]), since.shape)
  kept = np.isfinite(since) & (t_index >= frames)
  quiet = kept & ((since < 0) | (since >= quiet_steps)) & (t_index >= quiet_steps)
  pos = kept & (since >= 0) & (since <= positive)

  def select(mask, split):
    m = mask & split[:, None]
    return x_all[m], m

  result = {}
  x_q, _ = select(quiet, train_ep)
  x_p, _ = select(pos, train_ep)
  x_train = np.concatenate([x_p, x_q])
  y_train = np.concatenate([np.ones(len(x_p)), np.zeros(len(x_q))])
  weight = np.where(y_train > 0, len(x_q) / max(len(x_p), 1), 1.0)
  test = ~train_ep
  x_q_test = x_all[quiet & test[:, None]]
  for name, hidden in (("linear", 0), ("mlp", HIDDEN)):
    detect = fit(x_train, y_train, hidden=hidden, loss="logistic", weight=weight)
    quiet_scores = detect(x_q_test)[:, 0]
    threshold = float(np.quantile(quiet_scores, 1.0 - false_alarm))
    by_step, pos_scores = [], []
    for k in range(STEPS_AFTER):
      s = detect(x_all[kept & test[:, None] & (since == k)])[:, 0]
      if k <= positive:
        pos_scores.append(s)
      by_step.append(round(float(np.mean(s > threshold)), 3) if len(s) else None)
    # direction from the positive steps
    x_dir = x_all[pos & train_ep[:, None]]
    ang = np.radians(heading[pos & train_ep[:, None]])
    direction = fit(x_dir, np.stack([np.cos(ang), np.sin(ang)], -1), hidden=hidden, loss="squared")
    err_by_step, within_by_step = [], []
    for k in range(positive + 1):
      m = kept & test[:, None] & (since == k)
      guess = direction(x_all[m])
      err = np.abs((np.degrees(np.arctan2(guess[:, 1], guess[:, 0])) - heading[m] + 180.0) % 360.0 - 180.0)
      err_by_step.append(round(float(np.median(err)), 1) if len(err) else None)
      within_by_step.append(round(float(np.mean(err < 45.0)), 3) if len(err) else None)
    result[name] = {
      "found_by_step": by_step,
      "auc": round(auc(np.concatenate(pos_scores), quiet_scores), 4),
      "direction_median_error_deg_by_step": err_by_step,
      "direction_within_45deg_by_step": within_by_step,
    }
  result["kicks_scored"] = int(np.sum(kept & test[:, None] & (since == 0)))
  result["quiet_steps_scored"] = int(len(x_q_test))
  return result


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("path", type=Path, help="run directory, checkpoint directory or .onnx file")
  parser.add_argument("--commands", type=float, nargs="+", default=[0.0, 0.1], help="forward commands, m/s")
  parser.add_argument("--episodes", type=int, default=32, help="per command; half train, half score")
  parser.add_argument("--duration", type=float, default=20.0, help="s per episode")
  parser.add_argument("--kick", type=float, default=0.5, help="kick strength, m/s")
  parser.add_argument("--first", type=float, default=1.5, help="s before the first kick (plus a draw)")
  parser.add_argument("--interval", type=float, nargs=2, default=[2.0, 3.0], help="s between kicks, drawn")
  parser.add_argument("--runtime", action="store_true", help="observe as the robot runtime does")
  parser.add_argument("--frames", type=int, nargs="+", default=[1], help="observations side by side (1: the file)")
  parser.add_argument("--positive", type=int, default=3, help="steps after the kick a detector must flag")
  parser.add_argument("--false_alarm", type=float, default=0.01, help="share of quiet steps flagged")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  if args.episodes < 2:
    raise SystemExit("error: --episodes must be at least 2 (half train, half score)")
  if not args.interval[0] > 0 or args.interval[1] < args.interval[0]:
    raise SystemExit("error: --interval needs 0 < MIN <= MAX")
  if not 0 < args.false_alarm < 1:
    raise SystemExit("error: --false_alarm must be between 0 and 1")
  if any(f < 1 for f in args.frames):
    raise SystemExit("error: --frames must be 1 or more")
  if not args.path.exists():
    raise SystemExit(f"error: no such policy, checkpoint or run: {args.path}")
  from playground.open_duck_mini_v2.evaluation import policy_io

  try:
    played = play_kicked(
      args.path,
      args.commands,
      episodes=args.episodes,
      duration=args.duration,
      kick=args.kick,
      first=args.first,
      interval=tuple(args.interval),
      runtime=args.runtime,
      seed=args.seed,
    )
  except (policy_io.ScoreError, ValueError) as e:
    raise SystemExit(f"error: {e}") from None
  dt = float(policy_io.read_metadata(policy_io.resolve_policy(args.path)[0])["control_period_s"])
  by_command = {}
  for vx, data in played.items():
    by_command[vx] = {
      "falls": int(data["fell"].sum()),
      "by_frames": {
        str(f): evaluate(data, frames=f, positive=args.positive, false_alarm=args.false_alarm, dt=dt)
        for f in args.frames
      },
    }
  emit(
    {
      "benchmark": "kick_detect",
      "policy": str(args.path),
      "source": "runtime" if args.runtime else "env",
      "conditions": "randomization, sensor noise and delays on; kicks uniformly around the heading",
      "kick_mps": args.kick,
      "episodes": args.episodes,
      "duration_s": args.duration,
      "interval_s": args.interval,
      "positive_steps": args.positive,
      "false_alarm": args.false_alarm,
      "by_command_vx": by_command,
      "machine": machine(),
    }
  )


if __name__ == "__main__":
  main()
