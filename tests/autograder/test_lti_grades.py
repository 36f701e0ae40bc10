"""Grades back to the LMS (``autograder/lms.py``, ``python -m autograder lms``), against the loopback
LTI 1.3 platform of ``lti_platform.py`` and a gradebook the course's own autograde wrote."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

from autograder import lms
from autograder.course import Course
from autograder.errors import GradingError
from autograder.export import grade_rows
from autograder.lti import ensure_key, public_jwk
from grader_helpers import FIXTURES, FixtureCourse, needs_bwrap, run_cli
from lti_platform import INSTRUCTOR, LEARNER, Platform

ASSIGNMENT = "fx_softmax"   # 5 points
COURSE = "attention_course"
CONTEXT = "ctx-42"
WRONG_BACKWARD = "def softmax_backward(probabilities, dout):\n    return dout\n"


@pytest.fixture(scope="module")
def graded(released_template, tmp_path_factory) -> Path:
    """ada (5/5), bo (3/5: a wrong backward), cy (5/5) and eve (5/5) graded by autograde, all flagged (their
    answers match the solution's); the instructor reviewed ada's, bo's and cy's (as formgrader records it),
    not eve's; di has no submission."""
    root = tmp_path_factory.mktemp("lti-grades") / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root)
    for student, overrides in (("ada", {}), ("bo", {"softmax_backward": WRONG_BACKWARD}), ("cy", {}), ("eve", {})):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(course.solved(ASSIGNMENT, **overrides), folder / f"{ASSIGNMENT}.ipynb")
    extra = [] if shutil.which("bwrap") else ["--unsafe-no-sandbox"]
    done = course.cli("autograde", ASSIGNMENT, "--workers", "1", *extra)
    assert done.returncode == 0, done.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE) as gb:
        gb.update_or_create_student("di")
        for student in ("ada", "bo", "cy"):
            for grade in gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).grades:
                assert grade.needs_manual_grade   # flagged by the batch
                grade.manual_score, grade.needs_manual_grade = grade.auto_score, False   # formgrader's PUT
        gb.db.commit()
    return root


