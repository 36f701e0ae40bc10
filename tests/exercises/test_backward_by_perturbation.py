"""A backward pass by perturbation loses the backward cells' points, through the real grader.

A student can skip the hand-written backward pass: keep the inputs in the forward pass's cache and
return, as the backward pass, central differences of their own forward pass (a loop of ten lines,
``NUMERICAL_BACKWARD``). On small inputs that is exact enough for every check. Each test cell that
grades a backward pass therefore ends its hidden part with a check at a realistic size, under a
reason that says a backward by finite differences cannot finish within the time limit
(``benchmarks/backward_by_perturbation.py`` measures the margin).

For each exercise tried here (three by default, ``PERTURBATION_EXERCISES=all`` for the ten), that
submission (the solution's forward pass, the numerical backward pass) is graded twice, sandboxed:

* against the source notebook with its scale checks taken out (the tests as they were before:
  for these notebooks, exactly the notebooks before the checks came): full marks;
* against the source notebook as it is: every cell with a scale check fails, and at that check (the
  student's feedback page gives its reason and the time limit); every other cell passes.

Both times the static scan flags it for review (``differentiates numerically``).

The cell limit here is 10 s, not the grader's default 60 s: at the checks' sizes the perturbation
needs ten minutes or more, so either limit stops it, and 10 s keeps this test to about a minute
per exercise.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import sys
from pathlib import Path
from textwrap import dedent, indent

import nbformat
import pytest

from autograder.course import REPO_ROOT, Course
from autograder.feedback import feedback
from autograder.grading import GradeOptions, autograde
from autograder.release import release
from autograder.submissions import import_submissions
from exercise_helpers import SOLUTIONS

sys.path.insert(0, str(REPO_ROOT / "tools"))
import check_exercise  # noqa: E402

SCALE_REASON = "a backward by finite differences cannot finish within the time limit"
NUMPY_EXERCISES = sorted(path.name for path in SOLUTIONS.glob("ch*a_*") if (path / f"{path.name}.ipynb").is_file())
DEFAULT = ("ch1a_peephole_lstm", "ch5a_location_attention", "ch10a_multihead_backward")
TRIED = NUMPY_EXERCISES if os.environ.get("PERTURBATION_EXERCISES") == "all" else DEFAULT
CELL_TIMEOUT = 10
# The step of the central differences, as a student tunes it until the checks on small inputs pass.
STEP = {"ch10a_multihead_backward": 1e-5}

# The student's backward pass: central differences of their own forward pass, whose cache is its inputs.
NUMERICAL_BACKWARD = '''
def {backward}({upstream}, cache, eps={eps}):
    upstream = ({upstream},)
    inputs = [np.array(value, dtype=np.float64) if isinstance(value, np.ndarray) and value.dtype.kind == "f"
              else value for value in cache]
    grads = []
    for array in inputs:
        if not (isinstance(array, np.ndarray) and array.dtype == np.float64):
            continue  # a mask, the lengths, the number of heads: no gradient
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            original = array[index]
            array[index] = original + eps
            plus = {forward}(*inputs)
            array[index] = original - eps
            minus = {forward}(*inputs)
            array[index] = original
            grad[index] = sum(np.sum(d * (p - m)) for d, p, m in zip(upstream, plus, minus)) / (2 * eps)
        grads.append(grad)
    return tuple(grads)
'''


def _function(source: str, suffix: str) -> ast.FunctionDef:
    return next(node for node in ast.parse(source).body
                if isinstance(node, ast.FunctionDef) and node.name.endswith(suffix))


def perturbation_answers(source_nb, eps: float = 1e-6) -> dict[str, str]:
    """grade_id -> answer: the solution's forward pass renamed ``_solution_forward`` behind a forward pass
    that keeps its inputs as the cache, and ``NUMERICAL_BACKWARD`` as the backward pass."""
    answers = check_exercise.solution_answers(source_nb)
    forward_id = next(g for g, text in answers.items() if re.search(r"^def \w+_forward\(", text, re.M))
    backward_id = next(g for g, text in answers.items() if re.search(r"^def \w+_backward\(", text, re.M))
    forward = _function(answers[forward_id], "_forward")
    backward = _function(answers[backward_id], "_backward")
    names = [argument.arg for argument in forward.args.args]
    upstream = ", ".join(argument.arg for argument in backward.args.args[:-1])  # all but the cache
    wrapper = (f"def {forward.name}({ast.unparse(forward.args)}):\n"
               f"    *outputs, _ = _solution_forward({', '.join(names)})\n"
               f"    return (*outputs, ({', '.join(names)},))\n")
    renamed = re.sub(rf"^def {forward.name}\(", "def _solution_forward(", answers[forward_id], flags=re.M)
    numerical = NUMERICAL_BACKWARD.format(backward=backward.name, forward=forward.name, upstream=upstream, eps=eps)
    if forward_id == backward_id:  # (one cell holds both)
        cell = re.sub(rf"^def {backward.name}\(.*?(?=^def |\Z)", numerical.strip() + "\n\n\n", renamed,
                      flags=re.M | re.S)
        return {**answers, forward_id: cell + "\n\n" + wrapper}
    return {**answers, forward_id: renamed + "\n\n\n" + wrapper, backward_id: numerical.strip() + "\n"}


def without_scale_checks(source_nb):
    """The notebook as it was before the scale checks: each one (its reason line to the next reason or
    the end of the hidden part) taken out."""
    nb = copy.deepcopy(source_nb)
    for cell in nb.cells:
        lines = cell.source.split("\n")
        kept, skipping = [], False
        for line in lines:
            if line.strip().startswith("# reason:"):
                skipping = SCALE_REASON in line
            elif "### END HIDDEN TESTS" in line:
                skipping = False
            if not skipping:
                kept.append(line)
        cell.source = "\n".join(kept)
    return nb


def scale_cells(source_nb) -> set[str]:
    return {cell.metadata.nbgrader["grade_id"] for cell in source_nb.cells
            if cell.cell_type == "code" and SCALE_REASON in cell.source}


def grade(folder: Path, source: Path, name: str, answers: dict[str, str]) -> tuple[Course, dict]:
    """The submission ``answers`` graded in a course of its own whose source notebooks are ``source``:
    the course and the student's result."""
    course = Course(root=folder / "grading", source=source)
    previous = Path.cwd()
    try:
        release(course, [name])   # (nbgrader's release changes the process's directory)
    finally:
        os.chdir(previous)
    submissions = folder / "submissions"
    submissions.mkdir()
    nbformat.write(check_exercise.handed_in(course, name, answers), submissions / "perturbation.ipynb")
    import_submissions(course, name, source=submissions)
    report = autograde(course, name, GradeOptions(workers=1, cell_timeout=CELL_TIMEOUT), echo=lambda line: None)
    return course, report["students"]["perturbation"]


