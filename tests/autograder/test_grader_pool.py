"""The worker pool starts a worker after the first only when it pays for its warm-up (``_grow``)."""

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
