"""The checks of one course (``checks.py``), run: the exchange watched, the queue served by warm workers.

``Engine`` is what a course's check service (``jupyterhub/check_service.py``, a hub service run as
the course's grader account) keeps running:

- a watcher thread lists the exchange's inbound folder every ``poll`` seconds (and at once when
  asked): each submission it has not seen goes to the queue, which queues or refuses it;
- a thread per worker slot takes the queue's next check, reads that submission as ``collect``
  reads one (made by the student it names, her files only, no links), prepares it as ``autograde``
  does (the released read-only and test cells restored, the hidden tests from the gradebook) and
  grades it on a worker of its own (``worker.py``: the same sandbox and judge as the instructor's
  batch), kept warm between checks. Nothing of a check is written to the gradebook.

A check that cannot run (the sandbox's preflight fails, a worker is lost) is marked failed with
the reason, and costs the student nothing; the submission itself stays in the exchange for the
instructor's ``collect``, whatever happens here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from . import checks, pool, sandbox
from .course import REPO_ROOT, Course
from .errors import GradingError


@dataclass
class _Assignment:
    """What grading one assignment needs, made once and kept while its release stays the same."""

    plans: dict
    settings: dict
    preflight: str
    released: float     # the release folder's mtime it was made from


class Engine:
    def __init__(self, course: Course, queue: checks.Queue, *, workers: int = 2, cell_timeout: int = 30,
                 notebook_timeout: int = 180, bwrap: str | None = None, poll: float = 1.0, log=None) -> None:
        self.course, self.queue = course, queue
        self.cell_timeout, self.notebook_timeout, self.poll = cell_timeout, notebook_timeout, poll
        self.bwrap = sandbox.find_bwrap(bwrap)
        self.log = log or open(os.devnull, "w")
        self.run_dir = Path(tempfile.mkdtemp(prefix="ag-checks-"))
        os.chmod(self.run_dir, 0o755)
        self.lease = sandbox.UidLease(workers) if (self.bwrap and os.geteuid() == 0) else None
        log_file = course.logs_dir / "checks-workers.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self._worker_log = open(log_file, "ab")
        self.workers = [pool._Worker(self._worker_log, dict(os.environ)) for _ in range(max(1, workers))]
        self._assignments: dict[str, _Assignment] = {}
        self._setup_lock = threading.Lock()
        self._wake = threading.Event()
        self._work = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._forged: set[str] = set()

    # -- life ------------------------------------------------------------------------------------
    def start(self) -> "Engine":
        self.queue.recover()
        self._threads = [threading.Thread(target=self._watch, daemon=True, name="checks-watch")]
        self._threads += [threading.Thread(target=self._serve, args=(i,), daemon=True, name=f"checks-{i}")
                          for i in range(len(self.workers))]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._work:
            self._work.notify_all()
        for thread in self._threads:
            thread.join(timeout=self.notebook_timeout + pool.STARTUP_ALLOWANCE)
        for worker in self.workers:
            worker.close()
        if self.lease is not None:
            self.lease.release()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def look_now(self) -> None:
        """List the exchange now (a student just submitted, and her page asks)."""
        self._wake.set()

    # -- the exchange ------------------------------------------------------------------------------
    def scan(self, now: float | None = None) -> int:
        """Queue (or refuse) every submission of the exchange not seen before; how many were new."""
        from .exchange import due_date
        from .submissions import inbound_names

        if not self.course.exchange:
            return 0
        new, forged = 0, []
        for name, student, assignment in inbound_names(Path(self.course.exchange), self.course.course_id, forged):
            if self.queue.known(name):
                continue
            if not self.course.release_dir(assignment).is_dir():
                continue   # (not an assignment of this course's: never ours to check)
            parts = name.split("+")
            stamp = parts[2] if len(parts) > 2 else ""
            due = due_date(self.course, assignment)
            self.queue.submitted(student, assignment, name, stamp, checks.policy(self.course, assignment),
                                 due.timestamp() if due is not None else None, now)
            new += 1
        for name, maker in forged:
            if name not in self._forged:   # (never the named student's check; the instructor's log says so once)
                self._forged.add(name)
                print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} not checked: inbound folder {name!r} names another "
                      f"student but was made by {maker!r}", file=self.log)
        if new:
            with self._work:
                self._work.notify_all()
        return new

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan()
            except Exception:  # noqa: BLE001 - logged; the next look may succeed
                traceback.print_exc(file=self.log)
            self._wake.wait(self.poll)
            self._wake.clear()

    # -- grading ---------------------------------------------------------------------------------
    def _serve(self, slot: int) -> None:
        while not self._stop.is_set():
            check = self.queue.take()
            if check is None:
                with self._work:
                    self._work.wait(self.poll)
                continue
            try:
                self.queue.finish(check, self.grade(check, slot))
            except GradingError as exc:
                self.queue.fail(check, self._public(str(exc)))
            except Exception as exc:  # noqa: BLE001 - the check could not run: it costs nothing
                traceback.print_exc(file=self.log)
                self.queue.fail(check, f"the check could not run ({type(exc).__name__}): your submission is kept "
                                "for your instructor")

    def _public(self, reason: str) -> str:
        """A reason as the student's page shows it: the hub's own folders not named."""
        from .submissions import _inbound_dir

        folders = [self.run_dir, self.course.root]
        if self.course.exchange:
            folders.insert(0, _inbound_dir(Path(self.course.exchange), self.course.course_id))
        for folder in folders:
            reason = reason.replace(f"{folder}{os.sep}", "").replace(str(folder), "the course's folder")
        return reason

    def _setup(self, assignment: str) -> _Assignment:
        """The plans, the sandbox and the job settings of ``assignment`` (made once per release)."""
        from . import records
        from .grading import _data_files

        released = self.course.release_dir(assignment).stat().st_mtime
        with self._setup_lock:
            known = self._assignments.get(assignment)
            if known is not None and known.released == released:
                return known
            if self.bwrap is None:
                raise GradingError("the grading sandbox (bubblewrap) is not installed on the hub: no check can run; "
                                   "your submission is kept for your instructor")
            with records.open_gradebook(self.course) as gb:
                plans = {plan.name: plan for plan in records.plan_assignment(self.course, gb, assignment)}
            run_dir = self.run_dir / assignment
            shutil.rmtree(run_dir, ignore_errors=True)
            run_dir.mkdir(parents=True)
            os.chmod(run_dir, 0o755)
            modules = sorted({m for plan in plans.values() for m in plan.course_modules})
            config = sandbox.make_config(self.bwrap, sandbox.Limits(), run_dir, len(self.workers),
                                         uids=self.lease.uids if self.lease else (), modules=modules,
                                         autodiff=any("torch" in plan.preload for plan in plans.values()))
            try:
                preflight = sandbox.preflight(config, [self.course.root, self.course.source, REPO_ROOT / "autograder",
                                                       REPO_ROOT / "tests", run_dir])
            except GradingError as exc:
                raise GradingError(f"the grading sandbox did not pass its check ({exc}): no check can run now; "
                                   "your submission is kept for your instructor") from None
            data = _data_files(self.course, assignment, run_dir)
            settings = {"workdir": str(run_dir / "w"), "data_dir": str(self.course.release_dir(assignment)),
                        "sandbox_data": str(data) if data else None, "sandbox": config.to_json(),
                        "cell_timeout": self.cell_timeout, "notebook_timeout": self.notebook_timeout}
            self._assignments[assignment] = _Assignment(plans, settings, preflight, released)
            return self._assignments[assignment]

    def grade(self, check: checks.Check, slot: int) -> dict:
        """Grade one check's submission on worker ``slot``; the result ``render`` shows."""
        from .prepare import job_cells, prepare
        from .records import test_records
        from .submissions import read_submission

        started = time.time()
        setup = self._setup(check.assignment)
        incoming = read_submission(Path(self.course.exchange), check.submission, list(setup.plans),
                                   self.course.course_id)
        folder = Path(tempfile.mkdtemp(prefix=f"check-{check.id}-", dir=self.run_dir))
        result = {"notebooks": {}, "score": 0.0, "max_score": 0.0,
                  "timing": {"queue": round(started - check.queued, 3), "sandbox": 0.0, "student": 0.0,
                             "checks": 0.0}}
        try:
            for name, plan in setup.plans.items():
                entry = {"cells": [], "notes": []}
                result["notebooks"][name] = entry
                path = folder / f"{name}.ipynb"
                if name in incoming.notebooks:
                    path.write_bytes(incoming.notebooks[name])
                prepared = prepare(path if path.exists() else None, plan, check.student, check.assignment,
                                   self.course.db_url)
                entry["notes"] += prepared.notes + [flag for flag in prepared.flags if "restored" in flag
                                                    or "could not" in flag]
                outcome = {}
                if prepared.nb is not None:
                    job = dict(setup.settings, id=check.id, worker=slot, cells=job_cells(prepared.nb),
                               names=plan.names, preload=plan.preload, reference=plan.reference)
                    outcome = self.workers[slot].run(job, self.notebook_timeout + pool.STARTUP_ALLOWANCE)
                    if outcome.get("status") == "error":
                        raise GradingError("the grader's worker was lost: no check ran; your submission is kept for "
                                           "your instructor")
                    timing = outcome.get("timing") or {}
                    result["timing"]["sandbox"] += timing.get("zygote_startup", 0.0) + timing.get("startup", 0.0)
                    result["timing"]["student"] += timing.get("student", 0.0)
                    result["timing"]["checks"] += timing.get("checks", 0.0)
                    entry["notes"] += [str(reason) for reason in outcome.get("reasons", [])]
                records = test_records(outcome)
                order = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in plan.released.cells]
                for grade_id in [g for g in order if g in plan.test_ids]:
                    record = records.get(grade_id) or {"passed": False, "feedback": "the test did not run"}
                    passed = record.get("passed") is True
                    entry["cells"].append({
                        "grade_id": grade_id, "max": plan.max_scores.get(grade_id, 0.0),
                        "points": plan.max_scores.get(grade_id, 0.0) if passed else 0.0, "passed": passed,
                        "visible_passed": record.get("visible_passed") is True,
                        "feedback": "" if passed else str(record.get("feedback") or "failed").splitlines()[0][:300],
                    })
                    result["score"] += entry["cells"][-1]["points"]
                    result["max_score"] += entry["cells"][-1]["max"]
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        result["timing"] = {key: round(value, 3) for key, value in result["timing"].items()}
        result["timing"]["total"] = round(time.time() - check.queued, 3)
        return result
