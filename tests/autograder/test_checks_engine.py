"""Check on submit, the engine: a submission in the exchange is graded at once by the batch's own
sandbox and judge, writes nothing into the gradebook, and gets the same verdicts as the
instructor's ``collect`` and ``autograde`` of it, for a NumPy and a torch assignment."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from autograder import checks, checkservice
from autograder.course import Course
from autograder.records import open_gradebook

from grader_helpers import REPO, FixtureCourse, needs_bwrap, run_cli

pytestmark = needs_bwrap
COURSE = "attention_course"


def put(exchange, student: str, assignment: str, stamp: str, nb) -> str:
    """A submission laid out as nbgrader's ExchangeSubmit writes it; its folder's name."""
    name = f"{student}+{assignment}+{stamp}+{os.urandom(4).hex()}"
    folder = exchange / COURSE / "inbound" / name
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    (folder / "timestamp.txt").write_text(stamp)
    return name


def wait(queue, names, timeout=240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {name: queue._rows("WHERE submission = ?", name) for name in names}
        if all(rows and rows[0].state not in (checks.QUEUED, checks.RUNNING) for rows in found.values()):
            return {name: rows[0] for name, rows in found.items()}
        time.sleep(0.2)
    raise AssertionError(f"the checks did not finish within {timeout} s")


def verdicts(result: dict) -> dict:
    return {cell["grade_id"]: cell["passed"] for entry in result["notebooks"].values() for cell in entry["cells"]}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The fixture assignment (NumPy) and ch7b (torch), released, with an exchange."""
    base = tmp_path_factory.mktemp("checks")
    source = base / "source"
    shutil.copytree(REPO / "tests" / "autograder" / "fixtures" / "source" / "fx_softmax", source / "fx_softmax")
    shutil.copytree(REPO / "solutions" / "ch7b_dense_stack_torch", source / "ch7b_dense_stack_torch")
    root = base / "grading"
    for assignment in ("fx_softmax", "ch7b_dense_stack_torch"):
        done = run_cli(root, source, "release", assignment)
        assert done.returncode == 0, done.stderr
    (root / checks.FILE_NAME).write_text(json.dumps({"default": {"show": "points", "per_hour": 5, "until_due": True}}))
    return FixtureCourse(root, source), Course(root=root, source=source, course_id=COURSE,
                                                exchange=str(base / "exchange"))


WRONG = {  # a hidden test fails; the visible ones pass
    "fx_softmax": {"softmax": "def softmax(x):\n    e = np.exp(x.astype(np.float32))   # overflows for large scores\n"
                              "    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)\n"},
    "ch7b_dense_stack_torch": None,   # (its core mistake, from its reference)
}


def wrong_answers(fixture, assignment) -> dict[str, str]:
    """The answer cells of a wrong submission: ``WRONG``'s, or the exercise's own core mistake."""
    import ast
    from textwrap import dedent, indent

    if WRONG[assignment] is not None:
        return WRONG[assignment]
    tree = ast.parse((fixture.source / assignment / "reference.py").read_text())
    mistake = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                   and getattr(node.targets[0], "id", "") == "CORE_MISTAKE")
    answers = {}
    for cell in fixture.source_notebook(assignment).cells:
        body = mistake["answers"].get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if body is not None:
            head = cell.source.split("### BEGIN SOLUTION")[0].rstrip(" ")   # (the marker's indent dropped)
            answers[cell.metadata.nbgrader.grade_id] = head + indent(dedent(body).strip("\n"), "    ") + "\n"
    assert answers, mistake
    return answers


