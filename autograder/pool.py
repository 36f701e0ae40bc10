"""A pool of grading worker processes, one thread each in the main process.

Each thread owns one ``python -m autograder.worker`` process and feeds it jobs one at a time.
A job that gets no answer in time, or whose worker dies, gets an error result and only that
worker is replaced: the rest of the batch goes on. Results come back to the caller's thread,
which alone writes the gradebook. Workers start (and import, and with a warm job start their
zygotes and load the references) while the caller still prepares jobs, and take each job as soon
as it is submitted.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from .course import REPO_ROOT
from .sandbox import remove_memory_cgroup

_DONE = object()
# Beyond a notebook's own time limit, what a worker may take before its watchdog kills it: starting
# its sandbox (twice, when the first start fails) and cleaning up after the notebook.
STARTUP_ALLOWANCE = 120
MAX_RESULT_BYTES = 64 * 1024 * 1024   # one job's result line (the notebook's outputs are budgeted below this)


class _Worker:
    def __init__(self, log, env: dict) -> None:
        self.log = log
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.pending: list[bytes] = []   # what was read after the last result line

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.worker"], cwd=REPO_ROOT, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     bufsize=0, start_new_session=True)
        self.pending = []

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        remove_memory_cgroup(proc.pid)

    def close(self) -> None:
        proc = self.proc
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()
        remove_memory_cgroup(proc.pid)

    def _read_line(self, deadline: float) -> bytes | dict:
        """The worker's next line, read in linear time (each chunk is searched once); an error
        result when it takes past ``deadline``, grows past ``MAX_RESULT_BYTES`` or the worker dies."""
        chunks, size = self.pending, sum(len(c) for c in self.pending)
        self.pending = []
        fd = self.proc.stdout.fileno()
        while not (chunks and b"\n" in chunks[-1]):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                return {"status": "error", "reasons": ["grading worker gave no result within its time limit: killed"]}
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                code = self.proc.wait()
                remove_memory_cgroup(self.proc.pid)
                self.proc = None
                return {"status": "error", "reasons": [f"grading worker died (exit status {code})"]}
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_RESULT_BYTES:
                self.kill()
                return {"status": "error", "reasons": [f"the grading result was larger than "
                                                       f"{MAX_RESULT_BYTES // 2**20} MiB: killed"]}
        line, _, rest = chunks.pop().partition(b"\n")
        if rest:
            self.pending = [rest]
        return b"".join(chunks) + line

    def run(self, job: dict, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
        except OSError as exc:
            self.kill()
            return {"status": "error", "reasons": [f"grading worker unavailable: {exc}"]}
        line = self._read_line(time.monotonic() + timeout)
        if isinstance(line, dict):
            return line
        try:
            answer = json.loads(line)
        except ValueError:
            self.kill()
            return {"status": "error", "reasons": ["grading worker wrote an unreadable result: killed"]}
        if not isinstance(answer, dict) or answer.get("id") != job["id"] or not isinstance(answer.get("result"), dict):
            self.kill()
            return {"status": "error", "reasons": ["grading worker answered another job: killed"]}
        return answer["result"]


class WorkerPool:
    """``start()``, ``submit(job)`` any number of times, ``finish()``, then iterate ``results()``."""

    def __init__(self, size: int, log_path: Path, timeout: float, memory_cap: int | None = None) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(log_path, "ab")
        self.timeout = timeout
        env = dict(os.environ, **({"AUTOGRADER_MEMORY_CAP": str(memory_cap)} if memory_cap else {}))
        self.workers = [_Worker(self.log, env) for _ in range(max(1, size))]
        self.pending: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.submitted = 0
        self.threads = [threading.Thread(target=self._serve, args=(i, w), daemon=True)
                        for i, w in enumerate(self.workers)]
        self.warm_job: dict | None = None
        self.warmed: queue.Queue = queue.Queue()   # each worker's answer to the warm job

    def start(self, warm: dict | None = None) -> "WorkerPool":
        """Start the workers; with ``warm`` (a job's settings, marked ``"warm": True``), each first
        starts its zygote and loads the references (``worker.py``), then takes jobs."""
        self.warm_job = warm
        for worker in self.workers:
            worker.start()
        for thread in self.threads:
            thread.start()
        return self

    def first_warm(self, timeout: float) -> dict | None:
        """The first worker's answer to the warm job (None: none within ``timeout``, or no warm job)."""
        if self.warm_job is None:
            return None
        try:
            return self.warmed.get(timeout=timeout)
        except queue.Empty:
            return None

    def submit(self, job: dict) -> None:
        self.submitted += 1
        self.pending.put(job)

    def finish(self) -> None:
        for _ in self.workers:
            self.pending.put(_DONE)

    def _serve(self, index: int, worker: _Worker) -> None:
        try:
            if self.warm_job is not None:
                try:
                    answer = worker.run(dict(self.warm_job, id="warm", worker=index), self.timeout)
                except Exception as exc:  # noqa: BLE001 - the jobs start the zygote again
                    worker.kill()
                    answer = {"status": "error", "reasons": [f"grading worker failed: {type(exc).__name__}: {exc}"]}
                self.warmed.put(answer)
            while True:
                job = self.pending.get()
                if job is _DONE:
                    break
                job = dict(job, worker=index)
                try:
                    result = worker.run(job, self.timeout)
                except Exception as exc:  # noqa: BLE001 - one job's failure must not stop the pool
                    worker.kill()
                    result = {"status": "error", "reasons": [f"grading worker failed: {type(exc).__name__}: {exc}"]}
                self.done.put((job, result))
        finally:
            worker.close()

    def results(self) -> Iterator[tuple[dict, dict]]:
        for _ in range(self.submitted):
            yield self.done.get()

    def close(self, abort: bool = False) -> None:
        """Stop the workers; ``abort`` kills them (and their kernels) mid-job."""
        if abort:
            for worker in self.workers:
                proc = worker.proc
                if proc is not None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        self.finish()
        for thread in self.threads:
            if thread.is_alive():
                thread.join(timeout=60)
        self.log.close()
