"""The formgrader guard of a course's grader service, offline: what the formgrader renders of a
submission, and the policy it is served under (the hub test checks the same through the hub)."""

from __future__ import annotations

import re

import nbformat
from nbconvert.exporters import HTMLExporter
from nbgrader.server_extensions.formgrader import handlers
from traitlets.config import Config

from autograder.jupyterhub import formgrader_guard

PAYLOADS = ['<img src=x onerror="alert(1)">', "<script>alert(2)</script>", "[link](javascript:alert(3))",
            "<iframe src=/hub/admin></iframe>", '<svg onload="alert(4)"></svg>', "[r]: JavaScript:alert(5)\n\n[k][r]"]


def rendered(notebook) -> str:
    """The page the formgrader's submission view writes, with the guard's exporter settings."""
    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    exporter = HTMLExporter(config=config)
    exporter.sanitize_html = True
    exporter.register_preprocessor(formgrader_guard.sanitizer(), enabled=True)
    html, _ = exporter.from_notebook_node(notebook, resources={
        "base_url": "/services/c", "notebook_id": "nb", "assignment_id": "a", "submission_id": "s", "index": 0,
        "total": 1, "student": "bo", "notebook_path": "p"})
    return formgrader_guard.add_nonce(html.encode(), "NONCE").decode()


def test_what_a_student_wrote_is_shown_as_text_and_runs_nothing():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(p) for p in PAYLOADS]
    code = nbformat.v4.new_code_cell("display(HTML(...))")
    code.outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": '<img src=y onerror="alert(6)"><script>alert(7)</script>',
        "application/javascript": "alert(8)", "image/svg+xml": '<svg onload="alert(9)"></svg>'})]
    notebook.cells.append(code)
    html = rendered(notebook)
    template, student = re.split(r'<div\b[^>]*\bid="notebook"', html, maxsplit=1)
    # the formgrader's own scripts carry the page's nonce; nothing in the notebook's part runs
    assert template.count("<script") == template.count('<script nonce="NONCE"') > 0
    assert "<script" not in student and "<iframe" not in student
    assert not re.search(r"<[^>]+\son(error|load)\s*=", student)
    assert not re.search(r"(?i)href=\"\s*javascript:", student)
    assert "onerror" in student   # shown, as text, for the instructor to see


def test_the_policy_runs_only_scripts_with_the_pages_nonce():
    policy = formgrader_guard.strict_policy("abc")
    script_src = next(part for part in policy.split("; ") if part.startswith("script-src"))
    assert "'nonce-abc'" in script_src and "'unsafe-inline'" not in script_src and "'self'" not in script_src
    assert "object-src 'none'" in policy and "base-uri 'none'" in policy and "frame-src 'none'" in policy
    # the template's two inline handlers, by hash; 'unsafe-hashes' allows those handlers only
    assert script_src.count("'sha256-") == 2


def test_a_page_without_a_notebook_gets_no_nonce():
    page = b"<html><body><script>alert(1)</script></body></html>"
    assert formgrader_guard.add_nonce(page, "N") == page


def test_the_formgraders_buttons_run_the_courses_commands(monkeypatch):
    from nbgrader.apps.api import NbGraderAPI

    calls = []
    monkeypatch.setattr(formgrader_guard, "route", lambda command: calls.append(command) or {"success": True})
    for name in ("generate_assignment", "release_assignment", "collect", "autograde", "generate_feedback",
                 "release_feedback"):
        monkeypatch.setattr(NbGraderAPI, name, getattr(NbGraderAPI, name))   # restored after the test
    formgrader_guard.patch_api()
    api = NbGraderAPI.__new__(NbGraderAPI)
    api.generate_assignment("a1")
    api.release_assignment("a1")
    api.collect("a1")
    api.autograde("a1", "bo")
    api.generate_feedback("a1")
    api.generate_feedback("a1", "bo")
    api.release_feedback("a1", "bo")
    assert calls == [["release", "a1"], ["publish", "a1"], ["collect", "a1"], ["autograde", "a1", "--student", "bo"],
                     ["feedback", "a1"], ["feedback", "a1", "--student", "bo"],
                     ["return-feedback", "a1", "--student", "bo"]]
