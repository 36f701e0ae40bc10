"""The instructor's "Push grades to the LMS" page, ``/hub/lms/<course>``, served by the hub itself.

A push to the LMS is signed with the tool's private key (``autograder/lti.py``), root's alone,
beside the roster. The course's grader service runs as the course's grader account, which must not
read that key: with it, one course's instructors could write any course's grades in the LMS. So
the button is here, in the hub's own process, and runs what ``python -m autograder lms push`` runs
(``lms.push``) for this one course, for this course's instructors only (the hub group
``formgrade-<course>``; being an admin is not enough). The page exists when the roster has an
``lti`` block (the LTI authenticator serves it) and the course an ``lti_context``.

The page runs no script: each assignment of the course's gradebook has two plain forms, Preview
(a dry run) and Push to the LMS, posted with the hub's xsrf token; a browser session signs them
(no API token does). A push runs in a thread of its own, never in the hub's event loop, within a
deadline, one per course at a time; its lines are shown as ``lms push`` prints them, with the
outcome in words. The LMS's endpoints come from the hub's own record of the launches
(``lms.hub_services_file``), not from the course directory, which the course's instructors can
write.
"""

from __future__ import annotations

import asyncio
import html
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jupyterhub.handlers import BaseHandler
from tornado import web

from autograder import lms, lti
from autograder.course import Course
from autograder.errors import GradingError

PATH = r"/lms/([^/]+)"   # under the hub's prefix: /hub/lms/<course>
CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
DEADLINE = 240   # seconds a push may take before the page answers (the push itself goes on)
STYLE = ("body{font-family:sans-serif;max-width:50em;margin:2em auto;padding:0 1em;line-height:1.4}"
         "table{border-collapse:collapse}td{padding:.3em .8em .3em 0}form{display:inline}"
         "pre{background:#f4f4f4;padding:.8em;overflow-x:auto;white-space:pre-wrap}"
         "button{margin-right:.4em}.outcome{font-weight:bold}")

_pushes = ThreadPoolExecutor(4, thread_name_prefix="lms-push")
_running: dict[str, threading.Lock] = {}
_running_guard = threading.Lock()


def _lock_of(course: str) -> threading.Lock:
    with _running_guard:
        return _running.setdefault(course, threading.Lock())


def lms_courses(state_path: str):
    """The template variable ``lms_courses`` (``JupyterHub.template_vars``): for the signed-in
    user, the courses in an LMS whose instructor she is, for the home page's links to their pages."""
    def courses_of(user) -> list[str]:
        if user is None:
            return []
        try:
            contexts = (json.loads(Path(state_path).read_text()).get("lti") or {}).get("contexts", {})
        except (OSError, ValueError):
            return []
        groups = {group.name for group in user.groups}
        return sorted(course for course in set(contexts.values()) if f"formgrade-{course}" in groups)
    return courses_of


def assignments(course: Course) -> list[str]:
    """The assignments of the course's gradebook: those a push can send (read only)."""
    if not course.db_path.exists():
        return []
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url, course.course_id) as gb:
        return sorted(assignment.name for assignment in gb.assignments)


def outcome(status: int, dry_run: bool) -> str:
    """``lms.push``'s exit status in words."""
    if status == 0:
        return ("Preview done: nothing was sent to the LMS." if dry_run
                else "Done: the scores that differed are in the LMS; the others were already there.")
    return ("Some scores were refused by the LMS or lost to the network (the lines below say whose); "
            "push again once the cause is fixed: only the missing scores go.")