@pytest.mark.parametrize("assignment", ["fx_softmax", "ch7b_dense_stack_torch"])
def test_a_check_grades_at_once_writes_no_grade_and_agrees_with_the_batch(course, assignment):
    fixture, real = course
    exchange = Path(real.exchange)
    right = put(exchange, "alice", assignment, "2027-03-01 09:00:00.000000 UTC", fixture.solved(assignment))
    wrong = put(exchange, "bob", assignment, "2027-03-01 09:00:01.000000 UTC",
                fixture.solved(assignment, **wrong_answers(fixture, assignment)))
    queue = checks.Queue(real.root / "checks" / "checks.sqlite")
    engine = checkservice.Engine(real, queue, workers=2, poll=0.2).start()
    try:
        done = wait(queue, [right, wrong])
    finally:
        engine.stop()
    alice, bob = done[right], done[wrong]
    assert alice.state == checks.DONE and alice.result["score"] == alice.result["max_score"] > 0, alice
    assert bob.state == checks.DONE and 0 <= bob.result["score"] < bob.result["max_score"], bob
    failed = [cell for entry in bob.result["notebooks"].values() for cell in entry["cells"] if not cell["passed"]]
    assert failed and all(cell["feedback"] for cell in failed), failed
    with open_gradebook(real) as gb:   # a check is no grade
        assert [s.student_id for s in gb.assignment_submissions(assignment)] == []
    # The instructor's batch of the same submissions: the same verdicts, cell by cell.
    collected = run_cli(real.root, real.source, "--exchange", str(exchange), "--course-id", COURSE, "collect", assignment)
    assert collected.returncode == 0, collected.stderr
    graded = run_cli(real.root, real.source, "autograde", assignment, "--workers", "2")
    assert graded.returncode == 0, graded.stderr
    report = json.loads((real.root / "reports" / f"{assignment}.json").read_text())["students"]
    for student, check in (("alice", alice), ("bob", bob)):
        batch = {grade_id: record["passed"] for notebook in report[student]["notebooks"].values()
                 for grade_id, record in notebook["tests"].items()}
        assert batch == verdicts(check.result), (student, batch, verdicts(check.result))
        assert report[student]["score"] == check.result["score"]


HOSTILE = "import time\n\ndef softmax(x):\n    while True:   # never returns: each call costs the cell's limit\n" \
          "        time.sleep(0.05)\n"


def state(queue, name: str) -> str | None:
    rows = queue._rows("WHERE submission = ?", name)
    return rows[0].state if rows else None


def test_a_flood_or_a_hostile_notebook_does_not_delay_another_students_check(course):
    """mallory hands in a notebook whose answer never returns, then four more submissions at once;
    carol then hands in hers. carol's check does not wait for mallory's (it is done long before
    mallory's first cell limit has passed), mallory's flood is one running and one waiting check (the
    others superseded, no check counted for them), and mallory's check ends at its own limits."""
    fixture, real = course
    exchange = Path(real.exchange)
    queue = checks.Queue(real.root / "checks" / "checks.sqlite")
    limit = 8
    engine = checkservice.Engine(real, queue, workers=2, poll=0.2, cell_timeout=limit, notebook_timeout=3 * limit).start()
    try:
        # (warm: the assignment's sandbox and both workers started, as on a hub that has run a check)
        wait(queue, [put(exchange, "warm1", "fx_softmax", "2027-03-02 09:00:00.000000 UTC", fixture.solved("fx_softmax")),
                     put(exchange, "warm2", "fx_softmax", "2027-03-02 09:00:00.000001 UTC", fixture.solved("fx_softmax"))])
        hostile = fixture.solved("fx_softmax", softmax=HOSTILE)
        flood = [put(exchange, "mallory", "fx_softmax", "2027-03-02 10:00:00.000000 UTC", hostile)]
        engine.look_now()
        deadline = time.monotonic() + 60
        while state(queue, flood[0]) != checks.RUNNING:
            assert time.monotonic() < deadline, "mallory's first check never started"
            time.sleep(0.1)
        flood += [put(exchange, "mallory", "fx_softmax", f"2027-03-02 10:00:0{i}.000000 UTC", hostile)
                  for i in range(1, 5)]
        engine.look_now()
        submitted = time.monotonic()
        carol = put(exchange, "carol", "fx_softmax", "2027-03-02 10:00:10.000000 UTC", fixture.solved("fx_softmax"))
        engine.look_now()
        mine = wait(queue, [carol], timeout=60)[carol]
        waited = time.monotonic() - submitted
        assert mine.state == checks.DONE and mine.result["score"] == mine.result["max_score"] > 0, mine
        assert waited < limit, f"carol waited {waited:.1f} s, past mallory's cell limit of {limit} s"
        assert state(queue, flood[0]) == checks.RUNNING   # (mallory's still runs)
        theirs = wait(queue, flood, timeout=10 * limit)
    finally:
        engine.stop()
    states = [theirs[name].state for name in flood]
    assert states[0] == checks.DONE and states[-1] == checks.DONE and set(states[1:-1]) == {checks.SUPERSEDED}, states
    first = theirs[flood[0]]
    assert first.result["score"] < first.result["max_score"], first.result
    assert first.finished - first.started < 3 * limit + 15, (first.started, first.finished)   # its own limits
