"""The exercise notebooks (``solutions/<assignment>/<assignment>.ipynb``) as a student meets them.

For every notebook:

* its structure is what nbgrader needs (markers, unique grade ids, points, hidden tests, no
  outputs), its test cells are in the form that runs both in the student's kernel and in the
  grader's judge, and every graded cell has a visible part and a hidden part that compares with the
  judge's ``reference.py`` and gives a reason (``autograder/README.md``, "Writing an exercise");
* the solution (with ``reference`` bound, as the judge binds it) runs top to bottom in a kernel
  without an error and in under 30 s, and every graded cell passes there (nbgrader's own rule: an
  error or anything on stderr scores 0);
* the student version (nbgrader's ``ClearSolutions`` + ``ClearHiddenTests``) still runs through,
  and every graded test cell fails, so the student's "Validate" shows every test failing.

How the grader scores them (solutions, student versions, wrong answers, calls of the reference
implementation) is ``test_exercise_grading.py``. The notebooks run in kernels started from this
interpreter (a kernelspec written to a temporary folder), two at a time.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbgrader.utils import determine_grade, is_grade, is_locked, is_solution

from exercise_helpers import ALL_NOTEBOOKS, NOTEBOOKS, PACKAGE, ROOT, SOLUTIONS, hidden_test_lines, read, released, run_visible, \
    solution_lines

sys.path.insert(0, str(ROOT / "tools"))
import exercise_adversary as adversary  # noqa: E402

NOTEBOOK_LIMIT_S = 30.0
WORKERS = 2  # kernels running at once (this machine has two cores)

# ------------------------------------------------------------------------------------------------
# Running notebooks
_TEMPORARY = []  # folders removed when the test process ends


def _temporary_folder(prefix: str) -> Path:
    folder = tempfile.TemporaryDirectory(prefix=prefix)
    _TEMPORARY.append(folder)
    return Path(folder.name)


@lru_cache(maxsize=1)
def _kernel_specs() -> KernelSpecManager:
    """A kernelspec "python3" that runs this interpreter (the venv's), whatever else is installed."""
    folder = _temporary_folder("exercise-kernels-")
    spec = folder / "python3"
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (exercise tests)",
        "language": "python",
    }))
    return KernelSpecManager(kernel_dirs=[str(folder)])


@dataclass
class Run:
    nb: nbformat.NotebookNode
    seconds: float

    def graded(self) -> list[tuple[str, float, float, str]]:
        """(grade_id, points scored, points possible, error text) for every graded cell."""
        rows = []
        for cell in self.nb.cells:
            if is_grade(cell):
                score, possible = determine_grade(cell)
                rows.append((cell.metadata.nbgrader["grade_id"], score, possible, error_text(cell)))
        return rows

    def score(self) -> tuple[float, float]:
        rows = self.graded()
        return sum(r[1] for r in rows), sum(r[2] for r in rows)

    def errors(self) -> dict[str, str]:
        """Cell id -> error text, for every code cell with an error or anything on stderr."""
        return {cell.metadata.get("nbgrader", {}).get("grade_id", cell.id): error_text(cell)
                for cell in self.nb.cells if cell.cell_type == "code" and error_text(cell)}


def error_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            parts.append(f"{output.ename}: {output.evalue}")
        elif output.output_type == "stream" and output.name == "stderr":
            parts.append(f"stderr: {output.text}")
    return "\n".join(parts)


def run_all(notebooks: dict[str, nbformat.NotebookNode]) -> dict[str, Run]:
    """Execute every notebook top to bottom (errors allowed), WORKERS kernels at a time."""
    workdir = _temporary_folder("exercise-runs-")

    async def one(key, nb, gate):
        async with gate:
            nb = copy.deepcopy(nb)
            # IPC sockets in a private folder: no TCP ports, no warning about unencrypted TCP on stderr
            manager = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=_kernel_specs(), transport="ipc",
                                         ip=str(workdir / f"kernel-{len(started)}"))
            started.append(key)
            client = NotebookClient(nb, km=manager, timeout=120, allow_errors=True, kernel_name="python3",
                                    resources={"metadata": {"path": str(workdir)}})
            start = time.perf_counter()
            await client.async_execute()
            return key, Run(nb, time.perf_counter() - start)

    started = []

    async def main():
        gate = asyncio.Semaphore(WORKERS)
        return dict(await asyncio.gather(*(one(key, nb, gate) for key, nb in notebooks.items())))

    return asyncio.run(main())


