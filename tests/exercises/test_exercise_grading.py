"""Every exercise in ``solutions/``, graded as an instructor grades a class and attacked as
``tools/check_exercise.py --adversarial`` attacks it: sandboxed, two assignments at a time.

For each assignment one batch holds, as students would hand them in:

* ``solution``: the reference answers typed into the released notebook: full marks;
* ``released``: the notebook as released, unanswered: zero, graded cleanly;
* ``fake-*``: every answer function replaced by zeros, its first argument, ``None``, random values
  of the solution's shapes, an exception, or a fixed linear map with its exact transpose as the
  backward pass: each scores 0; the linear fake of each function alone loses points;
* a sample of the solution's mutants: ``SCREENED_MUTANTS`` per exercise are screened against the
  tests in a process of their own, ``GRADED_MUTANTS`` of them also graded. Each loses points or is
  shown equivalent;
* ``core-mistake``: the wrong answer the exercise exists to teach against (``CORE_MISTAKE`` in its
  ``reference.py``): it loses points, and a visible test fails on it with a message that names it;
* ``wrong-N``: each plausible wrong answer of ``WRONG_ANSWERS``: it loses points, and the tests it
  fails say why (not that something is missing);
* ``reference-N``: each answer of ``REFERENCE_CALLS`` that calls the course's reference layer: the
  static scan flags it for review (in the sandbox the tracks do not even exist).

Then the feedback of every student is generated; neither the released notebooks nor the feedback
hold a solution or a hidden test. The tables ``check_exercise`` prints are part of a failure's message.
"""

from __future__ import annotations

import os
import sys

import pytest

from autograder import leakscan, similarity
from autograder.course import REPO_ROOT, package_folder
from autograder.feedback import feedback

from exercise_helpers import ALL_NOTEBOOKS, NOTEBOOKS, REFERENCE_CALLS, REFERENCE_CALL_SETUP, WRONG_ANSWERS, read, with_body, \
    with_prefix

sys.path.insert(0, str(REPO_ROOT / "tools"))
import check_exercise  # noqa: E402

SOLUTIONS = REPO_ROOT / "solutions"
ASSIGNMENTS = sorted(NOTEBOOKS)
# CI's share of the attack, sized for CI's time: every fake of every function at once, the linear fake
# of each function alone, a sample of the mutants spread over the kinds of edit (one of them also
# through the grader). `tools/check_exercise.py --adversarial` tries them all.
SCREENED_MUTANTS = int(os.environ.get("EXERCISE_SCREENED_MUTANTS", "30"))
GRADED_MUTANTS = int(os.environ.get("EXERCISE_GRADED_MUTANTS", "1"))
OPTIONS = check_exercise.Options(adversarial=True, mutants=GRADED_MUTANTS, screened=SCREENED_MUTANTS,
                                 alone=("linear",), workers=1, jobs=2)


def _answers(nb) -> dict[str, str]:
    return check_exercise.solution_answers(nb)


def extra_entries(name: str) -> list:
    source = read(name)
    found = []
    for index, (notebook, function, what, body) in enumerate(WRONG_ANSWERS):
        if notebook == name:
            found.append(check_exercise.Entry(f"wrong-{index}", f"wrong answer: {what}", "loses",
                                              _answers(with_body(source, function, body))))
    for index, (notebook, function, how, body) in enumerate(REFERENCE_CALLS):
        if notebook == name:
            variant = with_body(source, function, body)
            setup = REFERENCE_CALL_SETUP.get((notebook, function))
            if setup:
                variant = with_prefix(variant, function, setup)
            found.append(check_exercise.Entry(f"reference-{index}", f"calls {how}", "flagged", _answers(variant)))
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from autograder import sandbox

    if sandbox.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed (tools/install-system-packages.sh)")
    tables = []
    results = check_exercise.check_assignments(ASSIGNMENTS, tmp_path_factory.mktemp("exercises"), OPTIONS,
                                               {name: extra_entries(name) for name in ASSIGNMENTS}, echo=tables.append)
    for name, result in results.items():
        lines, withheld = feedback(result.course, name)
        assert withheld == [], lines
    print("\n".join(tables))
    return results


def _entry(result, student):
    assert not [note for note in result.notes if "refuses" in note], result.notes
    found = [entry for entry in result.entries if entry.student == student]
    assert found, f"{result.name}: no submission {student!r} was graded"
    return found[0]


