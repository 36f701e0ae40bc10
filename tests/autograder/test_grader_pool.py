"""The worker pool starts a worker after the first only when it pays for its warm-up (``_grow``);
the first starts before the main process's own heavy imports, and warms up from the source folder."""

from __future__ import annotations

import pytest

from autograder import pool


@pytest.fixture
def idle_pool(tmp_path, monkeypatch):
    """A pool of two workers, never started: its decision is read from the state set by each test."""
    monkeypatch.setattr(pool.os, "cpu_count", lambda: 2)   # no core to spare: 4 warm-ups
    made = pool.WorkerPool(2, tmp_path / "pool.log", timeout=60, expected_jobs=30)
    made.wake[0].set()
    made.warm_seconds = 2.0
    yield made
    made.log.close()


def _state(made, done, each, submitted=30, taken=None, running=None):
    made.durations = [each] * done
    made.submitted = submitted
    made.taken = done + len(running or {}) if taken is None else taken
    made.running = dict(running or {})


def test_no_second_worker_before_a_warm_up_is_known_or_three_notebooks_are_done(idle_pool):
    _state(idle_pool, done=2, each=5.0)
    assert not idle_pool._grow(now=100.0)
    _state(idle_pool, done=3, each=5.0)
    idle_pool.warm_seconds = None
    assert not idle_pool._grow(now=100.0)


def test_a_second_worker_starts_when_the_work_left_outweighs_four_warm_ups_on_two_cores(idle_pool):
    _state(idle_pool, done=3, each=0.25)      # 27 left x 0.25 s = 6.75 s < 4 x 2 s: one worker
    assert not idle_pool._grow(now=100.0)
    _state(idle_pool, done=3, each=0.5)       # 27 x 0.5 = 13.5 s > 8 s: a second one pays
    assert idle_pool._grow(now=100.0)
    _state(idle_pool, done=3, each=0.5, submitted=30, taken=30)   # nothing queued: nobody to start for
    assert not idle_pool._grow(now=100.0)


def test_with_a_core_to_spare_one_warm_up_is_enough(idle_pool, monkeypatch):
    monkeypatch.setattr(pool.os, "cpu_count", lambda: 8)
    _state(idle_pool, done=3, each=0.25)      # 6.75 s > 2 s
    assert idle_pool._grow(now=100.0)


def test_a_notebook_that_runs_past_two_warm_ups_starts_another_worker(idle_pool):
    _state(idle_pool, done=0, each=0.0, running={0: 97.0})     # 3 s: not yet
    assert not idle_pool._grow(now=100.0)
    _state(idle_pool, done=0, each=0.0, running={0: 95.0})     # 5 s > 2 x 2 s, 29 waiting
    assert idle_pool._grow(now=100.0)


def _python(code: str):
    import subprocess
    import sys

    from autograder.course import REPO_ROOT

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


def test_autograde_can_start_its_workers_before_importing_nbgrader():
    """``grading`` imports nbgrader, SQLAlchemy and nbformat (1.5 s) only after the pool has started
    (``records``), so the first worker's warm-up overlaps them."""
    done = _python("import sys\nimport autograder.cli, autograder.grading\n"
                   "heavy = [m for m in ('nbgrader', 'sqlalchemy', 'nbformat', 'torch') if m in sys.modules]\n"
                   "assert not heavy, heavy\n")
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("uses_torch", [True, False])
def test_the_warm_up_loads_the_reference_and_imports_torch_only_for_a_torch_exercise(tmp_path, uses_torch):
    import json

    from autograder.course import Course
    from autograder.grading import _warm_job

    folder = tmp_path / "source" / "ex"
    folder.mkdir(parents=True)
    code = "import torch\nx = torch.zeros(2)" if uses_torch else "import numpy as np\nx = np.zeros(2)"
    notebook = {"cells": [{"cell_type": "code", "source": code.splitlines(True), "metadata": {}, "outputs": []}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "ex.ipynb").write_text(json.dumps(notebook))
    (folder / "reference.py").write_text("import json\nLOADED = 'yes'\n")
    job = _warm_job(Course(tmp_path / "grading", source=tmp_path / "source"), "ex")
    assert job["references"] == [str(folder / "reference.py")] and job["sources"] == [str(folder / "ex.ipynb")]
    done = _python("import json, sys\nfrom autograder.worker import Worker\n"
                   f"answer = Worker().warm(json.loads({json.dumps(json.dumps(job))}))\n"
                   "loaded = [m for m in sys.modules.values() if getattr(m, 'LOADED', None) == 'yes']\n"
                   "print(json.dumps({'answer': answer, 'torch': 'torch' in sys.modules, 'loaded': len(loaded)}))\n")
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["answer"]["status"] == "warm" and "reference_error" not in seen["answer"], seen
    assert seen["loaded"] == 1 and seen["torch"] is uses_torch, seen
