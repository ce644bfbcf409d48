"""The layers of `playground`: rooms that import only downward, no import cycles, no library
module importing a command-line script, and a command line that loads no JAX.

The import graph is read from the source with `ast`, counting every import:
module-level, function-level (deferred) and under `if TYPE_CHECKING:`. Each
module may import only modules below it, so the graph must be acyclic. The
rooms (subpackages) of `playground.common` and of a robot are ordered: the
imports a module runs (all but those under `if TYPE_CHECKING:`, which only
name types) reach its own room or the rooms below it.
Run as a script to print the graph: `uv run python tests/test_layers.py`.
"""

import ast
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
COMMON = REPO_ROOT / "playground" / "common"
PACKAGE = "playground.common"

#: Edges known to close a cycle, each waiting for an edit outside this test's
#: owners: (importer, imported) -> what must change. The test fails once an
#: edge here is gone, so that the entry is removed with it.
PENDING: dict[tuple[str, str], str] = {}

#: Modules the command line loads before JAX: none of them may import JAX at
#: module level, nor a module of this package that does.
JAX_FREE = (
  "cli",
  "runner",
  "robot_spec",
  "runs.arguments",
  "runs.record",
  "runs.resume",
  "runs.compatibility",
  "errors",
  "configs",
  "runs.directories",
)
HEAVY = ("jax", "jaxlib", "mujoco", "mujoco_playground", "brax", "flax", "optax", "orbax", "onnxruntime")


def _imported_names(tree: ast.AST, at_import: bool = False, runtime: bool = False) -> set[str]:
  """Every module name imported under `tree` (`from a import b` gives "a" and "a.b").

  With `at_import`, only the imports that run when the module is imported:
  not those in function bodies nor under `if TYPE_CHECKING:`. With
  `runtime`, every import but those under `if TYPE_CHECKING:`.
  """
  out = set()
  todo = [tree]
  while todo:
    node = todo.pop()
    if isinstance(node, ast.Import):
      out.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      out.add(node.module)
      out.update(f"{node.module}.{alias.name}" for alias in node.names)
    if at_import and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      continue
    if (at_import or runtime) and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
      todo.extend(node.orelse)
      continue
    todo.extend(ast.iter_child_nodes(node))
  return out


def _imports(
  tree: ast.AST, modules: set[str], at_import: bool = False, package: str = PACKAGE, runtime: bool = False
) -> set[str]:
  """The modules of `package` (among `modules`, dotted below it: `runs.record`) that `tree` imports."""
  out = set()
  for name in _imported_names(tree, at_import, runtime):
    if name.startswith(package + "."):
      module = name[len(package) + 1 :]
      while module and module not in modules:
        module = module.rpartition(".")[0]
      if module:
        out.add(module)
  return out


def _trees(root: Path = COMMON) -> dict[str, ast.Module]:
  """Dotted module name below `root` (`runs.record`) -> its syntax tree; `__init__` files left out."""
  return {
    ".".join(p.relative_to(root).with_suffix("").parts): ast.parse(p.read_text(), filename=str(p))
    for p in sorted(root.rglob("*.py"))
    if p.name != "__init__.py"
  }


def import_graph() -> dict[str, set[str]]:
  """module -> the modules of `playground.common` it imports anywhere (deferred and TYPE_CHECKING included)."""
  trees = _trees()
  return {name: _imports(tree, set(trees)) - {name} for name, tree in trees.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
  """One import cycle of `graph` as [a, b, ..., a], or None."""
  state: dict[str, int] = {}  # 1: on the current path, 2: done
  path: list[str] = []

  def visit(node: str) -> list[str] | None:
    state[node] = 1
    path.append(node)
    for nxt in sorted(graph.get(node, ())):
      if state.get(nxt) == 1:
        return path[path.index(nxt) :] + [nxt]
      if nxt not in state and (cycle := visit(nxt)):
        return cycle
    path.pop()
    state[node] = 2
    return None

  for node in sorted(graph):
    if node not in state and (cycle := visit(node)):
      return cycle
  return None


def test_the_import_graph_of_common_is_acyclic():
  graph = import_graph()
  assert {"runner", "cli", "train.trainer", "runs.record", "robot_spec"} <= set(graph)
  for importer, imported in PENDING:
    assert imported in graph[importer], f"{importer} -> {imported} is gone: remove it from PENDING"
    graph[importer].discard(imported)
  cycle = find_cycle(graph)
  assert cycle is None, "import cycle in playground/common: " + " -> ".join(cycle)


def test_find_cycle_finds_deferred_and_type_checking_imports():
  tree = ast.parse(
    "from typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n  from playground.common.b import X\n"
    "def f():\n  from playground.common import c\n"
  )
  assert _imports(tree, {"a", "b", "c"}) == {"b", "c"}
  assert _imports(tree, {"a", "b", "c"}, at_import=True) == set()
  assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
  assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_command_line_modules_import_no_jax_at_module_level():
  trees = _trees()
  for name in JAX_FREE:
    seen, todo = set(), [name]
    while todo:
      module = todo.pop()
      if module in seen:
        continue
      seen.add(module)
      heavy = {n.split(".")[0] for n in _imported_names(trees[module], at_import=True)} & set(HEAVY)
      assert not heavy, f"{name} imports {sorted(heavy)} at module level (through {module})"
      todo.extend(_imports(trees[module], set(trees), at_import=True))


def test_a_robot_runner_module_loads_without_jax():
  code = (
    "import sys\n"
    "import playground.cartpole.runner, playground.open_duck_mini_v2.runner\n"
    "import playground.common.cli, playground.common.runner\n"
    f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
    "assert not heavy, heavy\n"
  )
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]


