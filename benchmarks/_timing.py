"""Shared timing helpers for the benchmark scripts (run them from the repository root)."""

from __future__ import annotations

import time
from statistics import median


def time_call(fn, repeats: int = 7, min_seconds: float = 0.2) -> float:
    """Median seconds per call of ``fn()``, each repeat looping long enough to be measurable."""
    fn()  # warm up: caches, lazily built layers
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    loops = max(1, int(min_seconds / once))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - start) / loops)
    return median(samples)
