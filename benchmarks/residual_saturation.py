"""Does the policy run out of authority? How close its tanh residual comes to +-1 on the scorecard.

A joystick policy trained around the reference gait outputs
`feedforward + gain x tanh(network)`: the residual is bounded by the gain
(`reference.residual_gain`, 1 by default; times `action_scale` in radians
at the servo). If push recovery needed more, the
residual would sit at +-1 while the duck falls. Plays the scorecard's
entries (default: the push entries) with `scorecard.score`'s conditions
(randomization, noise and delays on), and reads the residual the file
computed at every step (its ONNX node `residual`, added as a second output
of the same graph). Prints per entry and joint the largest and mean
|residual| over the steps before a fall, and the share of steps above 0.95.

  uv run python -m benchmarks.residual_saturation tests/fixtures/walker/policy.onnx --seeds 4
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import emit
from benchmarks.common import machine


def residual_session(path: Path):
  """An onnxruntime session of the policy file that also outputs its `residual` node."""
  import onnx
  import onnxruntime as ort

  model = onnx.load(str(path))
  if not any("residual" in node.output for node in model.graph.node):
    raise SystemExit(f"error: {path} has no residual node (it was not trained around a reference gait)")
  model.graph.output.append(onnx.helper.make_tensor_value_info("residual", onnx.TensorProto.FLOAT, None))
  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("path", help="run directory, checkpoint directory or .onnx file")
  parser.add_argument("--seeds", type=int, default=4, help="episodes per entry")
  parser.add_argument("--entries", nargs="*", default=None, help="suite entries (default: the push entries)")
  args = parser.parse_args()
  from playground.common.evaluation.scorecard import Pushes
  from playground.open_duck_mini_v2.evaluation import player
  from playground.open_duck_mini_v2.evaluation import policy_io
  from playground.open_duck_mini_v2.evaluation import scorecard
  from playground.open_duck_mini_v2.model import constants

  policy_path, env_config, _ = policy_io.resolve_policy(Path(args.path))
  metadata = policy_io.read_metadata(policy_path)
  config = policy_io.play_config(metadata, env_config, noise=True, delays=True, randomization=True)
  suite = scorecard.suite(Pushes.of_config(config.push_config))
  names = args.entries or [c.name for c in suite if c.pushes is not None]
  unknown = set(names) - {c.name for c in suite}
  if unknown:
    raise SystemExit(f"error: unknown entries {sorted(unknown)}; valid: {', '.join(c.name for c in suite)}")
  commands = [c for c in suite if c.name in names]
  session = residual_session(policy_path)
  last = {}

  def policy(obs):
    action, residual = session.run(None, {"obs": np.asarray(obs, np.float32)})  # the file's output, then `residual`
    last["residual"] = residual
    return action

  rows = []

  def on_step(view) -> None:
    rows.append((np.abs(last["residual"]), view.running.copy()))

  episodes = [(c, s) for c in commands for s in range(args.seeds)]
  played = player.play(policy, metadata["env"], metadata.get("task") or "flat_terrain", config, metadata, episodes,
                       on_step=on_step)  # fmt: skip
  residual = np.stack([r for r, _ in rows])  # [steps, episodes, 14]
  running = np.stack([m for _, m in rows])[..., None]  # [steps, episodes, 1]
  result = {"policy": str(policy_path), "seeds": args.seeds, "machine": machine(), "entries": {}}
  for i, command in enumerate(commands):
    cols = slice(i * args.seeds, (i + 1) * args.seeds)
    r, m = residual[:, cols], np.broadcast_to(running[:, cols], residual[:, cols].shape)
    seen = np.where(m, r, np.nan)
    result["entries"][command.name] = {
      "falls": int(sum(e["fell"] for e in played[cols])),
      "joints": {
        name: {
          "max": round(float(np.nanmax(seen[..., j])), 3),
          "mean": round(float(np.nanmean(seen[..., j])), 3),
          "above_0.95": round(float(((r[..., j] > 0.95) & m[..., j]).sum() / max(1, m[..., j].sum())), 4),
        }
        for j, name in enumerate(constants.ACTUATOR_NAMES)
      },
    }
  emit(result)


if __name__ == "__main__":
  main()
