"""What the book's experiments share: seeds, summaries over seeds, and the results files.

Each experiment in this folder is a script that trains small models of the package over
several seeds and writes one JSON file into ``book/results/``; a book page loads that file,
plots it and shows the command that made it. The scripts import the package like any user
of it; this module holds only the bookkeeping.
"""

from __future__ import annotations

import json
import math
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "book" / "results"

__all__ = ["ROOT", "RESULTS", "mean_sd", "write_results", "load_results", "command_line",
           "Stopwatch"]


def mean_sd(values) -> tuple[float, float]:
    """The mean and the sample standard deviation (0 for a single value)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_sd: no values")
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.fmean(values), sd


def command_line(module: str, argv: list[str] | None = None) -> str:
    """The command that reproduces this run, as typed from the repository root."""
    argv = sys.argv[1:] if argv is None else argv
    return " ".join([".venv/bin/python -m", module, *map(shlex.quote, argv)])


def _finite(value):
    """NaN (a length with no examples) as None, so the file stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def write_results(path: Path, experiment: str, settings: dict, records: list[dict],
                  seconds: float, command: str, **extra) -> Path:
    """Write one experiment's results as JSON (small, readable, diffable)."""
    import numpy

    machine = {"python": platform.python_version(), "numpy": numpy.__version__,
               "processor": platform.machine()}
    if "torch" in sys.modules:
        machine["torch"] = sys.modules["torch"].__version__
    payload = {
        "experiment": experiment,
        "command": command,
        "settings": settings,
        "machine": machine,
        "seconds": round(seconds, 1),
        **extra,
        "records": records,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(payload), indent=1) + "\n", encoding="utf-8")
    return path


def load_results(name: str) -> dict:
    """``book/results/<name>.json``, as written by :func:`write_results`."""
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


class Stopwatch:
    """Seconds since creation, for progress lines."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def log(self, message: str) -> None:
        print(f"[{self.seconds:7.1f} s] {message}", file=sys.stderr, flush=True)
