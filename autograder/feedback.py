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
"""

from __future__ import annotations

import shutil

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat.v4 import new_output
from nbgrader import utils as nbutils
from nbgrader.preprocessors import GetGrades, NbGraderPreprocessor

from . import leakscan
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
        api.config.GenerateFeedback.preprocessors = [HideHiddenTests, refuse_secrets(secrets), GetGrades,
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
            # nbgrader's exchange keys a student's feedback by their submission's secret (return-feedback).
            for name in ("timestamp.txt", "submission_secret.txt"):
                if (course.submitted_dir(student, assignment) / name).is_file():
                    shutil.copyfile(course.submitted_dir(student, assignment) / name, folder / name)
            pages = sorted(p.name for p in folder.glob("*.html"))
            messages.append(f"{student}: {', '.join(pages)} -> {folder}")
    return messages, withheld
