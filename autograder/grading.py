"""``autograde``: prepare every submission, execute them in parallel sandboxes, write grades serially.

The gradebook (SQLite) is written by the main thread only, one transaction per notebook, as
results arrive; the workers only execute notebooks. A submission that cannot be read, a kernel
that hangs, crashes or exits, a worker that dies: each ends in a defined result for that student
(the tests it did not pass score 0, and the submission is flagged for manual grading with the
reason) while the rest of the batch is graded. Manual scores are never overwritten, a copy of the
gradebook is kept in ``gradebook.db.bak`` before each run, and re-running gives the same grades.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
from nbgrader import utils as nbutils
from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning

from . import pool, sandbox
from .course import COURSE_ID, REPO_ROOT, Course, atomic_write, check_id
from .errors import GradingError
from .prepare import NotebookPlan, Prepared, plan_notebook, prepare, score_cells


@dataclass
class GradeOptions:
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    cell_timeout: int = 60
    notebook_timeout: int = 600
    unsafe_no_sandbox: bool = False
    bwrap: str | None = None
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    students: list[str] | None = None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def open_gradebook(course: Course) -> Gradebook:
    course.ensure()
    return Gradebook(course.db_url, COURSE_ID)


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
    report["updated"] = _now()
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


def _timestamp(folder: Path):
    path = folder / "timestamp.txt"
    if path.exists():
        try:
            return nbutils.parse_utc(path.read_text().strip())
        except Exception:  # noqa: BLE001 - a bad timestamp is not worth losing a grade over
            return None
    return None


def _outcome_flags(result: dict) -> list[str]:
    if result.get("status") in ("timeout", "stopped", "error"):
        return list(result.get("reasons", [])) or [f"execution ended with status {result['status']}"]
    return []


def save_notebook(gb: Gradebook, course: Course, assignment: str, plan: NotebookPlan, prepared: Prepared,
                  executed, flags: list[str]) -> dict:
    """Write one notebook's auto scores in one transaction; returns its report entry."""
    student = prepared.student
    scores = score_cells(executed, plan.max_scores)
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


