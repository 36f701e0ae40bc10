"""A course's check service on the course hub: ``/services/checks-<course>/``.

Run by the hub as the course's grader account (``python -m autograder.jupyterhub.check_service``),
with the course's settings in its environment (``AUTOGRADER_COURSE_ID``, ``_COURSE_DIR``,
``_SOURCE``, ``_EXCHANGE``, as the grader service has them). It keeps ``checkservice.Engine``
running (the exchange watched, the class's queue in the course directory, warm workers) and
answers, each user signed in through the hub (OAuth, as every hub service):

- ``GET  {prefix}``: the user's own checks, newest first, with links to their pages;
- ``GET  {prefix}assignments/<assignment>``: the page of her newest check of that assignment
  (``checks.render``: it refreshes itself while the check waits or runs);
- ``GET  {prefix}api/assignments/<assignment>``: the same as JSON (state, place, verdicts);
- ``POST {prefix}api/assignments/<assignment>``: "I just submitted": look at the exchange now;
- ``GET  {prefix}instructor/<assignment>``: every student's newest check, for the course's
  instructors only.

A page is its student's alone: a user is answered about her own checks only (an instructor of the
course may see the overview, never ask as a student), and anyone not on the course's roster
(``people.json`` in the course directory, written by ``hub start`` and ``hub update``) is refused.
Every page runs no script (``checks.POLICY``) and may be framed by the hub's own pages only.
"""

from __future__ import annotations

import json
import os
import sys
from html import escape
from pathlib import Path

from tornado import ioloop, web
from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join

from .. import checks, checkservice
from ..course import Course, is_valid_id


class _Handler(HubOAuthenticated, web.RequestHandler):
    def initialize(self, service: "Service") -> None:
        self.service = service

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", checks.POLICY)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("Cache-Control", "no-store")

    def who(self) -> tuple[str, str]:
        """(user name, "student" or "instructor"); 403 for anyone else."""
        user = self.get_current_user()
        name = user.get("name") if isinstance(user, dict) else None
        people = self.service.people()
        if name in people.get("instructors", []):
            return name, "instructor"
        if name in people.get("students", []):
            return name, "student"
        raise web.HTTPError(403, "you are not on this course's roster")

    def assignment(self, value: str) -> str:
        if not is_valid_id(value) or not self.service.course.release_dir(value).is_dir():
            raise web.HTTPError(404, "no such assignment in this course")
        return value

    def write_error(self, status_code: int, **kwargs) -> None:
        reason = self._reason if status_code != 500 else "the check service failed; your submission is kept"
        self.finish(f"<!DOCTYPE html><meta charset=utf-8><title>{status_code}</title><p>{escape(reason)}</p>")


class Index(_Handler):
    @web.authenticated
    def get(self) -> None:
        name, _ = self.who()
        rows = self.service.queue.latest(name, limit=50)
        items = "".join(f'<li><a href="assignments/{escape(c.assignment)}">{escape(c.assignment)}</a>: '
                        f"{escape(c.submitted)}, {escape(c.state)}</li>" for c in rows)
        self.finish(f"<!DOCTYPE html><meta charset=utf-8><title>Your checks</title><h1>Your checks</h1>"
                    f"<ul>{items or '<li>none yet: submit an assignment to have it checked</li>'}</ul>")


class Page(_Handler):
    @web.authenticated
    def get(self, assignment: str) -> None:
        name, _ = self.who()
        assignment = self.assignment(assignment)
        self.service.engine.look_now()   # (she may have just submitted: the exchange is looked at now)
        rows = self.service.queue.latest(name, assignment, limit=1)
        if not rows:
            self.finish("<!DOCTYPE html><meta charset=utf-8><meta http-equiv=refresh content=2>"
                        f"<title>Check of {escape(assignment)}</title><p>No submission of {escape(assignment)} "
                        "has reached the check yet (this page looks again every two seconds).</p>")
            return
        check = rows[0]
        self.finish(checks.render(check, checks.policy(self.service.course, assignment), self.service.queue.place(check)))


