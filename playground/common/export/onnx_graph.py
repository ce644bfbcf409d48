"""ONNX export of a trained PPO policy, built directly with `onnx` (no TensorFlow).

The graph computes exactly what the JAX deterministic policy computes:

    x = (obs - mean) / std                      observation normalizer
    h = LN(act(x @ W0 + b0)) ...                Brax MLP (LayerNorm when enabled)
    out = h @ Wn + bn                           (loc, raw_scale)
    continuous_actions = tanh(out[:, :A])       mode of the tanh-normal policy
                         (+ feed-forward)      a reference gait, when trained as a residual

The optional feed-forward (`reference_motion.Feedforward`) reads the command and
the gait phase from `obs` and adds the reference_motion's action offsets, weighted
by hat functions over the command grid and the phase knots (the same
trilinear / linear interpolation as the env), so the runtime contract does
not change.

Contract with the robot runtime: one input `obs` (float32, shape
(batch, obs_size), batch usually 1), one output `continuous_actions`
(float32, (batch, action_size)), opset 17 (onnxruntime >= 1.16 loads it).
`session.run(None, {"obs": [obs]})[0][0]` gives the actions. The file's
metadata properties describe the observation layout, action order, scales,
home pose, control period, env/task, training step and project version.

`verify_parity` runs the exported file with onnxruntime against the JAX
policy on observations sampled around the normalizer statistics (and on
given probes, such as the robot runtime's first frame) and fails loudly
above a tolerance; it also fails on any non-finite action for a finite
input far outside training (`fuzz_observations`). `export.export` always
calls it.

With `input_bounds`, the file first clamps its input (the Open Duck Mini V2
clamps the 7 commands to the trained ranges), so out-of-range commands are
never extrapolated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper
from onnx import numpy_helper

OPSET = 17
IR_VERSION = 8  # readable by onnxruntime >= 1.10
INPUT_NAME = "obs"
OUTPUT_NAME = "continuous_actions"
PARITY_ATOL = 1e-5
_LAYER = re.compile(r"^hidden_(\d+)$")


class ExportError(RuntimeError):
  """The parameters cannot be exported, or the export does not match JAX."""


def _mlp_layers(policy_params: Mapping[str, Any]) -> list[dict[str, Any]]:
  """The Dense (and LayerNorm) parameters of a Brax MLP, in order.

  Raises:
    ExportError: for any parameter layout other than Brax's `MLP`.
  """
  if not isinstance(policy_params, Mapping) or set(policy_params) != {"params"}:
    raise ExportError(
      "unsupported policy parameter layout: expected Brax's MLP params {'params': {'hidden_0': ...}}, "
      f"got keys {sorted(policy_params) if isinstance(policy_params, Mapping) else type(policy_params).__name__}"
    )
  layers = policy_params["params"]
  names = sorted(layers, key=lambda n: int(_LAYER.match(n).group(1)) if _LAYER.match(n) else -1)
  dense = [n for n in names if _LAYER.match(n)]
  norms = {n for n in names if n.startswith("LayerNorm")}
  unknown = set(names) - set(dense) - norms
  if unknown or not dense or [int(_LAYER.match(n).group(1)) for n in dense] != list(range(len(dense))):
    raise ExportError(f"unsupported policy network (not a Brax MLP): parameter groups {names}")
  out = []
  for i, name in enumerate(dense):
    p = layers[name]
    if set(p) != {"kernel", "bias"}:
      raise ExportError(f"unsupported layer {name} with parameters {sorted(p)}")
    layer = {"kernel": np.asarray(p["kernel"], np.float32), "bias": np.asarray(p["bias"], np.float32)}
    norm = f"LayerNorm_{i}"
    if norm in layers:
      layer["norm"] = {k: np.asarray(v, np.float32) for k, v in layers[norm].items()}
    out.append(layer)
  for a, b in zip(out, out[1:]):
    if a["kernel"].shape[1] != b["kernel"].shape[0]:
      raise ExportError("unsupported policy network: layer sizes do not chain")
  return out


def _activation(nodes: list, name: str, x: str, out: str) -> None:
  if name == "swish":
    nodes.append(helper.make_node("Sigmoid", [x], [f"{out}_sig"]))
    nodes.append(helper.make_node("Mul", [x, f"{out}_sig"], [out]))
  elif name == "relu":
    nodes.append(helper.make_node("Relu", [x], [out]))
  elif name == "elu":
    nodes.append(helper.make_node("Elu", [x], [out], alpha=1.0))
  elif name == "tanh":
    nodes.append(helper.make_node("Tanh", [x], [out]))
  else:
    raise ExportError(f"unsupported activation '{name}' (swish, relu, elu, tanh)")


def _feedforward(nodes: list, inits: list, ff: Any, action_size: int, obs: str = INPUT_NAME) -> str:
  """Adds the nodes of `ff(obs)` ([batch, action_size]); returns the output name.

  Hat weights relu(1 - |u - i|) over each command axis (u: the clamped grid
  coordinate) and over the phase knots 0..n (knot n repeats knot 0) are
  multiplied into one weight per table entry, then a MatMul with the table.
  """
  offsets = np.asarray(ff.offsets, np.float32)
  if offsets.ndim != 5 or offsets.shape[-1] != action_size:
    raise ExportError(f"feed-forward offsets have shape {offsets.shape}, expected [vx, vy, yaw, phase, {action_size}]")
  sizes = offsets.shape[:3]
  n_phase = offsets.shape[3]
  table = np.concatenate([offsets, offsets[:, :, :, :1]], axis=3).reshape(-1, action_size)
  from playground.common.tasks import reference_motion  # imports JAX (via the observation layout): only when needed

  lows, steps = reference_motion.grid_origin_and_steps(ff.axes)
  const = lambda name, value, dtype=np.float32: inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))  # noqa: E731
  node = lambda op, inputs, output, **kw: nodes.append(helper.make_node(op, inputs, [output], **kw))  # noqa: E731
  ci, pi = int(ff.command_index), int(ff.phase_index)
  for name, start in (("ff_cmd", ci), ("ff_cos", pi), ("ff_sin", pi + 1)):
    const(f"{name}_start", [start], np.int64)
    const(f"{name}_end", [start + (3 if name == "ff_cmd" else 1)], np.int64)
    const(f"{name}_axis", [1], np.int64)
    node("Slice", [obs, f"{name}_start", f"{name}_end", f"{name}_axis"], name)
  # Gate: the command norm above the threshold (none: always on).
  gated = ff.gate_threshold is not None
  if gated:
    node("ReduceSumSquare", ["ff_cmd"], "ff_cmd_sq", axes=[1], keepdims=1)
    const("ff_gate_sq", [float(ff.gate_threshold) ** 2])
    node("Greater", ["ff_cmd_sq", "ff_gate_sq"], "ff_moving")
    node("Cast", ["ff_moving"], "ff_gate", to=TensorProto.FLOAT)
  # Grid coordinates of the command, clamped to the grid.
  const("ff_lows", lows)
  const("ff_steps", steps)
  const("ff_zero", [0.0])
  const("ff_upper", np.array(sizes, np.float32) - 1)
  const("ff_one", [1.0])
  node("Sub", ["ff_cmd", "ff_lows"], "ff_u0")
  node("Div", ["ff_u0", "ff_steps"], "ff_u1")
  node("Max", ["ff_u1", "ff_zero"], "ff_u2")
  node("Min", ["ff_u2", "ff_upper"], "ff_u")

  def hats(coord: str, knots: int, name: str) -> str:
    const(f"{name}_knots", np.arange(knots, dtype=np.float32))
    node("Sub", [coord, f"{name}_knots"], f"{name}_d")
    node("Abs", [f"{name}_d"], f"{name}_ad")
    node("Sub", ["ff_one", f"{name}_ad"], f"{name}_h")
    node("Relu", [f"{name}_h"], name)
    return name

  weights = []
  for axis, size in enumerate(sizes):
    const(f"ff_ax{axis}_start", [axis], np.int64)
    const(f"ff_ax{axis}_end", [axis + 1], np.int64)
    node("Slice", ["ff_u", f"ff_ax{axis}_start", f"ff_ax{axis}_end", "ff_cmd_axis"], f"ff_u_{axis}")
    weights.append(hats(f"ff_u_{axis}", size, f"ff_w{axis}"))
  # Phase in [0, 1) from (cos, sin): atan2 by Atan and the quadrant. A (0, 0)
  # phase (the Open Duck runtime's first frame, observed before its phase is
  # first advanced) is phase 0, as atan2(0, 0) = 0 in JAX: the denominator
  # becomes 1, so 0 / 0 never makes a NaN.
  node("Equal", ["ff_cos", "ff_zero"], "ff_cos_zero")
  node("Equal", ["ff_sin", "ff_zero"], "ff_sin_zero")
  node("And", ["ff_cos_zero", "ff_sin_zero"], "ff_no_phase")
  node("Where", ["ff_no_phase", "ff_one", "ff_cos"], "ff_cos_safe")
  node("Div", ["ff_sin", "ff_cos_safe"], "ff_tan")
  node("Atan", ["ff_tan"], "ff_atan")
  node("Less", ["ff_cos", "ff_zero"], "ff_left")
  node("Cast", ["ff_left"], "ff_leftf", to=TensorProto.FLOAT)
  node("GreaterOrEqual", ["ff_sin", "ff_zero"], "ff_upper_half")
  const("ff_pi", [np.pi])
  const("ff_minus_pi", [-np.pi])
  node("Where", ["ff_upper_half", "ff_pi", "ff_minus_pi"], "ff_turn")
  node("Mul", ["ff_leftf", "ff_turn"], "ff_correction")
  node("Add", ["ff_atan", "ff_correction"], "ff_angle")
  const("ff_inv_two_pi", [1.0 / (2.0 * np.pi)])
  node("Mul", ["ff_angle", "ff_inv_two_pi"], "ff_turns")
  node("Floor", ["ff_turns"], "ff_turns_floor")
  node("Sub", ["ff_turns", "ff_turns_floor"], "ff_phase01")
  const("ff_n_phase", [float(n_phase)])
  node("Mul", ["ff_phase01", "ff_n_phase"], "ff_p")
  weights.append(hats("ff_p", n_phase + 1, "ff_wp"))
  # Outer product of the four weight vectors, flattened in table order.
  for i, w in enumerate(weights):
    # w0: [B, nx, 1, 1, 1], w1: [B, 1, ny, 1, 1] ...: unsqueeze the other axes.
    other = [a for a in range(1, 5) if a != i + 1]
    const(f"ff_unsq{i}", other, np.int64)
    node("Unsqueeze", [w, f"ff_unsq{i}"], f"{w}_x")
  node("Mul", ["ff_w0_x", "ff_w1_x"], "ff_o01")
  node("Mul", ["ff_o01", "ff_w2_x"], "ff_o012")
  node("Mul", ["ff_o012", "ff_wp_x"], "ff_outer")
  const("ff_flat_shape", [0, -1], np.int64)
  node("Reshape", ["ff_outer", "ff_flat_shape"], "ff_weights")
  const("ff_table", table)
  if not gated:
    node("MatMul", ["ff_weights", "ff_table"], "ff_out")
    return "ff_out"
  node("MatMul", ["ff_weights", "ff_table"], "ff_raw")
  standing = getattr(ff, "standing", None)
  if standing is None:
    node("Mul", ["ff_raw", "ff_gate"], "ff_out")
    return "ff_out"
  # Standing (the gate off): the standing pose instead of the gait.
  standing = np.asarray(standing, np.float32).reshape(1, -1)
  if standing.shape[1] != action_size:
    raise ExportError(f"feed-forward standing pose has {standing.shape[1]} entries, expected {action_size}")
  node("Mul", ["ff_raw", "ff_gate"], "ff_moving_out")
  node("Sub", ["ff_one", "ff_gate"], "ff_standing_gate")
  const("ff_standing", standing)
  node("Mul", ["ff_standing_gate", "ff_standing"], "ff_standing_out")
  node("Add", ["ff_moving_out", "ff_standing_out"], "ff_out")
  return "ff_out"


def build_model(
  mean: np.ndarray,
  std: np.ndarray,
  policy_params: Mapping[str, Any],
  action_size: int,
  activation: str,
  metadata: Mapping[str, Any] | None = None,
  feedforward: Any = None,
  input_bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> onnx.ModelProto:
  """The ONNX model of a deterministic Brax tanh-normal MLP policy.

  Args:
    mean, std: observation normalizer statistics (ones/zeros to disable).
    policy_params: Brax policy params {'params': {'hidden_i': {kernel, bias}}}.
    action_size: number of actions (the last layer has 2x as many outputs).
    activation: hidden activation name.
    metadata: key -> value written as metadata properties (JSON for non-str).
    feedforward: a `reference_motion.Feedforward` added to the actions (which
      are first multiplied by its `residual_gain`), or None.
    input_bounds: (low, high) per input: the file clamps its input to them
      first (e.g. commands to the trained range), for the network and the
      feed-forward alike; None clamps nothing.
  """
  layers = _mlp_layers(policy_params)
  obs_size = layers[0]["kernel"].shape[0]
  if layers[-1]["kernel"].shape[1] != 2 * action_size:
    raise ExportError(
      f"unsupported policy head: {layers[-1]['kernel'].shape[1]} outputs, expected 2 x {action_size} "
      "(loc and scale of a tanh-normal distribution)"
    )
  mean = np.asarray(mean, np.float32).reshape(-1)
  std = np.asarray(std, np.float32).reshape(-1)
  if mean.shape != (obs_size,) or std.shape != (obs_size,):
    raise ExportError(f"normalizer size {mean.shape} does not match the network input {obs_size}")
  inits = [numpy_helper.from_array(mean, "obs_mean"), numpy_helper.from_array(std, "obs_std")]
  nodes = []
  obs = INPUT_NAME
  if input_bounds is not None:
    low, high = (np.asarray(b, np.float32).reshape(-1) for b in input_bounds)
    if low.shape != (obs_size,) or high.shape != (obs_size,) or np.any(low > high):
      raise ExportError(f"input bounds must be two vectors of {obs_size} values with low <= high")
    inits += [numpy_helper.from_array(low, "obs_low"), numpy_helper.from_array(high, "obs_high")]
    nodes += [
      helper.make_node("Max", [INPUT_NAME, "obs_low"], ["obs_above_low"]),
      helper.make_node("Min", ["obs_above_low", "obs_high"], ["obs_clamped"]),
    ]
    obs = "obs_clamped"
  nodes += [
    helper.make_node("Sub", [obs, "obs_mean"], ["obs_centered"]),
    helper.make_node("Div", ["obs_centered", "obs_std"], ["x0"]),
  ]
  x = "x0"
  for i, layer in enumerate(layers):
    inits += [numpy_helper.from_array(layer["kernel"], f"W{i}"), numpy_helper.from_array(layer["bias"], f"b{i}")]
    nodes.append(helper.make_node("MatMul", [x, f"W{i}"], [f"mm{i}"]))
    nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"z{i}"]))
    x = f"z{i}"
    if i < len(layers) - 1:
      # Brax MLP: Dense -> activation -> LayerNorm (when enabled) for hidden layers.
      _activation(nodes, activation, x, f"h{i}")
      x = f"h{i}"
      if "norm" in layer:
        inits += [
          numpy_helper.from_array(layer["norm"]["scale"], f"ln_scale{i}"),
          numpy_helper.from_array(layer["norm"]["bias"], f"ln_bias{i}"),
        ]
        nodes.append(
          helper.make_node("LayerNormalization", [x, f"ln_scale{i}", f"ln_bias{i}"], [f"ln{i}"], axis=-1, epsilon=1e-6)
        )
        x = f"ln{i}"
  inits += [
    numpy_helper.from_array(np.array([0], np.int64), "slice_start"),
    numpy_helper.from_array(np.array([action_size], np.int64), "slice_end"),
    numpy_helper.from_array(np.array([1], np.int64), "slice_axis"),
  ]
  nodes.append(helper.make_node("Slice", [x, "slice_start", "slice_end", "slice_axis"], ["loc"]))
  if feedforward is None:
    nodes.append(helper.make_node("Tanh", ["loc"], [OUTPUT_NAME]))
  else:
    nodes.append(helper.make_node("Tanh", ["loc"], ["residual"]))
    residual = "residual"
    gain = float(getattr(feedforward, "residual_gain", 1.0))
    if gain != 1.0:
      inits.append(numpy_helper.from_array(np.array([gain], np.float32), "residual_gain"))
      nodes.append(helper.make_node("Mul", ["residual", "residual_gain"], ["residual_scaled"]))
      residual = "residual_scaled"
    ff = _feedforward(nodes, inits, feedforward, action_size, obs)
    nodes.append(helper.make_node("Add", [residual, ff], [OUTPUT_NAME]))
  graph = helper.make_graph(
    nodes,
    "duck_playground_policy",
    [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", obs_size])],
    [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", action_size])],
    initializer=inits,
  )
  model = helper.make_model(
    graph,
    producer_name="duck-playground",
    opset_imports=[helper.make_opsetid("", OPSET)],
  )
  model.ir_version = IR_VERSION
  for key, value in (metadata or {}).items():
    entry = model.metadata_props.add()
    entry.key = key
    entry.value = value if isinstance(value, str) else json.dumps(value)
  onnx.checker.check_model(model)
  return model


def sample_observations(mean: np.ndarray, std: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
  """`n` observations drawn around the normalizer statistics (mean + std * N(0, 1))."""
  rng = np.random.default_rng(seed)
  return (mean + std * rng.standard_normal((n, mean.shape[-1]))).astype(np.float32)


def batched_policy(model: onnx.ModelProto | bytes | str | Path) -> Callable[[np.ndarray], np.ndarray]:
  """The exported policy as a function obs [N, size] -> actions [N, action size], run with
  onnxruntime on one CPU thread as on a robot; the session is built once."""
  import onnxruntime as ort

  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  options.inter_op_num_threads = 1
  source = (
    model.SerializeToString()
    if isinstance(model, onnx.ModelProto)
    else (model if isinstance(model, bytes) else str(model))
  )
  session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
  return lambda obs: session.run(None, {INPUT_NAME: np.asarray(obs, np.float32)})[0]


def run_onnx(model: onnx.ModelProto | bytes | str | Path, obs: np.ndarray) -> np.ndarray:
  """Runs the exported policy once with onnxruntime (single thread, CPU)."""
  return batched_policy(model)(obs)


def fuzz_observations(
  mean: np.ndarray, std: np.ndarray, probes: np.ndarray | None = None, n: int = 64, seed: int = 1
) -> dict[str, np.ndarray]:
  """Finite observations far from training: name -> [k, obs_size] (float32).

  zeros; `probes` (e.g. the robot runtime's first frames); draws at 10 and
  100 standard deviations from the normalizer's mean; every input at +-1e3;
  and inputs drawn uniformly in [-1e3, 1e3].
  """
  mean = np.asarray(mean, np.float32).reshape(-1)
  std = np.asarray(std, np.float32).reshape(-1)
  rng = np.random.default_rng(seed)
  size = mean.shape[0]
  sets = {"zeros": np.zeros((1, size), np.float32)}
  if probes is not None and len(probes):
    sets["probes"] = np.asarray(probes, np.float32).reshape(-1, size)
  for k in (10, 100):
    sets[f"{k}_std"] = mean + k * std * rng.choice([-1.0, 1.0], (n, size)) * rng.uniform(0.5, 1.0, (n, size))
  sets["plus_minus_1e3"] = np.stack([np.full(size, 1e3), np.full(size, -1e3)])
  sets["uniform_1e3"] = rng.uniform(-1e3, 1e3, (n, size))
  return {name: np.asarray(v, np.float32) for name, v in sets.items()}


def verify_parity(
  model: onnx.ModelProto,
  jax_policy: Callable[[np.ndarray], np.ndarray],
  mean: np.ndarray,
  std: np.ndarray,
  n: int = 1000,
  atol: float = PARITY_ATOL,
  probes: np.ndarray | None = None,
) -> float:
  """Max |onnx - jax| over `n` sampled observations and the `probes`; raises ExportError above `atol`.

  Also runs the file on `fuzz_observations` (zeros, the probes, far outside
  the normalizer's statistics, +-1e3): any non-finite action fails the export.
  """
  obs = sample_observations(np.asarray(mean, np.float32), np.asarray(std, np.float32), n)
  fuzz = fuzz_observations(mean, std, probes)
  for name, batch in fuzz.items():
    actions = run_onnx(model, batch)
    if not np.all(np.isfinite(actions)):
      rows = int(np.sum(~np.all(np.isfinite(actions), axis=1)))
      raise ExportError(
        f"the exported policy returns non-finite actions for {rows} of {len(batch)} finite '{name}' observations"
      )
  checked = np.concatenate([obs, fuzz["zeros"], fuzz.get("probes", fuzz["zeros"])])
  expected = np.asarray(jax_policy(checked), np.float32)
  got = run_onnx(model, checked)
  diff = float(np.max(np.abs(got - expected)))
  if not np.isfinite(diff) or diff > atol:
    raise ExportError(f"ONNX export does not match the JAX policy: max |diff| = {diff:.3g} > {atol:g}")
  return diff


def read_metadata(path: str | Path) -> dict[str, Any]:
  """Metadata properties of an exported file, JSON values decoded."""
  model = onnx.load(str(path))
  out = {}
  for entry in model.metadata_props:
    try:
      out[entry.key] = json.loads(entry.value)
    except json.JSONDecodeError:
      out[entry.key] = entry.value
  return out
