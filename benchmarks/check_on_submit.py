"""Check on submit under a class: 30 students submit a NumPy and a torch assignment within a minute.

    sudo .venv/bin/python benchmarks/check_on_submit.py [--students 30] [--workers 2] [--seed 0]

What it runs: the course's check engine (``checkservice.Engine``, as the hub's check service runs
it, with its queue, its warm workers, the batch's sandbox and judge) on a course made here from
``solutions/`` (ch3a_multi_query_penalty, NumPy; ch7b_dense_stack_torch, torch), and submissions
laid into the exchange's inbound folder as nbgrader's submit lays them. What it leaves out: the
hub's HTTP and OAuth in front of the page, and the student's server writing the folder (tens of
milliseconds each); and it runs the sandbox as root (leased uids), where the hub's service runs
it as the course's grader account (a user namespace).

1. **Idle**: one student, alone, submits ch3a three times in a row (each after the last check
   is done): the time from the submission's folder appearing to its result being written.
2. **Class**: every student submits ch3a at the same moment, then ch7b at random moments over the
   next minute (seeded). Of each assignment two students hand in a wrong answer (the exercise's
   core mistake) and one a hostile notebook (an answer that never returns: it costs its own cell
   limit, ``--cell-timeout``); the rest the solution. Every check must finish (``lost``: those
   that did not within ten minutes), and every right answer get full marks.

Prints, per run, p50 and p95 of submit -> result and its split (waiting in the queue, the sandbox
starting, the student's code, the checks), then one JSON line. Goal (issue 31), on the course's
2-core machine: 0 lost, p95 <= 15 s for the class, median <= 5 s for a single check when idle.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from textwrap import dedent, indent

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from autograder import checks, checkservice  # noqa: E402
from autograder.course import Course  # noqa: E402

COURSE = "bench"
ASSIGNMENTS = ("ch3a_multi_query_penalty", "ch7b_dense_stack_torch")
HOSTILE = "import time\nwhile True:\n    time.sleep(0.05)\n"


def answers(source_nb, kind: str, reference: Path) -> dict[str, str]:
    """The answer cells of a right, wrong (the core mistake) or hostile submission."""
    cells = {c.metadata.nbgrader.grade_id: c.source for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("solution")}
    if kind == "right":
        return cells
    if kind == "hostile":
        first = next(iter(cells))
        head = cells[first].split("### BEGIN SOLUTION")[0].rstrip(" ")   # (the marker's own indent dropped)
        return {**cells, first: head + indent(HOSTILE, "    ")}
    tree = ast.parse(reference.read_text())
    mistake = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                   and getattr(n.targets[0], "id", "") == "CORE_MISTAKE")
    for grade_id, body in mistake["answers"].items():
        cells[grade_id] = cells[grade_id].split("### BEGIN SOLUTION")[0].rstrip(" ") + indent(dedent(body).strip("\n"), "    ")
    return cells


def handed_in(released: Path, cells: dict[str, str]):
    nb = nbformat.read(released, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in cells:
            cell.source = cells[grade_id]
    return nb


def put(exchange: Path, student: str, assignment: str, nb, number: int) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()) + f".{number:06d} UTC"
    name = f"{student}+{assignment}+{stamp}+{os.urandom(4).hex()}"
    staging = exchange / COURSE / f".staging-{name}"
    staging.mkdir(parents=True)
    nbformat.write(nb, staging / f"{assignment}.ipynb")
    (staging / "timestamp.txt").write_text(stamp)
    os.rename(staging, exchange / COURSE / "inbound" / name)   # appears whole, as nbgrader's rename does
    return name


def wait(queue: checks.Queue, names: list[str], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    found: dict = {}
    while time.monotonic() < deadline and len(found) < len(names):
        for name in names:
            if name not in found:
                rows = queue._rows("WHERE submission = ?", name)
                if rows and rows[0].state not in (checks.QUEUED, checks.RUNNING):
                    found[name] = rows[0]
        time.sleep(0.05)
    return found


def summary(title: str, done: dict, appeared: dict, expected: int) -> dict:
    latency = [check.finished - appeared[name] for name, check in done.items() if check.state == checks.DONE]
    parts = {key: [check.result["timing"][key] for check in done.values() if check.state == checks.DONE]
             for key in ("queue", "sandbox", "student", "checks")}

    def q(values, p):
        return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]

    row = {"checks": len(latency), "lost": expected - len(latency), "p50_s": round(q(latency, 50), 2),
           "p95_s": round(q(latency, 95), 2), "max_s": round(max(latency), 2)}
    row.update({f"{key}_p50_s": round(q(values, 50), 2) for key, values in parts.items()})
    print(f"{title}: {row['checks']} checks, {row['lost']} lost; submit -> result p50 {row['p50_s']} s, p95 "
          f"{row['p95_s']} s, max {row['max_s']} s; split (p50): queue {row['queue_p50_s']} s, sandbox "
          f"{row['sandbox_p50_s']} s, student's code {row['student_p50_s']} s, checks {row['checks_p50_s']} s")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--cell-timeout", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="check-bench-"))
    try:
        source, root, exchange = base / "source", base / "grading", base / "exchange"
        for assignment in ASSIGNMENTS:
            shutil.copytree(REPO / "solutions" / assignment, source / assignment)
            done = subprocess.run([sys.executable, "-m", "autograder", "--course-dir", str(root), "--source", str(source),
                                   "release", assignment], cwd=REPO, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(done.stderr)
        (root / checks.FILE_NAME).write_text(json.dumps({"default": {"show": "points", "per_hour": 100}}))
        (exchange / COURSE / "inbound").mkdir(parents=True)
        course = Course(root=root, source=source, course_id=COURSE, exchange=str(exchange))
        queue = checks.Queue(root / "checks" / "checks.sqlite")
        engine = checkservice.Engine(course, queue, workers=args.workers, cell_timeout=args.cell_timeout,
                                     notebook_timeout=6 * args.cell_timeout, poll=0.05).start()
        notebooks = {}
        for assignment in ASSIGNMENTS:
            source_nb = nbformat.read(source / assignment / f"{assignment}.ipynb", as_version=4)
            released = root / "release" / assignment / f"{assignment}.ipynb"
            notebooks[assignment] = {kind: handed_in(released, answers(source_nb, kind, source / assignment / "reference.py"))
                                     for kind in ("right", "wrong", "hostile")}
        results = {}
        try:
            # warm: the first check of each assignment starts its workers' sandboxes (once per service)
            for assignment in ASSIGNMENTS:
                wait(queue, [put(exchange, "warmup", assignment, notebooks[assignment]["right"], 0)], 300)
            appeared, idle = {}, {}
            for number in range(3):
                name = put(exchange, "alone", ASSIGNMENTS[0], notebooks[ASSIGNMENTS[0]]["right"], number)
                appeared[name] = time.time()
                idle.update(wait(queue, [name], 120))
            results["idle"] = summary("one student, idle service (ch3a)", idle, appeared, 3)
            kinds = ["wrong", "wrong", "hostile"] + ["right"] * (args.students - 3)
            students = [f"s{index:02d}" for index in range(args.students)]
            plan = [(0.0, student, ASSIGNMENTS[0], kinds[i]) for i, student in enumerate(students)]
            plan += [(rng.uniform(0, 60), student, ASSIGNMENTS[1], kinds[(i + 5) % len(kinds)])
                     for i, student in enumerate(students)]
            appeared, expected = {}, {}
            start = time.time()
            for at, student, assignment, kind in sorted(plan):
                time.sleep(max(0.0, start + at - time.time()))
                name = put(exchange, student, assignment, notebooks[assignment][kind], len(appeared))
                appeared[name], expected[name] = time.time(), kind
            done = wait(queue, list(appeared), 600)
            wrong_marks = [name for name, check in done.items() if expected[name] == "right" and
                           (check.state != checks.DONE or check.result["score"] != check.result["max_score"])]
            if wrong_marks:
                raise SystemExit(f"right answers without full marks: {wrong_marks[:3]}")
            full_marks = [name for name, check in done.items() if expected[name] != "right" and
                          check.state == checks.DONE and check.result["score"] == check.result["max_score"]]
            if full_marks:
                raise SystemExit(f"wrong or hostile answers with full marks: {full_marks[:3]}")
            results["class"] = summary(f"{args.students} students x 2 assignments within a minute", done, appeared,
                                       len(appeared))
        finally:
            engine.stop()
            queue.close()
        line = {"students": args.students, "workers": args.workers, "cpus": os.cpu_count(),
                "lost": results["class"]["lost"], "p50_s": results["class"]["p50_s"], "p95_s": results["class"]["p95_s"],
                "idle_p50_s": results["idle"]["p50_s"], "class": results["class"], "idle": results["idle"],
                "load_average": round(os.getloadavg()[0], 2)}
        print(json.dumps(line))
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
