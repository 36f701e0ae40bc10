"""Check exercise notebooks the way a student and the grader meet them, and attack their tests.

    .venv/bin/python tools/check_exercise.py ch3a_multi_query_penalty [ch3b_draw_read_torch ...]
    .venv/bin/python tools/check_exercise.py ASSIGNMENT --submission mine.ipynb [--submission ...]
    .venv/bin/python tools/check_exercise.py --all --adversarial [--mutants 40] [--workers 2]

For each assignment of ``solutions/``:

1. in a Jupyter kernel, as a student runs it: the solution notebook (with the exercise's
   ``reference.py`` bound to ``reference``, as the judge binds it) must run top to bottom without an
   error; the student version (solutions and hidden tests removed, as released, no ``reference``)
   must run through with every test cell failing on the missing answer (``NotImplementedError``);
2. through the grader (sandboxed, ``python -m autograder``'s own code): the solution handed in as
   a student would scores full marks, the released version zero, and every ``--submission``
   (a student notebook you wrote, e.g. with a wrong answer) is graded; each test cell's record
   (passed, or the failure message) is printed.

``--adversarial`` adds, in the same grading batch (``tools/exercise_adversary.py`` writes them):

* trivial fakes, every answer function at once: zeros, the first argument, ``None``, random values
  of the solution's shapes, an exception: each must score 0;
* a self-consistent fake: a fixed linear map with its exact transpose as the backward pass (or
  autograd's, in torch): must score 0, so no gradient test passes on consistency alone;
* each fake of each answer function alone (the others solved): must lose points;
* the exercise's core mistake (``CORE_MISTAKE`` in its ``reference.py``: the wrong answer the exercise
  exists to teach against): must lose points, and a *visible* test must fail on it with a message
  that names the mistake (holds its ``message``), so that the student learns it before grading;
* mutants of the solution (a flipped sign, another axis, a dropped term, a transpose, an
  off-by-one, the mask ignored, a changed constant, ...): each must lose points. A mutant that
  keeps full marks is compared with the solution on the inputs the tests use and on random
  inputs near them (outputs and, for torch, gradients): if they agree it is *equivalent* and
  excused, otherwise it is a *survivor* and the check fails.

It prints one table per exercise. ``--mutants N`` grades a sample of N mutants per exercise
spread over the kinds of edit (CI); the default grades every mutant. Exit status 1 if any
expectation fails (submissions given with ``--submission`` are only reported).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import exercise_adversary as adversary  # noqa: E402  (the standard library only)

# The grader and nbgrader (the `grading` extras: nbgrader, nbformat, jupyter_client, copydetect, ...)
# are imported where they are used, so that `--help` works without them.
if TYPE_CHECKING:
    import nbformat
    from autograder.course import Course

SOLUTIONS = ROOT / "solutions"   # --source changes it


def reference_path(source_notebook: Path) -> Path | None:
    from autograder.references import reference_path as find

    return find(source_notebook)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def source_notebook(name: str) -> nbformat.NotebookNode:
    import nbformat

    path = SOLUTIONS / name / f"{name}.ipynb"
    if not path.is_file():
        raise SystemExit(f"no exercise {name!r}: {path} does not exist")
    return nbformat.read(path, as_version=4)


# ------------------------------------------------------------------------------------------------
# 1. In a kernel
def _reference_cell(name: str) -> nbformat.NotebookNode | None:
    """A first cell binding ``reference`` as the judge does, or None when the exercise has none."""
    import nbformat

    path = reference_path(SOLUTIONS / name / f"{name}.ipynb")
    if path is None:
        return None
    return nbformat.v4.new_code_cell(
        f"import sys as _sys\n_sys.path.insert(0, {str(ROOT)!r})\n"
        f"from autograder.references import load_reference as _load_reference\n"
        f"reference = _load_reference({str(path)!r})\n")


def _kernel(nb, folder: Path) -> nbformat.NotebookNode:
    """``nb`` executed top to bottom (errors allowed) in a kernel of this interpreter."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    specs = folder / "kernels" / "python3"
    specs.mkdir(parents=True, exist_ok=True)
    (specs / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    nb = copy.deepcopy(nb)
    # IPC sockets in the private folder: no TCP ports, no warning about unencrypted TCP
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / f"kernel-{time.monotonic_ns()}"),
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs.parent)]))
    client = NotebookClient(nb, km=manager, timeout=300, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}})
    try:
        client.execute()
    finally:
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)
    return nb


