"""Shared test helpers: nested recurrent states as flat lists of arrays, for the gradient checks.

A state is an array ``h``, a tuple ``(h, c)`` (LSTM), a ``(forward, backward)`` tuple
(Bidirectional) or a list with one state per layer (Stacked). ``check_layer_gradients`` perturbs
arrays, so the wrappers below take and return states as flat sequences of arrays.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from attention_course.numpy_track.base import Layer


def flatten_state(state) -> list[np.ndarray]:
    """Every array of a nested state, depth first."""
    if state is None:
        return []
    if isinstance(state, np.ndarray):
        return [state]
    return [array for part in state for array in flatten_state(part)]


def unflatten_state(template, arrays):
    """The nested structure of ``template`` filled from the iterator ``arrays``."""
    if isinstance(template, np.ndarray):
        return next(arrays)
    return type(template)(unflatten_state(part, arrays) for part in template)


class SequenceWithState(Layer):
    """A sequence layer seen as ``(xs, *initial_state) -> (outputs, *final_state)``.

    ``forward(xs, mask=None, **initial)`` takes the initial state as keyword arrays in the order
    of ``flatten_state(template)`` (any names); ``backward`` returns ``(dxs, *initial_state_grad)``.
    """

    def __init__(self, layer: Layer, template=None) -> None:
        super().__init__()
        self.layer = self.add_child("layer", layer)
        self.template = template

    def forward(self, xs, mask=None, **initial):
        state = unflatten_state(self.template, iter(initial.values())) if initial else None
        outputs = self.layer.forward(xs, mask, state)
        return (outputs, *flatten_state(self.layer.final_state))

    def backward(self, douts):
        d_outputs, *d_final = douts
        dxs = self.layer.backward(d_outputs, unflatten_state(self.layer.final_state, iter(d_final)))
        return (dxs, *flatten_state(self.layer.initial_state_grad))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def states() -> SimpleNamespace:
    """``states.flatten``, ``states.unflatten`` and ``states.SequenceWithState``."""
    return SimpleNamespace(flatten=flatten_state, unflatten=unflatten_state, SequenceWithState=SequenceWithState)
