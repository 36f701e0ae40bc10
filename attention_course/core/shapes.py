"""Shape assertions whose errors name the argument, the expected and the actual shape.

Shared by both tracks (the torch track checks tensors with the same ``assert_shape``), by the
tests and by the exercises (through ``attention_course.testing``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["ShapeError", "assert_shape", "check_array"]


class ShapeError(ValueError):
    """A wrong shape, dtype or rank; the message names the argument."""


def _format_expected(expected: Sequence[int | str | None]) -> str:
    return "(" + ", ".join("?" if e is None else str(e) for e in expected) + ("," if len(expected) == 1 else "") + ")"


def assert_shape(name: str, array, expected: Sequence[int | str | None], sizes: dict | None = None) -> dict:
    """Check ``array.shape`` against ``expected`` and return the named sizes it binds.

    ``expected`` holds an int (that exact size), a str (a named size such as ``"N"`` that must
    agree everywhere it appears, here and in ``sizes``) or ``None`` (any size). ``sizes`` maps
    names already bound by earlier checks; the returned dict holds those plus the new ones, so
    checks chain: ``sizes = assert_shape("encoder_states", hs, ("N", "T_enc", "H"))``, then
    ``assert_shape("decoder_states", s, ("N", "T_dec", "H"), sizes)``.

    Raises:
        ShapeError: ``"encoder_states: expected shape (N=4, T_enc, H=8), got (4, 7, 6)"``.
    """
    sizes = dict(sizes or {})
    shape = getattr(array, "shape", None)
    if shape is None:
        raise ShapeError(f"{name}: expected an array of shape {_format_expected(expected)}, got {type(array).__name__}")
    problem = len(shape) != len(expected)
    bound = dict(sizes)
    if not problem:
        for got, want in zip(shape, expected):
            if isinstance(want, str):
                if want in bound and bound[want] != got:
                    problem = True
                    break
                bound.setdefault(want, got)
            elif want is not None and got != want:
                problem = True
                break
    if problem:
        described = []
        for want in expected:
            if isinstance(want, str) and want in sizes:
                described.append(f"{want}={sizes[want]}")
            else:
                described.append("?" if want is None else str(want))
        wanted = "(" + ", ".join(described) + ("," if len(described) == 1 else "") + ")"
        raise ShapeError(f"{name}: expected shape {wanted}, got {tuple(shape)}")
    return bound


def check_array(name: str, array, expected: Sequence[int | str | None], sizes: dict | None = None,
                kind: str = "float") -> dict:
    """``assert_shape`` plus a dtype-kind check: ``kind`` is "float", "int" or "bool".

    Raises:
        ShapeError: when ``array`` is not a NumPy array, has the wrong kind of dtype, or the wrong shape.
    """
    if not isinstance(array, np.ndarray):
        raise ShapeError(f"{name}: expected a numpy array, got {type(array).__name__}")
    ok = {"float": "f", "int": "iu", "bool": "b"}[kind]
    if array.dtype.kind not in ok:
        article = "an" if kind == "int" else "a"
        raise ShapeError(f"{name}: expected {article} {kind} array, got dtype {array.dtype}")
    return assert_shape(name, array, expected, sizes)
