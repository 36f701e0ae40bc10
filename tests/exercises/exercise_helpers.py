"""What the exercise tests share: the notebooks, their student versions, and answers to try.

``WRONG_ANSWERS``: plausible wrong answers, each must cost points. ``REFERENCE_CALLS``: answers
that call the course's reference implementation. Each chapter keeps its own in ``answers_ch<N>.py``
next to this file (the same lists), added to these when this module loads.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import nbformat
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
from nbgrader.utils import is_solution

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
PACKAGE = ROOT / "attention_course"
ALL_NOTEBOOKS = {path.stem: path for path in sorted(SOLUTIONS.glob("*/*.ipynb"))}
# EXERCISES=ch1a,ch1b,ch2 tests only the assignments whose names start so, while you work on them
# ("ch1" takes ch10 too)
ONLY = tuple(p.strip() for p in os.environ.get("EXERCISES", "").split(",") if p.strip())
NOTEBOOKS = {name: path for name, path in ALL_NOTEBOOKS.items() if not ONLY or name.startswith(ONLY)}

# ------------------------------------------------------------------------------------------------
# Plausible wrong answers: (notebook, function, what is wrong, the body that replaces the solution).
# Each must cost points.
WRONG_ANSWERS: list = []
# Answers that call the reference implementation instead of implementing the exercise:
# (notebook, function, how, body).
REFERENCE_CALLS: list = []
# Top-level code that some REFERENCE_CALLS put in their answer cell (it runs before any test does).
REFERENCE_CALL_SETUP: dict = {}


# ------------------------------------------------------------------------------------------------
# Notebook helpers
def read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(ALL_NOTEBOOKS[name], as_version=4)


def released(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student version: nbgrader's ClearSolutions and ClearHiddenTests, as generate_assignment applies them."""
    nb = copy.deepcopy(nb)
    nb, resources = ClearSolutions().preprocess(nb, {})
    nb, _ = ClearHiddenTests().preprocess(nb, resources)
    return nb


def solution_cell(nb: nbformat.NotebookNode, function: str) -> nbformat.NotebookNode:
    cells = [cell for cell in nb.cells if is_solution(cell) and re.search(rf"^def {function}\(", cell.source, re.M)]
    assert len(cells) == 1, f"expected one solution cell defining {function}, found {len(cells)}"
    return cells[0]


def _indented(body: str, indent: str) -> list[str]:
    from textwrap import dedent

    return [indent + line if line.strip() else "" for line in dedent(body).strip("\n").split("\n")]


def with_body(nb: nbformat.NotebookNode, function: str, body: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose solution of ``function`` is ``body`` (what a student might have written)."""
    nb = copy.deepcopy(nb)
    cell = solution_cell(nb, function)
    lines = cell.source.split("\n")
    begin = next(i for i, line in enumerate(lines) if "### BEGIN SOLUTION" in line)
    end = next(i for i, line in enumerate(lines) if "### END SOLUTION" in line)
    indent = re.match(r"\s*", lines[begin]).group(0)
    cell.source = "\n".join(lines[:begin] + _indented(body, indent) + lines[end + 1:])
    return nb


def with_prefix(nb: nbformat.NotebookNode, function: str, code: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose answer cell for ``function`` runs ``code`` first (at the cell's top level)."""
    nb = copy.deepcopy(nb)
    cell = solution_cell(nb, function)
    cell.source = "\n".join(_indented(code, "")) + "\n\n" + cell.source
    return nb


def solution_lines(nb: nbformat.NotebookNode) -> list[str]:
    """The stripped, non-blank, non-comment lines between the solution markers."""
    found = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.split("\n"):
            if "### BEGIN SOLUTION" in line:
                inside = True
            elif "### END SOLUTION" in line:
                inside = False
            elif inside and line.strip() and not line.strip().startswith("#"):
                found.append(line.strip())
    return found


def hidden_test_lines(nb: nbformat.NotebookNode, outside: bool = False) -> list[str]:
    """The stripped, non-blank lines between the hidden-test markers (or, with ``outside``, all the others)."""
    found = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.split("\n"):
            if "### BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "### END HIDDEN TESTS" in line:
                inside = False
            elif inside != outside and line.strip():
                found.append(line.strip())
    return found


def run_visible(nb: nbformat.NotebookNode, answers: dict[str, str] | None = None) -> dict[str, str | None]:
    """Run ``nb`` in this process as the student's kernel meets it, each test cell's visible part only,
    with ``answers`` (grade_id -> answer cell source) typed in: grade_id -> None (it passed) or the
    failure's message, for every test cell."""
    import traceback

    namespace: dict = {"__name__": "__main__"}
    found: dict[str, str | None] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        source = (answers or {}).get(meta.get("grade_id"), cell.source)
        if meta.get("grade"):
            source = source.split("### BEGIN HIDDEN TESTS", 1)[0]
        try:
            exec(compile(source, f"<{meta.get('grade_id')}>", "exec"), namespace)  # noqa: S102 - our own notebooks
            if meta.get("grade"):
                found[meta["grade_id"]] = None
        except Exception as exc:  # noqa: BLE001 - a failing test is what we look for
            if not meta.get("grade"):
                raise AssertionError(f"{meta.get('grade_id')} fails: {traceback.format_exc()}") from exc
            found[meta["grade_id"]] = f"{type(exc).__name__}: {exc}"
    return found


def _chapter_tables() -> None:
    import importlib

    for path in sorted(Path(__file__).parent.glob("answers_ch*.py")):
        module = importlib.import_module(path.stem)
        WRONG_ANSWERS.extend(getattr(module, "WRONG_ANSWERS", []))
        REFERENCE_CALLS.extend(getattr(module, "REFERENCE_CALLS", []))
        REFERENCE_CALL_SETUP.update(getattr(module, "REFERENCE_CALL_SETUP", {}))


_chapter_tables()