def with_reference(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """``nb`` with a first cell binding the exercise's ``reference.py`` to ``reference``, as the judge
    binds it for the test cells (the student's kernel never has it)."""
    nb = copy.deepcopy(nb)
    path = NOTEBOOKS[name].parent / "reference.py"
    if path.is_file():
        nb.cells.insert(0, nbformat.v4.new_code_cell(
            f"import sys as _sys\n_sys.path.insert(0, {str(ROOT)!r})\n"
            f"from autograder.references import load_reference as _load_reference\n"
            f"reference = _load_reference({str(path)!r})"))
    return nb


def variants(name: str) -> dict[str, nbformat.NotebookNode]:
    """The versions of notebook ``name`` run in a kernel: the solution (with its reference bound) and
    the student version (without)."""
    nb = read(name)
    return {"solution": with_reference(nb, name), "released": released(nb)}


@lru_cache(maxsize=None)
def results(name: str) -> dict[str, Run]:
    return run_all(variants(name))


# ------------------------------------------------------------------------------------------------
# Structure (no kernel)
def test_there_are_two_assignments_for_each_chapter():
    NOTEBOOKS = ALL_NOTEBOOKS
    assert len(NOTEBOOKS) >= 20
    for chapter in range(1, 11):
        found = [name for name in NOTEBOOKS if re.match(rf"ch{chapter}[ab]_", name)]
        assert len(found) >= 2, f"chapter {chapter}: expected two assignments, found {found}"
        torch_ones = [name for name in found if "import torch" in "".join(c.source for c in read(name).cells)]
        assert len(torch_ones) == 1, f"chapter {chapter}: exactly one exercise should use PyTorch, got {torch_ones}"
    for name, path in NOTEBOOKS.items():
        assert path.parent.name == name, f"{path}: the notebook must sit in solutions/{name}/"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_structure(name):
    raw = json.loads(NOTEBOOKS[name].read_text())
    nb = read(name)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    ids = [cell.metadata.nbgrader["grade_id"] for cell in nb.cells if "nbgrader" in cell.metadata]
    assert len(ids) == len(set(ids)), f"duplicate grade ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    assert all("nbgrader" in cell.metadata for cell in nb.cells), "every cell carries nbgrader metadata"
    for cell, raw_cell in zip(nb.cells, raw["cells"]):
        meta = cell.metadata.nbgrader
        assert meta["schema_version"] == 3
        if cell.cell_type == "code":
            assert raw_cell["outputs"] == [] and raw_cell["execution_count"] is None, \
                f"{meta['grade_id']}: outputs left in"
        if is_solution(cell):
            assert cell.cell_type == "code" and not meta["grade"] and not meta["locked"]
            source = cell.source
            assert source.count("### BEGIN SOLUTION") == 1 and source.count("### END SOLUTION") == 1, meta["grade_id"]
            assert source.index("### BEGIN SOLUTION") < source.index("### END SOLUTION")
            assert re.search(r'^def \w+\(.*\):\n    """', source, re.M | re.S), \
                f"{meta['grade_id']}: signature and docstring"
            assert "Shapes:" in source, f"{meta['grade_id']}: the docstring lists the shapes"
        elif is_grade(cell):
            assert cell.cell_type == "code" and meta["locked"] and meta["points"] > 0, meta["grade_id"]
            assert "from attention_course.testing import checks" in cell.source, meta["grade_id"]
            # the in-kernel machinery of the old form; gradients of torch code go through checks.vjp
            for old in ("load_checks", "forbid_reference", "autograd_vjp", "testing.exercise"):
                assert old not in cell.source, f"{meta['grade_id']}: {old} (see 'Writing test cells')"
        else:
            assert is_locked(cell), f"{meta['grade_id']}: explanation and given code are read-only"
    graded = [cell for cell in nb.cells if is_grade(cell)]
    assert len(graded) >= 2
    for cell in graded:  # autograder/README.md, "Writing an exercise": visible tests guide, hidden tests decide
        grade_id = cell.metadata.nbgrader["grade_id"]
        assert cell.source.count("### BEGIN HIDDEN TESTS") == cell.source.count("### END HIDDEN TESTS") == 1, \
            f"{grade_id}: every graded cell has one hidden part"
        visible, hidden = cell.source.split("### BEGIN HIDDEN TESTS")
        assert "reference" not in visible.replace("the reference", ""), \
            f"{grade_id}: the visible part uses `reference`, which only the judge has"
        assert [line for line in visible.split("\n") if line.strip() and not line.startswith(("import", "from", "#"))], \
            f"{grade_id}: no visible test to guide the student"
        assert "reference." in hidden, f"{grade_id}: the hidden part does not compare with the judge's reference"
        assert re.search(r"^# reason: \S", hidden, re.M), f"{grade_id}: no '# reason:' for the hidden part's feedback"
    assert (NOTEBOOKS[name].parent / "reference.py").is_file(), "the judge's reference.py is missing"
    assert "What you may use" in nb.cells[0].source, "the introduction says what the student may use"


TIME_AND_POINTS = re.compile(r"\*\*Time and points\*\*: about (\d+) minutes, (\d+) points "
                             r"\(a point for every five minutes of work\)")
MORE_TESTS = "# More tests, hidden here, run when the notebook is graded."
REASON = re.compile(r"^\s*#\s*reason:\s*\S")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_points_follow_the_time_the_exercise_takes(name):
    """The introduction estimates the work in minutes, and the exercise is worth a point for every five of
    them, spread over its cells: the longest exercise is worth the most."""
    nb = read(name)
    found = TIME_AND_POINTS.search(nb.cells[0].source)
    assert found, f"{name}: the introduction says '**Time and points**: about N minutes, P points (a point for " \
                  f"every five minutes of work)'"
    minutes, points = int(found.group(1)), int(found.group(2))
    assert minutes % 5 == 0 and points == minutes // 5, f"{name}: about {minutes} minutes are {minutes // 5} points, not {points}"
    total = sum(cell.metadata.nbgrader["points"] for cell in nb.cells if is_grade(cell))
    assert total == points, f"{name}: the test cells' points add up to {total}, the introduction says {points}"


def _hidden_parts(source: str) -> list[str]:
    """The text of each hidden part of a test cell (between its markers)."""
    return [part.split("### END HIDDEN TESTS", 1)[0] for part in source.split("### BEGIN HIDDEN TESTS")[1:]]


def _checks(tree) -> list:
    """The nodes of a hidden part that can fail it with a check: assert statements and calls of the checks."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Assert) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "checks" and node.func.attr.startswith(("assert_", "check_")))]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_hidden_check_has_a_reason_above_it(name):
    """A student whose hidden test failed reads only the instructor's reason written nearest above the
    failing line (autograder/README.md, "Writing test cells"): every check of a hidden part needs one
    above it, and a bare ``assert`` also says what failed in the instructor's own record."""
    for cell in read(name).cells:
        if not is_grade(cell):
            continue
        grade_id = cell.metadata.nbgrader["grade_id"]
        for part in _hidden_parts(cell.source):
            lines = part.split("\n")
            reasons = [number + 1 for number, line in enumerate(lines) if REASON.match(line)]
            found = _checks(ast.parse(part))
            assert found, f"{grade_id}: a hidden part without a check"
            for node in found:
                assert any(line < node.lineno for line in reasons), \
                    f"{grade_id}: the hidden check `{lines[node.lineno - 1].strip()}` has no '# reason:' above it"
                if isinstance(node, ast.Assert):
                    assert node.msg is not None, f"{grade_id}: a bare assert in a hidden part: `{lines[node.lineno - 1].strip()}`"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_graded_cell_says_that_hidden_tests_follow(name):
    for cell in read(name).cells:
        if is_grade(cell):
            visible = cell.source.split("### BEGIN HIDDEN TESTS", 1)[0].rstrip("\n").split("\n")
            assert visible[-1] == MORE_TESTS, f"{cell.metadata.nbgrader['grade_id']}: the visible part ends with {MORE_TESTS!r}"


def _core_mistake(name: str) -> dict:
    mistake = adversary.core_mistake(NOTEBOOKS[name].parent / "reference.py")
    assert mistake is not None, f"{name}: reference.py names no {adversary.CORE_MISTAKE} (the wrong answer the exercise " \
                                f"exists to teach against)"
    return mistake


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_visible_test_names_the_core_mistake(name):
    """The solution passes every visible test; the exercise's core mistake fails one, in the student's own
    kernel, with a message that names it (``tools/check_exercise.py --adversarial`` checks the same through
    the grader)."""
    nb = read(name)
    mistake = _core_mistake(name)
    assert set(mistake["answers"]) <= set(adversary.answer_functions(nb)), mistake["answers"].keys()
    solved = run_visible(nb)
    assert solved and all(message is None for message in solved.values()), solved
    failed = run_visible(nb, adversary.core_mistake_answers(nb, mistake))
    named = [grade_id for grade_id, message in failed.items() if message and mistake["message"].lower() in message.lower()]
    assert named, f"{name}: no visible test fails on the core mistake ({mistake['what']}) with a message holding " \
                  f"{mistake['message']!r}: {failed}"


def test_the_core_mistakes_are_as_secret_as_the_references():
    """A core mistake lives in the exercise's reference.py: never released (nbgrader's ignore list), and every
    distinctive line of it a leak-scan secret."""
    from autograder import leakscan
    from autograder.course import RELEASE_IGNORE, Course, package_folder

    assert "reference.py" in RELEASE_IGNORE
    assert "reference.py" in Course(root=ROOT / "grading", source=SOLUTIONS).nbgrader_config().CourseDirectory.ignore
    secrets = {secret.line: secret.origin for secret in leakscan.course_secrets(SOLUTIONS, package_folder())}
    public = "\n".join([leakscan.package_text(package_folder())] + [leakscan.normalize(cell.source) for name in ALL_NOTEBOOKS
                                                                      for cell in released(read(name)).cells])
    for name in NOTEBOOKS:
        lines = [leakscan.normalize(line) for body in _core_mistake(name)["answers"].values() for line in body.split("\n")]
        distinctive = [line for line in lines if len(line) >= leakscan.MIN_LENGTH and not line.startswith("#")
                       and line not in public]  # a line the students see anyway (a visible test's) is no secret
        assert distinctive, f"{name}: the core mistake has no line to look for"
        missing = [line for line in distinctive if line not in secrets]
        assert not missing, f"{name}: core-mistake lines that the leak scan does not look for: {missing}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_released_version_holds_no_solution_and_no_hidden_test(name):
    nb = read(name)
    student = released(nb)
    text = "\n".join(cell.source for cell in student.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert text.count("raise NotImplementedError()") == sum(is_solution(cell) for cell in nb.cells)
    student_lines = {line.strip() for line in text.split("\n")}
    leaked = [line for line in solution_lines(nb) if len(line) > 12 and line in student_lines]
    assert not leaked, f"solution lines in the student version: {leaked}"
    # hidden-test lines, apart from those the visible tests share (such as the reference guard's line)
    visible = set(hidden_test_lines(nb, outside=True))
    leaked = [line for line in hidden_test_lines(nb) if line in student_lines and line not in visible]
    assert not leaked, f"hidden-test lines in the student version: {leaked}"


def test_solutions_are_not_copied_from_the_package():
    """A leak scan of the built wheel looks for solution lines in the package: there must be none."""
    package_lines = set()
    for path in PACKAGE.rglob("*.py"):
        package_lines.update(line.strip() for line in path.read_text().split("\n"))
    for name in NOTEBOOKS:
        shared = [line for line in solution_lines(read(name)) if len(line) >= 16 and line in package_lines]
        assert not shared, f"{name}: solution lines also found in attention_course/: {shared}"


def test_nbgrader_generates_every_assignment(tmp_path, monkeypatch):
    """nbgrader's own generate_assignment accepts every notebook and releases what ``released`` builds."""
    from traitlets.config import Config
    from nbgrader.apps import NbGraderAPI

    # nbgrader creates the gradebook with the venv's `alembic` command
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    config.CourseDirectory.source_directory = str(SOLUTIONS.relative_to(SOLUTIONS.parent))
    config.CourseDirectory.release_directory = "release"
    config.CourseDirectory.db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    (tmp_path / SOLUTIONS.name).symlink_to(SOLUTIONS)
    api = NbGraderAPI(config=config)
    for name in NOTEBOOKS:
        result = api.generate_assignment(name, force=True, create=True)
        assert result["success"], f"{name}: {result.get('error')}"
        generated = nbformat.read(tmp_path / "release" / name / f"{name}.ipynb", as_version=4)
        assert [c.source for c in generated.cells] == [c.source for c in released(read(name)).cells], name


# ------------------------------------------------------------------------------------------------
# Grading (kernels)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_solution_runs_clean_and_scores_full_marks(name):
    run = results(name)["solution"]
    assert not run.errors(), f"errors or stderr output: {run.errors()}"
    score, possible = run.score()
    assert possible > 0 and score == possible, run.graded()
    assert run.seconds < NOTEBOOK_LIMIT_S, f"{name} took {run.seconds:.1f} s"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_released_version_runs_through_and_scores_zero(name):
    run = results(name)["released"]
    assert all(cell.execution_count is not None for cell in run.nb.cells if cell.cell_type == "code"), "it ran through"
    for grade_id, score, possible, error in run.graded():
        assert score == 0, f"{grade_id} passes without an answer"
        assert "NotImplementedError" in error, f"{grade_id}: {error}"
    assert not {k: v for k, v in run.errors().items() if not k.startswith("test")}, "only the test cells fail"


def test_nbgrader_validator_agrees_with_the_scores():
    """nbgrader's Validator (the student's "Validate" button) finds no failure in a solution, and every
    graded cell failing in a released notebook."""
    from nbgrader.validator import Validator

    validator = Validator()
    name = next(iter(NOTEBOOKS))
    assert validator._get_failed_cells(results(name)["solution"].nb) == []
    released_run = results(name)["released"].nb
    assert len(validator._get_failed_cells(released_run)) == sum(is_grade(c) for c in released_run.cells)
    # the student's Validate runs their own notebook: the released one, answered
    answers = {c.metadata.nbgrader["grade_id"]: c.source for c in read(name).cells if is_solution(c)}
    answered = released(read(name))
    for cell in answered.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in answers:
            cell.source = answers[cell.metadata.nbgrader["grade_id"]]
    path = _temporary_folder("exercise-validate-") / f"{name}.ipynb"
    nbformat.write(answered, path)
    assert validator.validate(str(path)) == {}
