"""Grading throughput: the sandboxed parallel grader against plain serial ``nbgrader autograde``.

For each assignment (default: a NumPy exercise, ``ch3a_multi_query_penalty``, and a torch one,
``ch3b_draw_read_torch``), 30 students hand in the reference answers. In one run, each on a fresh
copy of the same course, whole commands are timed (start-up included):

1. ``nbgrader autograde`` (serial, unsandboxed: student code runs as you, one kernel per notebook;
   its kernels import the exercise's ``reference`` from an IPython startup file, as the judge binds
   it, so that its hidden tests run to the end: every student must get full marks from it too),
2. ``python -m autograder autograde --workers 1`` in the bubblewrap sandbox,
3. the same with ``--unsafe-no-sandbox``,
4. ``python -m autograder autograde`` with up to one worker per CPU, in the sandbox (the grader
   starts workers after the first only when the batch's work pays for their warm-up).

    .venv/bin/python benchmarks/grading_throughput.py [--students 30] [--assignment A ...]

Each is run ``--repeats`` times (default 2) in alternating order, and the best time counts: the
machine may be shared. It also prints, from the grader's reports, the time per notebook split
into start-up (the sandbox's zygote starting, shared by a worker's notebooks, plus forking a
child per notebook), the student's code, and the checks (the judge running the test cells); and
a worker's warm-up, once, before its first notebook (the judge's imports, the exercise's
reference), which overlaps the preparation of the submissions.
Goals (issue 9): the parallel sandboxed grader at least 5x serial nbgrader in notebooks per
minute (4 against 1), on each assignment; the sandbox costs little (2 against 3).
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
    parser.add_argument("--assignment", action="append",
                        help="an assignment in solutions/ (repeatable; default: ch3a_multi_query_penalty and ch3b_draw_read_torch)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=2, help="rounds, in alternating order; the best time counts")
    args = parser.parse_args()
    summary = {}
    for assignment in args.assignment or ["ch3a_multi_query_penalty", "ch3b_draw_read_torch"]:
        summary[assignment] = bench(assignment, args)
    print(json.dumps(summary))


def split(course: Path, assignment: str) -> dict[str, float]:
    """Mean seconds per notebook of the grader's own timings (from its report)."""
    whole = json.loads((course / "reports" / f"{assignment}.json").read_text())
    report = whole["students"]
    timings = [notebook["execution"]["timing"] for entry in report.values() for notebook in entry["notebooks"].values()]
    keys = ("zygote_startup", "startup", "student", "checks")
    parts = {key: sum(t.get(key, 0.0) for t in timings) / len(timings) for key in keys}
    parts["warm_up"] = whole.get("warm_up") or {}   # a worker's, once, before its first notebook
    return parts


