"""Alignment heat maps: which source characters each output character attended to.

A row per output token, a column per source token; the cell is ``alpha_ij``. For dates, a
good model lights up the year digits when it writes the year, and the month name when it
writes the month.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["plot_alignment", "save_alignments", "alignment_text"]

_SHADES = " .:-=+*#%@"


def _check(weights: np.ndarray, source: Sequence[str], output: Sequence[str]) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights: expected shape (T_out, T_enc), got {weights.shape}")
    if weights.shape[0] < len(output) or weights.shape[1] < len(source):
        raise ValueError(f"weights: shape {weights.shape} is too small for {len(output)} outputs x {len(source)} sources")
    return weights[:len(output), :len(source)]


def plot_alignment(weights: np.ndarray, source: Sequence[str], output: Sequence[str], ax=None, title: str | None = None,
                   colorbar: bool = True):
    """Draw one alignment as a heat map on ``ax`` (a new figure if None); returns the axes.

    The colours run from 0 to 1 (the weights of a row sum to 1), with a colour bar beside the
    map unless ``colorbar=False`` (several maps can share one: ``fig.colorbar(ax.images[0], ax=axes)``).

    Shapes:
        weights: (T_out, T_enc), at least ``len(output)`` x ``len(source)`` (extra padding is cut).
    """
    import matplotlib.pyplot as plt

    weights = _check(weights, source, output)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 0.3 * len(source) + 1), max(2.0, 0.3 * len(output) + 1)))
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="weight α", fraction=0.046, pad=0.02)
    ax.set_xticks(range(len(source)), [c if c != " " else "␣" for c in source], fontsize=8)
    ax.set_yticks(range(len(output)), list(output), fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def save_alignments(examples: Sequence[tuple[np.ndarray, Sequence[str], Sequence[str]]], path: str,
                    columns: int = 2) -> str:
    """Save a grid of alignment heat maps, one per ``(weights, source, output)``, to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if not examples:
        raise ValueError("save_alignments: no examples to draw")
    rows = -(-len(examples) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 3.2 * rows), squeeze=False)
    for ax in axes.flat[len(examples):]:
        ax.axis("off")
    for ax, (weights, source, output) in zip(axes.flat, examples):
        plot_alignment(weights, source, output, ax=ax, title=f"{''.join(source)!r} -> {''.join(output)!r}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def alignment_text(weights: np.ndarray, source: Sequence[str], output: Sequence[str]) -> str:
    """The alignment as a text heat map: darker characters for larger weights.

    Each row starts with the output character and ends with the source character it attended
    to most, and that weight.
    """
    weights = _check(weights, source, output)
    width = max((len(token) for token in output), default=1)
    lines = [" " * (width + 3) + "".join(source)]
    for row, out_token in zip(weights, output):
        cells = "".join(_SHADES[min(int(w * len(_SHADES)), len(_SHADES) - 1)] for w in row)
        best = int(row.argmax()) if row.size else 0
        lines.append(f" {out_token:>{width}}  {cells}  <- {source[best]!r} {row[best]:.2f}")
    return "\n".join(lines)