class LmsPushHandler(BaseHandler):
    """GET: the course's assignments, each with Preview and Push to the LMS. POST: one of them run."""

    def _course(self, course_id: str) -> tuple[Course, dict]:
        """The course and the hub's state; 404 if the hub has no such course in an LMS, 403 if the
        user is not its instructor."""
        state = json.loads(Path(self.authenticator.state_path).read_text())
        spec = state["courses"].get(course_id)
        if spec is None or course_id not in (state.get("lti") or {}).get("contexts", {}).values():
            raise web.HTTPError(404, f"no course {course_id!r} in an LMS on this hub")
        if f"formgrade-{course_id}" not in {group.name for group in self.current_user.groups}:
            raise web.HTTPError(403, f"only the instructors of {course_id} may push its grades to the LMS")
        return Course(root=Path(spec["dir"]), source=Path(spec["dir"]), course_id=course_id), state

    def _page(self, course: Course, names: list[str], result: str = "") -> None:
        xsrf = self.xsrf_form_html()
        rows = "".join(
            f"<tr><td>{html.escape(name)}</td><td>"
            f"<form method='post'>{xsrf}<input type='hidden' name='assignment' value='{html.escape(name, True)}'>"
            "<button name='action' value='preview'>Preview</button>"
            "<button name='action' value='push'>Push to the LMS</button></form></td></tr>"
            for name in names)
        listing = (f"<table>{rows}</table>" if names else
                   "<p>No assignment in the course's gradebook yet: release and autograde one first.</p>")
        title = f"Grades of {html.escape(course.course_id)} to the LMS"
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(
            f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{STYLE}</style></head><body><h1>{title}</h1>{result}"
            "<p>The score of record of each student (your batch in the gradebook: what <code>export</code> "
            "reports) goes to the assignment's line item in the LMS course. <b>Preview</b> shows what would "
            "change and sends nothing; <b>Push to the LMS</b> sends the scores that differ.</p>"
            f"{listing}<p><a href='{self.hub.base_url}home'>Back to the hub</a></p></body></html>")

    @web.authenticated
    async def get(self, course_id: str) -> None:
        course, _ = self._course(course_id)
        loop = asyncio.get_running_loop()
        self._page(course, await loop.run_in_executor(_pushes, assignments, course))

    @web.authenticated
    async def post(self, course_id: str) -> None:
        course, state = self._course(course_id)
        assignment = self.get_body_argument("assignment", "")
        dry_run = self.get_body_argument("action", "") != "push"   # anything but Push only previews
        loop = asyncio.get_running_loop()
        names = await loop.run_in_executor(_pushes, assignments, course)
        lock = _lock_of(course_id)
        if not lock.acquire(blocking=False):
            self.set_status(409)
            return self._page(course, names, "<p class='outcome'>A push of this course's grades is running: "
                                              "wait for it to finish, then try again.</p>")
        lines: list[str] = []

        def run() -> int:
            try:
                if not state.get("roster"):
                    raise GradingError("the hub was started before it kept its roster's path: restart it "
                                       "(hub stop, hub start), or run `lms push` in a terminal")
                return lms.push(course, assignment, Path(state["roster"]), dry_run=dry_run, echo=lines.append,
                                services=lms.hub_services(state["hub_dir"]).get(course_id, {}),
                                started_with=lti.Registration.from_state(state["lti"]))
            finally:
                lock.release()   # when the push ends, even one that outran the page's deadline

        what = f"{'preview' if dry_run else 'push'} of {assignment!r}"
        try:
            # (shielded: at the deadline the page answers, and the push, started or queued, still runs and
            # releases the lock)
            status = await asyncio.wait_for(asyncio.shield(loop.run_in_executor(_pushes, run)), DEADLINE)
            said = outcome(status, dry_run)
        except asyncio.TimeoutError:
            status, said = None, (f"Still running after {DEADLINE} s: it goes on in the hub. Preview again "
                                  "later to see what remains to send.")
        except GradingError as exc:
            status, said = 2, "Not done: " + " ".join(str(exc).split())
        except Exception as exc:  # noqa: BLE001 - the page says it in one line; the hub's log has the rest
            self.log.exception("lms %s of %s failed", what, course_id)
            status, said = 2, f"Not done: {type(exc).__name__} (the hub's log has the details)."
        self.log.info("lms %s of %s by %s: exit %s", what, course_id, self.current_user.name, status)
        shown = "".join(f"{html.escape(line)}\n" for line in list(lines))
        heading = html.escape(what[0].upper() + what[1:])
        self._page(course, names, f"<h2>{heading}</h2><p class='outcome'>{html.escape(said)}</p>"
                                  + (f"<pre>{shown}</pre>" if shown else ""))