def nbgrader_scores(course: Path, assignment: str) -> dict[str, tuple[float, float]]:
    """Each student's (score, max score) in the gradebook nbgrader's own autograde wrote."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {submission.student_id: (submission.score, submission.max_score)
                for submission in gradebook.assignment_submissions(assignment)}


def bench(assignment: str, args) -> dict:
    source = REPO / "solutions"
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
        # nbgrader's kernels get the exercise's `reference`, as the judge's test cells do: an IPython
        # startup file of the baseline's own profile imports it (without it every hidden test stops
        # at a NameError, and the baseline looks faster than it is).
        ipython_dir = work / "ipython"
        startup = ipython_dir / "profile_default" / "startup"
        startup.mkdir(parents=True)
        reference = source / assignment / "reference.py"
        if reference.is_file():
            (startup / "00-reference.py").write_text(
                "import importlib.util as _util\n"
                f"_spec = _util.spec_from_file_location('reference', {str(reference)!r})\n"
                "reference = _util.module_from_spec(_spec)\n_spec.loader.exec_module(reference)\n")

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
        splits: dict[str, dict] = {}
        # Rounds alternate the order (ABCD, DCBA, ...) so that a drift in machine load favours no one.
        for round_number in range(args.repeats):
            order = list(runs) if round_number % 2 == 0 else list(reversed(runs))
            for label in order:
                course = fresh(f"r{round_number}-{len(samples[label])}-{list(runs).index(label)}")
                if runs[label] is None:
                    # nbgrader reads the course's nbgrader_config.py from cwd; root and gradebook point at this copy.
                    # The course's config switches nbgrader's own autograde off (it runs student code
                    # unsandboxed): the baseline is exactly that command, so this copy's config lets it run.
                    config = course / "nbgrader_config.py"
                    config.write_text("".join(line for line in config.read_text().splitlines(keepends=True)
                                              if not line.startswith(("Autograde.start", "GenerateFeedback.start",
                                                                      "ExchangeCollect.start"))))
                    samples[label].append(run(
                        [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force",
                         f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}"],
                        course, dict(env, IPYTHONDIR=str(ipython_dir))))
                    scores = nbgrader_scores(course, assignment)
                    wrong = [s for s, (score, best) in scores.items() if score != best]
                    if wrong or len(scores) != args.students:
                        raise SystemExit(f"{label}: not full marks for {wrong[:3] or 'every student'}: the "
                                         "baseline must run every hidden test to the end")
                    continue
                samples[label].append(run(grader + [str(course), "--source", str(source), "autograde", assignment,
                                                    *runs[label]], REPO, env))
                report = json.loads((course / "reports" / f"{assignment}.json").read_text())["students"]
                # (Thirty identical answers are flagged as copies of each other: flags score nothing.)
                wrong = [s for s, e in report.items() if e["score"] != e["max_score"]]
                if wrong:
                    raise SystemExit(f"{label}: not full marks for {wrong[:3]}")
                if len(samples[label]) == 1 or samples[label][-1] == min(samples[label]):
                    splits[label] = split(course, assignment)
                shutil.rmtree(course)
        seconds = {label: min(values) for label, values in samples.items()}

        rates = {label: 60.0 * notebooks / s for label, s in seconds.items()}
        print(f"{notebooks} notebooks ({args.students} students x {assignment}), {os.cpu_count()} CPUs, "
              f"best of {args.repeats} (load average now {os.getloadavg()[0]:.1f})")
        for label, rate in rates.items():
            runs_text = ", ".join(f"{v:.1f}" for v in samples[label])
            print(f"  {label:45s} {seconds[label]:7.1f} s  {rate:6.1f} notebooks/min   (runs: {runs_text} s)")
        serial, sandboxed, unsandboxed, parallel = rates.values()
        print(f"sandbox cost (1 worker, unsandboxed vs sandboxed): {100 * (unsandboxed / sandboxed - 1):+.1f}%")
        print(f"parallel sandboxed vs serial nbgrader: {parallel / serial:.2f}x  (goal >= 5x)")
        for label, parts in splits.items():
            wall = seconds[label] / notebooks * (1 if "1 worker" in label else args.workers)
            print(f"  per notebook ({label}; a worker's time): start-up {1000 * parts['zygote_startup']:.0f} ms "
                  f"(the zygote, once per worker, spread over its notebooks) + {1000 * parts['startup']:.0f} ms "
                  f"(a fresh child), student code {1000 * parts['student']:.0f} ms, checks "
                  f"{1000 * parts['checks']:.0f} ms; whole command per notebook {1000 * wall:.0f} ms")
            if parts["warm_up"]:
                warm = parts["warm_up"]
                print(f"    and once per worker, while the submissions are prepared: warm-up "
                      f"{1000 * sum(warm.values()):.0f} ms (the judge's imports {1000 * warm.get('judge_imports', 0):.0f} ms, "
                      f"the references {1000 * warm.get('references', 0):.0f} ms)")
        return {"notebooks": notebooks, "seconds": seconds, "notebooks_per_minute": rates,
                "speedup_vs_nbgrader": parallel / serial, "sandbox_cost": unsandboxed / sandboxed - 1,
                "per_notebook_seconds": splits}
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
