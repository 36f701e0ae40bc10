"""A grading worker: ``python -m autograder.worker`` grades notebooks one job at a time.

The main process writes one JSON line per job on stdin; the worker grades it (``judge.py``: the
student's cells in the sandbox's zygote, the tests here) and answers with one JSON line on its
protocol channel (the original stdout; everything else printed goes to stderr, the worker's
log). The worker keeps its zygote between jobs, so numpy, torch and IPython are imported once
per worker, not once per notebook; a "warm" job, first, does the judge's imports and loads the
exercise's reference while the main process still imports and prepares the submissions. It
never touches the gradebook, and it dies with the main process (its sandbox dies with it:
``--die-with-parent``).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import sys
import traceback
from pathlib import Path

from . import references
from .judge import Zygote, grade_notebook, job_cells, needs_torch
from .sandbox import SandboxConfig, enter_memory_cgroup, prepare_dirs

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(1)


def _kill_uid(uid: int) -> None:
    """Kill every process of the sandbox uid (it is this worker's alone)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                real_uid = next(line for line in handle if line.startswith("Uid:")).split()[1]
            if int(real_uid) == uid:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, StopIteration, ValueError):
            continue


def _judge_imports(preload: list[str]) -> None:
    """The judge's own imports, once per worker, not in a notebook's checks."""
    if "torch" in preload:
        import torch  # noqa: F401


def _code_of(notebooks: list[str]) -> list[str]:
    """The code cells of the exercise's source notebooks (one that does not read is skipped: the
    main process's plan reads them too, and says what is wrong)."""
    code = []
    for path in notebooks:
        try:
            cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
            code += ["".join(cell["source"]) if isinstance(cell["source"], list) else str(cell["source"])
                     for cell in cells if cell.get("cell_type") == "code"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return code


class Worker:
    def __init__(self) -> None:
        self.zygote: Zygote | None = None
        self.key = None
        self.uid: int | None = None

    def zygote_for(self, job: dict) -> Zygote:
        """The zygote for this job's sandbox, preloads and data files (a new one when they change)."""
        key = (json.dumps(job["sandbox"], sort_keys=True), tuple(job["preload"]), job.get("sandbox_data"),
               job["worker"])
        if self.zygote is not None and self.key == key and self.zygote.alive:
            return self.zygote
        self.close()
        config = SandboxConfig.from_json(job["sandbox"])
        self.uid = config.uid(job["worker"])
        work = Path(job["workdir"]) / f"worker-{job['worker']}"  # unsandboxed only: inside, it is /sandbox
        if not config.sandboxed:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            prepare_dirs(config, self.uid, work)
        self.zygote = Zygote(config, self.uid, job["preload"], job.get("sandbox_data"), str(work), log=sys.stderr)
        self.key = key
        _judge_imports(job["preload"])
        return self.zygote

    def warm(self, job: dict) -> dict:
        """Before the first notebook: the judge's imports (torch, when the exercise's source notebooks
        use it) and the exercise's reference, while the main process still prepares submissions. A
        reference that does not load is reported, and the main process grades nothing."""
        import time

        started = time.perf_counter()
        _judge_imports(["torch"] if needs_torch(_code_of(job.get("sources", []))) else [])
        loading = time.perf_counter()
        for path in job.get("references", []):
            try:
                references.load_reference(path)
            except Exception as exc:  # noqa: BLE001 - the instructor's file: say what is wrong with it
                return {"status": "warm", "reference_error": f"{path} does not load: {type(exc).__name__}: {exc}"}
        # (The zygote itself starts with the first notebook: the main process waits for this answer.)
        return {"status": "warm", "timing": {"judge_imports": loading - started,
                                             "references": time.perf_counter() - loading}}

    def run(self, job: dict) -> dict:
        zygote = self.zygote_for(job)
        started_before = zygote.startup_total   # the zygote starts (again) inside, when it must
        outcome = grade_notebook(zygote, job_cells(job), job["names"], cell_timeout=job["cell_timeout"],
                                 notebook_timeout=job["notebook_timeout"], data_dir=job.get("data_dir"),
                                 reference=job.get("reference"))
        result = outcome.to_json()
        result["timing"]["zygote_startup"] = zygote.startup_total - started_before
        result["uid"] = self.uid
        return result

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        if self.uid is not None:
            _kill_uid(self.uid)


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _die_with_parent()
    cap = os.environ.get("AUTOGRADER_MEMORY_CAP")
    if cap:
        enter_memory_cgroup(int(cap))
    worker = Worker()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            try:
                result = worker.warm(job) if job.get("warm") else worker.run(job)
            except Exception as exc:  # noqa: BLE001 - reported to the main process, which flags the job
                traceback.print_exc()
                worker.close()
                result = {"status": "error", "reasons": [f"grading failed: {type(exc).__name__}: {exc}"]}
            protocol.write(json.dumps({"id": job["id"], "result": result}) + "\n")
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    # Nothing is left to write or clean up: skip the interpreter's teardown, 0.7 s with torch loaded,
    # which the main process would wait for at the end of every batch.
    os._exit(status)