def _errors(cell) -> str:
    return " | ".join(f"{o.ename}: {o.evalue}" for o in cell.get("outputs", []) if o.output_type == "error")


def check_in_kernel(name: str, course: Course, folder: Path) -> list[str]:
    import nbformat

    problems = []
    source = source_notebook(name)
    bound = _reference_cell(name)
    if bound is not None:
        source.cells.insert(0, bound)
    ran = _kernel(source, folder)
    for cell in ran.cells:
        if cell.cell_type == "code" and _errors(cell):
            problems.append(f"{name}: the solution fails in cell {_meta(cell).get('grade_id')}: {_errors(cell)}")
    student = nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4)
    ran = _kernel(student, folder)
    for cell in ran.cells:
        meta = _meta(cell)
        if meta.get("grade") and not meta.get("solution"):
            if not _errors(cell):
                problems.append(f"{name}: test cell {meta.get('grade_id')} passes on the student version")
            elif "NotImplementedError" not in _errors(cell):
                problems.append(f"{name}: test cell {meta.get('grade_id')} fails on the student version for "
                                f"another reason than the missing answer: {_errors(cell)}")
        elif cell.cell_type == "code" and not meta.get("solution") and _errors(cell):
            problems.append(f"{name}: the student version fails outside the tests, in cell "
                            f"{meta.get('grade_id')}: {_errors(cell)}")
    print(f"{name}: kernel runs checked ({len(problems)} problem(s))")
    return problems


# ------------------------------------------------------------------------------------------------
# 2. Through the grader
@dataclass
class Options:
    adversarial: bool = False
    mutants: int | None = None                       # how many mutants go through the grader (None: all)
    screened: int | None = None                      # how many mutants are tried at all (None: all)
    seed: int = 0                                    # which sample of mutants
    alone: tuple = adversary.FAKE_KINDS              # the fakes also tried one answer function at a time
    workers: int = 2                                 # grading processes per assignment
    jobs: int = 1                                    # assignments graded at once
    verbose: bool = False


