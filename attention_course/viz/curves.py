"""Curves over seeds, drawn so that they read without colour: each line has its own marker and
dash pattern as well as its colour, and a band around it shows the spread over the seeds.

``plot_over_seeds(ax, x, {"dot": curves, ...})`` draws, for each label, the mean over the seeds
of ``curves`` (an array (seeds, points)) with a band of one standard deviation (``band="sd"``)
or of the lowest to the highest seed (``band="range"``); ``band="seeds"`` draws every seed's own
curve instead of a mean, for results whose seeds split (the introduction's "Reading results over
seeds": a mean and a band would draw a curve that no run followed).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["LINE_STYLES", "line_style", "plot_over_seeds"]

# (marker, dashes): told apart in grey as well as in colour.
LINE_STYLES = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", (0, (5, 1, 1, 1))), ("P", (0, (1, 1)))]


def line_style(index: int) -> dict:
    """Matplotlib keyword arguments for the ``index``-th line of a plot: colour, marker, dashes."""
    marker, dashes = LINE_STYLES[index % len(LINE_STYLES)]
    return {"color": f"C{index % 10}", "marker": marker, "linestyle": dashes}


def plot_over_seeds(ax, x: Sequence[float], curves: Mapping[str, np.ndarray], band: str = "sd",
                    markersize: float = 3.5, markers: int = 8, limits: tuple[float, float] | None = None,
                    each_seed: Sequence[str] = ()):
    """Draw each label's mean curve over the seeds and a band for its spread (or, with
    ``band="seeds"``, each seed's curve); returns ``ax``.

    ``markers``: about how many markers each line carries (every point is too many on long
    curves). ``limits``: the range a value can take (an accuracy: ``(0, 1)``); a band of one
    standard deviation is cut there rather than drawn beyond what any run could reach.
    ``each_seed``: labels whose seeds split, drawn seed by seed whatever ``band`` says.
    Shapes: x (P,); each curve (seeds, P).
    """
    if band not in ("sd", "range", "seeds"):
        raise ValueError(f"band: expected 'sd', 'range' or 'seeds', got {band!r}")
    x = np.asarray(x, dtype=float)
    for index, (label, values) in enumerate(curves.items()):
        values = np.atleast_2d(np.asarray(values, dtype=float))
        if values.shape[1] != x.size:
            raise ValueError(f"curves[{label!r}]: {values.shape[1]} points for {x.size} x values")
        style = line_style(index)
        if band == "seeds" or label in each_seed:  # a thin line per seed, the label's marker, dashes
            for seed, row in enumerate(values):
                ax.plot(x, row, label=f"{label} (each seed)" if seed == 0 else None, linewidth=1,
                        alpha=0.85, markersize=markersize - 0.5, markevery=max(1, x.size // markers),
                        **style)
            continue
        mean = values.mean(axis=0)
        if band == "sd":
            spread = values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros_like(mean)
            low, high = mean - spread, mean + spread
        else:
            low, high = values.min(axis=0), values.max(axis=0)
        if limits is not None:
            low, high = np.clip(low, *limits), np.clip(high, *limits)
        ax.plot(x, mean, label=label, markersize=markersize, markevery=max(1, x.size // markers), **style)
        ax.fill_between(x, low, high, color=style["color"], alpha=0.15, linewidth=0)
    return ax
