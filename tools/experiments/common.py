"""What the book's experiments share: seeds, summaries over seeds, and the results files.

Each experiment in this folder is a script that trains small models of the package over
several seeds and writes one JSON file into ``book/results/``; a book page loads that file,
plots it and shows the command that made it. The scripts import the package like any user
of it; this module holds only the bookkeeping.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
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


def train_run(options: list[str], folder: Path, timeout_s: float) -> dict:
    """One run of ``attention-course train OPTIONS --out FOLDER`` in a fresh process: its last
    summary line, its ``history.json``, its parameter count and the child's CPU seconds (start-up,
    training and evaluations: what it would take on an idle core); stopped as hung after ``timeout_s``."""
    import numpy as np

    command = [sys.executable, "-m", "attention_course", "train", *options, "--out", str(folder), "--no-progress"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT, env=env)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    with np.load(folder / "checkpoint" / "weights.npz") as weights:
        parameters = int(sum(weights[name].size for name in weights.files))
    return {"summary": json.loads(completed.stdout.strip().splitlines()[-1]),
            "history": json.loads((folder / "history.json").read_text()),
            "parameters": parameters, "cpu_seconds": cpu_seconds}
