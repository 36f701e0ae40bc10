"""Every exercise in ``solutions/``, graded as an instructor grades a class: sandboxed, in parallel.

For each assignment one batch holds, as students would hand them in:

* ``solution``: the reference answers typed into the released notebook: full marks;
* ``released``: the notebook as released, unanswered: zero, graded cleanly;
* ``wrong-N``: each plausible wrong answer of ``WRONG_ANSWERS``: it loses points, and the tests it
  fails say why (not that something is missing);
* ``reference-N``: each answer of ``REFERENCE_CALLS`` that calls the course's reference layer: the
  static scan flags it for review (it is not a security question: the package is public).

Then the feedback of every student is generated; neither the released notebooks nor the feedback
hold a solution or a hidden test.
"""

from __future__ import annotations

import nbformat
import pytest

from autograder import leakscan
from autograder.course import REPO_ROOT, Course, package_folder
from autograder.feedback import feedback, own_text
from autograder.grading import GradeOptions, autograde
from autograder.release import release

from exercise_helpers import NOTEBOOKS, REFERENCE_CALLS, REFERENCE_CALL_SETUP, WRONG_ANSWERS, read, with_body, \
    with_prefix

SOLUTIONS = REPO_ROOT / "solutions"
ASSIGNMENTS = sorted(NOTEBOOKS)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def handed_in(course: Course, name: str, source_nb) -> nbformat.NotebookNode:
    """The released notebook with the answer cells of ``source_nb`` typed in, as a student hands it in."""
    answers = {_meta(c)["grade_id"]: c.source for c in source_nb.cells if _meta(c).get("solution")}
    nb = nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if _meta(cell).get("grade_id") in answers:
            cell.source = answers[_meta(cell)["grade_id"]]
    return nb


def students(course: Course, name: str) -> dict[str, nbformat.NotebookNode]:
    source = read(name)
    found = {"solution": handed_in(course, name, source),
             "released": nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4)}
    for index, (notebook, function, _, body) in enumerate(WRONG_ANSWERS):
        if notebook == name:
            found[f"wrong-{index}"] = handed_in(course, name, with_body(source, function, body))
    for index, (notebook, function, _, body) in enumerate(REFERENCE_CALLS):
        if notebook == name:
            variant = with_body(source, function, body)
            setup = REFERENCE_CALL_SETUP.get((notebook, function))
            if setup:
                variant = with_prefix(variant, function, setup)
            found[f"reference-{index}"] = handed_in(course, name, variant)
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from autograder import sandbox

    if sandbox.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed (tools/install-system-packages.sh)")
    course = Course(root=tmp_path_factory.mktemp("exercises") / "grading", source=SOLUTIONS)
    release(course, ASSIGNMENTS)
    reports = {}
    for name in ASSIGNMENTS:
        for student, nb in students(course, name).items():
            folder = course.submitted_dir(student, name)
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, folder / f"{name}.ipynb")
        reports[name] = autograde(course, name, GradeOptions(workers=2, notebook_timeout=300),
                                  echo=lambda line: None)["students"]
        lines, withheld = feedback(course, name)
        assert withheld == [], lines
    return course, reports


def _records(entry: dict) -> dict:
    return {grade_id: record for notebook in entry["notebooks"].values()
            for grade_id, record in notebook.get("tests", {}).items()}


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_solution_scores_full_marks(graded, name):
    entry = graded[1][name]["solution"]
    assert entry["status"] == "graded", entry["flags"]
    assert entry["max_score"] > 0 and entry["score"] == entry["max_score"], _records(entry)
    assert _records(entry) and all(record["passed"] for record in _records(entry).values())


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_released_notebook_scores_zero_and_grades_cleanly(graded, name):
    entry = graded[1][name]["released"]
    assert entry["status"] == "graded", entry["flags"]
    assert entry["score"] == 0
    for notebook in entry["notebooks"].values():
        assert notebook["execution"]["status"] == "ok", notebook["execution"]
    for grade_id, record in _records(entry).items():
        assert not record["passed"] and "NotImplementedError" in record["message"], (grade_id, record)


def test_every_notebook_has_a_wrong_answer_to_try():
    for name in ASSIGNMENTS:
        assert any(row[0] == name for row in WRONG_ANSWERS), f"{name}: no wrong answer is tried"
    for row in WRONG_ANSWERS + REFERENCE_CALLS:
        assert row[0] in NOTEBOOKS, f"{row[0]}: no such notebook"


def _ids(table):
    return [f"{row[0]} / {row[1]} / {row[2]}" for row in table]


@pytest.mark.parametrize("row", WRONG_ANSWERS, ids=_ids(WRONG_ANSWERS))
def test_a_wrong_answer_loses_points(graded, row):
    name, function, what, _ = row
    entry = graded[1][name][f"wrong-{WRONG_ANSWERS.index(row)}"]
    assert entry["score"] < entry["max_score"], f"{name}: the wrong {function} ({what}) keeps full marks"
    failed = {grade_id: record["message"] for grade_id, record in _records(entry).items() if not record["passed"]}
    assert failed and not any("NotImplementedError" in message for message in failed.values()), failed


@pytest.mark.parametrize("row", REFERENCE_CALLS, ids=_ids(REFERENCE_CALLS))
def test_a_call_of_the_reference_is_flagged_for_review(graded, row):
    name, function, how, _ = row
    entry = graded[1][name][f"reference-{REFERENCE_CALLS.index(row)}"]
    assert entry["status"] == "flagged", f"{name}: {function} calling {how} is not flagged"
    assert any("reference implementation" in flag for flag in entry["flags"]), entry["flags"]


def test_no_solution_or_hidden_test_in_released_notebooks_or_feedback(graded):
    course = graded[0]
    secrets = leakscan.course_secrets(SOLUTIONS, package_folder())
    assert secrets, "the solution notebooks have no solution or hidden-test lines to look for"
    assert leakscan.scan([course.root / "release"], secrets) == []
    for folder in sorted((course.root / "feedback").iterdir()):
        # a line the student typed themselves may coincide with a hidden-test line: that reveals nothing
        own = "\n".join(own_text(path) for path in (course.root / "autograded" / folder.name).iterdir())
        unseen = [secret for secret in secrets if secret.line not in own]
        assert leakscan.scan([folder], unseen, kinds=("hidden test",)) == [], folder.name
    assert leakscan.scan([course.root / "feedback" / "released"], secrets) == []
    # The scan does find them where they belong (the instructor's graded notebooks).
    assert leakscan.scan([course.root / "autograded" / "solution"], secrets)
