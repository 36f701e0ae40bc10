"""``feedback``: HTML feedback per student, in which hidden tests never appear.

nbgrader's own feedback shows the autograded notebook as it ran, hidden tests and all. Here every
test cell says what the judge recorded for it (``metadata.autograder``, written by the grader's
main process from the judge's record, never by anything in the sandbox): passed, or failed with
the record's ``feedback`` line. For a failure in a hidden part that line is the judge's fixed
sentence and the instructor's reason (never a value, message or traceback computed for or returned
from the hidden test); for a failure in a visible part it is the visible check's own message, which
the student sees in their own kernel anyway. A cell with hidden tests is shown without them (its
source keeps the visible part) and with that one line as its only output; a cell without hidden
tests keeps the judge's own output too.

What is shown is decided from the test cells, never from what the student wrote: the student's
own cells and every output are shown as they are (they were made in the sandbox, which holds no
secret, so a secret line there is one the student typed). The instructor's part of each page (the
test cells as shown, the read-only cells, the text, the verdicts) is checked for the hidden-test
lines of the source notebook before the page is written; a page that would show one is not written
(that would be a bug of this module, the same for every student).

What a student wrote never runs in the browser that opens the page (an instructor's, on the course
hub's origin): every cell is sanitized as the formgrader's view is (``sanitize.sanitizer``: a tag or
attribute off bleach's allowlist shows as text, script URLs are blocked, outputs keep only plain
mimetypes and cleaned HTML, JavaScript and SVG outputs are dropped), and the page carries a strict
Content-Security-Policy (``POLICY``, a ``<meta http-equiv>`` first in its head) under which no
script runs at all: the page needs none (nbgrader's feedback template loads only MathJax, from a
CDN, which is left out: math shows as its TeX source). Each page written is parsed again; one
that still holds anything live (a script element, an event handler, a script URL, a frame...) or
lacks the policy is removed and withheld (a bug of this module, as above).
"""

from __future__ import annotations

import html
import shutil

import jinja2
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat.v4 import new_output
from nbgrader import utils as nbutils
from nbgrader.preprocessors import GetGrades, NbGraderPreprocessor
from traitlets import default

from . import leakscan, sanitize
from .course import Course, check_id, package_folder
from .errors import GradingError
from .release import nbgrader_api

BEGIN, END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


def verdict(cell, hidden: bool) -> str:
    """One line: what the judge recorded for a test cell (a cell without a record did not pass)."""
    record = cell.metadata.get("autograder")
    scope = "Tests of this cell (hidden tests included)" if hidden else "Tests of this cell"
    if isinstance(record, dict) and record.get("passed") is True:
        return f"{scope}: passed\n"
    line = str(record.get("feedback") or "") if isinstance(record, dict) else "no result was recorded"
    line = line.splitlines()[0][:300] if line.strip() else "failed"
    return f"{scope}: failed ({line})\n"


def is_student_cell(cell) -> bool:
    """An answer cell or a cell the student added: what the student wrote."""
    meta = cell.metadata.get("nbgrader", {})
    return not meta or bool(meta.get("solution")) or not (meta.get("locked") or meta.get("grade"))


class HideHiddenTests(NbGraderPreprocessor):
    """Every test cell shows the judge's verdict; hidden tests (and their outputs) are removed."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not nbutils.is_grade(cell) or nbutils.is_solution(cell):
            if cell.cell_type == "code" and BEGIN in cell.source and not is_student_cell(cell):
                cell.source, cell.outputs = _visible(cell.source), []  # a hidden test outside a test cell
            return cell, resources
        hidden = BEGIN in cell.source
        line = new_output("stream", name="stdout", text=verdict(cell, hidden))
        if hidden:
            cell.source = _visible(cell.source)
            cell.outputs = [line]
        else:
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "error"] + [line]
        return cell, resources


class InlineOutputs(NbGraderPreprocessor):
    """An HTML output marked ``isolated`` is shown in the page (sanitized) rather than in a frame of
    its own, which the page's policy would block (and its check would refuse)."""

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            for options in output.get("metadata", {}).values():
                if isinstance(options, dict):
                    options.pop("isolated", None)
        return cell, resources


def _visible(source: str) -> str:
    kept, hidden = [], False
    for text in source.splitlines():
        if BEGIN in text:
            hidden = True
            kept.append(text.split("#")[0] + "# (hidden tests: not shown)")
        elif END in text:
            hidden = False
        elif not hidden:
            kept.append(text)
    return "\n".join(kept)


class SecretInFeedback(GradingError):
    """The instructor's part of a feedback page would show a hidden-test line."""


