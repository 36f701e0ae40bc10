"""Where an LTI launch lands in a student's server (``lti.landing``): ``/attention/open``.

``?course=C&assignment=A`` opens the assignment's notebook in JupyterLab, fetching the assignment
first (nbgrader's own fetch, as the Assignments tab does) if she has not yet; ``?course=C`` (a
link to the course, not an assignment) shows the course's assignments, each a link that opens it.
An assignment not released yet shows the list with a line saying so. Loaded by the students'
``jupyter_server_config.py`` from its own folder (the hub's ``etc/student``).
"""

import html
import re

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_escape, url_path_join
from tornado import web

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class OpenHandler(JupyterHandler):
    @web.authenticated
    def get(self):
        course = self.get_argument("course", "")
        assignment = self.get_argument("assignment", "") or None
        if not _ID.match(course) or (assignment and (not _ID.match(assignment) or ".." in assignment)):
            raise web.HTTPError(400, "the link names no course or assignment of this hub")
        manager = self.settings["assignment_list_manager"]
        listed = manager.list_released_assignments(course_id=course)
        if not listed["success"]:
            raise web.HTTPError(500, "the course's assignments cannot be listed now; try again in a minute")
        assignments = {a["assignment_id"]: a for a in listed["value"] if a["course_id"] == course}
        note = ""
        if assignment and assignment in assignments:
            entry = assignments[assignment]
            if entry["status"] == "released":
                fetched = manager.fetch_assignment(course, assignment)
                if not fetched["success"]:
                    raise web.HTTPError(500, f"{assignment} could not be fetched; open the Assignments tab")
                entry = {a["assignment_id"]: a for a in manager.list_released_assignments(course_id=course)["value"]
                         if a["course_id"] == course}[assignment]
            notebooks = sorted(nb["path"] for nb in entry.get("notebooks", []))
            if notebooks:
                return self.redirect(url_path_join(self.base_url, "lab", "tree", url_escape(notebooks[0])))
        elif assignment:
            note = f"{assignment} is not released yet: ask your instructor, or come back later."
        rows = "".join(
            f'<li><a href="{html.escape(url_path_join(self.base_url, "attention", "open"))}?course='
            f'{html.escape(url_escape(course))}&amp;assignment={html.escape(url_escape(name))}">{html.escape(name)}</a>'
            f' ({html.escape(entry["status"])})</li>' for name, entry in sorted(assignments.items()))
        self.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
        self.finish(f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(course)}: assignments'
                    f'</title></head><body><h1>{html.escape(course)}: assignments</h1>'
                    f'{f"<p>{html.escape(note)}</p>" if note else ""}'
                    f'<ul>{rows or "<li>none released yet</li>"}</ul>'
                    f'<p><a href="{html.escape(url_path_join(self.base_url, "lab"))}">JupyterLab</a></p></body></html>')


def _load_jupyter_server_extension(server_app):
    web_app = server_app.web_app
    web_app.add_handlers(".*$", [(url_path_join(web_app.settings["base_url"], "attention", "open"), OpenHandler)])


def _jupyter_server_extension_points():
    return [{"module": "attention_landing"}]
