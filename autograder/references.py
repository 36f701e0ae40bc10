"""The instructor's reference of an exercise: ``<source>/<assignment>/reference.py``, loaded by the judge.

A graded exercise asks for what neither the package nor the book computes, so its hidden tests need
a reference of their own: an implementation the instructor wrote independently of the solution
cells (a loop where the solution is vectorised, say), kept beside the source notebook. It never
reaches students: ``release`` does not copy it (nbgrader's ``CourseDirectory.ignore``), the leak
scan counts its lines as secrets, and the grading sandbox never sees the source folder. The judge
runs the test cells with the module bound to the name ``reference``; ``tools/check_exercise.py``
does the same when it runs a solution notebook in a kernel.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types
from pathlib import Path

FILE_NAME = "reference.py"
NAME = "reference"          # the name the test cells see

_LOADED: dict[tuple[str, float], types.ModuleType] = {}


def reference_path(source_notebook: Path) -> Path | None:
    """The reference module beside a source notebook, if the exercise has one."""
    return reference_in(Path(source_notebook).parent)


def reference_in(folder: Path) -> Path | None:
    """The reference module of the exercise whose source notebooks are in ``folder``, if it has one."""
    path = Path(folder) / FILE_NAME
    return path if path.is_file() else None


def load_reference(path: str | Path) -> types.ModuleType:
    """The module at ``path``, loaded once per version of the file (under a name of its own, so two
    assignments' references never meet in ``sys.modules``)."""
    path = Path(path).resolve()
    key = (str(path), path.stat().st_mtime)
    if key not in _LOADED:
        name = f"_course_reference_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _LOADED[key] = module
    return _LOADED[key]