def refuse_secrets(secrets: list) -> type:
    """A preprocessor (run after ``HideHiddenTests``) that fails the page when the instructor's part
    of it (everything but the student's own cells; verdicts included) shows one of ``secrets``."""
    lines = {secret.line: secret for secret in secrets}

    class RefuseSecrets(NbGraderPreprocessor):
        def preprocess_cell(self, cell, resources, index):
            if is_student_cell(cell) and cell.cell_type == "code":
                return cell, resources
            texts = cell.source.splitlines()
            if not is_student_cell(cell) and nbutils.is_grade(cell):
                texts += [o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream"]
            for text in texts:
                for line in str(text).splitlines():
                    secret = lines.get(leakscan.normalize(line))
                    if secret is not None:
                        raise SecretInFeedback(f"it would show a hidden test line ({secret.origin})")
            return cell, resources

    return RefuseSecrets


# No script, frame, object, form, connection or font from anywhere; images only from the page itself
# (data: URLs, as notebook outputs are embedded); the page's own inline styles.
POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'none'",
    "object-src 'none'",
    "frame-src 'none'",
    "connect-src 'none'",
    "img-src data:",
    "style-src 'unsafe-inline'",
    "font-src data:",
    "base-uri 'none'",
    "form-action 'none'",
])

# nbgrader's feedback template (``index.html.j2`` of its template ``feedback``), with the policy first
# in its head and without its MathJax loader (two scripts); everything else as nbgrader writes it.
_PAGE = """{%- extends 'index.html.j2' -%}
{%- block header -%}
{{- super() | replace(mathjax(), '') | replace('<head>', '<head>\\n' ~ resources.autograder_policy_meta, 1) -}}
{%- endblock header -%}
"""
_PAGE_NAME = "autograder_feedback.html.j2"


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback page, sanitized (outputs included), under ``POLICY``, without scripts."""

    @default("extra_loaders")
    def _page_loader(self):
        return [jinja2.DictLoader({_PAGE_NAME: _PAGE})]

    @default("template_file")
    def _page_file(self):
        return _PAGE_NAME

    @default("sanitize_html")
    def _sanitized(self):
        return True   # (nbconvert's templates then write no script for a JavaScript or widget output)

    def _init_resources(self, resources):
        resources = super()._init_resources(resources)
        resources["autograder_policy_meta"] = (f'<meta http-equiv="Content-Security-Policy" '
                                               f'content="{html.escape(POLICY, quote=True)}">')
        return resources


class LiveInFeedback(GradingError):
    """A written feedback page holds something that could run, or lacks the policy."""


def check_page(page: str) -> None:
    """Raises ``LiveInFeedback`` unless ``page`` is inert and declares ``POLICY``."""
    found, policies = sanitize.live_html(page)
    if found:
        raise LiveInFeedback(f"it would hold {found[0]}")
    if policies != [POLICY]:
        raise LiveInFeedback("it lacks its Content-Security-Policy")


def feedback(course: Course, assignment: str, students: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Write ``feedback/<student>/<assignment>/``; returns (messages, withheld students)."""
    check_id("assignment", assignment)
    base = course.root / "autograded"
    graded = sorted(p.name for p in base.iterdir() if (p / assignment).is_dir()) if base.is_dir() else []
    if students:
        for student in students:
            check_id("student", student)
            if student not in graded:
                raise GradingError(f"no autograded submission of {assignment} by {student!r}: run autograde first")
        graded = [s for s in graded if s in students]
    if not graded:
        raise GradingError(f"no autograded submissions of {assignment}: run `python -m autograder autograde {assignment}` first")
    secrets = [s for s in leakscan.course_secrets(course.source, package_folder(), [assignment])
               if s.kind == "hidden test"]
    messages, withheld = [], []
    with course.lock("feedback"):
        api = nbgrader_api(course)
        api.config.GenerateFeedback.exporter_class = FeedbackExporter
        # (each preprocessor sees the cells as the ones before it left them: the secrets are looked
        # for in the source as written, then everything is sanitized)
        api.config.GenerateFeedback.preprocessors = [HideHiddenTests, refuse_secrets(secrets),
                                                     sanitize.sanitizer(), InlineOutputs, GetGrades,
                                                     CSSHTMLHeaderPreprocessor]
        for student in graded:
            result = api.generate_feedback(assignment, student, force=True)
            folder = course.feedback_dir(student, assignment)
            if not result.get("success"):
                shutil.rmtree(folder, ignore_errors=True)  # no page at all rather than a partial one
                error = (result.get("error") or "") + (result.get("log") or "")
                if SecretInFeedback.__name__ in error:
                    withheld.append(student)
                    messages.append(f"{student}: feedback WITHHELD: the instructor's part of the page would show "
                                    "a hidden test line; grade it by hand and report this as a bug")
                else:
                    messages.append(f"{student}: feedback failed: {error.strip().splitlines()[-1:] or ''}")
                continue
            try:
                for page in folder.glob("*.html"):
                    check_page(page.read_text(errors="replace"))
            except LiveInFeedback as exc:
                shutil.rmtree(folder, ignore_errors=True)
                withheld.append(student)
                messages.append(f"{student}: feedback WITHHELD: {exc}; grade it by hand and report this as a bug")
                continue
            # nbgrader's exchange keys a student's feedback by their submission's secret (return-feedback).
            for name in ("timestamp.txt", "submission_secret.txt"):
                if (course.submitted_dir(student, assignment) / name).is_file():
                    shutil.copyfile(course.submitted_dir(student, assignment) / name, folder / name)
            pages = sorted(p.name for p in folder.glob("*.html"))
            messages.append(f"{student}: {', '.join(pages)} -> {folder}")
    return messages, withheld
