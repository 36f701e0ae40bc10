"""Check exercise notebooks the way a student and the grader meet them.

    .venv/bin/python tools/check_exercise.py ch3a_weight_sum [ch3b_context_torch ...]
    .venv/bin/python tools/check_exercise.py ch3a_weight_sum --submission mine.ipynb [--submission ...]
    .venv/bin/python tools/check_exercise.py --all

For each assignment of ``solutions/``:

1. in a Jupyter kernel, as a student runs it: the solution notebook must run top to bottom
   without an error; the student version (solutions and hidden tests removed, as released) must
   run through with every test cell failing;
2. through the grader (sandboxed, ``python -m autograder``'s own code): the solution handed in as
   a student would scores full marks, the released version zero, and every ``--submission``
   (a student notebook you wrote, e.g. with a wrong answer) is graded; each test cell's record
   (passed, or the failure message) is printed.

Exit status 1 if any of these expectations fails (submissions given with ``--submission`` are
only reported).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.course import Course  # noqa: E402
from autograder.grading import GradeOptions, autograde  # noqa: E402
from autograder.release import release  # noqa: E402
from autograder.submissions import import_submissions  # noqa: E402

SOLUTIONS = ROOT / "solutions"


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _kernel(nb, folder: Path) -> nbformat.NotebookNode:
    """``nb`` executed top to bottom (errors allowed) in a kernel of this interpreter."""
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient

    specs = folder / "kernels" / "python3"
    specs.mkdir(parents=True, exist_ok=True)
    (specs / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    nb = copy.deepcopy(nb)
    client = NotebookClient(nb, timeout=300, allow_errors=True, kernel_name="python3",
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs.parent)]),
                            resources={"metadata": {"path": str(folder)}})
    client.execute()
    return nb


def _errors(cell) -> str:
    return " | ".join(f"{o.ename}: {o.evalue}" for o in cell.get("outputs", []) if o.output_type == "error")


def check_in_kernel(name: str, course: Course, folder: Path) -> list[str]:
    problems = []
    source = nbformat.read(SOLUTIONS / name / f"{name}.ipynb", as_version=4)
    ran = _kernel(source, folder)
    for cell in ran.cells:
        if cell.cell_type == "code" and _errors(cell):
            problems.append(f"{name}: the solution fails in cell {_meta(cell).get('grade_id')}: {_errors(cell)}")
    student = nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4)
    ran = _kernel(student, folder)
    for cell in ran.cells:
        meta = _meta(cell)
        if meta.get("grade") and not meta.get("solution") and not _errors(cell):
            problems.append(f"{name}: test cell {meta.get('grade_id')} passes on the student version")
        elif cell.cell_type == "code" and not meta.get("grade") and not meta.get("solution") and _errors(cell):
            problems.append(f"{name}: the student version fails outside the tests, in cell "
                            f"{meta.get('grade_id')}: {_errors(cell)}")
    print(f"{name}: kernel run checked ({len(problems)} problem(s))")
    return problems


def solved(course: Course, name: str) -> nbformat.NotebookNode:
    """The released notebook with the solution's answer cells typed in, as a student hands it in."""
    source = nbformat.read(SOLUTIONS / name / f"{name}.ipynb", as_version=4)
    answers = {_meta(c)["grade_id"]: c.source for c in source.cells if _meta(c).get("solution")}
    nb = nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if _meta(cell).get("grade_id") in answers:
            cell.source = answers[_meta(cell)["grade_id"]]
    return nb


def check_with_grader(names: list[str], course: Course, folder: Path, extra: list[Path]) -> list[str]:
    problems = []
    for name in names:
        submissions = folder / "submissions" / name
        submissions.mkdir(parents=True)
        nbformat.write(solved(course, name), submissions / "solution.ipynb")
        nbformat.write(nbformat.read(course.release_dir(name) / f"{name}.ipynb", as_version=4),
                       submissions / "released.ipynb")
        for index, path in enumerate(extra):
            (submissions / f"submission{index + 1}.ipynb").write_bytes(path.read_bytes())
        import_submissions(course, name, source=submissions)
        report = autograde(course, name, GradeOptions(workers=2), echo=lambda line: None)
        for student, entry in sorted(report["students"].items()):
            print(f"{name} / {student}: {entry.get('score')}/{entry.get('max_score')} {entry['status']}"
                  + (f"  flags: {entry['flags']}" if entry["flags"] else ""))
            for notebook in entry["notebooks"].values():
                for grade_id, record in notebook.get("tests", {}).items():
                    mark = "pass" if record.get("passed") else "FAIL"
                    print(f"    {mark} {grade_id} ({record.get('seconds', 0):.2f} s) {record.get('message', '')[:300]}")
                timing = notebook.get("execution", {}).get("timing")
                if timing:
                    print(f"    timing: {json.dumps({k: round(v, 3) for k, v in timing.items()})}")
        students = report["students"]
        if students["solution"]["score"] != students["solution"]["max_score"]:
            problems.append(f"{name}: the solution scores {students['solution']['score']}, "
                            f"not {students['solution']['max_score']}")
        if students["released"]["score"] != 0:
            problems.append(f"{name}: the released version scores {students['released']['score']}, not 0")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--submission", action="append", type=Path, default=[],
                        help="a student notebook to grade too (with one assignment)")
    parser.add_argument("--no-kernel", action="store_true", help="skip the kernel runs")
    args = parser.parse_args()
    names = sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir()) if args.all else args.assignments
    if not names:
        parser.error("name an assignment, or --all")
    if args.submission and len(names) != 1:
        parser.error("--submission goes with exactly one assignment")
    with tempfile.TemporaryDirectory(prefix="check-exercise-") as tmp:
        folder = Path(tmp)
        course = Course(root=folder / "grading", source=SOLUTIONS)
        for line in release(course, names):
            print(line)
        problems = []
        if not args.no_kernel:
            for name in names:
                problems += check_in_kernel(name, course, folder)
        problems += check_with_grader(names, course, folder, args.submission)
    for problem in problems:
        print("PROBLEM:", problem)
    print("all expectations met" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
