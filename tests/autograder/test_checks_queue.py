"""Check on submit: the instructor's policy, the class's fair queue, and what the student's page shows."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from autograder import checks
from autograder.errors import GradingError

ON = checks.Policy("points", per_hour=3, until_due=True)
T0 = 1_800_000_000.0


@pytest.fixture
def queue(tmp_path):
    made = checks.Queue(tmp_path / "checks" / "checks.sqlite")
    yield made
    made.close()


def submit(queue, student, number, assignment="a1", rule=ON, due=None, now=None):
    return queue.submitted(student, assignment, f"{student}+{assignment}+{number}", f"2027-01-01 10:00:{number:02d}",
                           rule, due, T0 + number if now is None else now)


def test_the_roster_says_what_is_allowed_and_a_mistake_is_named():
    policies = checks.read_policies({"default": {"show": "hidden", "per_hour": 4},
                                     "ch3a_multi_query_penalty": {"show": "points"}, "ch7b": {"show": False}}, "c1")
    assert policies["ch3a_multi_query_penalty"] == {"show": "points", "per_hour": 4, "until_due": True}
    assert policies["ch7b"]["show"] == "off"   # YAML's off
    for bad, words in [({"default": {"show": "all"}}, "c1.checks.default.show must be one of"),
                       ({"x": {"per_hour": 0}}, "c1.checks.x.per_hour must be a whole number"),
                       ({"x": {"until_due": "no"}}, "until_due must be true or false"),
                       ({"x": {"when": 1}}, "unknown key"), ({"../x": {}}, "assignment")]:
        with pytest.raises(GradingError, match=words):
            checks.read_policies(bad, "c1")


def test_refusals_say_why_and_cost_nothing(queue):
    off = submit(queue, "bo", 1, rule=checks.Policy("off"))
    assert off.state == checks.REFUSED and "switched off" in off.reason
    late = submit(queue, "bo", 2, due=T0)
    assert late.state == checks.REFUSED and "due date" in late.reason
    for number in range(3, 6):   # three checks that ran: the rate is spent
        check = submit(queue, "bo", number)
        assert queue.take(T0 + number).id == check.id
        queue.finish(check, {}, T0 + number)
    over = submit(queue, "bo", 6)
    assert over.state == checks.REFUSED and "3 checks of this assignment in the last hour" in over.reason
    assert queue.used("bo", "a1", T0 + 6) == 3, "the refused ones were not counted"
    later = submit(queue, "bo", 7, now=T0 + 3 + checks.HOUR + 1)
    assert later.state == checks.QUEUED, "an hour after the first, a check is free again"
    assert submit(queue, "bo", 7).id == later.id, "a submission seen before is not queued twice"


def test_a_check_that_could_not_run_costs_nothing(queue):
    for number in range(1, 4):
        check = submit(queue, "bo", number)
        queue.fail(queue.take(T0 + number), "the sandbox did not start")
    assert queue.used("bo", "a1", T0 + 5) == 0 and submit(queue, "bo", 5).state == checks.QUEUED


def test_a_newer_submission_supersedes_the_one_still_waiting(queue):
    first, second = submit(queue, "bo", 1), submit(queue, "bo", 2)
    assert queue.get(first.id).state == checks.SUPERSEDED and "a newer submission" in queue.get(first.id).reason
    assert queue.take(T0 + 3).id == second.id and queue.take(T0 + 3) is None


def test_one_students_flood_holds_no_one_elses_place(queue):
    """Bo submits twelve times to two assignments; Cy and Di once each, after him. Each student has
    at most one check running, and the next goes to whoever waited longest since her last began."""
    for number in range(12):
        submit(queue, "bo", number, assignment=f"a{number % 2}")
    submit(queue, "cy", 20)
    submit(queue, "di", 21)
    first = queue.take(T0 + 30)
    assert first.student == "bo" and first.submission.endswith("+11"), "his newest first"
    second, third = queue.take(T0 + 31), queue.take(T0 + 32)
    assert {second.student, third.student} == {"cy", "di"}, "while his runs, nothing more of his starts"
    assert queue.take(T0 + 33) is None
    for check in (first, second, third):
        queue.finish(check, {}, T0 + 34)
    assert queue.take(T0 + 35).student == "bo", "his other assignment, now that the others had their turn"
    assert queue.waiting() == 0


def test_restarting_loses_no_check(tmp_path):
    path = tmp_path / "checks.sqlite"
    first = checks.Queue(path)
    waiting = submit(first, "bo", 1)
    running = first.take(T0 + 2)
    also = submit(first, "cy", 3)
    first.close()
    again = checks.Queue(path)
    assert again.recover() == 1
    assert {again.take(T0 + 4).id, again.take(T0 + 5).id} == {waiting.id, also.id} == {running.id, also.id}


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.text, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


RESULT = {"notebooks": {"nb": {"cells": [
    {"grade_id": "test_forward", "max": 3.0, "points": 3.0, "passed": True, "visible_passed": True, "feedback": ""},
    {"grade_id": "test_backward", "max": 4.0, "points": 0.0, "passed": False, "visible_passed": True,
     "feedback": "a hidden test of this cell failed: both gradients must match"},
    {"grade_id": "test_shapes", "max": 2.0, "points": 0.0, "passed": False, "visible_passed": False,
     "feedback": "the gradient of W_a: expected shape (3, 4), got (4, 3) <script>alert(1)</script>"}],
    "notes": ["cell answer ran past its 30 s time limit and was interrupted"]}}, "score": 3.0, "max_score": 9.0}


@pytest.mark.parametrize("show", ["visible", "hidden", "points"])
def test_the_page_shows_what_the_instructor_allows(queue, show):
    check = submit(queue, "bo", 1)
    queue.finish(queue.take(T0 + 2), RESULT, T0 + 3)
    page = checks.render(queue.get(check.id), checks.Policy(show))
    parsed = _Text()
    parsed.feed(page)
    text = " ".join(parsed.text)
    assert not [tag for tag, _ in parsed.tags if tag in ("script", "iframe", "object", "img")], "nothing runs"
    assert ("meta", {"http-equiv": "Content-Security-Policy", "content": checks.PAGE_POLICY}) in parsed.tags
    assert checks.POLICY.startswith(checks.PAGE_POLICY + ";")   # the header's: the same, and frame-ancestors
    assert "<script>alert(1)</script>" in text and "got (4, 3)" in text, "the visible message, as text"
    assert "ran past its 30 s time limit" in text
    assert "not your grade" in text
    if show == "visible":
        assert "hidden test" not in text.replace("the hidden tests are not run", "")
        assert "both gradients must match" not in text
    else:
        assert "a hidden test of this cell failed: both gradients must match" in text
    assert ("Points: 3 of 9" in text) == (show == "points")
    assert ("4 / 4" not in text) and (("0 / 4" in text) == (show == "points"))


def test_a_waiting_page_says_where_the_student_stands(queue):
    for student in ("cy", "di"):
        submit(queue, student, 1)
    mine = submit(queue, "bo", 2)
    page = checks.render(queue.get(mine.id), ON, queue.place(queue.get(mine.id)))
    assert "waiting to be checked" in page and "2 other students ahead of you" in page
    assert 'http-equiv="refresh"' in page
    refused = submit(queue, "bo", 3, rule=checks.Policy("off"))
    assert "Checks are switched off" in checks.render(refused, ON) and "refresh" not in checks.render(refused, ON)
    assert json.loads(json.dumps(checks.verdicts(queue.get(mine.id), ON))) == []
