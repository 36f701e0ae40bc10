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


# --- the same call, once per worker --------------------------------------------------------------

REMEMBERED_BYTES = 512 * 1024 * 1024   # what a worker keeps of the reference's answers, at most


class _NotAKey(Exception):
    pass


def _key(value):
    """A key that equals another's exactly when the two arguments hold the same data; raises
    ``_NotAKey`` for an argument that is not plain data (its call is then not remembered)."""
    import numpy as np

    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise _NotAKey
        data = np.ascontiguousarray(value)
        return ("array", str(data.dtype), data.shape, hashlib.blake2b(data.view(np.uint8).reshape(-1), digest_size=16).digest())
    if isinstance(value, np.generic):
        return ("scalar", str(value.dtype), value.item())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((_key(k), _key(v)) for k, v in value.items()))
    raise _NotAKey


def _size(value) -> int:
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (list, tuple)):
        return sum(_size(item) for item in value)
    if isinstance(value, dict):
        return sum(_size(item) for item in value.values())
    return 64


class Remembered:
    """A reference module whose functions answer a call they answered before from memory.

    The hidden tests of a class call the reference with the same inputs in every notebook (their
    inputs are seeded), and at a realistic size (the checks that a backward pass is hand-written)
    one such call took half a second of the judge's time per notebook. A reference's functions
    are functions of their arguments (every random draw in them takes a seed), so a worker keeps
    each answer, keyed by its arguments' contents, and returns a fresh copy of it (a test that
    changes the array it got changes no other test's). A call with an argument that is not plain
    data (a tensor, a function) is not remembered; past ``REMEMBERED_BYTES`` the oldest go."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module
        self._answers: dict = {}
        self._bytes = 0
        self._functions: dict = {}

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if not isinstance(value, types.FunctionType):
            return value
        if name not in self._functions:
            self._functions[name] = self._remembering(name, value)
        return self._functions[name]

    def _remembering(self, name: str, function):
        import copy
        import functools

        @functools.wraps(function)
        def remembered(*args, **kwargs):
            try:
                key = (name, _key(args), _key(kwargs))
            except _NotAKey:
                return function(*args, **kwargs)
            if key not in self._answers:
                answer = function(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                size = _size(answer)
                while self._answers and self._bytes + size > REMEMBERED_BYTES:
                    self._bytes -= self._answers.pop(next(iter(self._answers)))[1]   # the oldest
                if size <= REMEMBERED_BYTES:
                    self._answers[key] = (answer, size)
                    self._bytes += size
                return copy.deepcopy(answer)
            return copy.deepcopy(self._answers[key][0])

        return remembered


_REMEMBERED: dict[int, Remembered] = {}


def remembered_reference(path: str | Path) -> Remembered:
    """``load_reference(path)``, its answers remembered for the worker's life (one per module)."""
    module = load_reference(path)
    if id(module) not in _REMEMBERED:
        _REMEMBERED[id(module)] = Remembered(module)
    return _REMEMBERED[id(module)]
