"""Two pictures of the Transformer's sinusoidal positions, drawn from a table ``PE`` (T, d_model).

``plot_position_columns`` draws a few columns of the table against the position: each pair of
columns turns at its own speed, the speeds falling geometrically from column to column, like the
hands of a clock (seconds, minutes, hours). ``plot_position_similarity`` draws how alike the codes
of two positions are, ``PE[t] . PE[t + delta]`` (divided by ``d_model / 2``, so 1 at ``delta = 0``),
against the offset ``delta``, for several starting positions ``t``: the curves lie on one another,
because the similarity depends on the offset only.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .curves import line_style

__all__ = ["plot_position_columns", "plot_position_similarity"]


def plot_position_columns(ax, table, columns: Sequence[int], fontsize: float = 8):
    """Columns ``columns`` of the positional table against the position, each its own line style; returns ``ax``.

    Shapes: table (T, d_model).
    """
    table = np.asarray(table, dtype=float)
    if table.ndim != 2 or not all(0 <= column < table.shape[1] for column in columns):
        raise ValueError(f"table: expected (T, d_model) with every column of {list(columns)}, got {table.shape}")
    positions = np.arange(len(table))
    for index, column in enumerate(columns):
        style = line_style(index)
        ax.plot(positions, table[:, column], label=f"column {column}", markersize=3,
                markevery=max(1, len(table) // 12), linewidth=1.1, **style)
    ax.set_xlabel("position t (tokens)", fontsize=fontsize)
    ax.set_ylabel("PE[t, column]", fontsize=fontsize)
    ax.set_ylim(-1.15, 1.6)
    ax.legend(fontsize=fontsize - 1, ncol=2, loc="upper right")
    return ax


def plot_position_similarity(ax, table, starts: Sequence[int], max_offset: int, fontsize: float = 8):
    """``PE[t] . PE[t + delta] / (d_model / 2)`` against ``delta = 0 .. max_offset``, one line per start ``t``;
    returns ``ax``.

    Shapes: table (T, d_model), T > max(starts) + max_offset.
    """
    table = np.asarray(table, dtype=float)
    if table.ndim != 2 or len(table) <= max(starts) + max_offset:
        raise ValueError(f"table: needs more than {max(starts) + max_offset} positions, got shape {table.shape}")
    offsets = np.arange(max_offset + 1)
    half = table.shape[1] / 2
    for index, start in enumerate(starts):
        similarity = table[start + offsets] @ table[start] / half
        ax.plot(offsets, similarity, label=f"t = {start}", markersize=3, markevery=max(1, max_offset // 10),
                linewidth=1.1, **line_style(index))
    ax.set_xlabel("offset δ (tokens)", fontsize=fontsize)
    ax.set_ylabel("PE[t] · PE[t + δ] / (d/2)", fontsize=fontsize)
    ax.legend(fontsize=fontsize - 1)
    return ax
