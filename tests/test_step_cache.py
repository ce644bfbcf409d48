"""The step cache: lowered steps kept with `jax.export`, reused only when nothing changed.

The whole-runner path (a warm start loads the training step, with results
bit-identical to plain compilation) is tested in `test_run_management.py`.
"""

import logging
import subprocess
import sys
import time

import flax
import jax
import jax.numpy as jp
import numpy as np
import pytest
from helpers import REPO_ROOT
from helpers import assert_trees_equal
from helpers import subprocess_env

from playground.common import configs
from playground.common.train import step_cache
from playground.common.train.step_cache import StepCache


@flax.struct.dataclass
class State:
  x: jax.Array
  count: jax.Array
  label: str = flax.struct.field(pytree_node=False, default="static")


def step(state: State, scale: jax.Array):
  x = jp.tanh(state.x * scale) + jp.sin(state.x)
  return state.replace(x=x, count=state.count + 1), {"mean": jp.mean(x), "max": jp.max(x)}


def args():
  return State(x=jp.linspace(-2.0, 2.0, 64).reshape(8, 8), count=jp.zeros((), jp.int32)), jp.float32(1.5)


def test_second_compile_loads_the_entry_and_matches_plain_jit(tmp_path):
  fn = jax.jit(step)
  expected = fn(*args())
  first = StepCache(tmp_path, {"config": 1})
  out1 = first.compile("step", fn, *args())(*args())
  assert first.last_outcome == "miss"
  assert len(list(tmp_path.glob("step-*.jaxexport"))) == 1
  second = StepCache(tmp_path, {"config": 1})
  out2 = second.compile("step", fn, *args())(*args())
  assert second.last_outcome == "hit"
  assert_trees_equal(out1, expected)
  assert_trees_equal(out2, expected)
  assert out2[0].label == "static"  # static pytree data survives the round trip


def test_donated_sharded_arguments(tmp_path):
  mesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  fn = jax.jit(step, donate_argnums=(0,))
  expected = jax.jit(step)(*args())
  for outcome in ("miss", "hit"):
    state, scale = jax.device_put(args(), sharding)
    cache = StepCache(tmp_path)
    out = cache.compile("donated", fn, state, scale, donate=True)(state, scale)
    assert cache.last_outcome == outcome
    assert_trees_equal(out, expected)


TWO_DEVICE_STEP = """
import sys
import jax
import jax.numpy as jp
import numpy as np
from helpers import assert_trees_equal
from test_step_cache import State, step
from playground.common.train.step_cache import StepCache

assert jax.device_count() == 2, jax.devices()
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("i"))
whole = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

def start():
  state = State(x=jp.linspace(-2.0, 2.0, 64).reshape(8, 8), count=jp.zeros((), jp.int32))
  return jax.device_put(state, State(x=rows, count=whole)), jax.device_put(jp.float32(1.5), whole)

def three_steps(fn):
  state, _ = start()
  for _ in range(3):  # the outputs fit the next call's shardings
    state, metrics = fn(state, start()[1])  # (every argument is donated)
  assert len(state.x.addressable_shards) == 2
  return jax.device_get((state, metrics))

fn = jax.jit(step, donate_argnums=(0,))
plain = three_steps(jax.jit(step))
for outcome in ("miss", "hit"):
  cache = StepCache(sys.argv[1])
  compiled = cache.compile("sharded", fn, *start(), donate=True)
  assert cache.last_outcome == outcome, cache.last_outcome
  assert_trees_equal(three_steps(compiled), plain)
# A donated argument passed again is an error, not a crash (jax 0.9.2 segfaults on 2 devices).
state, scale = start()
compiled(state, scale)
try:
  compiled(state, scale)
except ValueError as e:
  assert "donated" in str(e), e
  print("OK")
"""


