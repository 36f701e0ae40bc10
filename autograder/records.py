"""Grades in and out: the gradebook, the report, and each graded notebook.

``plan_assignment`` reads what grading needs from the gradebook and the released notebooks;
``save_notebook`` writes one notebook's automatic scores in one transaction, and its graded copy;
``copy_flags`` compares the answers with the notebook's solution and reference, with the package
and with each other (advisory). Only the main process's grading thread writes (``grading.py``);
``export``, ``exchange`` and ``submissions`` read the gradebook with ``open_gradebook``.

These need nbgrader, SQLAlchemy and nbformat (1.5 s of imports): ``autograde`` imports this module
after its first worker has started, so that the worker's own warm-up runs meanwhile.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import nbformat
from nbgrader import utils as nbutils
from nbgrader.api import Gradebook, MissingEntry

from . import sandbox
from .course import Course, atomic_write
from .errors import GradingError
from .prepare import NotebookPlan, Prepared, load_submission, plan_notebook, score_tests, student_cells


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def open_gradebook(course: Course) -> Gradebook:
    course.ensure()
    return Gradebook(course.db_url, course.course_id)


def backup_gradebook(course: Course) -> None:
    """A consistent copy (SQLite's backup API), taken before grades change."""
    if not course.db_path.exists():
        return
    source = sqlite3.connect(course.db_path)
    target = sqlite3.connect(course.db_path.with_name("gradebook.db.bak"))
    try:
        with target:
            source.backup(target)
    finally:
        source.close()
        target.close()


def load_report(course: Course, assignment: str) -> dict:
    path = course.report_path(assignment)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except ValueError:
            pass
    return {"assignment": assignment, "students": {}}


def save_report(course: Course, assignment: str, report: dict) -> None:
    report["updated"] = now()
    atomic_write(course.report_path(assignment), json.dumps(report, indent=1, sort_keys=True))


def plan_assignment(course: Course, gb: Gradebook, assignment: str) -> list[NotebookPlan]:
    try:
        record = gb.find_assignment(assignment)
    except MissingEntry:
        raise GradingError(f"assignment {assignment!r} is not in the gradebook: "
                           f"run `python -m autograder release {assignment}` first") from None
    plans = []
    for notebook in record.notebooks:
        released = course.release_dir(assignment) / f"{notebook.name}.ipynb"
        if not released.exists():
            raise GradingError(f"{released} is missing: run `python -m autograder release {assignment}` first")
        max_scores = {cell.name: float(cell.max_score) for cell in notebook.grade_cells}
        plans.append(plan_notebook(notebook.name, released, course.source / assignment / f"{notebook.name}.ipynb",
                                   max_scores))
    if not plans:
        raise GradingError(f"assignment {assignment!r} has no notebooks in the gradebook")
    return plans


def timestamp(folder: Path):
    path = folder / "timestamp.txt"
    if path.exists():
        try:
            return nbutils.parse_utc(path.read_text().strip())
        except Exception:  # noqa: BLE001 - a bad timestamp is not worth losing a grade over
            return None
    return None


def outcome_flags(result: dict) -> list[str]:
    if result.get("status") in ("timeout", "stopped", "error"):
        return list(result.get("reasons", [])) or [f"grading ended with status {result['status']}"]
    return []


def test_records(result: dict) -> dict[str, dict]:
    """The worker's records, keeping only well-formed ones (a malformed record is no pass)."""
    tests = result.get("tests")
    if not isinstance(tests, dict):
        return {}
    return {str(grade_id): record for grade_id, record in tests.items() if isinstance(record, dict)}


def graded_notebook(prepared: Prepared, result: dict):
    """The prepared notebook with the outputs of this run, and each test cell's record in its
    metadata (``autograder``), as the judge wrote them: what the instructor and feedback see."""
    nb = prepared.nb
    if nb is None:
        return None
    outputs = result.get("outputs") if isinstance(result.get("outputs"), dict) else {}
    tests = test_records(result)
    count = 0
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("autograder", None)  # only the judge's record may stand here
        if cell.cell_type != "code":
            continue
        cell_outputs = outputs.get(str(index))
        cell.outputs = [nbformat.from_dict(o) for o in cell_outputs] if isinstance(cell_outputs, list) else []
        count += 1
        cell.execution_count = count if isinstance(cell_outputs, list) else None
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in tests:
            record = tests[grade_id]
            cell.metadata["autograder"] = {"passed": record.get("passed") is True,
                                           "message": str(record.get("message", ""))[:2000],
                                           "feedback": str(record.get("feedback", ""))[:400]}
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError:  # an output the worker sent is malformed: drop the outputs, keep the grades
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
    return nb


def save_notebook(gb: Gradebook, course: Course, assignment: str, plan: NotebookPlan, prepared: Prepared,
                  result: dict, flags: list[str]) -> dict:
    """Write one notebook's auto scores in one transaction; returns its report entry."""
    student = prepared.student
    executed = graded_notebook(prepared, result)
    scores = score_tests(test_records(result) if executed is not None else {}, plan)
    submission = gb.find_submission_notebook(plan.name, assignment, student)
    for grade in submission.grades:
        auto = scores.get(grade.name, 0.0)
        grade.auto_score = auto
        grade.needs_manual_grade = bool(flags) or grade.manual_score is not None or auto is None
    cells = {c.metadata.nbgrader["grade_id"]: c for c in (executed.cells if executed is not None else [])
             if nbutils.is_solution(c) or nbutils.is_task(c)}
    for comment in submission.comments:
        cell = cells.get(comment.name)
        unchanged = cell is None or (cell.metadata.nbgrader.get("checksum") == nbutils.compute_checksum(cell)
                                     and not nbutils.is_task(cell))
        comment.auto_comment = "No response." if unchanged else None
    submission.flagged = bool(flags)
    gb.db.commit()

    target = course.autograded_dir(student, assignment) / f"{plan.name}.ipynb"
    if executed is not None:
        atomic_write(target, nbformat.writes(executed), mode=0o644)
    elif target.exists():
        target.unlink()  # a stale result of an earlier submission must not be shown as this one's
    return {"score": sum(s for s in scores.values() if s is not None),
            "max_score": sum(plan.max_scores.values()),
            "cells": scores}


def answer_code(nb) -> list[tuple[str, str]]:
    """(cell, code) of each cell the student controls (``prepare.student_cells``): what the copy check reads."""
    return student_cells(nb)


def copy_flags(course: Course, assignment: str, plans: dict[str, NotebookPlan],
               prepared: list[Prepared]) -> dict[tuple[str, str], list[str]]:
    """(student, notebook) -> flags for answers that are substantially the notebook's solution or the
    exercise's reference (its *answer key*: ``similarity.answer_key``), the package's code or another
    submission's (``similarity.py``); advisory, it never changes a score, and a flag names lines, never
    quotes them. Each graded answer is compared with every submission of the assignment, graded now or
    not, so that re-grading some students gives them the same flags. Every fingerprint but the
    answers' is taken once per batch: the package's here, each notebook's key in ``flags``."""
    from . import similarity  # (numpy and the winnowing: imported here, in the copy check's thread)

    offered = set(sandbox.library_modules(sorted({m for plan in plans.values() for m in plan.course_modules})))
    check = similarity.CopyCheck(similarity.package_sources(sandbox.package_root(), offered))
    graded = {(p.student, p.notebook): p for p in prepared if p.nb is not None}
    found: dict[tuple[str, str], list[str]] = {}
    for name, plan in plans.items():
        answers = {student: answer_code(p.nb) for (student, notebook), p in graded.items() if notebook == name}
        for student in course.submitted_students(assignment):
            if student not in answers:
                nb, _ = load_submission(course.submitted_dir(student, assignment) / f"{name}.ipynb") \
                    if (course.submitted_dir(student, assignment) / f"{name}.ipynb").is_file() else (None, [])
                if nb is not None:
                    answers[student] = answer_code(nb)
        boilerplate = [c.source for c in plan.released.cells if c.cell_type == "code"]
        key = similarity.answer_key(course.source / assignment / f"{name}.ipynb", plan.reference)
        for student, flags in check.flags(answers, boilerplate, key).items():
            if (student, name) in graded:
                found[(student, name)] = flags
    return found
