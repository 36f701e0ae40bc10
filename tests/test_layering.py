"""The package's floors: the tracks are siblings on a neutral core, the library does not import its tests,
and nothing above the tracks branches on which track it holds.

The import checks run in a fresh interpreter and list the ``attention_course`` modules an import loads;
the branch check reads the source.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest


def loaded_after(statement: str, block_torch: bool = False) -> set[str]:
    code = ("import sys\n" + ("sys.modules['torch'] = None\n" if block_torch else "") + statement + "\n"
            "import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('attention_course'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def under(modules: set[str], package: str) -> set[str]:
    return {name for name in modules if name == package or name.startswith(package + ".")}


def test_the_numpy_track_loads_nothing_of_the_torch_track_or_testing():
    loaded = loaded_after("import attention_course.numpy_track, attention_course.numpy_track.trainer, "
                          "attention_course.numpy_track.track")
    assert under(loaded, "attention_course.numpy_track"), "the check itself must see the track load"
    assert not under(loaded, "attention_course.torch_track")
    assert not under(loaded, "attention_course.testing")


def test_the_torch_track_loads_nothing_of_the_numpy_track_or_testing():
    pytest.importorskip("torch")
    loaded = loaded_after("import attention_course.torch_track, attention_course.torch_track.trainer, "
                          "attention_course.torch_track.track")
    assert under(loaded, "attention_course.torch_track")
    assert not under(loaded, "attention_course.numpy_track")
    assert not under(loaded, "attention_course.testing")


def test_the_core_imports_neither_track():
    loaded = loaded_after("import attention_course.core.configs, attention_course.core.registries, "
                          "attention_course.core.layer_stack, attention_course.core.initializers, "
                          "attention_course.core.shapes, attention_course.training, attention_course.decoding, "
                          "attention_course.tracks, attention_course.checkpoint")
    assert under(loaded, "attention_course.core")
    for package in ("attention_course.numpy_track", "attention_course.torch_track", "attention_course.testing"):
        assert not under(loaded, package), package


def test_the_numpy_track_and_its_checkpoints_work_without_torch():
    loaded = loaded_after("import attention_course.numpy_track, attention_course.checkpoint, attention_course.viz\n"
                          "from attention_course.tracks import get_track\n"
                          "try:\n"
                          "    get_track('torch')\n"
                          "except ValueError as error:\n"
                          "    assert 'needs PyTorch' in str(error), error\n"
                          "else:\n"
                          "    raise AssertionError('the torch track loaded without torch')",
                          block_torch=True)
    assert under(loaded, "attention_course.numpy_track")


# --- above the tracks, nobody asks which track it holds -------------------------------------------

PACKAGE = Path(__file__).resolve().parents[1] / "attention_course"
TRACK_NAMES = {"numpy", "torch"}
# Not above the tracks in this sense: the tracks themselves and their registry; convert.py, whose
# job is to map one track's layers onto the other's; testing/, whose checks take a student's
# values (arrays or tensors) and never choose a track.
EXEMPT = ("numpy_track/", "torch_track/", "tracks.py", "convert.py", "testing/")


def track_branches(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """Every place in ``path`` that branches on a track: a comparison with a track's name, a table
    keyed by every track's name, a model's ``__module__``, an import of a track's modules, or an
    ``isinstance`` check against a class from a track or torch."""
    tree = ast.parse(path.read_text(), str(path))
    from_tracks = set()  # names bound to what a track or torch defines
    found = []

    def where(node) -> str:
        return f"{path.relative_to(root)}:{node.lineno}"

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if re.search(r"(^|\.)(numpy_track|torch_track)(\.|$)", module):
                found.append(f"{where(node)}: imports {module}")
            if re.search(r"(^|\.)(numpy_track|torch_track)(\.|$)", module) or module.split(".")[0] == "torch":
                from_tracks.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if re.search(r"(numpy_track|torch_track)", alias.name):
                    found.append(f"{where(node)}: imports {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                if any(isinstance(v, ast.Constant) and v.value in TRACK_NAMES for v in values):
                    found.append(f"{where(node)}: compares with a track's name")
        elif isinstance(node, ast.Dict):
            keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
            if TRACK_NAMES <= keys:
                found.append(f"{where(node)}: a table keyed by track")
        elif isinstance(node, ast.Attribute) and node.attr == "__module__":
            found.append(f"{where(node)}: reads a __module__")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if names & (from_tracks | {"torch", "nn"}):
                found.append(f"{where(node)}: isinstance of a track's class")
    return found


def test_the_check_finds_each_kind_of_branch(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from .torch_track.layers import Affine\nfrom torch import nn\n"
                      "DEFAULTS = {'numpy': 1, 'torch': 2}\n"
                      "def f(track, model):\n"
                      "    if track == 'numpy' or track in ('torch',):\n"
                      "        return type(model).__module__\n"
                      "    return isinstance(model, nn.Module) or isinstance(model, Affine)\n")
    found = track_branches(sample, tmp_path)
    assert sorted(found) == sorted([
        "sample.py:1: imports .torch_track.layers", "sample.py:3: a table keyed by track",
        "sample.py:5: compares with a track's name", "sample.py:5: compares with a track's name",
        "sample.py:6: reads a __module__", "sample.py:7: isinstance of a track's class",
        "sample.py:7: isinstance of a track's class"])


def test_nothing_above_the_tracks_branches_on_a_track():
    """The tasks, the command line, training, checkpoints, the explorer...: they ask the registry
    (``tracks.get_track``, ``track_of``) and call what the track offers."""
    modules = [path for path in sorted(PACKAGE.rglob("*.py"))
               if not str(path.relative_to(PACKAGE)).startswith(EXEMPT)]
    assert any(path.parent.name == "tasks" for path in modules), "the check must see the tasks"
    found = [line for path in modules for line in track_branches(path)]
    assert not found, "\n".join(found)


def test_the_tasks_and_the_command_line_load_no_track_until_one_is_asked_for():
    loaded = loaded_after("import attention_course.cli, attention_course.tasks, attention_course.tasks.classify, "
                          "attention_course.tasks.caption, attention_course.tasks.question_answering, "
                          "attention_course.tasks.copy, attention_course.tasks.pairs")
    assert under(loaded, "attention_course.tasks")
    for package in ("attention_course.numpy_track", "attention_course.torch_track", "attention_course.testing"):
        assert not under(loaded, package), package


# --- no import cycles --------------------------------------------------------------------------


def import_graph(package: Path) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}``, read from the source: every import statement,
    those inside functions included (a deferred import still ties the two modules together)."""
    def name_of(path: Path) -> str:
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(path): path for path in package.rglob("*.py")}

    def targets(module: str, path: Path, node) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(max(node.level - 1, 0)):
            base = base.rpartition(".")[0]
        target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
        return [f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target for alias in node.names]

    graph = {}
    for module, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in targets(module, path, node):
                    while target and target not in modules:  # a name inside a module: the module
                        target = target.rpartition(".")[0]
                    if target and target != module:
                        found.add(target)
        graph[module] = found
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another round a circle (strongly connected, two or more)."""
    order, low, stack, cycles = {}, {}, [], []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def test_the_cycle_check_finds_a_deferred_import_round_a_circle(tmp_path):
    package = tmp_path / "demo"
    (package / "tasks").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("from .tasks import pairs\n")
    (package / "tasks" / "__init__.py").write_text("")
    (package / "tasks" / "pairs.py").write_text("from .common import rules\n")
    (package / "tasks" / "common.py").write_text("def rules():\n    from ..cli import main\n")
    (package / "tasks" / "alone.py").write_text("import demo.tasks.pairs\n")
    graph = import_graph(package)
    assert graph["demo.tasks.common"] == {"demo.cli"} and graph["demo.tasks.alone"] == {"demo.tasks.pairs"}
    assert import_cycles(graph) == [["demo.cli", "demo.tasks.common", "demo.tasks.pairs"]]


def test_no_module_of_the_package_imports_itself_through_others():
    """The command line sits above the tasks (``cli`` -> ``tasks`` -> ``tasks.options``), the tasks above the
    tracks' registry: no import, deferred or not, leads back round."""
    graph = import_graph(PACKAGE)
    assert "attention_course.tasks.options" in graph["attention_course.tasks.common"], "the check must see imports"
    assert import_cycles(graph) == []


if __name__ == "__main__":
    # python tests/test_layering.py [PACKAGE]: list and count the track branches above the tracks of a
    # package folder (default this checkout's attention_course), e.g. of another commit's export.
    package = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else PACKAGE
    branches = [line for path in sorted(package.rglob("*.py"))
                if not str(path.relative_to(package)).startswith(EXEMPT)
                for line in track_branches(path, package.parent)]
    print("\n".join(branches + [f"{len(branches)} track branches above the tracks in {package}"]))