def test_donated_arguments_sharded_over_two_devices(tmp_path):
  # A training step on 2 devices: env rows split over the devices, the rest
  # replicated; the stored and the loaded step run like plain compilation.
  result = subprocess.run(
    [sys.executable, "-c", TWO_DEVICE_STEP, str(tmp_path)],
    capture_output=True,
    text=True,
    timeout=300,
    env=subprocess_env(XLA_FLAGS="--xla_force_host_platform_device_count=2", PYTHONPATH=str(REPO_ROOT / "tests")),
    cwd=REPO_ROOT,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "OK" in result.stdout


def test_key_covers_key_material_and_argument_shapes(tmp_path):
  fn = jax.jit(step)
  StepCache(tmp_path, {"config": 1}).compile("step", fn, *args())
  other = StepCache(tmp_path, {"config": 2})
  other.compile("step", fn, *args())
  assert other.last_outcome == "miss"
  state, scale = args()
  wider = StepCache(tmp_path, {"config": 1})
  compiled = wider.compile("step", fn, state.replace(x=jp.zeros((4, 4))), scale)
  assert wider.last_outcome == "miss"
  assert compiled(state.replace(x=jp.zeros((4, 4))), scale)[0].x.shape == (4, 4)
  assert len(list(tmp_path.glob("step-*.jaxexport"))) == 3


def test_least_recently_used_entries_are_pruned(tmp_path):
  fn = jax.jit(step)
  for config in (1, 2):
    StepCache(tmp_path, {"config": config}, keep=2).compile("step", fn, *args())
  time.sleep(0.05)
  StepCache(tmp_path, {"config": 1}, keep=2).compile("step", fn, *args())  # a hit refreshes it
  time.sleep(0.05)
  StepCache(tmp_path, {"config": 3}, keep=2).compile("step", fn, *args())
  assert len(list(tmp_path.glob("step-*.jaxexport"))) == 2
  outcomes = {}
  for config in (1, 2, 3):
    cache = StepCache(tmp_path, {"config": config}, keep=10)
    cache.compile("step", fn, *args())
    outcomes[config] = cache.last_outcome
  assert outcomes == {1: "hit", 2: "miss", 3: "hit"}


def test_a_damaged_entry_is_rebuilt(tmp_path, caplog):
  fn = jax.jit(step)
  StepCache(tmp_path).compile("step", fn, *args())
  (entry,) = tmp_path.glob("step-*.jaxexport")
  entry.write_bytes(entry.read_bytes()[:100])
  cache = StepCache(tmp_path)
  with caplog.at_level(logging.WARNING, logger="playground"):
    out = cache.compile("step", fn, *args())(*args())
  assert "unreadable" in caplog.text
  assert cache.last_outcome == "miss"
  assert_trees_equal(out, jax.jit(step)(*args()))
  again = StepCache(tmp_path)
  again.compile("step", fn, *args())
  assert again.last_outcome == "hit"


def with_host_callback(state: State, scale: jax.Array):
  doubled = jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(state.x.shape, state.x.dtype), state.x)
  return step(state.replace(x=doubled), scale)


def test_steps_that_cannot_be_exported_compile_without_the_cache(tmp_path):
  fn = jax.jit(with_host_callback)
  expected = fn(*args())
  for _ in range(2):
    cache = StepCache(tmp_path)
    out = cache.compile("callback", fn, *args())(*args())
    assert cache.last_outcome == "unsupported"
    assert_trees_equal(out, expected)
  (marker,) = tmp_path.glob("callback-*.jaxexport")
  assert marker.read_bytes() == b"unsupported\n"


def test_disabled_cache_is_plain_compilation():
  cache = StepCache(None)
  out = cache.compile("step", jax.jit(step), *args())(*args())
  assert cache.last_outcome == "disabled"
  assert_trees_equal(out, jax.jit(step)(*args()))


def test_files_named_in_the_config_are_part_of_the_key(tmp_path):
  data = tmp_path / "reference.npz"
  data.write_bytes(b"one")
  config = {"reference": {"path": str(data), "weights": [1, 2]}, "name": "not a file"}
  first = configs.named_file_digests(config)
  assert list(first) == [str(data)]
  data.write_bytes(b"two")
  assert configs.named_file_digests(config) != first


def test_project_code_and_data_are_in_the_environment_digest():
  files = step_cache._project_files()
  names = {f.name for f in files}
  # The project's modules, its MJCF and its reference data; no installed library.
  assert {"step_cache.py", "ppo.py", "open_duck_mini_v2.xml", "reference_gait.npz"} <= names
  assert not any("site-packages" in str(f) for f in files)


@pytest.mark.parametrize("material", [{"a": 1}, {"a": 1.0, "b": (1, 2)}])
def test_key_material_is_stable_json(material, tmp_path):
  spec = [jax.ShapeDtypeStruct((2,), jp.float32)]
  tree = jax.tree_util.tree_structure((1,))
  key1 = StepCache(tmp_path, material)._key("f", tree, spec)
  key2 = StepCache(tmp_path, dict(material))._key("f", tree, spec)
  assert key1 == key2


LINALG_STEP = """
import sys
import jax
import jax.numpy as jp
from playground.common.train.step_cache import StepCache

def f(a):
  return jp.linalg.cholesky(a @ a.T + 3 * jp.eye(3)).sum()

x = jp.arange(9.0).reshape(3, 3) / 9
cache = StepCache(sys.argv[1])
out = cache.compile("cholesky", jax.jit(f), x)(x)
print(cache.last_outcome, repr(float(out)))
"""


def test_a_fresh_process_runs_a_loaded_step_that_calls_lapack(tmp_path):
  # jaxlib sets up its CPU LAPACK kernels only when a linear-algebra op is
  # lowered; a process that only loads such a step used to segfault.
  outputs = []
  for _ in range(2):
    result = subprocess.run(
      [sys.executable, "-c", LINALG_STEP, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    outputs.append(result.stdout.split())
  assert [o[0] for o in outputs] == ["miss", "hit"]
  assert outputs[0][1] == outputs[1][1]