def records(result: dict) -> dict[str, dict]:
    return {grade_id: record for notebook in result["notebooks"].values() for grade_id, record in notebook["tests"].items()}


def test_the_scale_checks_sit_where_a_backward_is_graded():
    """Every NumPy exercise has them, and the submission below is built for each."""
    for name in NUMPY_EXERCISES:
        source_nb = nbformat.read(SOLUTIONS / name / f"{name}.ipynb", as_version=4)
        cells = scale_cells(source_nb)
        assert "test_backward" in cells or "test_large" in cells, name   # (ch0a: a cell of its own)
        assert all(cell.startswith("test_") and cell != "test_forward" for cell in cells), (name, cells)
        answers = perturbation_answers(source_nb)
        assert any("np.ndindex" in answer and "(2 * eps)" in answer for answer in answers.values()), name
        assert without_scale_checks(source_nb).cells != source_nb.cells and \
            not scale_cells(without_scale_checks(source_nb)), name


@pytest.mark.parametrize("name", TRIED)
def test_a_backward_by_perturbation_passed_before_and_now_loses_the_backward_cells(name, tmp_path):
    from autograder import sandbox

    if sandbox.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed (tools/install-system-packages.sh)")
    source_nb = nbformat.read(SOLUTIONS / name / f"{name}.ipynb", as_version=4)
    answers = perturbation_answers(source_nb, STEP.get(name, 1e-6))
    before_source = tmp_path / "before-source" / name
    before_source.mkdir(parents=True)
    nbformat.write(without_scale_checks(source_nb), before_source / f"{name}.ipynb")
    (before_source / "reference.py").write_bytes((SOLUTIONS / name / "reference.py").read_bytes())

    _, before = grade(tmp_path / "before", before_source.parent, name, answers)
    assert before["score"] == before["max_score"] > 0, records(before)

    course, after = grade(tmp_path / "after", SOLUTIONS, name, answers)
    # the static scan saw it both times (a flag for review; it changes no score)
    for result in (before, after):
        assert result["status"] == "flagged" and any("differentiates numerically" in flag for flag in result["flags"])
    failed = {grade_id for grade_id, record in records(after).items() if not record["passed"]}
    assert failed == scale_cells(source_nb), records(after)
    assert after["score"] < after["max_score"]
    for grade_id in failed:
        said = records(after)[grade_id]["feedback"]
        # the hidden part failed at the scale check, on the time limit
        assert said.startswith("a hidden test of this cell failed") and SCALE_REASON in said, said
        assert "time limit" in said.split(SCALE_REASON)[1], said
    # and the page the student gets back says so, once per failed cell
    _, withheld = feedback(course, name)
    assert not withheld
    page = (course.feedback_dir("perturbation", name) / f"{name}.html").read_text()
    assert page.count(SCALE_REASON) == len(failed)
