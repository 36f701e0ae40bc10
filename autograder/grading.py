"""``autograde``: prepare every submission, grade them in parallel, write grades serially.

Each worker (``worker.py``) runs a submission's cells in its sandbox and the tests in itself, the
judge (``judge.py``), and sends back one record per test cell. Points come only from a record
that says ``passed`` (fail closed): no record, an error, a timeout, a lost sandbox score 0.

The gradebook (SQLite) is written by the main thread only, one transaction per notebook, as
results arrive. A submission that cannot be read, code that hangs, crashes or exits, a scan that
blows up, a worker that dies: each ends in a defined result for that student (the tests it did
not pass score 0, and the submission is flagged for manual grading with the reason) while the
rest of the batch is graded. The advisory static scan runs beside the grading, in processes of
its own; it flags, it never scores. Manual scores are never overwritten, a copy of the gradebook
is kept in ``gradebook.db.bak`` before each run, and re-running gives the same grades.
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
from .course import REPO_ROOT, Course, atomic_write, check_id
from .errors import GradingError
from .prepare import (NotebookPlan, Prepared, job_cells, load_submission, plan_notebook, prepare, score_tests,
                      student_cells)
from .scan import Scanner


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
        return list(result.get("reasons", [])) or [f"grading ended with status {result['status']}"]
    return []


def _tests(result: dict) -> dict[str, dict]:
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
    tests = _tests(result)
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
    scores = score_tests(_tests(result) if executed is not None else {}, plan)
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


def _data_files(course: Course, assignment: str, run_dir: Path) -> Path | None:
    """The assignment's released files other than notebooks, copied into a folder for the sandbox."""
    files = [p for p in course.release_dir(assignment).iterdir()
             if p.suffix != ".ipynb" and not p.name.startswith(".")]
    if not files:
        return None
    folder = run_dir / "data" / assignment
    folder.mkdir(parents=True)
    for path in files:
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, folder / path.name)
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    for parent in (run_dir / "data", run_dir):
        os.chmod(parent, 0o755)
    return folder


def _answer_code(nb) -> str:
    return "\n\n".join(source for _, source in student_cells(nb))


