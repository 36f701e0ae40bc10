"""A backward pass by perturbation against the hand-written one, at the size of each NumPy exercise's
scale test.

A backward pass made by central differences of the student's own forward pass (two forward passes
per input element) gives the right values on small inputs, and on small inputs only. Every test
cell of the ten NumPy exercises that grades a backward pass therefore has a hidden check at a
realistic size, under a ``# reason:`` that says a backward by finite differences cannot finish
within the time limit. This script reads those checks from the source notebooks and runs each one
as the judge does (the exercise's ``reference.py`` bound to ``reference``), with the solution's own
functions (from the notebook's solution cells) in the student's place, recording every call. Then,
on the inputs the check used, it times:

* the hand-written backward pass (the graded call, alone: median of ``--repeats`` runs);
* one forward pass (the fastest of ``--repeats`` runs), and estimates a backward by perturbation
  as 2 forward passes per float input element, divided by the batch size N: a student who
  perturbs one element in every example of the batch at once needs 2 forward passes per element
  of one example and per parameter, which is more than the total divided by N; the estimate is
  a lower bound;

and prints per check the hand-written ms, the perturbation estimate s, their ratio, the margin of
the estimate over the grader's per-cell limit (``--cell-timeout``, 60 s by default), and, for the
cost to the judge, the seconds the check spends outside the student's functions (the reference,
the comparisons) and the MiB its calls carry across the wire (arguments and results; the largest
reply too, which must stay well under the wire's 128 MiB). The figures, measured in this run, come
last as one JSON line. (A benchmark, not a timed test. On a shared machine another process can
only slow a run down: the fastest forward pass is the closest to this machine's own speed, and a
perturbation on a busy machine would take longer still.)

``--grade K`` also measures what the checks cost the grader: the solution, handed in K + 1 times,
is graded in one batch by one worker (sandboxed, the real grader), once against the source
notebook with its scale checks taken out and once as it is, the two batches alternating
``--rounds`` times; it prints the median seconds of a notebook's test cells (the judge's side,
transfers included; the slowest notebook of each batch, the one that paid the worker's warm-up,
left out).

    .venv/bin/python benchmarks/backward_by_perturbation.py [--repeats 10] [--grade K [--rounds 2]] [ASSIGNMENT ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from statistics import median

import nbformat
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.references import load_reference, reference_path  # noqa: E402

SOLUTIONS = ROOT / "solutions"
ASSIGNMENTS = ("ch1a_peephole_lstm", "ch2a_lstmp_encoder", "ch3a_multi_query_penalty", "ch4a_l2_attention",
               "ch5a_location_attention", "ch6a_bidirectional", "ch7a_highway", "ch8a_local_p_window",
               "ch9a_key_value_memory", "ch10a_multihead_backward")
SCALE_REASON = "a backward by finite differences cannot finish within the time limit"
CELL_LIMIT = 60.0          # the grader's default --cell-timeout, seconds
REASON = re.compile(r"^\s*# reason:")
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def solution_namespace(nb) -> dict:
    """The notebook's read-only and solution cells run here: the answer functions as a student who
    wrote the solution has them."""
    namespace: dict = {"__name__": "__solution__"}
    for cell in nb.cells:
        if cell.cell_type == "code" and not _meta(cell).get("grade"):
            exec(compile(cell.source, f"<{_meta(cell).get('grade_id')}>", "exec"), namespace)  # noqa: S102
    return namespace


def answer_functions(nb) -> list[str]:
    names = []
    for cell in nb.cells:
        if cell.cell_type == "code" and _meta(cell).get("solution"):
            names += re.findall(r"^def ([A-Za-z]\w*)\(", cell.source, re.M)
    return names


def scale_checks(nb) -> list[tuple[str, str, str]]:
    """(grade_id, the cell's code before the scale check, the scale check) for every test cell with one:
    the check runs from its ``# reason:`` line to the next reason or the end of the hidden part."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not _meta(cell).get("grade"):
            continue
        lines = cell.source.split("\n")
        starts = [i for i, line in enumerate(lines) if REASON.match(line) and SCALE_REASON in line]
        for start in starts:
            end = next(i for i in range(start + 1, len(lines)) if REASON.match(lines[i]) or HIDDEN_END in lines[i])
            before = [line for line in lines[:start] if HIDDEN_BEGIN not in line]
            found.append((_meta(cell)["grade_id"], "\n".join(before), "\n".join(lines[start:end])))
    return found


class Recorder:
    """Stands in for an answer function: calls the solution's, records the call and its seconds."""

    def __init__(self, name: str, function, calls: list) -> None:
        self.name, self.function, self.calls = name, function, calls

    def __call__(self, *args, **kwargs):
        started = time.perf_counter()
        result = self.function(*args, **kwargs)
        self.calls.append({"name": self.name, "args": args, "kwargs": kwargs, "result": result,
                           "seconds": time.perf_counter() - started})
        return result


def float_arrays(value) -> list[np.ndarray]:
    """The float arrays in a value (nested lists, tuples and dicts included)."""
    if isinstance(value, np.ndarray):
        return [value] if value.dtype.kind == "f" else []
    if isinstance(value, (list, tuple)):
        return [array for item in value for array in float_arrays(item)]
    if isinstance(value, dict):
        return [array for item in value.values() for array in float_arrays(item)]
    return []


def nbytes(value) -> int:
    """What a value weighs on the wire, roughly: its arrays' bytes."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (list, tuple)):
        return sum(nbytes(item) for item in value)
    if isinstance(value, dict):
        return sum(nbytes(item) for item in value.values())
    return 0


def forward_of(namespace: dict, calls: list, graded: dict):
    """(a forward pass to time, the inputs a perturbation would move, the batch size) for the graded call.

    For ``*_backward``: the last forward pass before it, all its float inputs. For
    ``highway_gradient_norms`` (the norms of the gradients at every level of a stack): the stack's
    forward pass, and only its input ``xs`` (a perturbation needs at least the level-0 gradient; the
    other levels cost more still).
    """
    if graded["name"] == "highway_gradient_norms":
        xs, mask, layers = graded["args"][:3]
        forward = namespace["highway_forward"]

        def stack():
            level = xs
            for layer in layers:
                level = forward(level, mask, layer["W_H"], layer["b_H"], layer["W_T"], layer["b_T"])[0]
            return level

        return stack, [xs], xs.shape[0]
    stem = graded["name"][:-len("_backward")]
    call = [c for c in calls[:calls.index(graded)] if c["name"] == f"{stem}_forward"][-1]
    inputs = float_arrays(list(call["args"]) + list(call["kwargs"].values()))
    function = namespace[call["name"]]
    return (lambda: function(*call["args"], **call["kwargs"])), inputs, inputs[0].shape[0]


def timed(function, repeats: int) -> list[float]:
    function()  # warm up
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return samples


def measure(name: str, repeats: int, cell_limit: float) -> list[dict]:
    nb = nbformat.read(SOLUTIONS / name / f"{name}.ipynb", as_version=4)
    solution = solution_namespace(nb)
    reference = load_reference(reference_path(SOLUTIONS / name / f"{name}.ipynb"))
    functions = answer_functions(nb)
    rows = []
    checks_found = scale_checks(nb)
    if not checks_found:
        raise SystemExit(f"{name}: no hidden check under a reason that says {SCALE_REASON!r}")
    for grade_id, before, check in checks_found:
        calls: list = []
        namespace = {"__name__": "__main__", "reference": reference}
        namespace.update({f: solution[f] for f in functions})
        exec(compile(before, f"<{grade_id}>", "exec"), namespace)  # noqa: S102 - the cell's earlier checks
        namespace.update({f: Recorder(f, solution[f], calls) for f in functions})
        started = time.perf_counter()
        exec(compile(check, f"<{grade_id}: scale check>", "exec"), namespace)  # noqa: S102
        block = time.perf_counter() - started
        graded = [c for c in calls if not c["name"].endswith("_forward")][-1]
        forward, inputs, batch = forward_of(solution, calls, graded)
        function = solution[graded["name"]]
        hand = median(timed(lambda: function(*graded["args"], **graded["kwargs"]), repeats))
        once = min(timed(forward, repeats))
        elements = sum(array.size for array in inputs)
        estimate = 2 * elements * once / batch
        rows.append({
            "assignment": name, "test": grade_id, "function": graded["name"], "elements": elements, "batch": batch,
            "hand_written_ms": round(hand * 1e3, 3), "forward_ms": round(once * 1e3, 3),
            "perturbation_s": round(estimate, 1), "ratio": round(estimate / hand), "margin": round(estimate / cell_limit, 1),
            "judge_ms": round((block - sum(c["seconds"] for c in calls)) * 1e3, 1),
            "wire_mib": round(sum(nbytes(c["args"]) + nbytes(c["kwargs"]) + nbytes(c["result"]) for c in calls) / 2**20, 1),
            "largest_reply_mib": round(max(nbytes(c["result"]) for c in calls) / 2**20, 1),
        })
    return rows


def without_scale_checks(nb):
    """The notebook with each scale check (its reason line to the next reason or the end of the hidden
    part) taken out: the tests as they were before."""
    import copy

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        kept, skipping = [], False
        for line in cell.source.split("\n"):
            if REASON.match(line):
                skipping = SCALE_REASON in line
            elif HIDDEN_END in line:
                skipping = False
            if not skipping:
                kept.append(line)
        cell.source = "\n".join(kept)
    return nb


def grading_seconds(names: list[str], copies: int, rounds: int) -> dict[str, dict]:
    """Median seconds of one notebook's test cells in the grader, without and with the scale checks."""
    import shutil
    import tempfile

    sys.path.insert(0, str(ROOT / "tools"))
    import check_exercise

    samples: dict[str, dict[str, list[float]]] = {name: {"without": [], "with": []} for name in names}
    with tempfile.TemporaryDirectory(prefix="scale-checks-") as tmp:
        before = Path(tmp) / "source-without"
        for name in names:
            (before / name).mkdir(parents=True)
            nb = nbformat.read(SOLUTIONS / name / f"{name}.ipynb", as_version=4)
            nbformat.write(without_scale_checks(nb), before / name / f"{name}.ipynb")
            shutil.copy(SOLUTIONS / name / "reference.py", before / name / "reference.py")
        for round_ in range(rounds):
            for label, source in (("without", before), ("with", SOLUTIONS)):
                check_exercise.SOLUTIONS = source
                extra = {name: [check_exercise.Entry(f"copy{i}", f"copy {i}", "full",
                                                     check_exercise.solution_answers(check_exercise.source_notebook(name)))
                                for i in range(copies)] for name in names}
                results = check_exercise.check_assignments(names, Path(tmp) / f"{label}-{round_}",
                                                           check_exercise.Options(workers=1), extra, echo=lambda _: None)
                for name, result in results.items():
                    graded = [e for e in result.entries if e.expect == "full"]
                    if any(e.score != e.max_score for e in graded):
                        raise SystemExit(f"{name} ({label} the scale checks): the solution lost points: "
                                         f"{[e.records for e in graded if e.score != e.max_score][:1]}")
                    seconds = sorted(sum(r.get("seconds", 0.0) for r in e.records.values()) for e in graded)
                    samples[name][label] += seconds[:-1]  # the slowest: the worker's warm-up
    return {name: {label: round(median(values), 3) for label, values in found.items()} for name, found in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", default=list(ASSIGNMENTS))
    parser.add_argument("--repeats", type=int, default=10, help="timed runs of each pass (default 10)")
    parser.add_argument("--cell-timeout", type=float, default=CELL_LIMIT,
                        help=f"the grader's limit per test cell, seconds (default {CELL_LIMIT:g})")
    parser.add_argument("--grade", type=int, default=0, metavar="K",
                        help="also grade the solution K + 1 times per batch, without and with the scale checks")
    parser.add_argument("--rounds", type=int, default=2, help="batches of each kind, alternating (with --grade)")
    args = parser.parse_args(argv)
    rows = []
    header = (f"{'assignment / test cell':<44} {'inputs':>9} {'N':>3} {'hand ms':>8} {'fwd ms':>7} "
              f"{'perturb s':>10} {'ratio':>8} {'margin':>7} {'judge ms':>8} {'wire MiB':>8}")
    print(header)
    for name in args.assignments:
        for row in measure(name, args.repeats, args.cell_timeout):
            rows.append(row)
            print(f"{name + ' / ' + row['test']:<44} {row['elements']:>9} {row['batch']:>3} {row['hand_written_ms']:>8.2f} "
                  f"{row['forward_ms']:>7.2f} {row['perturbation_s']:>10.0f} {row['ratio']:>8} "
                  f"{row['margin']:>6.1f}x {row['judge_ms']:>8.1f} {row['wire_mib']:>8.1f}", flush=True)
    least = min(rows, key=lambda row: row["margin"])
    print(f"smallest margin: {least['margin']}x the {args.cell_timeout:g} s cell limit "
          f"({least['assignment']} / {least['test']}); slowest hand-written backward: "
          f"{max(row['hand_written_ms'] for row in rows):.1f} ms")
    figures = {"cell_limit_s": args.cell_timeout, "min_margin": least["margin"], "checks": rows}
    if args.grade > 0:
        grading = grading_seconds(args.assignments, args.grade, args.rounds)
        print(f"\n{'assignment':<28} {'test cells s, without':>22} {'with the scale checks':>22} {'added':>8}")
        for name, seconds in grading.items():
            seconds["added"] = round(seconds["with"] - seconds["without"], 3)
            print(f"{name:<28} {seconds['without']:>22.3f} {seconds['with']:>22.3f} {seconds['added']:>+8.3f}")
        figures["grading_seconds_per_notebook"] = grading
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
