"""Calling a function on a large batch a chunk of rows at a time (predicting in batches, on either track).

A track's ``call`` runs its model on one chunk (NumPy arrays in, NumPy arrays out); this joins the
chunks, so that evaluating thousands of examples never holds all their activations at once.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["in_chunks"]


def in_chunks(function: Callable, args: tuple, kwargs: dict, batch_size: int = 512):
    """``function(*args, **kwargs)`` on chunks of ``batch_size`` rows of every NumPy array among the
    arguments (the other arguments are passed whole), its results joined along the first axis.

    The arrays share their first axis, N. A result is an array or a tuple of arrays (joined part by
    part); with one chunk it is returned as it is.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    arrays = [value for value in (*args, *kwargs.values()) if isinstance(value, np.ndarray)]
    N = arrays[0].shape[0] if arrays else 0
    chunks = []
    for start in range(0, max(N, 1), batch_size):
        rows = slice(start, start + batch_size)
        part_args = [value[rows] if isinstance(value, np.ndarray) else value for value in args]
        part_kwargs = {name: value[rows] if isinstance(value, np.ndarray) else value for name, value in kwargs.items()}
        chunks.append(function(*part_args, **part_kwargs))
    if len(chunks) == 1:
        return chunks[0]
    if isinstance(chunks[0], tuple):
        return tuple(np.concatenate(parts) for parts in zip(*chunks))
    return np.concatenate(chunks)