def autograde(course: Course, assignment: str, options: GradeOptions,
              echo: Callable[[str], None] = print) -> dict:
    """Grade every submission of ``assignment`` (or ``options.students``); returns the report."""
    check_id("assignment", assignment)
    bwrap = None if options.unsafe_no_sandbox else sandbox.find_bwrap(options.bwrap)
    if bwrap is None and not options.unsafe_no_sandbox:
        where = options.bwrap or os.environ.get("AUTOGRADER_BWRAP") or "PATH"
        raise GradingError(f"bubblewrap (bwrap) not found ({where}): install it (tools/install-system-packages.sh) "
                           "or pass --unsafe-no-sandbox to run student code without a sandbox")
    if not course.db_path.exists():
        raise GradingError(f"no gradebook at {course.db_path}: run `python -m autograder release {assignment}` first")
    students = course.submitted_students(assignment)
    if options.students:
        for student in options.students:
            check_id("student", student)
            if student not in students:
                raise GradingError(f"no submission of {assignment} by {student!r} in {course.root / 'submitted'}")
        students = [s for s in students if s in options.students]
    if not students:
        raise GradingError(f"no submissions of {assignment} in {course.root / 'submitted'}: import some first")

    with course.lock("autograde"), warnings.catch_warnings():
        # nbgrader's update_or_create_submission trips SQLAlchemy's autoflush warnings; harmless.
        warnings.simplefilter("ignore", SAWarning)
        started = time.monotonic()
        backup_gradebook(course)
        run_dir = Path(tempfile.mkdtemp(prefix="ag-", dir="/tmp" if os.path.isdir("/tmp") else None))
        lease, workers, aborted = None, None, True
        try:
            notebooks = max(1, len(list(course.release_dir(assignment).glob("*.ipynb"))))
            size = max(1, min(options.workers, len(students) * notebooks))
            lease = sandbox.UidLease(size) if (bwrap and os.geteuid() == 0) else None
            config = sandbox.make_config(bwrap, options.limits, run_dir, size, uids=lease.uids if lease else ())
            # The probe runs while submissions are prepared; no student code runs before it passed.
            prober = ThreadPoolExecutor(1)
            probe = prober.submit(sandbox.preflight, config, [
                course.root, course.source, REPO_ROOT / "autograder", REPO_ROOT / "tests", run_dir / "io"])
            prober.shutdown(wait=False)
            workers = pool.WorkerPool(size, course.logs_dir / f"autograde-{assignment}.log",
                                      timeout=options.notebook_timeout + 120,
                                      memory_cap=sandbox.tree_memory_limit(options.limits)).start()
            report = load_report(course, assignment)
            with open_gradebook(course) as gb:
                plans = {plan.name: plan for plan in plan_assignment(course, gb, assignment)}
                jobs, ready = {}, []
                (run_dir / "io").mkdir()
                files = [str(p) for p in course.release_dir(assignment).iterdir()
                         if p.suffix != ".ipynb" and not p.name.startswith(".")]
                for student in students:
                    folder = course.submitted_dir(student, assignment)
                    gb.update_or_create_student(student)
                    timestamp = _timestamp(folder)
                    gb.update_or_create_submission(assignment, student, **({"timestamp": timestamp} if timestamp else {}))
                    report["students"][student] = {"status": "grading", "flags": [], "notes": [], "notebooks": {}}
                    for name, plan in plans.items():
                        prepared = prepare(folder / f"{name}.ipynb", plan, student, assignment, course.db_url)
                        if prepared.nb is None:
                            ready.append(prepared)
                            continue
                        number = len(jobs)
                        source = run_dir / "io" / f"{number}.in.ipynb"
                        nbformat.write(prepared.nb, source)
                        jobs[number] = ({"id": number, "input": str(source), "output": str(run_dir / "io" / f"{number}.out.ipynb"),
                                         "workdir": str(run_dir / "w" / str(number)), "runtime_dir": str(run_dir / "k" / str(number)),
                                         "files": files, "sandbox": config.to_json(), "cell_timeout": options.cell_timeout,
                                         "notebook_timeout": options.notebook_timeout}, prepared)
                    extra = sorted(p.name for p in folder.glob("*.ipynb") if p.stem not in plans)
                    if extra:
                        report["students"][student]["notes"].append(f"not part of the assignment, ignored: {', '.join(extra)}")

                def record(prepared: Prepared, executed, result: dict) -> None:
                    flags = prepared.flags + _outcome_flags(result)
                    entry = save_notebook(gb, course, assignment, plans[prepared.notebook], prepared, executed, flags)
                    entry["execution"] = result
                    student = report["students"][prepared.student]
                    student["notebooks"][prepared.notebook] = entry
                    student["flags"].extend(f"{prepared.notebook}: {flag}" for flag in flags)
                    student["notes"].extend(f"{prepared.notebook}: {note}" for note in prepared.notes)
                    if len(student["notebooks"]) == len(plans):
                        submission = gb.find_submission(assignment, prepared.student)
                        student.update(status="flagged" if student["flags"] else "graded", score=submission.score,
                                       max_score=submission.max_score, graded_at=_now())
                        flags_text = f"  FLAGGED: {student['flags'][0]}" if student["flags"] else ""
                        more = f" (+{len(student['flags']) - 1} more)" if len(student["flags"]) > 1 else ""
                        echo(f"{prepared.student}: {submission.score:g}/{submission.max_score:g}{flags_text}{more}")
                    save_report(course, assignment, report)

                echo(probe.result())
                for job, _ in jobs.values():
                    workers.submit(job)
                workers.finish()
                for prepared in ready:
                    record(prepared, None, {"status": "not run"})
                for job, result in workers.results():
                    prepared = jobs[job["id"]][1]
                    executed = None
                    if result.get("status") != "error" and os.path.exists(job["output"]):
                        executed = nbformat.read(job["output"], as_version=4)
                    record(prepared, executed, result)
            aborted = False
        finally:
            if workers is not None:
                workers.close(abort=aborted)
            shutil.rmtree(run_dir, ignore_errors=True)
            if lease is not None:
                lease.release()
        flagged = sum(1 for s in students if report["students"][s]["status"] == "flagged")
        echo(f"autograded {len(students)} submission(s) of {assignment} in {time.monotonic() - started:.1f} s"
             f" ({flagged} flagged for manual grading); report: {course.report_path(assignment)}")
        return report
