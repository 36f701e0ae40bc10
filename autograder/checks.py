"""Check on submit: what a course allows, and the class's one queue of checks.

A student who submits on the course hub may have her submission checked at once by the same
sandboxed judge as the instructor's batch (``checkservice.py`` runs the checks). A check is
feedback, never a grade: it writes nothing into the gradebook, and the grade of record stays the
instructor's ``autograde`` of the collected submission.

**What the instructor allows, per assignment** (``Policy``; the roster's ``checks`` of a course,
written to the course directory's ``checks.json`` by ``hub start`` and ``hub update``)::

    checks:
      default: {show: hidden, per_hour: 5, until_due: true}
      ch3a_multi_query_penalty: {show: points}

- ``show``: ``off`` (no checks), ``visible`` (each test cell's visible part: passed, or its own
  message), ``hidden`` (the whole cell, hidden tests included, passed or failed; a hidden test
  that failed gives only the instructor's reason), ``points`` (the same, with the points);
- ``per_hour``: how many checks a student gets per assignment in any hour; a check counts only
  when it ran (one refused, one that could not run, one superseded before it ran cost nothing);
- ``until_due``: no checks after the assignment's due date (the course's ``due.json``).

**The queue** (``Queue``, an SQLite file of the course directory, so that restarting the hub
loses no check): one for the class. A submission is refused at once, with the reason in one
sentence, when its assignment's checks are off, past their due date, or over the student's rate;
otherwise it is queued and supersedes her older submission of the same assignment still waiting.
The next check to run goes to the student who has waited longest since her last check started
(her newest submission first), and a student has at most one check running: submitting many
times holds no one's place but her own.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .course import Course, check_id
from .errors import GradingError

SHOW = ("off", "visible", "hidden", "points")
POLICY_KEYS = {"show", "per_hour", "until_due"}
HOUR = 3600.0
FILE_NAME = "checks.json"           # in the course directory: the course's policies
PEOPLE_FILE = "people.json"         # ... and who is on its roster: {"instructors": [...], "students": [...]}


@dataclass(frozen=True)
class Policy:
    show: str = "off"
    per_hour: int = 5
    until_due: bool = True

    @property
    def on(self) -> bool:
        return self.show != "off"

    @classmethod
    def read(cls, value, where: str, base: "Policy | None" = None) -> "Policy":
        """A policy from the roster's mapping (keys it leaves out come from ``base``); a clear
        error naming ``where`` for anything else."""
        base = base or cls()
        if value is None:
            return base
        if not isinstance(value, dict):
            raise GradingError(f"{where} must be a mapping with {', '.join(sorted(POLICY_KEYS))}")
        unknown = set(value) - POLICY_KEYS
        if unknown:
            raise GradingError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(POLICY_KEYS)})")
        show = value.get("show", base.show)
        if show is False:   # YAML's `off`
            show = "off"
        if show not in SHOW:
            raise GradingError(f"{where}.show must be one of {', '.join(SHOW)}, got {show!r}")
        per_hour = value.get("per_hour", base.per_hour)
        if isinstance(per_hour, bool) or not isinstance(per_hour, int) or not 1 <= per_hour <= 1000:
            raise GradingError(f"{where}.per_hour must be a whole number from 1 to 1000, got {per_hour!r}")
        until_due = value.get("until_due", base.until_due)
        if not isinstance(until_due, bool):
            raise GradingError(f"{where}.until_due must be true or false, got {until_due!r}")
        return cls(show, per_hour, until_due)


def read_policies(value, course: str) -> dict[str, dict]:
    """The roster's ``checks`` of ``course``, checked: ``{"default": {...}, assignment: {...}}``
    (what ``checks.json`` holds)."""
    if value is None:
        return {}
    where = f"roster: {course}.checks"
    if not isinstance(value, dict):
        raise GradingError(f"{where} must map 'default' and assignments to their settings")
    default = Policy.read(value.get("default"), f"{where}.default")
    found = {"default": asdict(default)}
    for name, spec in value.items():
        if name == "default":
            continue
        check_id("assignment", str(name), where)
        found[str(name)] = asdict(Policy.read(spec, f"{where}.{name}", default))
    return found


def policy(course: Course, assignment: str) -> Policy:
    """The assignment's policy from the course directory's ``checks.json`` (off where none says)."""
    try:
        data = json.loads((course.root / FILE_NAME).read_text())
    except (OSError, ValueError):
        return Policy()
    spec = data.get(assignment, data.get("default")) if isinstance(data, dict) else None
    try:
        return Policy.read(spec, FILE_NAME)
    except GradingError:
        return Policy()   # (written by hub start from a checked roster: a hand edit gone wrong is off)


# --- the queue ------------------------------------------------------------------------------------

QUEUED, RUNNING, DONE, SUPERSEDED, REFUSED, FAILED = "queued", "running", "done", "superseded", "refused", "failed"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL,
    assignment TEXT NOT NULL,
    submission TEXT NOT NULL UNIQUE,      -- the submission's folder name in the exchange
    submitted TEXT NOT NULL,              -- its timestamp, as nbgrader wrote it
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',      -- refused or failed: why, in one sentence
    queued REAL NOT NULL,
    started REAL,
    finished REAL,
    result TEXT                           -- done: the judge's records and the page's parts (JSON)
);
CREATE INDEX IF NOT EXISTS by_student ON checks (student, assignment, state);
"""


