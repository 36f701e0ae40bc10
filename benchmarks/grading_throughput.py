"""Grading throughput: the sandboxed parallel grader against plain serial ``nbgrader autograde``.

30 students hand in the same assignment (the reference answers of one exercise in solutions/,
or the fixture ``fx_softmax`` when there is none). In one run, each on a fresh copy of the same
course, whole commands are timed (start-up included):

1. ``nbgrader autograde`` (serial, unsandboxed: student code runs as you),
2. ``python -m autograder autograde --workers 1`` in the bubblewrap sandbox,
3. the same with ``--unsafe-no-sandbox``,
4. ``python -m autograder autograde`` with one worker per CPU, in the sandbox.

    .venv/bin/python benchmarks/grading_throughput.py [--students 30] [--assignment ch3a_weight_sum]

Each is run ``--repeats`` times (default 2) in alternating order, and the best time counts: the
machine may be shared. Goals (issue 4): the sandbox costs under 10% (2 against 3); the parallel grader is at least
1.5x as fast as serial nbgrader (4 against 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "autograder" / "fixtures" / "source"


def run(command: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    return seconds


def student_version(released, source):
    answers = {c.metadata.nbgrader.grade_id: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in released.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return released


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--assignment", help="an assignment in solutions/ (default: ch3a_weight_sum, else the fixture)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=2, help="rounds, in alternating order; the best time counts")
    args = parser.parse_args()

    source = REPO / "solutions"
    assignment = args.assignment or "ch3a_weight_sum"
    if not (source / assignment).is_dir():
        source, assignment = FIXTURES, "fx_softmax"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    work = Path(tempfile.mkdtemp(prefix="grading-bench-"))
    try:
        template = work / "template"
        grader = [sys.executable, "-m", "autograder", "--course-dir"]
        run(grader + [str(template), "--source", str(source), "release", assignment], REPO, env)
        for notebook in sorted((source / assignment).glob("*.ipynb")):
            released = nbformat.read(template / "release" / assignment / notebook.name, as_version=4)
            answered = student_version(released, nbformat.read(notebook, as_version=4))
            for index in range(args.students):
                folder = template / "submitted" / f"student{index:02d}" / assignment
                folder.mkdir(parents=True, exist_ok=True)
                nbformat.write(answered, folder / notebook.name)
        notebooks = args.students * len(list((source / assignment).glob("*.ipynb")))

        def fresh(name: str) -> Path:
            course = work / name
            shutil.copytree(template, course)
            return course

        # Warm the page cache (interpreter, numpy, torch, nbgrader) so that the first timing is not penalised.
        warm = fresh("warm")
        shutil.rmtree(warm / "submitted")
        shutil.copytree(template / "submitted" / "student00", warm / "submitted" / "student00")
        run(grader + [str(warm), "--source", str(source), "autograde", assignment, "--workers", "1"], REPO, env)

        nbgrader_label = "nbgrader autograde, serial, unsandboxed"
        runs = {nbgrader_label: None,
                "autograder, 1 worker, sandboxed": ["--workers", "1"],
                "autograder, 1 worker, unsandboxed": ["--workers", "1", "--unsafe-no-sandbox"],
                f"autograder, {args.workers} workers, sandboxed": ["--workers", str(args.workers)]}
        samples: dict[str, list[float]] = {label: [] for label in runs}
        # Rounds alternate the order (ABCD, DCBA, ...) so that a drift in machine load favours no one.
        for round_number in range(args.repeats):
            order = list(runs) if round_number % 2 == 0 else list(reversed(runs))
            for label in order:
                course = fresh(f"r{round_number}-{len(samples[label])}-{list(runs).index(label)}")
                if runs[label] is None:
                    # nbgrader reads the course's nbgrader_config.py from cwd; root and gradebook point at this copy.
                    samples[label].append(run(
                        [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force",
                         f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}"],
                        course, env))
                    continue
                samples[label].append(run(grader + [str(course), "--source", str(source), "autograde", assignment,
                                                    *runs[label]], REPO, env))
                report = json.loads((course / "reports" / f"{assignment}.json").read_text())["students"]
                wrong = [s for s, e in report.items() if e["score"] != e["max_score"] or e["flags"]]
                if wrong:
                    raise SystemExit(f"{label}: not full marks for {wrong[:3]}")
                shutil.rmtree(course)
        seconds = {label: min(values) for label, values in samples.items()}

        rates = {label: 60.0 * notebooks / s for label, s in seconds.items()}
        print(f"{notebooks} notebooks ({args.students} students x {assignment}), {os.cpu_count()} CPUs, "
              f"best of {args.repeats} (load average now {os.getloadavg()[0]:.1f})")
        for label, rate in rates.items():
            runs_text = ", ".join(f"{v:.1f}" for v in samples[label])
            print(f"  {label:45s} {seconds[label]:7.1f} s  {rate:6.1f} notebooks/min   (runs: {runs_text} s)")
        serial, sandboxed, unsandboxed, parallel = rates.values()
        print(f"sandbox cost (1 worker, unsandboxed vs sandboxed): {100 * (unsandboxed / sandboxed - 1):+.1f}%  (goal < 10%)")
        print(f"parallel sandboxed vs serial nbgrader: {parallel / serial:.2f}x  (goal >= 1.5x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