def copy_flags(course: Course, assignment: str, plans: dict[str, NotebookPlan],
               prepared: list[Prepared]) -> dict[tuple[str, str], list[str]]:
    """(student, notebook) -> flags for answers that are substantially the package's code or another
    submission's (``similarity.py``); advisory, it never changes a score. Each graded answer is
    compared with every submission of the assignment, graded now or not, so that re-grading some
    students gives them the same flags."""
    from . import similarity  # (numpy and the winnowing: imported here, in the copy check's thread)

    offered = set(sandbox.library_modules(sorted({m for plan in plans.values() for m in plan.course_modules})))
    check = similarity.CopyCheck(similarity.package_sources(sandbox.package_root(), offered))
    graded = {(p.student, p.notebook): p for p in prepared if p.nb is not None}
    found: dict[tuple[str, str], list[str]] = {}
    for name, plan in plans.items():
        answers = {student: _answer_code(p.nb) for (student, notebook), p in graded.items() if notebook == name}
        for student in course.submitted_students(assignment):
            if student not in answers:
                nb, _ = load_submission(course.submitted_dir(student, assignment) / f"{name}.ipynb") \
                    if (course.submitted_dir(student, assignment) / f"{name}.ipynb").is_file() else (None, [])
                if nb is not None:
                    answers[student] = _answer_code(nb)
        boilerplate = [c.source for c in plan.released.cells if c.cell_type == "code"]
        for student, flags in check.flags(answers, boilerplate).items():
            if (student, name) in graded:
                found[(student, name)] = flags
    return found


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
        os.chmod(run_dir, 0o755)
        lease, workers, scanner, aborted = None, None, None, True
        scans_process = Scanner()  # used by the scanner thread alone
        try:
            notebooks = max(1, len(list(course.release_dir(assignment).glob("*.ipynb"))))
            size = max(1, min(options.workers, len(students) * notebooks))
            lease = sandbox.UidLease(size) if (bwrap and os.geteuid() == 0) else None
            with open_gradebook(course) as gb:
                plans = {plan.name: plan for plan in plan_assignment(course, gb, assignment)}
            modules = sorted({module for plan in plans.values() for module in plan.course_modules})
            config = sandbox.make_config(bwrap, options.limits, run_dir, size, uids=lease.uids if lease else (),
                                         modules=modules)
            # The probe runs while submissions are prepared; no student code runs before it passed.
            prober = ThreadPoolExecutor(1)
            probe = prober.submit(sandbox.preflight, config, [
                course.root, course.source, REPO_ROOT / "autograder", REPO_ROOT / "tests", run_dir / "io"])
            prober.shutdown(wait=False)
            (run_dir / "io").mkdir()
            sandbox_data = _data_files(course, assignment, run_dir)
            settings = {"workdir": str(run_dir / "w"), "data_dir": str(course.release_dir(assignment)),
                        "sandbox_data": str(sandbox_data) if sandbox_data else None, "sandbox": config.to_json(),
                        "cell_timeout": options.cell_timeout, "notebook_timeout": options.notebook_timeout}
            # Each worker does the judge's imports and loads the references while the submissions are
            # prepared (worker.py: Worker.warm).
            warm = dict(settings, warm=True, preload=next((plan.preload for plan in plans.values()), []),
                        references=sorted({plan.reference for plan in plans.values() if plan.reference}))
            # The watchdog of a worker: the notebook's own limit, and time to start a sandbox twice.
            workers = pool.WorkerPool(size, course.logs_dir / f"autograde-{assignment}.log",
                                      timeout=options.notebook_timeout + pool.STARTUP_ALLOWANCE,
                                      memory_cap=sandbox.tree_memory_limit(options.limits),
                                      expected_jobs=len(students) * len(plans)).start(warm)
            scanner = ThreadPoolExecutor(1)  # one scan process for the batch (Scanner)
            report = load_report(course, assignment)
            gate: dict = {}

            def gate_open(wait: bool) -> bool:
                """Whether jobs may go to the workers: the sandbox's probe passed, and a worker loaded
                the references (one that does not load stops the batch here: nothing is graded)."""
                if "probe" not in gate:
                    if not (wait or probe.done()):
                        return False
                    gate["probe"] = probe.result()
                    echo(gate["probe"])
                if "warm" not in gate:
                    answer = workers.first_warm(timeout=workers.timeout if wait else 0)
                    if answer is None and not wait:
                        return False
                    gate["warm"] = answer or {}
                    if isinstance(gate["warm"].get("timing"), dict):  # (the first worker's, for the report)
                        report["warm_up"] = gate["warm"]["timing"]
                    if gate["warm"].get("reference_error"):
                        raise GradingError(gate["warm"]["reference_error"])
                return True

            with open_gradebook(course) as gb:
                jobs, ready, scans, waiting = {}, [], {}, []
                for student in students:
                    folder = course.submitted_dir(student, assignment)
                    gb.update_or_create_student(student)
                    timestamp = _timestamp(folder)
                    gb.update_or_create_submission(assignment, student, **({"timestamp": timestamp} if timestamp else {}))
                    report["students"][student] = {"status": "grading", "flags": [], "notes": [], "notebooks": {}}
                    for name, plan in plans.items():
                        prepared = prepare(folder / f"{name}.ipynb", plan, student, assignment, course.db_url, gb)
                        if prepared.nb is None:
                            ready.append(prepared)
                            continue
                        number = len(jobs)
                        scans[number] = scanner.submit(scans_process.scan, student_cells(prepared.nb), plan.context,
                                                       plan.modules)
                        jobs[number] = (dict(settings, id=number, cells=job_cells(prepared.nb), names=plan.names,
                                             preload=plan.preload, reference=plan.reference), prepared)
                        waiting.append(jobs[number][0])
                        if gate_open(wait=False):  # each job goes to the workers as soon as it is ready
                            for job in waiting:
                                workers.submit(job)
                            waiting.clear()
                    extra = sorted(p.name for p in folder.glob("*.ipynb") if p.stem not in plans)
                    if extra:
                        report["students"][student]["notes"].append(f"not part of the assignment, ignored: {', '.join(extra)}")

                # Copies of the package or of each other, compared while the workers grade.
                copying = ThreadPoolExecutor(1)
                copies = copying.submit(copy_flags, course, assignment, plans,
                                        [job[1] for job in jobs.values()])
                copying.shutdown(wait=False)

                def copied(prepared: Prepared) -> list[str]:
                    try:
                        return copies.result().get((prepared.student, prepared.notebook), [])
                    except Exception as exc:  # noqa: BLE001 - advisory: the grades stand without it
                        if "copy_check" not in report:
                            report["copy_check"] = f"failed: {type(exc).__name__}: {exc}"
                            echo(f"warning: the copy check failed ({type(exc).__name__}: {exc}); grades are unaffected")
                        return []

                def record(prepared: Prepared, result: dict, scan_flags: list[str]) -> None:
                    flags = prepared.flags + scan_flags + _outcome_flags(result) + copied(prepared)
                    entry = save_notebook(gb, course, assignment, plans[prepared.notebook], prepared, result, flags)
                    entry["execution"] = {key: result.get(key) for key in ("status", "reasons", "timing", "uid")
                                          if key in result}
                    entry["tests"] = _tests(result)
                    student = report["students"][prepared.student]
                    student["notebooks"][prepared.notebook] = entry
                    student["flags"].extend(f"{prepared.notebook}: {flag}" for flag in flags)
                    student["notes"].extend(f"{prepared.notebook}: {note}"
                                            for note in prepared.notes + list(result.get("notes", [])))
                    if len(student["notebooks"]) == len(plans):
                        submission = gb.find_submission(assignment, prepared.student)
                        student.update(status="flagged" if student["flags"] else "graded", score=submission.score,
                                       max_score=submission.max_score, graded_at=_now())
                        flags_text = f"  FLAGGED: {student['flags'][0]}" if student["flags"] else ""
                        more = f" (+{len(student['flags']) - 1} more)" if len(student["flags"]) > 1 else ""
                        echo(f"{prepared.student}: {submission.score:g}/{submission.max_score:g}{flags_text}{more}")
                    save_report(course, assignment, report)

                gate_open(wait=True)
                for job in waiting:
                    workers.submit(job)
                workers.finish()
                for prepared in ready:
                    record(prepared, {"status": "not run"}, [])
                for job, result in workers.results():
                    prepared = jobs[job["id"]][1]
                    record(prepared, result if isinstance(result, dict) else {"status": "error"},
                           scans[job["id"]].result())
            aborted = False
        finally:
            if workers is not None:
                workers.close(abort=aborted)
            if scanner is not None:
                scanner.shutdown(wait=not aborted, cancel_futures=aborted)
            scans_process.close()  # (an aborted run's scan in flight then fails: nobody reads it)
            shutil.rmtree(run_dir, ignore_errors=True)
            if lease is not None:
                lease.release()
        flagged = sum(1 for s in students if report["students"][s]["status"] == "flagged")
        echo(f"autograded {len(students)} submission(s) of {assignment} in {time.monotonic() - started:.1f} s"
             f" ({flagged} flagged for manual grading); report: {course.report_path(assignment)}")
        return report