@dataclass
class Check:
    id: int
    student: str
    assignment: str
    submission: str
    submitted: str
    state: str
    reason: str
    queued: float
    started: float | None
    finished: float | None
    result: dict | None

    @classmethod
    def of(cls, row) -> "Check":
        values = list(row)
        values[-1] = json.loads(values[-1]) if values[-1] else None
        return cls(*values)


class Queue:
    """The class's checks, in ``<course>/checks/checks.sqlite`` (the grader account's alone)."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        path.chmod(0o600)

    def close(self) -> None:
        self._db.close()

    def _rows(self, sql: str, *args) -> list[Check]:
        return [Check.of(row) for row in self._db.execute(f"SELECT * FROM checks {sql}", args)]

    def recover(self) -> int:
        """At the service's start: checks that were running when it stopped run again (their
        results were never written). Returns how many."""
        with self._lock:
            return self._db.execute("UPDATE checks SET state = ?, started = NULL WHERE state = ?",
                                    (QUEUED, RUNNING)).rowcount

    def known(self, submission: str) -> bool:
        return bool(self._db.execute("SELECT 1 FROM checks WHERE submission = ?", (submission,)).fetchone())

    def used(self, student: str, assignment: str, now: float) -> int:
        """Checks of this student and assignment that ran (or run) within the last hour."""
        return self._db.execute("SELECT COUNT(*) FROM checks WHERE student = ? AND assignment = ? AND started >= ? "
                                "AND state IN (?, ?)", (student, assignment, now - HOUR, RUNNING, DONE)).fetchone()[0]

    def next_free(self, student: str, assignment: str, per_hour: int, now: float) -> float:
        """When this student's next check of ``assignment`` will be within her rate again."""
        started = [row[0] for row in self._db.execute(
            "SELECT started FROM checks WHERE student = ? AND assignment = ? AND started >= ? AND state IN (?, ?) "
            "ORDER BY started", (student, assignment, now - HOUR, RUNNING, DONE))]
        return started[len(started) - per_hour] + HOUR if len(started) >= per_hour else now

    def submitted(self, student: str, assignment: str, submission: str, stamp: str, rule: Policy,
                  due: float | None, now: float | None = None) -> Check:
        """A new submission: refused (with the reason), or queued, superseding the student's older
        submission of the assignment still waiting. A submission seen before is returned as it is."""
        now = time.time() if now is None else now
        with self._lock:
            found = self._rows("WHERE submission = ?", submission)
            if found:
                return found[0]
            reason = ""
            if not rule.on:
                reason = "checks are switched off for this assignment: your submission is kept for your instructor"
            elif rule.until_due and due is not None and now > due:
                reason = (f"checks stopped at the due date ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(due))}): "
                          "your submission is kept for your instructor")
            elif self.used(student, assignment, now) >= rule.per_hour:
                again = self.next_free(student, assignment, rule.per_hour, now)
                reason = (f"you have had your {rule.per_hour} checks of this assignment in the last hour: the next "
                          f"can start at {time.strftime('%H:%M UTC', time.gmtime(again))} (your submission is kept "
                          "for your instructor)")
            if not reason:
                self._db.execute("UPDATE checks SET state = ?, finished = ?, reason = ? WHERE student = ? AND "
                                 "assignment = ? AND state = ?", (SUPERSEDED, now, f"a newer submission ({stamp}) "
                                 "replaced it before it was checked", student, assignment, QUEUED))
            self._db.execute("INSERT INTO checks (student, assignment, submission, submitted, state, reason, queued, "
                             "finished) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (student, assignment, submission, stamp, REFUSED if reason else QUEUED, reason, now,
                              now if reason else None))
            return self._rows("WHERE submission = ?", submission)[0]

    def take(self, now: float | None = None) -> Check | None:
        """The next check to run (now running), or None. Fair: of the students with a check waiting
        and none running, the one whose last check started longest ago (never: first; a tie goes to
        who has waited longest), and of hers, the newest."""
        now = time.time() if now is None else now
        with self._lock:
            student = self._db.execute(
                "SELECT c.student FROM checks c WHERE c.state = ? AND NOT EXISTS (SELECT 1 FROM checks r WHERE "
                "r.student = c.student AND r.state = ?) GROUP BY c.student ORDER BY (SELECT COALESCE(MAX(s.started), 0) "
                "FROM checks s WHERE s.student = c.student), MIN(c.id) LIMIT 1", (QUEUED, RUNNING)).fetchone()
            if student is None:
                return None
            row = self._db.execute("SELECT id FROM checks WHERE student = ? AND state = ? ORDER BY id DESC LIMIT 1",
                                   (student[0], QUEUED)).fetchone()
            self._db.execute("UPDATE checks SET state = ?, started = ? WHERE id = ?", (RUNNING, now, row[0]))
            return self._rows("WHERE id = ?", row[0])[0]

    def finish(self, check: Check, result: dict, now: float | None = None) -> None:
        with self._lock:
            self._db.execute("UPDATE checks SET state = ?, finished = ?, result = ? WHERE id = ?",
                             (DONE, time.time() if now is None else now, json.dumps(result), check.id))

    def fail(self, check: Check, reason: str, now: float | None = None) -> None:
        """A check that could not run (the sandbox, the pool): costs the student nothing."""
        with self._lock:
            self._db.execute("UPDATE checks SET state = ?, finished = ?, reason = ?, started = NULL WHERE id = ?",
                             (FAILED, time.time() if now is None else now, reason, check.id))

    def waiting(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM checks WHERE state = ?", (QUEUED,)).fetchone()[0]

    def place(self, check: Check) -> int:
        """How many students' checks start before this one, as the queue stands (those whose last
        check started before this student's, or at the same time and who have waited longer)."""
        if check.state != QUEUED:
            return 0
        order = self._db.execute(
            "SELECT c.student FROM checks c WHERE c.state = ? GROUP BY c.student ORDER BY (SELECT "
            "COALESCE(MAX(s.started), 0) FROM checks s WHERE s.student = c.student), MIN(c.id)", (QUEUED,)).fetchall()
        students = [row[0] for row in order]
        return students.index(check.student) if check.student in students else 0

    def latest(self, student: str, assignment: str | None = None, limit: int = 20) -> list[Check]:
        """The student's checks, newest first (of one assignment, or all)."""
        if assignment is None:
            return self._rows("WHERE student = ? ORDER BY id DESC LIMIT ?", student, limit)
        return self._rows("WHERE student = ? AND assignment = ? ORDER BY id DESC LIMIT ?", student, assignment, limit)

    def get(self, check_id: int) -> Check | None:
        found = self._rows("WHERE id = ?", check_id)
        return found[0] if found else None

    def all_latest(self, assignment: str) -> list[Check]:
        """Every student's newest check of ``assignment`` (the instructor's overview)."""
        return self._rows("WHERE id IN (SELECT MAX(id) FROM checks WHERE assignment = ? GROUP BY student) "
                          "ORDER BY student", assignment)


# --- the student's page ---------------------------------------------------------------------------

# The page's copy of the policy (a <meta>) leaves out frame-ancestors, which a browser takes from a
# header only (it logs an error for it in a <meta>); the service sends POLICY, all of it, as a header.
PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
POLICY = PAGE_POLICY + "; frame-ancestors 'self'"
_STATE_TEXT = {QUEUED: "waiting to be checked", RUNNING: "being checked now", DONE: "checked",
               SUPERSEDED: "not checked: a newer submission replaced it", REFUSED: "not checked",
               FAILED: "not checked"}


def verdicts(check: Check, rule: Policy) -> list[dict]:
    """What the student may read of a finished check under ``rule``: per test cell, its verdict
    (the visible part's alone when the course shows visible tests only) and points (when it shows
    points). The judge's line for a hidden test that failed is already only its reason."""
    rows = []
    for notebook, entry in ((check.result or {}).get("notebooks") or {}).items():
        for cell in entry.get("cells", []):
            if rule.show == "visible":
                passed = cell.get("visible_passed") is True
                message = "" if passed else str(cell.get("feedback", ""))
                if message.startswith("a hidden test"):   # (a cell that is all hidden: nothing to say)
                    passed, message = None, ""
            else:
                passed, message = cell.get("passed") is True, str(cell.get("feedback", ""))
            row = {"notebook": notebook, "cell": cell.get("grade_id"), "passed": passed, "message": message}
            if rule.show == "points":
                row.update(points=cell.get("points", 0.0), max=cell.get("max", 0.0))
            rows.append(row)
    return rows


def render(check: Check, rule: Policy, place: int = 0, refresh: bool = True) -> str:
    """The student's page for one check: plain text, escaped, under a policy that runs nothing."""
    from html import escape

    when = check.submitted or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(check.queued))
    waiting = check.state in (QUEUED, RUNNING)
    head = [f'<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">', '<meta charset="utf-8">',
            f"<title>Check of {escape(check.assignment)}</title>"]
    if waiting and refresh:
        head.append('<meta http-equiv="refresh" content="2">')
    body = [f"<h1>Check of {escape(check.assignment)}</h1>",
            f"<p>Your submission of {escape(when)}: <strong>{_STATE_TEXT.get(check.state, check.state)}</strong>"
            + (f" ({place} other student{'s' if place != 1 else ''} ahead of you)" if check.state == QUEUED and place
               else "") + ".</p>"]
    if check.reason and check.state in (REFUSED, FAILED, SUPERSEDED):
        body.append(f'<p class="reason">{escape(check.reason[0].upper() + check.reason[1:])}.</p>')
    if check.state == DONE:
        rows = verdicts(check, rule)
        scope = {"visible": "the visible tests of each cell (the hidden tests are not run for a check)",
                 "hidden": "each cell's tests, hidden tests included",
                 "points": "each cell's tests, hidden tests included, and their points"}.get(rule.show, "")
        body.append(f"<p>What this check shows: {scope}.</p>")
        body.append("<table><tr><th>cell</th><th>result</th>" + ("<th>points</th>" if rule.show == "points" else "")
                    + "<th>why</th></tr>")
        for row in rows:
            verdict = {True: "passed", False: "failed", None: "(hidden tests only)"}[row["passed"]]
            points = f"<td>{row['points']:g} / {row['max']:g}</td>" if rule.show == "points" else ""
            body.append(f"<tr><td>{escape(str(row['cell']))}</td><td class=\"{verdict.split()[0]}\">{verdict}</td>"
                        f"{points}<td>{escape(row['message'])}</td></tr>")
        body.append("</table>")
        if rule.show == "points":
            body.append(f"<p>Points: {check.result.get('score', 0):g} of {check.result.get('max_score', 0):g}.</p>")
        notes = [note for entry in (check.result.get("notebooks") or {}).values() for note in entry.get("notes", [])]
        if notes:
            body.append("<p>Notes:</p><ul>" + "".join(f"<li>{escape(note)}</li>" for note in notes) + "</ul>")
    body.append("<p><em>A check is feedback, not your grade: your grade is your instructor's, from the submission "
                "they collect.</em></p>")
    style = ("<style>body{font-family:sans-serif;max-width:48rem;margin:1rem}td,th{padding:.2rem .6rem;"
             "text-align:left;vertical-align:top}.passed{color:#05620b}.failed{color:#9b1c1c}</style>")
    return "<!DOCTYPE html>\n<html><head>" + "".join(head) + style + "</head><body>" + "".join(body) + \
        "</body></html>\n"
