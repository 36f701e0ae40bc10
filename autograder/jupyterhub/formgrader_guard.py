"""A Jupyter server extension for a course's grader service: the formgrader, safe to open.

The formgrader shows a submission as HTML on the hub's own origin, where a script would act
with the instructor's session (set grades through the formgrader's API, run code in the grader
service). This extension, loaded beside the formgrader:

- sanitizes every notebook the formgrader renders (``autograder/sanitize.py``, which the feedback
  pages use too: nbconvert's sanitizer, no script, no event handler, no iframe or form survives in
  a markdown cell or an output, and no script URL in a markdown link);
- serves those views with a Content-Security-Policy that lets only the formgrader's own scripts
  run (a fresh nonce per page, given to the template's ``<script>`` tags only, which all come
  before the notebook's part of the page; the two inline handlers of its template by hash);
- routes the formgrader's buttons that would bypass the course's safe path to the course's own
  commands (``python -m autograder ...``): Generate and Release (``release``, ``publish``),
  Collect (``collect``: a submission counts only for the account that made it), Autograde
  (``autograde``: sandboxed), Generate Feedback (``feedback``: no hidden tests), Release
  Feedback (``return-feedback``: leak-checked). Each answers the formgrader's dialog with the
  command's own output.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import subprocess
import sys

from ..sanitize import sanitizer   # (shared with feedback.py's pages)

ROUTED_TIMEOUT = 3600   # seconds: a whole class's autograde
_HANDLERS = ("toggle_name(true);", "toggle_name(false);")   # the formgrade template's inline handlers
_SCRIPT_TAG = re.compile(rb"<script\b", re.IGNORECASE)


def _sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def strict_policy(nonce: str) -> str:
    """The Content-Security-Policy of a page that shows student-written content."""
    handlers = " ".join(_sha256(h) for h in _HANDLERS)
    return "; ".join([
        "default-src 'self'",
        f"script-src 'nonce-{nonce}' 'unsafe-hashes' {handlers}",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "frame-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ])


# Where the formgrade template puts the notebook: everything before it is the template's own.
_NOTEBOOK_START = re.compile(rb'<div\b[^>]*\bid="notebook"')


def add_nonce(html: bytes, nonce: str) -> bytes:
    """The nonce on each ``<script`` tag before the notebook's part of the page: the template's
    (in its head, and its navigation bar's tooltips), never the notebook's. A page without that
    part (the formgrader's "not found") gets no nonce at all."""
    start = _NOTEBOOK_START.search(html)
    if start is None:
        return html
    template, rest = html[:start.start()], html[start.start():]
    return _SCRIPT_TAG.sub(b'<script nonce="' + nonce.encode() + b'"', template) + rest


def route(command: list[str]) -> dict:
    """Run ``python -m autograder COMMAND...`` in this grader service; the formgrader's reply dict."""
    try:
        done = subprocess.run([sys.executable, "-m", "autograder", *command], capture_output=True, text=True,
                              timeout=ROUTED_TIMEOUT, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        return {"success": False, "error": f"python -m autograder {' '.join(command)} took over {ROUTED_TIMEOUT} s",
                "log": ""}
    log = (f"(the formgrader runs the course's own command: python -m autograder {' '.join(command)})\n"
           + done.stdout + done.stderr)
    if done.returncode == 0:
        return {"success": True, "log": log}
    return {"success": False, "error": (done.stderr or done.stdout).strip() or f"exit status {done.returncode}",
            "log": log}


def _students(student_id) -> list[str]:
    return ["--student", student_id] if student_id else []


def patch_api() -> None:
    from nbgrader.apps.api import NbGraderAPI

    NbGraderAPI.generate_assignment = lambda self, assignment_id, force=True, create=True: \
        route(["release", assignment_id])
    NbGraderAPI.release_assignment = lambda self, assignment_id: route(["publish", assignment_id])
    NbGraderAPI.collect = lambda self, assignment_id, update=True: route(["collect", assignment_id])
    NbGraderAPI.autograde = lambda self, assignment_id, student_id, force=True, create=True: \
        route(["autograde", assignment_id, *_students(student_id)])
    NbGraderAPI.generate_feedback = lambda self, assignment_id, student_id=None, force=True: \
        route(["feedback", assignment_id, *_students(student_id)])
    NbGraderAPI.release_feedback = lambda self, assignment_id, student_id=None: \
        route(["return-feedback", assignment_id, *_students(student_id)])


def patch_views() -> None:
    from nbgrader.server_extensions.formgrader import base, handlers

    def exporter(self):
        exporter = self.settings["nbgrader_exporter"]
        if not getattr(exporter, "_sanitized", False):
            exporter.sanitize_html = True
            exporter.register_preprocessor(sanitizer(), enabled=True)
            exporter._sanitized = True
        return exporter

    base.BaseHandler.exporter = property(exporter)

    view = handlers.SubmissionHandler   # the one view that renders a student's notebook
    if getattr(view, "_guarded", False):
        return
    write = view.write

    def policy(self):
        if not getattr(self, "_page_nonce", None):
            self._page_nonce = secrets.token_urlsafe(18)
        return strict_policy(self._page_nonce)

    def guarded_write(self, chunk):
        if isinstance(chunk, str):
            chunk = chunk.encode()
        if isinstance(chunk, bytes):
            policy(self)   # the nonce, if the header has not made it yet
            chunk = add_nonce(chunk, self._page_nonce)
        return write(self, chunk)

    view.content_security_policy = property(policy)
    view.write = guarded_write
    view._guarded = True


def _load_jupyter_server_extension(serverapp) -> None:
    patch_api()
    patch_views()
    serverapp.log.info("formgrader guard: sanitized submission views with a strict CSP; the formgrader's "
                       "Generate, Release, Collect, Autograde and Feedback buttons run python -m autograder")


def _jupyter_server_extension_points():
    return [{"module": "autograder.jupyterhub.formgrader_guard"}]