def _records(entry) -> dict:
    return entry.records


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_solution_scores_full_marks(graded, name):
    entry = _entry(graded[name], "solution")
    # The batch holds fakes and mutants made from the solution, so copy flags are expected (they
    # change no score); any other flag is a grading problem.
    assert entry.status == "graded" or (entry.status == "flagged" and entry.flags
                                         and all(similarity.is_copy_flag(flag) for flag in entry.flags)), entry.flags
    assert entry.max_score > 0 and entry.score == entry.max_score, entry.records
    assert entry.records and all(record["passed"] for record in entry.records.values())


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_released_notebook_scores_zero_and_grades_cleanly(graded, name):
    entry = _entry(graded[name], "released")
    assert entry.status == "graded", entry.flags
    assert entry.score == 0
    for grade_id, record in entry.records.items():
        assert not record["passed"] and "NotImplementedError" in record["message"], (grade_id, record)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_fake_scores(graded, name):
    result = graded[name]
    assert not result.notes, result.notes
    fakes = [entry for entry in result.entries if entry.student.startswith("fake-")]
    assert len(fakes) >= len(check_exercise.adversary.FAKE_KINDS)
    failed = [f"{entry.label}: {entry.score}/{entry.max_score}" for entry in fakes if entry.verdict != "ok"]
    assert not failed, "\n".join(failed) + "\n\n" + check_exercise.table(result)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_core_mistake_fails_a_visible_test_that_names_it(graded, name):
    """The wrong answer the exercise exists to teach against (CORE_MISTAKE in its reference.py) loses points,
    and the student learns why before grading: a visible test fails on it with a message that names it."""
    result = graded[name]
    entry = _entry(result, "core-mistake")
    assert entry.score < entry.max_score, f"{name}: the core mistake ({entry.mistake['what']}) keeps full marks"
    named = [grade_id for grade_id, record in entry.records.items()
             if check_exercise.adversary.names_the_mistake(record, entry.mistake)]
    assert named, f"{name}: no visible test names the core mistake ({entry.mistake['what']}): {entry.records}"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_mutant_loses_points_or_is_equivalent(graded, name):
    result = graded[name]
    mutants = [entry for entry in result.entries if entry.mutant is not None]
    assert mutants, f"{name}: no mutant of the solution"
    assert not result.notes, result.notes
    survivors = [entry for entry in mutants if entry.problem]
    assert not survivors, check_exercise.table(result)
    assert sum(entry.verdict.startswith("ok") for entry in mutants) >= 0.75 * len(mutants), \
        f"{name}: most mutants are equivalent: the mutation is too weak to prove anything\n" + check_exercise.table(result)


def test_every_notebook_has_a_wrong_answer_to_try():
    for name in ALL_NOTEBOOKS:
        assert any(row[0] == name for row in WRONG_ANSWERS), f"{name}: no wrong answer is tried"
    for row in WRONG_ANSWERS + REFERENCE_CALLS:
        assert row[0] in ALL_NOTEBOOKS, f"{row[0]}: no such notebook"


def _ids(table):
    return [f"{row[0]} / {row[1]} / {row[2]}" for row in table]


TRIED = [row for row in WRONG_ANSWERS if row[0] in NOTEBOOKS]
CALLS = [row for row in REFERENCE_CALLS if row[0] in NOTEBOOKS]


@pytest.mark.parametrize("row", TRIED, ids=_ids(TRIED))
def test_a_wrong_answer_loses_points(graded, row):
    name, function, what, _ = row
    entry = _entry(graded[name], f"wrong-{WRONG_ANSWERS.index(row)}")
    assert entry.score < entry.max_score, f"{name}: the wrong {function} ({what}) keeps full marks"
    failed = {grade_id: record["message"] for grade_id, record in entry.records.items() if not record["passed"]}
    assert failed and not any("NotImplementedError" in message for message in failed.values()), failed


@pytest.mark.parametrize("row", CALLS, ids=_ids(CALLS))
def test_a_call_of_the_reference_is_flagged_for_review(graded, row):
    name, function, how, _ = row
    entry = _entry(graded[name], f"reference-{REFERENCE_CALLS.index(row)}")
    assert entry.status == "flagged", f"{name}: {function} calling {how} is not flagged"
    assert any("reference implementation" in flag for flag in entry.flags), entry.flags
    assert entry.score < entry.max_score, f"{name}: {function} calling {how} keeps full marks"


def test_no_solution_or_hidden_test_in_released_notebooks_or_feedback(graded):
    secrets = leakscan.course_secrets(SOLUTIONS, package_folder())
    assert secrets, "the solution notebooks have no solution or hidden-test lines to look for"
    for name, result in graded.items():
        root = result.course.root
        assert leakscan.scan([root / "release"], secrets) == [], name
        for folder in sorted((root / "feedback").iterdir()):
            # no submission here typed a hidden-test line, so none may show on any page
            assert leakscan.scan([folder], secrets, kinds=("hidden test",)) == [], (name, folder.name)
        assert leakscan.scan([root / "feedback" / "released"], secrets) == [], name
        # The scan does find them where they belong (the instructor's graded notebooks).
        assert leakscan.scan([root / "autograded" / "solution"], secrets), name
