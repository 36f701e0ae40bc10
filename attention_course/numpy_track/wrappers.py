"""Wrappers around sequence layers: bidirectional, stacked, residual (skip) connections.

They all follow the recurrent layers' protocol: ``forward(xs, mask=None, initial_state=None)``
returns the outputs, ``final_state`` is set afterwards; ``backward(dys, d_final_state=None)``
returns ``dxs`` and sets ``initial_state_grad``; ``output_size`` is the output width.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.shapes import ShapeError
from .base import Layer

__all__ = ["Bidirectional", "Stacked", "Residual"]


class Bidirectional(Layer):
    """Run one layer forwards and another backwards in time, and concatenate their outputs.

    ``h_j = [h_j→ ; h_j←]``. The backward layer runs with ``reverse=True``; with a mask its state
    stays at its initial value through the padding, so it starts at each sequence's true last
    token. ``final_state`` is ``(forward_state, backward_state)``: the backward layer's final
    state is the one at the first token, ``h_1←`` (Bahdanau's ``s_0 = tanh(W_s h_1←)`` uses it).

    Shapes:
        xs: (N, T, D).  mask: (N, T) bool.  returns: (N, T, H_fwd + H_bwd).
    """

    def __init__(self, forward_layer: Layer, backward_layer: Layer) -> None:
        super().__init__()
        if getattr(forward_layer, "reverse", False):
            raise ValueError("Bidirectional: forward_layer must have reverse=False")
        if forward_layer is backward_layer:
            raise ValueError("Bidirectional: give two separate layers (they have separate weights)")
        backward_layer.reverse = True
        self.forward_layer = self.add_child("forward_layer", forward_layer)
        self.backward_layer = self.add_child("backward_layer", backward_layer)
        self.final_state = None
        self.initial_state_grad = None

    @property
    def output_size(self) -> int:
        return self.forward_layer.output_size + self.backward_layer.output_size

    def forward(self, xs: np.ndarray, mask: np.ndarray | None = None,
                initial_state=None) -> np.ndarray:
        init_fwd, init_bwd = (None, None) if initial_state is None else initial_state
        out_fwd = self.forward_layer.forward(xs, mask, init_fwd)
        out_bwd = self.backward_layer.forward(xs, mask, init_bwd)
        self.final_state = (self.forward_layer.final_state,
                            self.backward_layer.final_state)
        return np.concatenate([out_fwd, out_bwd], axis=-1)

    def backward(self, dys: np.ndarray, d_final_state=None) -> np.ndarray:
        split = self.forward_layer.output_size
        d_fwd, d_bwd = (None, None) if d_final_state is None else d_final_state
        dxs = self.forward_layer.backward(dys[..., :split], d_fwd)
        dxs += self.backward_layer.backward(dys[..., split:], d_bwd)
        self.initial_state_grad = (self.forward_layer.initial_state_grad,
                                   self.backward_layer.initial_state_grad)
        return dxs


class Residual(Layer):
    """A skip connection around a layer: ``y = x + f(x)`` (zero at padded positions).

    The identity path hands the gradient straight through, which keeps it from vanishing in
    deep stacks (GNMT). Needs ``f``'s output as wide as its input.

    Shapes:
        xs: (N, T, D).  returns: (N, T, D).
    """

    def __init__(self, layer: Layer) -> None:
        super().__init__()
        self.layer = self.add_child("layer", layer)
        self._keep = None

    @property
    def output_size(self) -> int:
        return self.layer.output_size

    @property
    def final_state(self):
        return getattr(self.layer, "final_state", None)

    @property
    def initial_state_grad(self):
        return getattr(self.layer, "initial_state_grad", None)

    def forward(self, xs: np.ndarray, mask: np.ndarray | None = None,
                initial_state=None) -> np.ndarray:
        out = _same_shape(self.layer.forward(xs, mask, initial_state), xs)
        out += xs
        self._keep = None if mask is None else mask[:, :, None]
        if self._keep is not None:
            out *= self._keep  # padded positions stay zero
        return out

    def backward(self, dys: np.ndarray, d_final_state=None) -> np.ndarray:
        if self._keep is not None:
            dys = dys * self._keep
        dxs = self.layer.backward(dys, d_final_state)
        dxs += dys
        return dxs


def _same_shape(out: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """``out``, if the wrapped layer kept the shape of its input ``xs``; else a ShapeError."""
    if out.shape != xs.shape:
        raise ShapeError(f"Residual: the wrapped layer maps {xs.shape} to "
                         f"{out.shape}; a skip connection needs equal shapes")
    return out


class Stacked(Layer):
    """Layers applied one after another; states are lists with one entry per layer.

    Shapes:
        xs: (N, T, D).  returns: (N, T, output_size of the last layer).
    """

    def __init__(self, layers: Sequence[Layer]) -> None:
        super().__init__()
        if not layers:
            raise ValueError("Stacked: needs at least one layer")
        self.layers = [self.add_child(str(i), layer) for i, layer in enumerate(layers)]
        self.final_state = None
        self.initial_state_grad = None

    @property
    def output_size(self) -> int:
        return self.layers[-1].output_size

    def forward(self, xs: np.ndarray, mask: np.ndarray | None = None,
                initial_state=None) -> np.ndarray:
        states = []
        for layer, state in zip(self.layers, self._initial_states(initial_state)):
            xs = layer.forward(xs, mask, state)
            states.append(layer.final_state)
        self.final_state = states
        return xs

    def _initial_states(self, initial_state) -> list:
        """One initial state per layer (``None``: each layer's own); a list of another length
        raises a ValueError."""
        if initial_state is None:
            return [None] * len(self.layers)
        if len(initial_state) != len(self.layers):
            raise ValueError(f"initial_state: expected a list of {len(self.layers)} "
                             f"states, got {len(initial_state)}")
        return initial_state

    def backward(self, dys: np.ndarray, d_final_state=None) -> np.ndarray:
        grads = [None] * len(self.layers)
        for i in range(len(self.layers) - 1, -1, -1):
            d_state = None if d_final_state is None else d_final_state[i]
            dys = self.layers[i].backward(dys, d_state)
            grads[i] = self.layers[i].initial_state_grad
        self.initial_state_grad = grads
        return dys