def package_graph() -> tuple[dict[str, set[str]], set[str]]:
  """(module -> the `playground` modules it imports anywhere, the command-line scripts).

  Modules are dotted names (`open_duck_mini_v2.score`); a command-line script
  is a module with an `if __name__ == "__main__":` block.
  """
  root = REPO_ROOT / "playground"
  trees = {}
  for path in sorted(root.rglob("*.py")):
    parts = path.relative_to(root).with_suffix("").parts
    trees[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = ast.parse(path.read_text(), filename=str(path))
  graph = {}
  for name, tree in trees.items():
    out = set()
    for imported in _imported_names(tree):
      if not imported.startswith("playground."):
        continue
      module = imported[len("playground.") :]
      while module and module not in trees:
        module = module.rpartition(".")[0]
      if module and module != name:
        out.add(module)
    graph[name] = out
  scripts = {
    name
    for name, tree in trees.items()
    if any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)
  }
  return graph, scripts


def test_the_import_graph_of_the_whole_package_is_acyclic():
  graph, _ = package_graph()
  assert {"open_duck_mini_v2.runner", "open_duck_mini_v2.score", "common.train.trainer", "export"} <= set(graph)
  # Parents import their package's __init__ implicitly; only module-to-module edges count.
  packages = {k for k in graph if (REPO_ROOT / "playground" / k.replace(".", "/") / "__init__.py").is_file()}
  graph = {k: v - packages for k, v in graph.items()}
  cycle = find_cycle(graph)
  assert cycle is None, "import cycle in playground: " + " -> ".join(cycle)


def test_no_library_module_imports_a_command_line_script():
  graph, scripts = package_graph()
  assert {"export", "open_duck_mini_v2.score", "open_duck_mini_v2.playback", "open_duck_mini_v2.runner"} <= scripts
  offenders = {name: sorted(graph[name] & scripts) for name in graph if name not in scripts and graph[name] & scripts}
  assert not offenders, f"library modules import command-line scripts: {offenders}"


#: The rooms of `playground.common` and of the Open Duck Mini V2, lowest first. A module
#: outside every subpackage is in the room "" (the package's front door), unless the
#: room is named for it.
ROOMS = {
  "playground.common": ("errors", "configs", "hyperparameters", "runs", "tasks", "export", "train", "evaluation", ""),
  "playground.open_duck_mini_v2": ("model", "tasks", "evaluation", ""),
}


def _room(module: str, rooms: tuple[str, ...]) -> str:
  first = module.split(".")[0]
  return first if first in rooms else ""


def test_rooms_import_only_downward():
  for package, rooms in ROOMS.items():
    trees = _trees(REPO_ROOT / Path(*package.split(".")))
    assert {_room(m, rooms) for m in trees} == set(rooms), f"{package}: the rooms and the subpackages differ"
    upward = [
      f"{module} -> {imported}"
      for module, tree in trees.items()
      for imported in _imports(tree, set(trees), package=package, runtime=True)
      if rooms.index(_room(imported, rooms)) > rooms.index(_room(module, rooms))
    ]
    assert not upward, f"{package}: imports that reach a higher room: {upward}"


def test_common_imports_no_robot():
  graph, _ = package_graph()
  robots = {"open_duck_mini_v2", "cartpole"}
  offenders = {
    k: sorted(v) for k, v in graph.items() if k.startswith("common.") and {m.split(".")[0] for m in v} & robots
  }
  assert not offenders, f"playground.common imports a robot package: {offenders}"


if __name__ == "__main__":
  for module, imported in sorted(import_graph().items()):
    sys.stdout.write(f"{module}: {', '.join(sorted(imported)) or '-'}\n")
