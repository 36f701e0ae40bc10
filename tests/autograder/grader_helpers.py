"""Helpers for the autograder tests: student versions of notebooks, the CLI, a fixture course.

The fixture assignments live in ``fixtures/source`` (written by ``fixtures/make_fixtures.py``).
A "student version" is the released notebook with answers typed into its answer cells, which
is what a student hands in.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import sandbox

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "source"

needs_bwrap = pytest.mark.skipif(sandbox.find_bwrap() is None,
                                 reason="bubblewrap is not installed (tools/install-system-packages.sh)")


def run_cli(course_dir: Path, source: Path, *args: str, env: dict | None = None,
            timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m autograder --course-dir ... --source ... ARGS`` from the repository root."""
    return subprocess.run([sys.executable, "-m", "autograder", "--course-dir", str(course_dir),
                           "--source", str(source), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def solution_answers(source_nb) -> dict[str, str]:
    """The reference answer of every answer cell of a source notebook."""
    return {grade_id(c): c.source for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def student_version(released_nb, answers: dict[str, str]):
    """The released notebook with ``answers`` (grade id -> source) typed into its answer cells."""
    nb = copy.deepcopy(released_nb)
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


class FixtureCourse:
    """A course directory with the fixture assignments released into it."""

    def __init__(self, root: Path, source: Path = FIXTURES) -> None:
        self.root = root
        self.source = source

    def cli(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return run_cli(self.root, self.source, *args, **kwargs)

    def released(self, assignment: str, notebook: str | None = None):
        return nbformat.read(self.root / "release" / assignment / f"{notebook or assignment}.ipynb", as_version=4)

    def source_notebook(self, assignment: str, notebook: str | None = None):
        return nbformat.read(self.source / assignment / f"{notebook or assignment}.ipynb", as_version=4)

    def solved(self, assignment: str, **overrides: str):
        """The student version with the reference answers, some of them replaced by ``overrides``."""
        answers = solution_answers(self.source_notebook(assignment))
        answers.update(overrides)
        return student_version(self.released(assignment), answers)
