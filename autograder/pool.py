"""A pool of grading worker processes, one thread each in the main process.

Each thread owns one ``python -m autograder.worker`` process and feeds it jobs one at a time.
A job that gets no answer in time, or whose worker dies, gets an error result and only that
worker is replaced: the rest of the batch goes on. Results come back to the caller's thread,
which alone writes the gradebook. The first worker starts (imports, and with a warm job loads
the references) while the caller still prepares jobs, and takes each job as soon as it is
submitted; the others start when they pay (``WorkerPool.start``).
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import statistics
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

    def __init__(self, size: int, log_path: Path, timeout: float, memory_cap: int | None = None,
                 expected_jobs: int | None = None) -> None:
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
        # Workers after the first start when they pay (``_grow``): what that decision reads.
        self.expected_jobs = expected_jobs
        self.wake = [threading.Event() for _ in self.workers]
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.warm_seconds: float | None = None     # the first worker's warm-up
        self.taken = 0                             # jobs a worker has taken
        self.durations: list[float] = []           # finished jobs' seconds (less the zygote's start)
        self.running: dict[int, float] = {}        # worker -> when its job started

    def start(self, warm: dict | None = None) -> "WorkerPool":
        """Start the workers; with ``warm`` (``{"warm": True, ...}``: ``grading._warm_job``), each
        first does the judge's imports and loads the reference (``worker.py``), then takes jobs.

        With ``warm``, only the first worker starts at once; each further one starts when it pays
        for its warm-up (``_grow``: the work left per running worker against the first worker's
        warm-up), or when a job has run longer than two warm-ups while others wait (a notebook
        that hangs does not hold up the batch)."""
        self.warm_job = warm
        for index, event in enumerate(self.wake):
            if warm is None or index == 0:
                event.set()
        for worker, event in zip(self.workers, self.wake):
            if event.is_set():
                worker.start()
        for thread in self.threads:
            thread.start()
        if not all(event.is_set() for event in self.wake):
            threading.Thread(target=self._watch, daemon=True).start()
        return self

    def _grow(self, now: float) -> bool:
        """Whether one more worker should start now (called with ``self.lock`` held)."""
        if self.warm_seconds is None:
            return False
        queued = self.submitted - self.taken
        if queued <= 0:
            return False
        active = sum(event.is_set() for event in self.wake)
        if any(now - started > 2 * self.warm_seconds for started in self.running.values()):
            return True   # a slow (or hung) notebook: the others should not wait behind it
        if len(self.durations) < 3:   # (the first notebook of a worker pays for first-time paths)
            return False
        # With a core to spare (beyond the running workers and the main process) a new worker's
        # warm-up takes no one's time: it pays when the work left per worker is more than one
        # warm-up. Without, it slows everyone while it warms. Measured on 2 cores (30 students):
        # 8 s of NumPy checks against a 2.3 s warm-up, one worker was as fast as two; 20 s of torch
        # checks against 1.5 s, two were faster. Hence 4 warm-ups there.
        spare = (os.cpu_count() or 1) > active + 1
        left = max(self.expected_jobs or 0, self.submitted) - len(self.durations)
        return left * statistics.median(self.durations) / active > (1 if spare else 4) * self.warm_seconds

    def _watch(self) -> None:
        while not self.stopping.wait(0.1):
            with self.lock:
                sleeping = [index for index, event in enumerate(self.wake) if not event.is_set()]
                if not sleeping:
                    return
                if self._grow(time.monotonic()):
                    self.wake[sleeping[0]].set()
                    median = statistics.median(self.durations) if self.durations else 0.0
                    self.log.write(f"pool: starting worker {sleeping[0]}: {self.submitted - self.taken} queued, "
                                   f"{len(self.durations)} done (median {median:.3f} s), first warm-up "
                                   f"{self.warm_seconds:.3f} s\n".encode())
                    self.log.flush()

    def first_warm(self, timeout: float) -> dict | None:
        """The first worker's answer to the warm job (None: none within ``timeout``, or no warm job)."""
        if self.warm_job is None:
            return None
        try:
            return self.warmed.get(timeout=timeout)
        except queue.Empty:
            return None

    def submit(self, job: dict) -> None:
        with self.lock:
            self.submitted += 1
        self.pending.put(job)

    def finish(self) -> None:
        for _ in self.workers:
            self.pending.put(_DONE)

    def _serve(self, index: int, worker: _Worker) -> None:
        try:
            while not self.wake[index].wait(0.1):   # a worker after the first: until it pays (_grow)
                if self.stopping.is_set():
                    return
            if self.warm_job is not None:
                started = time.monotonic()
                try:
                    answer = worker.run(dict(self.warm_job, id="warm", worker=index), self.timeout)
                except Exception as exc:  # noqa: BLE001 - the jobs start the zygote again
                    worker.kill()
                    answer = {"status": "error", "reasons": [f"grading worker failed: {type(exc).__name__}: {exc}"]}
                if index == 0:
                    self.warm_seconds = time.monotonic() - started
                self.warmed.put(answer)
            while True:
                job = self.pending.get()
                if job is _DONE:
                    break
                job = dict(job, worker=index)
                with self.lock:
                    self.taken += 1
                    self.running[index] = started = time.monotonic()
                try:
                    result = worker.run(job, self.timeout)
                except Exception as exc:  # noqa: BLE001 - one job's failure must not stop the pool
                    worker.kill()
                    result = {"status": "error", "reasons": [f"grading worker failed: {type(exc).__name__}: {exc}"]}
                with self.lock:
                    del self.running[index]
                    timing = result.get("timing") if isinstance(result, dict) else None
                    zygote = timing.get("zygote_startup", 0.0) if isinstance(timing, dict) else 0.0
                    self.durations.append(max(0.0, time.monotonic() - started - float(zygote or 0.0)))
                self.done.put((job, result))
        finally:
            worker.close()

    def results(self) -> Iterator[tuple[dict, dict]]:
        for _ in range(self.submitted):
            yield self.done.get()

    def close(self, abort: bool = False) -> None:
        """Stop the workers; ``abort`` kills them (and their kernels) mid-job."""
        self.stopping.set()   # (workers that never started end here)
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
