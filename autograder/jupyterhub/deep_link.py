"""The instructor's choice of links for the LMS (LTI Deep Linking 2.0): ``/hub/lti13/links/<id>``.

An instructor who adds the tool to an LMS course through a deep linking placement (Canvas's
*Assignment Selection* or *Link Selection* with the message type ``LtiDeepLinkingRequest``;
Moodle's *Select content*) is launched with a deep linking request. The launch signs her in as any
launch does (``lti_auth.py``; only an Instructor or TeachingAssistant of the course may send one,
``lti.deep_linking_of``) and lands here: the course's assignments (those of its gradebook, with
their points) and the course's assignment list, each a button. Her choice goes back to the LMS as
an ``LtiDeepLinkingResponse``: a JWT signed with the tool's key (pylti1p3's ``DeepLink``, in the
hub's own process: the key is root's) that holds one LTI resource link. Its custom parameter
``assignment`` names the assignment (a later launch from it opens that notebook), and its line item
(``resourceId``: the assignment, ``scoreMaximum``: the gradebook's points) is the one ``lms push``
writes to. The LMS's opaque ``data`` goes back as it came.

The pages run no script: the last one is a form to the LMS's return address that she sends with a
button. A request is the launching instructor's alone, for ten minutes, and is used once.
"""

from __future__ import annotations

import asyncio
import html
import json
import secrets
import time
from pathlib import Path
from urllib.parse import urlsplit

from jupyterhub.handlers import BaseHandler
from tornado import web

from autograder import lms, lti
from autograder.course import Course

PATH = r"/lti13/links/([A-Za-z0-9_-]{20,64})"   # under the hub's prefix
LIFETIME = 600
STYLE = ("body{font-family:sans-serif;max-width:50em;margin:2em auto;padding:0 1em;line-height:1.4}"
         "table{border-collapse:collapse}td{padding:.3em .8em .3em 0}form{display:inline}")

_pending: dict[str, dict] = {}   # id -> {"user", "admitted", "until"}


def remember(user: str, admitted: dict) -> str:
    """Keep a deep linking request for the instructor who sent it; its id, for the page's address."""
    now = time.time()
    for key in [key for key, entry in _pending.items() if entry["until"] < now]:
        del _pending[key]
    key = secrets.token_urlsafe(24)
    _pending[key] = {"user": user, "admitted": admitted, "until": now + LIFETIME}
    return key


def offered(course: Course) -> list[tuple[str, float]]:
    """The assignments of the course's gradebook and their points (those a link can name)."""
    if not course.db_path.exists():
        return []
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url, course.course_id) as gb:
        return sorted((assignment.name, float(assignment.max_score)) for assignment in gb.assignments)


def response_jwt(state: dict, request: dict, assignment: str | None, points: float | None) -> str:
    """The signed LtiDeepLinkingResponse with one LTI resource link: to ``assignment`` (its line
    item with ``points``), or, for None, to the course's assignment list."""
    from pylti1p3.deep_link import DeepLink
    from pylti1p3.deep_link_resource import DeepLinkResource
    from pylti1p3.lineitem import LineItem

    registration = lti.Registration.from_state(state["lti"])
    course = request["admitted"]["course"]
    settings = request["admitted"]["deep_linking"]
    link = DeepLinkResource().set_url(f"{state['url']}/hub/lti13/oauth_login")
    if assignment is None:
        link.set_title(f"{course}: assignments")
    else:
        link.set_title(f"{assignment} ({course})").set_custom_params({"assignment": assignment})
        link.set_lineitem(LineItem().set_score_maximum(points).set_label(assignment).set_resource_id(assignment))
    return DeepLink(lms.tool_registration(registration), settings["deployment_id"],
                    {"deep_link_return_url": settings["return_url"], "data": settings["data"]}).get_response_jwt([link])


class DeepLinkHandler(BaseHandler):
    """GET: the course's assignments to link. POST: the chosen one, signed, and the form back to the LMS."""

    def _request(self, key: str, use: bool = False) -> dict:
        entry = _pending.get(key)
        if entry is None or entry["until"] < time.time():
            raise web.HTTPError(404, "This choice of links has expired or was made already: add the tool's link in "
                                     "the LMS again")
        if entry["user"] != self.current_user.name:
            raise web.HTTPError(403, "This choice of links belongs to the instructor whose launch opened it")
        if use:
            del _pending[key]
        return entry

    def _state(self) -> dict:
        return json.loads(Path(self.authenticator.state_path).read_text())

    def _course(self, state: dict, entry: dict) -> Course:
        folder = Path(state["courses"][entry["admitted"]["course"]]["dir"])
        return Course(root=folder, source=folder, course_id=entry["admitted"]["course"])

    def _finish(self, entry: dict, title: str, body: str) -> None:
        back = urlsplit(entry["admitted"]["deep_linking"]["return_url"])
        lms_origin = f"{back.scheme}://{back.netloc}"
        # no script; forms to the hub and to the LMS's return address only; framed by the LMS (its
        # deep linking dialogue) or the hub
        self.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "
                                                   f"form-action 'self' {lms_origin}; "
                                                   f"frame-ancestors 'self' {lms_origin}")
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                    f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")

    @web.authenticated
    async def get(self, key: str) -> None:
        entry = self._request(key)
        state = self._state()
        course = self._course(state, entry)
        items = await asyncio.get_running_loop().run_in_executor(None, offered, course)
        xsrf = self.xsrf_form_html()

        def button(value: str, label: str) -> str:
            return (f"<form method='post'>{xsrf}<input type='hidden' name='assignment' value='{html.escape(value, True)}'>"
                    f"<button>{html.escape(label)}</button></form>")

        rows = "".join(f"<tr><td>{button(name, f'Link {name}')}</td><td>{points:g} points</td></tr>"
                       for name, points in items)
        listing = (f"<table>{rows}</table>" if items else
                   "<p>No assignment in the course's gradebook yet: release one (the formgrader) to link it.</p>")
        self._finish(entry, f"A link to {course.course_id} in the LMS",
                     "<p>Choose what the LMS's link opens. A link to an assignment opens its notebook in the "
                     "student's server and gives the LMS the assignment's grade column (its points from the "
                     "gradebook), which <b>Push to the LMS</b> fills.</p>"
                     f"{listing}<p>{button('', 'Link the course’s assignment list')}</p>")

    @web.authenticated
    async def post(self, key: str) -> None:
        entry = self._request(key)
        state = self._state()
        chosen = self.get_body_argument("assignment", "")
        loop = asyncio.get_running_loop()
        points = None
        if chosen:
            items = dict(await loop.run_in_executor(None, offered, self._course(state, entry)))
            if chosen not in items:
                raise web.HTTPError(400, f"{chosen!r} is no assignment of the course's gradebook")
            points = items[chosen]
        entry = self._request(key, use=True)
        token = await loop.run_in_executor(None, response_jwt, state, entry, chosen or None, points)
        back = entry["admitted"]["deep_linking"]["return_url"]
        what = f"the assignment {chosen}" if chosen else "the course's assignment list"
        self.log.info("LTI deep link: %s linked %s of %s", self.current_user.name, what, entry["admitted"]["course"])
        self._finish(entry, "Back to the LMS",
                     f"<p>The link to {html.escape(what)} is ready. Send it to the LMS:</p>"
                     f"<form method='post' action='{html.escape(back, True)}'>"
                     f"<input type='hidden' name='JWT' value='{html.escape(token, True)}'>"
                     "<button>Add the link to the LMS course</button></form>")