def handed_in(course: Course, name: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The released notebook with ``answers`` (grade_id -> source) typed in, as a student hands it in."""
    import nbformat

    nb = nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if _meta(cell).get("grade_id") in answers:
            cell.source = answers[_meta(cell)["grade_id"]]
    return nb


def solution_answers(source) -> dict[str, str]:
    return {_meta(c)["grade_id"]: c.source for c in adversary.answer_cells(source)}


@dataclass
class Entry:
    """One submission of the batch and what is expected of it."""

    student: str
    label: str
    expect: str               # "full", "zero", "loses", "core" (loses, a visible test names it), "flagged" or "report"
    answers: dict | None      # grade_id -> source; None: the released notebook as it is
    mutant: adversary.Mutant | None = None
    graded: bool = True       # through the grader (a mutant not graded is screened only)
    screened: str = ""        # the screen's verdict on a mutant
    score: float | None = None
    max_score: float | None = None
    status: str = ""
    flags: list = field(default_factory=list)
    mutants_found: int = 0    # (on the solution's entry) how many mutants there are, tried or not
    mistake: dict | None = None   # (the core mistake's entry) the reference's CORE_MISTAKE
    records: dict = field(default_factory=dict)
    verdict: str = ""

    @property
    def problem(self) -> bool:
        return self.verdict.startswith(("PROBLEM", "SURVIVES", "NOT GRADED"))


@dataclass
class Result:
    name: str
    course: Course
    entries: list
    seconds: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        found = list(self.notes)
        for entry in self.entries:
            if entry.problem:
                what = f"mutant {entry.mutant.description}" if entry.mutant is not None else entry.label
                found.append(f"{self.name}: {what}: {entry.score}/{entry.max_score}: {entry.verdict}")
        return found


def entries_for(name: str, source, options: Options) -> list[Entry]:
    """The solution, the released notebook and, with ``options.adversarial``, the fakes and mutants."""
    entries = [Entry("solution", "solution", "full", solution_answers(source)),
               Entry("released", "released", "zero", None)]
    if not options.adversarial:
        return entries
    functions = adversary.answer_functions(source)
    base = solution_answers(source)
    mistake = adversary.core_mistake(reference_path(SOLUTIONS / name / f"{name}.ipynb"))
    if mistake is not None:
        entries.append(Entry("core-mistake", f"core mistake: {mistake['what']}", "core",
                             {**base, **adversary.core_mistake_answers(source, mistake)}, mistake=mistake))
    for kind in adversary.FAKE_KINDS:
        entries.append(Entry(f"fake-{kind}", f"fake {kind}: every function", "zero",
                             {**base, **adversary.fake_answers(source, kind)}))
    if len(functions) > 1:
        for function in functions:
            for kind in options.alone:
                entries.append(Entry(f"fake-{kind}-{function}"[:64], f"fake {kind}: {function} alone", "loses",
                                     {**base, **adversary.fake_answers(source, kind, only=function)}))
    found = adversary.mutants(source)
    tried = adversary.sample(found, options.screened, options.seed)
    graded = adversary.sample(tried, options.mutants, options.seed)
    for index, mutant in enumerate(found):
        if mutant in tried:
            entries.append(Entry(f"mutant-{index:04d}", mutant.description, "loses",
                                 {**base, mutant.grade_id: mutant.source}, mutant=mutant, graded=mutant in graded))
    entries[0].mutants_found = len(found)
    return entries


def grade_batch(course: Course, name: str, entries: list[Entry], folder: Path, workers: int) -> float:
    """Grade every entry to be graded in one batch, as a class is graded; returns the seconds it took."""
    import nbformat
    from autograder.grading import GradeOptions, autograde
    from autograder.submissions import import_submissions

    submissions = folder / "submissions"
    submissions.mkdir(parents=True)
    for entry in entries:
        if not entry.graded:
            continue
        if entry.answers is None and entry.expect == "report":
            continue  # written by the caller
        nb = handed_in(course, name, entry.answers) if entry.answers is not None else \
            nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4)
        nbformat.write(nb, submissions / f"{entry.student}.ipynb")
    for entry in entries:
        if entry.expect == "report" and entry.answers is None:
            (submissions / f"{entry.student}.ipynb").write_bytes(Path(entry.label).read_bytes())
    import_submissions(course, name, source=submissions)
    started = time.monotonic()
    report = autograde(course, name, GradeOptions(workers=workers, notebook_timeout=300), echo=lambda line: None)
    for entry in entries:
        result = report["students"].get(entry.student, {})
        entry.score, entry.max_score = result.get("score"), result.get("max_score")
        entry.status, entry.flags = result.get("status", ""), list(result.get("flags", []))
        entry.records = {grade_id: record for notebook in result.get("notebooks", {}).values()
                         for grade_id, record in notebook.get("tests", {}).items()}
    return time.monotonic() - started


def judge(entries: list[Entry]) -> None:
    """Each entry's verdict, from its grade and, for a mutant, from the screen and the equivalence test."""
    from autograder import similarity

    for entry in entries:
        if entry.mutant is not None:
            entry.verdict = _mutant_verdict(entry)
            continue
        if entry.score is None:
            entry.verdict = "NOT GRADED"
            continue
        full = entry.score == entry.max_score and entry.max_score > 0
        # Copy flags are expected in this batch (fakes and mutants are made from the solution) and
        # change no score; any other flag is the grader's finding.
        findings = [flag for flag in entry.flags if not similarity.is_copy_flag(flag)]
        if entry.expect == "full":
            entry.verdict = "ok" if full and not findings and entry.status in ("graded", "flagged") else \
                f"PROBLEM: not full marks, or flagged ({entry.flags[:1]})"
        elif entry.expect == "zero":
            entry.verdict = "ok" if entry.score == 0 else "PROBLEM: scores"
        elif entry.expect == "loses":
            entry.verdict = "ok" if entry.score < entry.max_score else "PROBLEM: keeps full marks"
        elif entry.expect == "core":
            named = [grade_id for grade_id, record in entry.records.items()
                     if adversary.names_the_mistake(record, entry.mistake)]
            entry.verdict = (f"ok (named by {', '.join(named)})" if entry.score < entry.max_score and named else
                             "PROBLEM: keeps full marks" if entry.score >= entry.max_score else
                             f"PROBLEM: no visible test fails with a message holding {entry.mistake['message']!r}")
        elif entry.expect == "flagged":
            entry.verdict = "ok" if entry.status == "flagged" else "PROBLEM: not flagged for review"
        else:
            entry.verdict = "reported"


def _mutant_verdict(entry: Entry) -> str:
    screened = entry.screened or "not screened"
    if entry.graded:
        if entry.score is None:
            return "NOT GRADED"
        lost = entry.score < entry.max_score
        if lost != screened.startswith("fails"):
            return (f"PROBLEM: the screen and the grader disagree (grader {entry.score:g}/{entry.max_score:g}, "
                    f"screen: {screened})")
        if lost:
            return "ok"
    elif screened.startswith("fails"):
        return "ok (screened)"
    if screened == "equivalent":
        return "equivalent"
    return f"SURVIVES ({screened})"


def screen_mutants(name: str, entries: list[Entry], folder: Path, workers: int) -> dict:
    """Screen every mutant against the tests, and compare those that pass with the solution, in a
    process of its own (``exercise_adversary.py run``); sets each mutant's ``screened``."""
    import nbformat

    mutants = [e for e in entries if e.mutant is not None]
    if not mutants:
        return {}
    source = source_notebook(name)
    cells = []
    for cell in source.cells:
        if cell.cell_type != "code":
            continue
        meta = _meta(cell)
        kind = "answer" if meta.get("solution") else "test" if meta.get("grade") else "given"
        functions = adversary.answer_functions(nbformat.v4.new_notebook(cells=[cell])) if kind == "answer" else []
        cells.append({"grade_id": meta.get("grade_id"), "kind": kind, "source": cell.source, "functions": functions})
    path = reference_path(SOLUTIONS / name / f"{name}.ipynb")
    job = {"cells": cells, "reference": str(path) if path else None, "workers": workers,
           "mutants": [{"id": e.student, "grade_id": e.mutant.grade_id, "source": e.mutant.source} for e in mutants]}
    job_path, out_path = folder / f"{name}-mutants.json", folder / f"{name}-mutants-out.json"
    job_path.write_text(json.dumps(job))
    started = time.monotonic()
    # one thread each: the screen forks a process per mutant, and a forked OpenMP pool can deadlock
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "exercise_adversary.py"), "run",
                          str(job_path), str(out_path)], capture_output=True, text=True, cwd=folder, env=env)
    if run.returncode != 0 or not out_path.exists():
        for entry in mutants:
            entry.screened = f"not screened: {run.stderr.strip()[-300:]}"
        return {"seconds": time.monotonic() - started}
    result = json.loads(out_path.read_text())
    for entry in mutants:
        entry.screened = result["mutants"].get(entry.student, "not screened")
    result["seconds"] = time.monotonic() - started
    return result


