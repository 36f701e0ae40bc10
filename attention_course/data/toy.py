"""Toy sequence tasks for the bottleneck chapter: copy, reverse and sort a string.

An encoder-decoder without attention must squeeze the whole source into one vector; the
longer the source, the worse it copies. These tasks make that visible: the answer is
trivial to state, its difficulty grows only with the length, and the alignment a model
should learn is known in advance (the diagonal for copy, the anti-diagonal for reverse).
"""

from __future__ import annotations

import numpy as np

TOY_TASKS = ("copy", "reverse", "sort")
DEFAULT_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _solve(task: str, source: str) -> str:
    if task == "copy":
        return source
    if task == "reverse":
        return source[::-1]
    return "".join(sorted(source))


def _check_arguments(
    task: str, n: int, min_length: int, max_length: int, alphabet: str
) -> None:
    if task not in TOY_TASKS:
        raise ValueError(f"task must be one of {TOY_TASKS}, got {task!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if min_length < 1:
        raise ValueError(f"min_length must be >= 1, got {min_length}")
    if min_length > max_length:
        raise ValueError(
            "min_length must be <= max_length, "
            f"got min_length={min_length}, max_length={max_length}"
        )
    if len(alphabet) == 0:
        raise ValueError("alphabet must hold at least one character, got ''")
    if len(set(alphabet)) != len(alphabet):
        raise ValueError(f"alphabet must not repeat a character, got {alphabet!r}")


def _draw_sources(
    rng: np.random.Generator, n: int, min_length: int, max_length: int, alphabet: str
) -> list[str]:
    """n strings: each length uniform in [min_length, max_length], each character uniform."""
    lengths = rng.integers(min_length, max_length + 1, size=n)
    character_indices = rng.integers(0, len(alphabet), size=int(lengths.sum()))
    all_characters = "".join(np.array(list(alphabet))[character_indices].tolist())
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    return [all_characters[start:end] for start, end in zip(starts, ends)]


def generate_toy_task(
    task: str,
    n: int,
    min_length: int,
    max_length: int,
    seed: int = 0,
    alphabet: str = DEFAULT_ALPHABET,
) -> list[tuple[str, str]]:
    """n (source, target) pairs of a toy task.

    Each source has a length drawn uniformly from ``min_length .. max_length`` and
    characters drawn uniformly from ``alphabet``; sources may repeat. The target is the
    source itself (``"copy"``), the source backwards (``"reverse"``) or its characters in
    code-point order (``"sort"``; for the default alphabet that is alphabetical order).

    Raises:
        ValueError: naming the bad argument (unknown task, ``n < 0``, ``min_length < 1``,
            ``min_length > max_length``, an empty alphabet or one that repeats a character).
    """
    _check_arguments(task, n, min_length, max_length, alphabet)
    rng = np.random.default_rng(seed)
    sources = _draw_sources(rng, n, min_length, max_length, alphabet)
    return [(source, _solve(task, source)) for source in sources]


def count_distinct_sources(min_length: int, max_length: int, alphabet_size: int) -> int:
    """How many different sources exist: the sum over lengths L of ``alphabet_size ** L``."""
    return sum(alphabet_size**length for length in range(min_length, max_length + 1))


def generate_toy_splits(
    task: str,
    n_train: int,
    n_test: int,
    min_length: int,
    max_length: int,
    seed: int = 0,
    alphabet: str = DEFAULT_ALPHABET,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Train and test pairs of a toy task, with no source in both splits.

    Sources are drawn as in :func:`generate_toy_task` and repeats are dropped, so every
    source is unique within and across the splits: the test split measures how well a
    model handles strings it never saw. When the request comes close to the number of
    distinct strings, dropping repeats thins out the short lengths (there are only
    ``len(alphabet)`` strings of length 1).

    Raises:
        ValueError: a bad argument (see :func:`generate_toy_task`), or more pairs asked
            for than distinct sources exist or than a bounded number of draws reaches.
    """
    if n_train < 0 or n_test < 0:
        raise ValueError(f"n_train and n_test must be >= 0, got {n_train} and {n_test}")
    _check_arguments(task, 0, min_length, max_length, alphabet)
    n_wanted = n_train + n_test
    n_distinct = count_distinct_sources(min_length, max_length, len(alphabet))
    if n_wanted > n_distinct:
        raise ValueError(
            f"asked for {n_wanted} distinct sources (n_train={n_train} + n_test={n_test}), but "
            f"only {n_distinct} strings of length {min_length}..{max_length} over "
            f"{len(alphabet)} characters exist"
        )

    rng = np.random.default_rng(seed)
    max_draws = max(100_000, 50 * n_wanted)
    unique_sources: dict[str, None] = {}  # a dict keeps the draw order; a set would not
    n_drawn = 0
    while len(unique_sources) < n_wanted and n_drawn < max_draws:
        n_missing = n_wanted - len(unique_sources)
        n_draws = min(max_draws - n_drawn, n_missing + n_missing // 10 + 16)
        n_drawn += n_draws
        for source in _draw_sources(rng, n_draws, min_length, max_length, alphabet):
            unique_sources.setdefault(source)
            if len(unique_sources) == n_wanted:
                break
    if len(unique_sources) < n_wanted:
        raise ValueError(
            f"asked for {n_wanted} distinct sources, but {n_drawn} draws gave only "
            f"{len(unique_sources)}; ask for fewer, allow longer sources or a larger alphabet"
        )
    pairs = [(source, _solve(task, source)) for source in unique_sources]
    return pairs[:n_train], pairs[n_train:]
