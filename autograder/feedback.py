"""``feedback``: HTML feedback per student, in which hidden tests never appear.

nbgrader's own feedback shows the autograded notebook as it ran, hidden tests and all. Here every
test cell says what the judge recorded for it (``metadata.autograder``, written by the grader's
main process from the judge's record, never by anything in the sandbox): passed, or failed with
the failing check's message. A cell with hidden tests is shown without them (its source keeps
the visible part) and with that one line as its only output; a cell without hidden tests keeps
the judge's own output too. Then every generated page is scanned for the hidden-test lines of
the source notebook; a page that still shows one is withheld (deleted) and reported.
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
    message = str(record.get("message", "")) if isinstance(record, dict) else "no result was recorded"
    first = message.splitlines()[0][:300] if message else "failed"
    return f"{scope}: failed ({first})\n"


class HideHiddenTests(NbGraderPreprocessor):
    """Every test cell shows the judge's verdict; hidden tests (and their outputs) are removed."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not nbutils.is_grade(cell) or nbutils.is_solution(cell):
            if cell.cell_type == "code" and BEGIN in cell.source:  # a hidden test outside a test cell
                cell.source, cell.outputs = _visible(cell.source), []
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


def own_text(folder) -> str:
    """The cells the student wrote (answers and added cells) in ``folder``'s notebooks, normalized line by line."""
    import nbformat

    lines: list[str] = []
    for path in folder.glob("*.ipynb") if folder.is_dir() else []:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("locked"):
                lines.extend(leakscan.normalize(line) for line in cell.source.splitlines())
    return "\n".join(lines)


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
    secrets = leakscan.course_secrets(course.source, package_folder(), [assignment])
    messages, withheld = [], []
    with course.lock("feedback"):
        api = nbgrader_api(course)
        api.config.GenerateFeedback.preprocessors = [HideHiddenTests, GetGrades, CSSHTMLHeaderPreprocessor]
        for student in graded:
            result = api.generate_feedback(assignment, student, force=True)
            folder = course.feedback_dir(student, assignment)
            if not result.get("success"):
                messages.append(f"{student}: feedback failed: {(result.get('error') or '').strip().splitlines()[-1:]}")
                continue
            # A hidden-test line the student typed into their own cells reveals nothing to them.
            own = own_text(course.autograded_dir(student, assignment))
            checked = [secret for secret in secrets if secret.line not in own]
            leaks = leakscan.scan([folder], checked, kinds=("hidden test",)) if folder.exists() else []
            if leaks:
                shutil.rmtree(folder, ignore_errors=True)
                withheld.append(student)
                messages.append(f"{student}: feedback WITHHELD: it would show a hidden test line "
                                f"({leaks[0].secret.origin}); grade it by hand")
                continue
            # nbgrader's exchange keys a student's feedback by their submission's secret (return-feedback).
            for name in ("timestamp.txt", "submission_secret.txt"):
                if (course.submitted_dir(student, assignment) / name).is_file():
                    shutil.copyfile(course.submitted_dir(student, assignment) / name, folder / name)
            pages = sorted(p.name for p in folder.glob("*.html"))
            messages.append(f"{student}: {', '.join(pages)} -> {folder}")
    return messages, withheld
