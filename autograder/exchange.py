"""nbgrader's exchange, from the instructor's side: ``publish``, ``collect``, ``return-feedback``.

On a course hub (``hub.py``) students fetch released assignments from the exchange, submit into
it and fetch their feedback from it, through nbgrader's Assignments tab. The instructor's side of
that exchange goes through nbgrader's own code, configured for this course (its id and the
exchange root, ``Course.exchange``):

- ``publish``: the student version made by ``release`` goes to ``<exchange>/<course>/outbound``;
- ``collect``: the latest submission of each student comes in (``import --from-exchange``);
- ``return-feedback``: the pages made by ``feedback`` go to ``<exchange>/<course>/feedback``, where
  each student's Assignments tab finds their own (keyed by a hash of their submission). Every
  page is scanned for the assignment's hidden tests first (a page written by anything else than
  ``feedback``, say nbgrader's own generate_feedback, may show them): one that does is refused,
  and nothing is returned.
"""

from __future__ import annotations

from . import leakscan
from .course import Course, check_id, package_folder
from .errors import GradingError
from .release import _failure_line, nbgrader_api


def _needs_exchange(course: Course, what: str) -> None:
    if not course.exchange:
        raise GradingError("no exchange: pass --exchange DIR (or set AUTOGRADER_EXCHANGE)")


def publish(course: Course, assignment: str) -> str:
    check_id("assignment", assignment)
    _needs_exchange(course, "publish")
    if not (course.release_dir(assignment)).is_dir():
        raise GradingError(f"{assignment}: nothing released yet: run `python -m autograder release "
                           f"{assignment}` first")
    with course.lock("publish"):
        result = nbgrader_api(course).release_assignment(assignment)
    if not result.get("success"):
        raise GradingError(f"{assignment}: {_failure_line(result)}")
    return f"published {assignment} to {course.exchange}/{course.course_id}/outbound/{assignment}"


def return_feedback(course: Course, assignment: str, students: list[str] | None = None) -> str:
    check_id("assignment", assignment)
    _needs_exchange(course, "return-feedback")
    for student in students or []:
        check_id("student", student)
    pages = {path.parent.parent.name for path in (course.root / "feedback").glob(f"*/{assignment}/*.html")}
    missing = sorted(set(students or []) - pages)
    if not pages or missing:
        raise GradingError(f"{assignment}: no feedback pages for "
                           f"{', '.join(missing) if missing else 'any student'}: run `python -m autograder "
                           f"feedback {assignment}` first")
    folders = [course.feedback_dir(s, assignment) for s in sorted(students or pages)]
    secrets = [s for s in leakscan.course_secrets(course.source, package_folder(), [assignment])
               if s.kind == "hidden test"]
    leaks = leakscan.scan(folders, secrets, kinds=("hidden test",))
    if leaks:
        raise GradingError(f"{assignment}: {leaks[0].where} shows a hidden test ({leaks[0].secret.origin}; "
                           f"{len(leaks)} line(s) in all): nothing was returned. Rewrite the pages with "
                           f"`python -m autograder feedback {assignment}` (nbgrader's own generate_feedback "
                           "keeps the hidden tests)")
    unkeyed = sorted(s for s in (students or pages)
                     if not (course.feedback_dir(s, assignment) / "submission_secret.txt").is_file())
    if unkeyed:
        raise GradingError(f"{assignment}: the feedback of {', '.join(unkeyed)} has no submission secret (their work "
                           "was imported from a folder or zip, not collected from the exchange), so the exchange "
                           "cannot hand it back; name the others with --student (the pages of "
                           f"{', '.join(unkeyed)} were checked: no hidden test)")
    with course.lock("return-feedback"):
        api = nbgrader_api(course)
        for student in students or [None]:
            result = api.release_feedback(assignment, student)
            if not result.get("success"):
                raise GradingError(f"{assignment}: {_failure_line(result)}")
    who = ", ".join(students) if students else f"{len(pages)} student(s)"
    return f"returned the feedback on {assignment} to {who} through {course.exchange}"


def due_date(course: Course, assignment: str):
    """The assignment's due date from the course's ``due.json`` (a course hub writes it from the
    roster's ``due``), as a UTC datetime; None if it has none."""
    import json

    from nbgrader.utils import parse_utc

    try:
        dates = json.loads((course.root / "due.json").read_text())
    except (OSError, ValueError):
        return None
    return parse_utc(dates[assignment]) if assignment in dates else None


def late_submissions(course: Course, assignment: str) -> list[str]:
    """After a collect: the due date goes into nbgrader's gradebook (the formgrader shows each
    submission's lateness, and nbgrader's late-submission policy applies to it), and one line per
    student whose collected submission came after it."""
    from nbgrader.utils import parse_utc

    from .records import open_gradebook

    due = due_date(course, assignment)
    if due is None:
        return []
    with open_gradebook(course) as gb:
        gb.update_or_create_assignment(assignment, duedate=due)
    lines = []
    for student in course.submitted_students(assignment):
        stamp_file = course.submitted_dir(student, assignment) / "timestamp.txt"
        try:
            when = parse_utc(stamp_file.read_text().strip())
        except Exception:  # noqa: BLE001 - an unreadable timestamp was refused at import already
            continue
        if when > due:
            lines.append(f"LATE {student}: submitted {when:%Y-%m-%d %H:%M} UTC, {str(when - due).split('.')[0]} "
                         f"after the due date ({due:%Y-%m-%d %H:%M} UTC)")
    return lines
