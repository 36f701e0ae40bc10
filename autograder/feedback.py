"""``feedback``: HTML feedback per student, in which hidden tests never appear.

nbgrader's own feedback shows the autograded notebook as it ran, hidden tests and all (the
autograder restored them). Here every test cell with hidden tests is shown without them: its
source keeps only the visible part, and its outputs (tracebacks quote the failing line; anything
the answer printed may echo hidden inputs) are replaced by one line: passed, or failed with the
error's name and message. Then every generated page is scanned for the hidden-test lines of the
source notebook; a page that still shows one is withheld (deleted) and reported.
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


class HideHiddenTests(NbGraderPreprocessor):
    """Remove hidden tests, and the outputs of cells that ran them, before the page is rendered."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or BEGIN not in cell.source:
            return cell, resources
        failed = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"
                  or (o.get("output_type") == "stream" and o.get("name") == "stderr")]
        kept, hidden = [], False
        for line in cell.source.splitlines():
            if BEGIN in line:
                hidden = True
                kept.append(line.split("#")[0] + "# (hidden tests: not shown)")
            elif END in line:
                hidden = False
            elif not hidden:
                kept.append(line)
        cell.source = "\n".join(kept)
        if nbutils.is_grade(cell):
            score, points = nbutils.determine_grade(cell)
        else:
            score, points = (0 if failed else None), None
        if not failed and score != 0:
            text = "Tests of this cell (hidden tests included): passed\n"
        else:
            error = next((o for o in failed if o.get("output_type") == "error"), None)
            detail = f"{error.get('ename', 'Error')}: {str(error.get('evalue', ''))[:300]}" if error else "output on stderr"
            text = f"Tests of this cell (hidden tests included): failed ({detail.splitlines()[0] if detail else ''})\n"
        cell.outputs = [new_output("stream", name="stdout", text=text)]
        return cell, resources


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
            leaks = leakscan.scan([folder], secrets, kinds=("hidden test",)) if folder.exists() else []
            if leaks:
                shutil.rmtree(folder, ignore_errors=True)
                withheld.append(student)
                messages.append(f"{student}: feedback WITHHELD: it would show a hidden test line "
                                f"({leaks[0].secret.origin}); grade it by hand")
                continue
            pages = sorted(p.name for p in folder.glob("*.html"))
            messages.append(f"{student}: {', '.join(pages)} -> {folder}")
    return messages, withheld