class Api(_Handler):
    def check_xsrf_cookie(self) -> None:
        """The POST only asks the service to look at the exchange now: it changes nothing of anyone's."""

    def status(self, name: str, assignment: str) -> dict:
        rows = self.service.queue.latest(name, assignment, limit=1)
        if not rows:
            return {"state": None}
        check = rows[0]
        rule = checks.policy(self.service.course, assignment)
        answer = {"state": check.state, "submitted": check.submitted, "reason": check.reason,
                  "place": self.service.queue.place(check), "show": rule.show}
        if check.state == checks.DONE:
            answer["cells"] = checks.verdicts(check, rule)
            if rule.show == "points":
                answer.update(score=check.result.get("score"), max_score=check.result.get("max_score"))
        return answer

    @web.authenticated
    def get(self, assignment: str) -> None:
        name, _ = self.who()
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(self.status(name, self.assignment(assignment))))

    @web.authenticated
    def post(self, assignment: str) -> None:
        name, _ = self.who()
        assignment = self.assignment(assignment)
        self.service.engine.look_now()
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(self.status(name, assignment)))


class Overview(_Handler):
    @web.authenticated
    def get(self, assignment: str) -> None:
        _, role = self.who()
        if role != "instructor":
            raise web.HTTPError(403, "the overview is the course's instructors'")
        assignment = self.assignment(assignment)
        def points(check: checks.Check) -> str:
            return f"{check.result.get('score', 0):g} / {check.result.get('max_score', 0):g}" if check.result else ""

        rows = "".join(f"<tr><td>{escape(c.student)}</td><td>{escape(c.submitted)}</td><td>{escape(c.state)}</td>"
                       f"<td>{points(c)}</td><td>{escape(c.reason)}</td></tr>"
                       for c in self.service.queue.all_latest(assignment))
        self.finish(f"<!DOCTYPE html><meta charset=utf-8><title>Checks of {escape(assignment)}</title>"
                    f"<h1>Checks of {escape(assignment)}</h1><p>Feedback only: the grade of record is your "
                    f"autograde of the collected submission.</p><table><tr><th>student</th><th>submitted</th>"
                    f"<th>state</th><th>points</th><th>reason</th></tr>{rows}</table>")


class Service:
    def __init__(self, course: Course, workers: int) -> None:
        self.course = course
        self.queue = checks.Queue(course.root / "checks" / "checks.sqlite")
        course.logs_dir.mkdir(mode=0o700, exist_ok=True)
        log = open(course.logs_dir / "checks.log", "a", buffering=1)
        self.engine = checkservice.Engine(course, self.queue, workers=workers, log=log)

    def people(self) -> dict:
        try:
            return json.loads((self.course.root / checks.PEOPLE_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def app(self, prefix: str) -> web.Application:
        def route(path: str) -> str:
            return url_path_join(prefix, path)

        args = {"service": self}
        return web.Application([
            (route("oauth_callback"), HubOAuthCallbackHandler),
            (route(r"/?"), Index, args),
            (route(r"assignments/([^/]+)/?"), Page, args),
            (route(r"api/assignments/([^/]+)/?"), Api, args),
            (route(r"instructor/([^/]+)/?"), Overview, args),
        ], cookie_secret=os.urandom(32), xsrf_cookies=True)


def main() -> int:
    course = Course(root=os.environ["AUTOGRADER_COURSE_DIR"], source=os.environ["AUTOGRADER_SOURCE"],
                    course_id=os.environ["AUTOGRADER_COURSE_ID"], exchange=os.environ["AUTOGRADER_EXCHANGE"])
    service = Service(course, workers=int(os.environ.get("AUTOGRADER_CHECK_WORKERS", "2")))
    service.engine.start()
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    url = os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101")
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    service.app(prefix).listen(port, address="127.0.0.1")
    try:
        ioloop.IOLoop.current().start()
    finally:
        service.engine.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