def table(result: Result, verbose: bool = False) -> str:
    """The result of one assignment as a table: every submission but the mutants that lost points
    (all of them with ``verbose``), and a summary of the mutants by kind."""
    entries = result.entries
    shown = [e for e in entries if verbose or e.mutant is None or not e.verdict.startswith("ok")]
    labels = [e.label if e.mutant is None else f"mutant {e.mutant.description}" for e in shown]
    width = min(max((len(label) for label in labels), default=10) + 2, 110)
    points = next((e.max_score for e in entries if e.max_score), 0)
    timing = ", ".join(f"{key} {value:.0f} s" for key, value in result.seconds.items())
    lines = [f"{result.name} ({points:g} points; {timing})",
             f"  {'submission':<{width}} {'score':>9}  {'expected':<11} verdict"]
    expected = {"full": "full marks", "zero": "0", "loses": "< full", "core": "named", "flagged": "flagged",
                "report": ""}
    for entry, label in zip(shown, labels):
        score = "-" if entry.score is None else f"{entry.score:g}/{entry.max_score:g}"
        if len(label) > width:
            label = label[:width - 3] + "..."
        lines.append(f"  {label:<{width}} {score:>9}  {expected[entry.expect]:<11} {entry.verdict}")
    mutants = [e for e in entries if e.mutant is not None]
    if mutants:
        killed = sum(e.verdict.startswith("ok") for e in mutants)
        equivalent = sum(e.verdict == "equivalent" for e in mutants)
        graded = sum(e.graded for e in mutants)
        share = f" ({100 * killed / (len(mutants) - equivalent):.1f}% of the non-equivalent lose points)" \
            if len(mutants) > equivalent else ""
        found = max(entries[0].mutants_found, len(mutants))
        tried = f"{len(mutants)} of {found} tried" if found > len(mutants) else f"{len(mutants)}"
        lines.append(f"  mutants: {tried} ({graded} graded, {len(mutants) - graded} screened): {killed} lose "
                     f"points, {equivalent} equivalent, {len(mutants) - killed - equivalent} survive{share}")
        by_kind: dict[str, list[int]] = {}
        for e in mutants:
            counts = by_kind.setdefault(e.mutant.kind, [0, 0])
            counts[0] += 1
            counts[1] += e.verdict.startswith("ok")
        lines.append("    by kind (lose points / all): " +
                     ", ".join(f"{kind} {k}/{n}" for kind, (n, k) in sorted(by_kind.items())))
    for note in result.notes:
        lines.append(f"  PROBLEM: {note}")
    return "\n".join(lines)


