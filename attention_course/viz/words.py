"""Attention over the words of a text, drawn as bars: one bar per word, its height the word's weight.

``plot_word_weights(ax, words, weights, marked=j)`` labels every bar with its word and draws the
bar of word ``j`` (the one the weights should find) hatched and outlined, so that the picture reads
in grey as well as in colour.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["plot_word_weights"]


def plot_word_weights(ax, words: Sequence[str], weights, marked: int | None = None, title: str | None = None,
                      fontsize: float = 7):
    """Draw the weight of every word as a bar on ``ax``, the ``marked`` word's bar hatched; returns ``ax``.

    Shapes:
        weights: (T,) with T >= len(words) (padding beyond the words is cut).
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 1 or weights.size < len(words):
        raise ValueError(f"weights: expected shape (T,) with T >= {len(words)} words, got {weights.shape}")
    if marked is not None and not 0 <= marked < len(words):
        raise ValueError(f"marked: expected a word index in 0..{len(words) - 1}, got {marked}")
    weights = weights[:len(words)]
    bars = ax.bar(range(len(words)), weights, color="0.6", edgecolor="0.3", linewidth=0.5)
    if marked is not None:
        bars[marked].set(color="C1", hatch="///", edgecolor="black", linewidth=1.2)
    ax.set_xticks(range(len(words)), list(words), rotation=90, fontsize=fontsize)
    ax.set_xlim(-0.6, len(words) - 0.4)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("weight α", fontsize=fontsize + 1)
    if title:
        ax.set_title(title, fontsize=fontsize + 1)
    return ax