def _scores(root: Path) -> dict[str, float]:
    return {r["student"]: r["score"] for r in grade_rows(Course(root=root, source=FIXTURES))
            if r["status"] != "missing"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Setting:
    """A copy of the graded course, a platform with its LMS course, a roster that registers it."""

    def __init__(self, graded: Path, tmp_path: Path, context: str = CONTEXT, page_size: int | None = None) -> None:
        self.root = tmp_path / "grading"
        shutil.copytree(graded, self.root)
        self.course = Course(root=self.root, source=FIXTURES)
        self.key = ensure_key(tmp_path / "tool.pem")
        self.platform = Platform("tool-1", "d1", "http://127.0.0.1:9/login", "http://127.0.0.1:9/launch",
                                 {"keys": [public_jwk(self.key)]}, page_size=page_size).start()
        p, self.context = self.platform, context
        p.add_context(context, "Attention 101")
        p.add_member(context, {"sub": "u-ada", "name": "Ada", "email": "ada.l@uni.edu", "roles": [LEARNER]})
        p.add_member(context, {"sub": "u-bo", "name": "Bo", "email": "bo@uni.edu", "roles": [LEARNER]})
        p.add_member(context, {"sub": "u-prof", "name": "Prof", "email": "prof@uni.edu", "roles": [INSTRUCTOR]})
        p.add_member(context, {"sub": "u-zed", "name": "Zed", "email": "zed@uni.edu", "roles": [LEARNER]})
        self.roster = tmp_path / "roster.yml"
        self.write_roster(context=context)
        # What launches told the tool: ada launched (her LMS id); bo did not (matched by email).
        claims = {"sub": "u-ada", "name": "Ada", lms.CONTEXT_CLAIM: {"id": context},
                  lms.AGS_CLAIM: {"lineitems": p.lineitems_url(context),
                                  "scope": [lms.LINEITEM_SCOPE, lms.RESULT_SCOPE, lms.SCORE_SCOPE]},
                  lms.NRPS_CLAIM: {"context_memberships_url": p.memberships_url(context)}}
        lms.remember_launch(self.course, "ada", claims)
        lms.remember_launch(self.course, "prof", {**claims, "sub": "u-prof", "name": "Prof"})

    def write_roster(self, lti=True, context=CONTEXT) -> None:
        p = self.platform
        course = {"instructors": ["prof"], "students": ["ada", "bo", "cy", "di", "eve"]}
        if context:
            course["lti_context"] = context
        data = {"courses": {COURSE: course}}
        if lti:
            data["lti"] = {"issuer": p.issuer, "client_id": "tool-1", "deployment_ids": ["d1"],
                           "authorize_url": p.authorize_url, "jwks_url": p.jwks_url, "token_url": p.token_url,
                           "key": "tool.pem"}
        self.roster.write_text(yaml.safe_dump(data))

    def push(self, dry_run=False) -> tuple[int, list[str]]:
        lines: list[str] = []
        status = lms.push(self.course, ASSIGNMENT, self.roster, dry_run=dry_run, echo=lines.append)
        return status, lines

    def item(self) -> dict:
        (item,) = self.platform.line_items(self.context)
        return item

    def results(self) -> dict[str, float]:
        return {user: r["resultScore"] for user, r in self.platform.results(self.item()["id"]).items()}


@pytest.fixture
def setting(graded, tmp_path):
    made = Setting(graded, tmp_path)
    yield made
    made.platform.stop()


def _line(lines: list[str], student: str) -> str:
    return next(line for line in lines if line.startswith(f"{student}: "))


@needs_bwrap
def test_grades_pushed_equal_the_gradebooks_and_a_second_push_sends_nothing(setting):
    gradebook = setting.root / "gradebook.db"
    before, scores = _sha(gradebook), _scores(setting.root)
    assert scores == {"ada": 5.0, "bo": 3.0, "cy": 5.0, "eve": 5.0}   # the batch's grades, as export reports them

    status, lines = setting.push(dry_run=True)
    assert status == 0 and setting.platform.line_items(CONTEXT) == []   # a dry run writes nothing
    assert _line(lines, "ada") == "ada: would push: none -> 5/5" and "3 score(s)" not in lines[-1]
    assert lines[-1].startswith("lms push fx_softmax: dry run: 2 score(s) would change")

    status, lines = setting.push()
    assert status == 0, lines
    item = setting.item()
    assert (item["label"], item["resourceId"], item["scoreMaximum"]) == (ASSIGNMENT, ASSIGNMENT, 5.0)
    assert setting.results() == {"u-ada": 5.0, "u-bo": 3.0}   # bo matched by his email in the class list
    assert _line(lines, "cy").startswith("cy: not in the LMS") and _line(lines, "di") == "di: held: no submission"
    assert _line(lines, "eve") == "eve: held: needs manual grading"
    sent = setting.platform.scores(item["id"])
    assert len(sent) == 2 and all(s["gradingProgress"] == "FullyGraded" and s["scoreMaximum"] == 5.0 for s in sent)

    status, lines = setting.push()
    assert status == 0 and len(setting.platform.scores(item["id"])) == 2   # nothing POSTed the second time
    assert "nothing to change" in lines[-1] and _line(lines, "bo") == "bo: unchanged: 3/5"

    setting.platform.set_result(item["id"], "u-bo", 1.0)   # changed by hand in the LMS
    status, lines = setting.push(dry_run=True)
    assert _line(lines, "bo") == "bo: would push: 1 -> 3/5" and _line(lines, "ada") == "ada: unchanged: 5/5"
    assert len(setting.platform.scores(item["id"])) == 2
    status, lines = setting.push()
    assert setting.results() == {"u-ada": 5.0, "u-bo": 3.0} and len(setting.platform.scores(item["id"])) == 3
    assert _sha(gradebook) == before   # nothing is ever written to the gradebook


@needs_bwrap
def test_an_lms_that_pages_everything_under_mixed_case_urls(graded, tmp_path):
    """Canvas pages its containers unasked; a next page's URL is followed as the LMS wrote it."""
    setting = Setting(graded, tmp_path, context="Ctx-Big", page_size=1)
    try:
        status, lines = setting.push()
        assert status == 0 and setting.results() == {"u-ada": 5.0, "u-bo": 3.0}, lines   # bo: on page 2
        status, lines = setting.push()
        assert "nothing to change" in lines[-1] and len(setting.platform.scores(setting.item()["id"])) == 2
    finally:
        setting.platform.stop()


@needs_bwrap
def test_a_network_failure_and_a_refused_token_are_per_student_and_the_rest_is_pushed(setting):
    gradebook = setting.root / "gradebook.db"
    before = _sha(gradebook)
    expected = {"ada": ("u-ada", 5.0), "bo": ("u-bo", 3.0)}
    setting.platform.fail_next("network")   # one score's connection drops (which one: the first to arrive)
    status, lines = setting.push()
    (lost,) = [s for s in expected if _line(lines, s).startswith(f"{s}: network failure")]
    (kept,) = set(expected) - {lost}
    assert status == 1 and _line(lines, kept).startswith(f"{kept}: pushed: none -> ")
    assert setting.results() == dict([expected[kept]])
    setting.platform.fail_next("401")       # now the lost one's token is refused
    status, lines = setting.push()
    assert status == 1 and _line(lines, lost).startswith(f"{lost}: refused: HTTP 401: the platform refused")
    assert _line(lines, kept).startswith(f"{kept}: unchanged")
    status, lines = setting.push()          # the next push sends what is still missing, and only that
    assert status == 0 and setting.results() == {"u-ada": 5.0, "u-bo": 3.0}
    assert len(setting.platform.scores(setting.item()["id"])) == 2
    assert _sha(gradebook) == before


@needs_bwrap
def test_a_student_who_left_the_lms_course_is_reported_and_a_changed_maximum_is_updated(setting):
    setting.push()
    item = setting.item()
    setting.platform.remove_member(CONTEXT, "u-bo")
    with setting.platform.lock:   # the LMS's line item edited to 10 points by hand
        setting.platform._line_items[item["id"]]["scoreMaximum"] = 10
    status, lines = setting.push()
    assert status == 0 and "line item 'fx_softmax': 10 -> 5 points" in lines
    assert _line(lines, "bo").startswith("bo: not in the LMS") and setting.item()["scoreMaximum"] == 5
    assert _line(lines, "ada") == "ada: unchanged: 5/5"   # 10/10 in the LMS is 5/5 here


@needs_bwrap
def test_a_token_the_lms_refuses_stops_the_push_with_one_line_and_sends_nothing(setting):
    setting.platform.fail_next("401", endpoint="token")
    done = run_cli(setting.root, FIXTURES, "lms", "push", ASSIGNMENT, "--roster", str(setting.roster))
    assert done.returncode == 2 and setting.platform.line_items(CONTEXT) == []
    message = done.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith("autograder lms push: the LMS refused the tool's request (HTTP 401") and \
        message.endswith("nothing was sent")
    setting.platform.fail_next("network", endpoint="token")
    with pytest.raises(GradingError, match="the LMS could not be reached .*; nothing was sent"):
        setting.push()
    assert setting.platform.line_items(CONTEXT) == []
    done = run_cli(setting.root, FIXTURES, "lms", "push", ASSIGNMENT, "--roster", str(setting.roster))
    assert done.returncode == 0 and "2 score(s) pushed" in done.stdout, done.stderr


@needs_bwrap
@pytest.mark.parametrize("change, message", [
    ({"lti": False}, "has no lti block: this hub is not registered with an LMS"),
    ({"context": None}, "course 'attention_course' has no lti_context in the roster"),
    ({"context": "ctx-other"}, "came from LMS course 'ctx-42', but the roster's lti_context is 'ctx-other'"),
])
def test_a_course_the_lms_does_not_know_is_a_clear_error(setting, change, message):
    setting.write_roster(**change)
    done = run_cli(setting.root, FIXTURES, "lms", "push", ASSIGNMENT, "--roster", str(setting.roster))
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert setting.platform.requests == []


def test_errors_before_any_grade_is_read(tmp_path):
    course = Course(root=tmp_path / "grading", source=FIXTURES)
    with pytest.raises(GradingError, match="no gradebook"):
        lms.push(course, ASSIGNMENT, tmp_path / "roster.yml")
    with pytest.raises(GradingError, match="name the roster"):
        lms.roster_path(None)
    done = run_cli(tmp_path / "grading", FIXTURES, "lms", "--help")
    assert done.returncode == 0 and "push" in done.stdout and "members" in done.stdout


@needs_bwrap
def test_a_push_with_no_launch_yet_says_so(setting):
    (setting.root / "lti" / "services.json").unlink()
    with pytest.raises(GradingError, match="no launch from the LMS into course 'attention_course' yet"):
        setting.push()


@needs_bwrap
def test_members_compares_the_lms_class_list_with_the_roster(setting):
    lines: list[str] = []
    assert lms.members(setting.course, setting.roster, echo=lines.append) == 0
    assert [line for line in lines if line.startswith("in the LMS")] == [
        "in the LMS, not in the roster: Zed <zed@uni.edu> (LMS id u-zed, learner)"]
    assert [line for line in lines if line.startswith("in the roster")] == [
        "in the roster, not in the LMS: cy", "in the roster, not in the LMS: di", "in the roster, not in the LMS: eve"]


def test_a_launch_is_remembered_as_the_push_reads_it(tmp_path):
    course = Course(root=tmp_path / "grading", source=FIXTURES)
    claims = {"sub": 1234, "name": "Ada", lms.CONTEXT_CLAIM: {"id": CONTEXT},
              lms.AGS_CLAIM: {"lineitems": "https://lms.example.edu/ctx/lineitems", "scope": [lms.SCORE_SCOPE]},
              lms.NRPS_CLAIM: {"context_memberships_url": "https://lms.example.edu/ctx/members"}}
    lms.remember_launch(course, "ada", claims)
    lms.remember_launch(course, "bo", {**claims, "sub": "u-bo", "name": "Bo"})
    folder = tmp_path / "grading" / "lti"
    assert yaml.safe_load((folder / "users.json").read_text()) == {"ada": {"sub": "1234", "name": "Ada"},
                                                                   "bo": {"sub": "u-bo", "name": "Bo"}}
    assert yaml.safe_load((folder / "services.json").read_text()) == {
        "context_id": CONTEXT, "lineitems": "https://lms.example.edu/ctx/lineitems", "scope": [lms.SCORE_SCOPE],
        "context_memberships_url": "https://lms.example.edu/ctx/members"}
    assert lms.lms_users(course, None, ["ada", "cy"]) == {"ada": "1234", "bo": "u-bo"}
    with pytest.raises(GradingError, match="bad student id"):
        lms.remember_launch(course, "../x", claims)


def test_students_without_a_launch_are_matched_in_the_class_list_only_when_unambiguous(tmp_path):
    course = Course(root=tmp_path / "grading", source=FIXTURES)
    members = [{"user_id": "1", "email": "cy@uni.edu"}, {"user_id": "2", "email": "di@uni.edu"},
               {"user_id": "3", "email": "di@other.edu"}, {"user_id": "4", "lis_person_sourcedid": "eve",
                                                            "email": "eve.x@uni.edu"}]
    assert lms.lms_users(course, members, ["cy", "di", "eve", "fay"]) == {"cy": "1", "eve": "4"}