def check_assignment(name: str, course: Course, folder: Path, options: Options, extra: list[Entry] = ()) -> Result:
    """Grade the batch of ``name`` (released in ``course``, a course of its own): the solution, the
    released notebook, the fakes, the graded mutants and ``extra``; screen every mutant; judge the lot."""
    source = source_notebook(name)
    entries = entries_for(name, source, options) + list(extra)
    result = Result(name, course, entries)
    if options.adversarial and not any(e.expect == "core" for e in entries):
        result.notes.append(f"{name}: its reference.py names no {adversary.CORE_MISTAKE} (the wrong answer the "
                            f"exercise exists to teach against, which a visible test must name)")
    result.seconds["graded"] = grade_batch(course, name, entries, folder, options.workers)
    if any(e.mutant is not None for e in entries):
        screen = screen_mutants(name, entries, folder, options.workers)
        result.seconds["mutants screened"] = screen.get("seconds", 0.0)
        result.notes += [f"the solution's tests fail when run with the calls recorded: {p}"
                         for p in screen.get("problems", [])]
    judge(entries)
    return result


def check_assignments(names: list[str], folder: Path, options: Options,
                      extra: dict[str, list[Entry]] | None = None, echo=print) -> dict[str, Result]:
    """``check_assignment`` for each name, ``options.jobs`` at a time (in processes of their own: the
    grader and the adversary parse Python, and CPython's ``ast`` is not safe in threads), each in a
    course of its own under ``folder``; each table is echoed when it is done."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from autograder.course import Course
    from autograder.errors import GradingError
    from autograder.release import release

    extra = extra or {}
    courses = {}
    for name in names:  # first, one at a time: nbgrader's release changes the process's directory
        (folder / name).mkdir(parents=True, exist_ok=True)
        courses[name] = Course(root=folder / name / "grading", source=SOLUTIONS)
        release(courses[name], [name])
    results = {}
    with ProcessPoolExecutor(max(1, options.jobs), mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {name: pool.submit(check_assignment, name, courses[name], folder / name, options,
                                     extra.get(name, [])) for name in names}
        for name in names:
            try:
                results[name] = futures[name].result()
            except GradingError as exc:  # the grader refuses the assignment: the others go on
                results[name] = Result(name, courses[name], [], notes=[f"{name}: the grader refuses it: {exc}"])
            echo("\n" + table(results[name], options.verbose))
    return results


def _print_records(result: Result) -> None:
    for entry in result.entries:
        if not entry.graded:
            continue
        flags = f"  flagged: {'; '.join(entry.flags)}" if entry.flags else ""
        print(f"{result.name} / {entry.student}: {entry.score}/{entry.max_score} {entry.status}{flags}")
        for grade_id, record in entry.records.items():
            mark = "pass" if record.get("passed") else "FAIL"
            print(f"    {mark} {grade_id} ({record.get('seconds', 0):.2f} s) {record.get('message', '')[:300]}")


def main(argv: list[str] | None = None) -> int:
    global SOLUTIONS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--all", action="store_true", help="every assignment in solutions/")
    parser.add_argument("--submission", action="append", type=Path, default=[],
                        help="a student notebook to grade too (with one assignment)")
    parser.add_argument("--no-kernel", action="store_true", help="skip the kernel runs")
    parser.add_argument("--adversarial", action="store_true", help="fakes and mutants must lose points")
    parser.add_argument("--mutants", type=int, default=None, metavar="N",
                        help="grade a sample of N mutants per exercise (default: all); the others are screened")
    parser.add_argument("--screen", type=int, default=None, metavar="N",
                        help="try a sample of N mutants per exercise (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="which sample of mutants (with --mutants, --screen)")
    parser.add_argument("--workers", type=int, default=2, help="grading processes per assignment (default 2)")
    parser.add_argument("--jobs", type=int, default=1, help="assignments graded at once (default 1)")
    parser.add_argument("--verbose", action="store_true", help="every mutant and test record")
    parser.add_argument("--source", type=Path, default=SOLUTIONS,
                        help="the folder of source assignments (default: solutions/)")
    args = parser.parse_args(argv)
    SOLUTIONS = args.source.resolve()
    names = sorted(p.name for p in SOLUTIONS.iterdir() if (p / f"{p.name}.ipynb").is_file()) \
        if args.all else args.assignments
    if not names:
        parser.error("name an assignment, or --all")
    if args.submission and len(names) != 1:
        parser.error("--submission goes with exactly one assignment")
    for number in (args.workers, args.jobs):
        if number < 1:
            parser.error("--workers and --jobs take a number >= 1")
    if any(number is not None and number < 0 for number in (args.mutants, args.screen)):
        parser.error("--mutants and --screen take a number >= 0")
    for name in names:
        source_notebook(name)
    options = Options(adversarial=args.adversarial, mutants=args.mutants, screened=args.screen, seed=args.seed,
                      workers=args.workers,
                      jobs=args.jobs, verbose=args.verbose)
    from autograder.course import Course
    from autograder.release import release

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="check-exercise-") as tmp:
        folder = Path(tmp)
        problems = []
        if not args.no_kernel:
            course = Course(root=folder / "kernel-runs" / "grading", source=SOLUTIONS)
            release(course, names)
            for name in names:
                problems += check_in_kernel(name, course, folder / "kernel-runs")
        extra = {names[0]: [Entry(f"submission{index + 1}", str(path.resolve()), "report", None)
                            for index, path in enumerate(args.submission)]} if args.submission else {}
        results = check_assignments(names, folder / "graded", options, extra)
        for result in results.values():
            if args.verbose or not args.adversarial or args.submission:
                _print_records(result)
            problems += result.problems
    for problem in problems:
        print("PROBLEM:", problem)
    print(f"{'all expectations met' if not problems else f'{len(problems)} problem(s)'} "
          f"({time.monotonic() - started:.0f} s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
