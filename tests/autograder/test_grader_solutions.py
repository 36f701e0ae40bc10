"""Every exercise in ``solutions/``: the reference answers score full marks, the released notebook
scores zero and grades cleanly, and neither the released notebooks nor the feedback leak anything.

Graded once for the module, in the sandbox, with the parallel grader (as an instructor would).
"""

from __future__ import annotations

import pytest

from autograder import leakscan
from autograder.course import REPO_ROOT, Course, package_folder
from autograder.feedback import feedback
from autograder.grading import GradeOptions, autograde
from autograder.release import release

import nbformat

from grader_helpers import needs_bwrap, solution_answers, student_version

SOLUTIONS = REPO_ROOT / "solutions"
ASSIGNMENTS = Course(source=SOLUTIONS).source_assignments()

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(not ASSIGNMENTS, reason="solutions/ holds no assignment notebooks yet"),
]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = Course(root=tmp_path_factory.mktemp("solutions") / "grading", source=SOLUTIONS)
    release(course, ASSIGNMENTS)
    reports, messages = {}, []
    for assignment in ASSIGNMENTS:
        for source in course.source_notebooks(assignment):
            released = nbformat.read(course.release_dir(assignment) / source.name, as_version=4)
            reference = student_version(released, solution_answers(nbformat.read(source, as_version=4)))
            for student, nb in (("reference", reference), ("unanswered", released)):
                folder = course.submitted_dir(student, assignment)
                folder.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, folder / source.name)
        reports[assignment] = autograde(course, assignment, GradeOptions(workers=2, notebook_timeout=300),
                                        echo=messages.append)["students"]
        lines, withheld = feedback(course, assignment)
        assert withheld == [], lines
    return course, reports


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_answers_score_full_marks(graded, assignment):
    entry = graded[1][assignment]["reference"]
    assert entry["status"] == "graded", entry["flags"]
    assert entry["max_score"] > 0
    assert entry["score"] == entry["max_score"], entry["notebooks"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_notebooks_score_zero_and_grade_cleanly(graded, assignment):
    entry = graded[1][assignment]["unanswered"]
    assert entry["status"] == "graded", entry["flags"]
    assert entry["score"] == 0
    for notebook in entry["notebooks"].values():
        assert notebook["execution"]["status"] == "ok", notebook["execution"]


def test_no_solution_or_hidden_test_in_released_notebooks_or_feedback(graded):
    course = graded[0]
    secrets = leakscan.course_secrets(SOLUTIONS, package_folder())
    assert secrets, "the solution notebooks have no solution or hidden-test lines to look for"
    assert leakscan.scan([course.root / "release"], secrets) == []
    assert leakscan.scan([course.root / "feedback"], secrets, kinds=("hidden test",)) == []
    assert leakscan.scan([course.root / "feedback" / "unanswered"], secrets) == []
    # The scan does find them where they belong (the instructor's autograded notebooks).
    assert leakscan.scan([course.root / "autograded" / "reference"], secrets)
