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

import os
import shutil
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from . import pool, references, sandbox
from .course import REPO_ROOT, Course, check_id
from .errors import GradingError

if TYPE_CHECKING:
    from .prepare import Prepared

# (records, prepare and scan, with nbgrader, SQLAlchemy and nbformat, are imported by ``autograde``
# once its first worker has started: 1.5 s of imports that the worker's warm-up overlaps.)


@dataclass
class GradeOptions:
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    cell_timeout: int = 60
    notebook_timeout: int = 600
    unsafe_no_sandbox: bool = False
    bwrap: str | None = None
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    students: list[str] | None = None


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


def _warm_job(course: Course, assignment: str) -> dict:
    """What each worker does before its first notebook (``worker.py``: ``Worker.warm``), known from
    the source folder alone: load the exercise's reference, and import torch when the source
    notebooks use it. (The jobs themselves carry what the gradebook's plan says.)"""
    folder = course.source / assignment
    reference = references.reference_in(folder)
    return {"warm": True, "references": [str(reference)] if reference else [],
            "sources": [str(path) for path in sorted(folder.glob("*.ipynb"))]}


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
        started = time.monotonic()
        run_dir = Path(tempfile.mkdtemp(prefix="ag-", dir="/tmp" if os.path.isdir("/tmp") else None))
        os.chmod(run_dir, 0o755)
        lease, workers, scanner, scans_process, aborted = None, None, None, None, True
        try:
            notebooks = max(1, len(list(course.release_dir(assignment).glob("*.ipynb"))))
            size = max(1, min(options.workers, len(students) * notebooks))
            # The first worker starts first: it warms up (worker.py: Worker.warm) while this process
            # imports, plans and prepares the submissions; the others start when they pay (pool.py).
            # The watchdog of a worker: the notebook's own limit, and time to start a sandbox twice.
            workers = pool.WorkerPool(size, course.logs_dir / f"autograde-{assignment}.log",
                                      timeout=options.notebook_timeout + pool.STARTUP_ALLOWANCE,
                                      memory_cap=sandbox.tree_memory_limit(options.limits),
                                      expected_jobs=len(students) * notebooks).start(_warm_job(course, assignment))
            from sqlalchemy.exc import SAWarning

            from . import records
            from .prepare import job_cells, prepare, student_cells
            from .scan import Scanner

            # nbgrader's update_or_create_submission trips SQLAlchemy's autoflush warnings; harmless.
            warnings.simplefilter("ignore", SAWarning)
            records.backup_gradebook(course)
            scans_process = Scanner()  # used by the scanner thread alone
            lease = sandbox.UidLease(size) if (bwrap and os.geteuid() == 0) else None
            with records.open_gradebook(course) as gb:
                plans = {plan.name: plan for plan in records.plan_assignment(course, gb, assignment)}
            modules = sorted({module for plan in plans.values() for module in plan.course_modules})
            config = sandbox.make_config(bwrap, options.limits, run_dir, size, uids=lease.uids if lease else (),
                                         modules=modules,
                                         autodiff=any("torch" in plan.preload for plan in plans.values()))
            # The probe runs while submissions are prepared; no student code runs before it passed.
            prober = ThreadPoolExecutor(1)
            probe = prober.submit(sandbox.preflight, config, [
                course.root, course.source, REPO_ROOT / "autograder", REPO_ROOT / "tests", run_dir])
            prober.shutdown(wait=False)
            (run_dir / "io").mkdir()
            sandbox_data = _data_files(course, assignment, run_dir)
            settings = {"workdir": str(run_dir / "w"), "data_dir": str(course.release_dir(assignment)),
                        "sandbox_data": str(sandbox_data) if sandbox_data else None, "sandbox": config.to_json(),
                        "cell_timeout": options.cell_timeout, "notebook_timeout": options.notebook_timeout}
            scanner = ThreadPoolExecutor(1)  # one scan process for the batch (Scanner)
            report = records.load_report(course, assignment)
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

            with records.open_gradebook(course) as gb:
                jobs, ready, scans, waiting = {}, [], {}, []
                for student in students:
                    folder = course.submitted_dir(student, assignment)
                    gb.update_or_create_student(student)
                    timestamp = records.timestamp(folder)
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
                copies = copying.submit(records.copy_flags, course, assignment, plans,
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
                    flags = prepared.flags + scan_flags + records.outcome_flags(result) + copied(prepared)
                    entry = records.save_notebook(gb, course, assignment, plans[prepared.notebook], prepared, result, flags)
                    entry["execution"] = {key: result.get(key) for key in ("status", "reasons", "timing", "uid")
                                          if key in result}
                    entry["tests"] = records.test_records(result)
                    student = report["students"][prepared.student]
                    student["notebooks"][prepared.notebook] = entry
                    student["flags"].extend(f"{prepared.notebook}: {flag}" for flag in flags)
                    student["notes"].extend(f"{prepared.notebook}: {note}"
                                            for note in prepared.notes + list(result.get("notes", [])))
                    if len(student["notebooks"]) == len(plans):
                        submission = gb.find_submission(assignment, prepared.student)
                        student.update(status="flagged" if student["flags"] else "graded", score=submission.score,
                                       max_score=submission.max_score, graded_at=records.now())
                        flags_text = f"  FLAGGED: {student['flags'][0]}" if student["flags"] else ""
                        more = f" (+{len(student['flags']) - 1} more)" if len(student["flags"]) > 1 else ""
                        echo(f"{prepared.student}: {submission.score:g}/{submission.max_score:g}{flags_text}{more}")
                    records.save_report(course, assignment, report)

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
            if scans_process is not None:
                scans_process.close()  # (an aborted run's scan in flight then fails: nobody reads it)
            shutil.rmtree(run_dir, ignore_errors=True)
            if lease is not None:
                lease.release()
        flagged = sum(1 for s in students if report["students"][s]["status"] == "flagged")
        echo(f"autograded {len(students)} submission(s) of {assignment} in {time.monotonic() - started:.1f} s"
             f" ({flagged} flagged for manual grading); report: {course.report_path(assignment)}")
        return report
