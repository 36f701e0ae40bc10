"""The rule that stacks recurrent layers, written once for both tracks.

A track passes its own classes: ``cells`` maps the registry's names (``"rnn"``, ``"lstm"``,
``"gru"``) to its time-unrolled layers, and ``wrappers`` is its ``(Bidirectional, Residual,
Stacked)``. The rule is the same on either track: layer ``k`` reads what layer ``k - 1`` wrote;
a bidirectional layer is two layers of the cell, the second running backwards in time; from the
second layer on, a residual model adds a skip connection around each layer (the first layer
changes the width from the embedding's to the hidden size, so it has none).
"""

from __future__ import annotations

from typing import Mapping

from .registries import cell_spec

__all__ = ["stack_layers"]


def _cell_options(cell: str, num_layers: int, options: dict) -> dict:
    """Check ``cell`` (a name of the registry) and ``num_layers``; the options a ``cell`` takes
    (``reset_after`` is a GRU option, dropped for the others)."""
    cell_spec(cell)
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if cell != "gru":
        options = {name: value for name, value in options.items() if name != "reset_after"}
    return options


def stack_layers(cells: Mapping[str, type], wrappers: tuple, cell: str, input_size: int,
                 hidden_size: int, *, num_layers: int = 1, bidirectional: bool = False,
                 residual: bool = False, **options):
    """``num_layers`` layers of ``cell`` in the track's ``Stacked``; ``options`` go to
    every layer (``reset_after`` only to a GRU's).
    """
    bidirectional_class, residual_class, stacked_class = wrappers
    options = _cell_options(cell, num_layers, options)

    def one(size_in: int):
        return cells[cell](size_in, hidden_size, **options)

    layers, size_in = [], input_size
    for index in range(num_layers):
        if bidirectional:
            layer = bidirectional_class(one(size_in), one(size_in))
        else:
            layer = one(size_in)
        if residual and index > 0:
            layer = residual_class(layer)
        layers.append(layer)
        size_in = layer.output_size
    return stacked_class(layers)
