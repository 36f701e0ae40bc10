"""A grading worker: ``python -m autograder.worker`` executes notebooks one job at a time.

The main process writes one JSON line per job on stdin; the worker executes the notebook named
in it (``executor.py``), writes the executed notebook and its outcome next to it, and answers
with one JSON line on its protocol channel (the original stdout; everything else printed, by the
kernel or a library, goes to stderr, which is the worker's log). The worker never touches the
gradebook. It dies with the main process, and its kernels die with it (``--die-with-parent``).
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

import nbformat
from .executor import execute_notebook, limit_output, outcome_json
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
    """Kill every process of the sandbox uid (it is this worker's alone): nothing survives a job."""
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


def run_job(job: dict) -> dict:
    config = SandboxConfig.from_json(job["sandbox"])
    uid = config.uid(job["worker"])
    workdir, runtime = Path(job["workdir"]), Path(job["runtime_dir"])
    for path in (workdir, runtime):
        shutil.rmtree(path, ignore_errors=True)
    # Sandboxed, the working folder is a tmpfs inside the sandbox (the data files bound into it);
    # the empty folder here is only where the kernel process starts. Unsandboxed, it is the real one.
    workdir.mkdir(parents=True)
    files = job.get("files", [])
    if not config.sandboxed:
        for extra in files:
            source = Path(extra)
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, workdir / source.name)
        prepare_dirs(config, uid, workdir)
    prepare_dirs(config, uid, runtime)
    nb = nbformat.read(job["input"], as_version=4)
    try:
        outcome = execute_notebook(nb, config=config, workdir=str(workdir), runtime_dir=str(runtime), uid=uid,
                                   cell_timeout=job["cell_timeout"], notebook_timeout=job["notebook_timeout"],
                                   files=files if config.sandboxed else [])
    finally:
        if uid is not None:
            _kill_uid(uid)
        for path in (workdir, runtime):
            shutil.rmtree(path, ignore_errors=True)
    limit_output(nb)
    nbformat.write(nb, job["output"])
    return dict(outcome_json(outcome), uid=uid)


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _die_with_parent()
    cap = os.environ.get("AUTOGRADER_MEMORY_CAP")
    if cap:
        enter_memory_cgroup(int(cap))
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            result = run_job(job)
        except Exception as exc:  # noqa: BLE001 - reported to the main process, which flags the job
            traceback.print_exc()
            result = {"status": "error", "reasons": [f"grading failed: {type(exc).__name__}: {exc}"]}
        protocol.write(json.dumps({"id": job["id"], "result": result}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
