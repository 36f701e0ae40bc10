"""Bidirectional, stacked and residual wrappers in torch.

They follow the recurrent layers' protocol, as in the NumPy track: ``forward(xs, mask=None,
initial_state=None)`` returns the outputs and sets ``final_state``; ``output_size`` is the
output width. Autograd does the backward pass.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from .base import ShapeError

__all__ = ["Bidirectional", "Stacked", "Residual"]


class Bidirectional(nn.Module):
    """``h_j = [h_j→ ; h_j←]``; the backward layer starts at each sequence's true last token.

    ``final_state`` is ``(forward_state, backward_state)``; the backward one is ``h_1←``.

    Shapes:
        xs: (N, T, D).  mask: (N, T) bool.  returns: (N, T, H_fwd + H_bwd).
    """

    def __init__(self, forward_layer: nn.Module, backward_layer: nn.Module) -> None:
        super().__init__()
        if getattr(forward_layer, "reverse", False):
            raise ValueError("Bidirectional: forward_layer must have reverse=False")
        if forward_layer is backward_layer:
            raise ValueError("Bidirectional: give two separate layers (they have separate weights)")
        backward_layer.reverse = True
        self.forward_layer = forward_layer
        self.backward_layer = backward_layer
        self.final_state = None

    @property
    def output_size(self) -> int:
        return self.forward_layer.output_size + self.backward_layer.output_size

    def forward(self, xs: torch.Tensor, mask: torch.Tensor | None = None, initial_state=None) -> torch.Tensor:
        init_fwd, init_bwd = (None, None) if initial_state is None else initial_state
        out_fwd = self.forward_layer(xs, mask, init_fwd)
        out_bwd = self.backward_layer(xs, mask, init_bwd)
        self.final_state = (self.forward_layer.final_state, self.backward_layer.final_state)
        return torch.cat([out_fwd, out_bwd], dim=-1)


class Residual(nn.Module):
    """A skip connection: ``y = x + f(x)``, zero at padded positions.

    Shapes:
        xs: (N, T, D).  returns: (N, T, D).
    """

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    @property
    def output_size(self) -> int:
        return self.layer.output_size

    @property
    def final_state(self):
        return getattr(self.layer, "final_state", None)

    def forward(self, xs: torch.Tensor, mask: torch.Tensor | None = None, initial_state=None) -> torch.Tensor:
        out = self.layer(xs, mask, initial_state)
        if out.shape != xs.shape:
            raise ShapeError(f"Residual: the wrapped layer maps {tuple(xs.shape)} to {tuple(out.shape)}; "
                             "a skip connection needs equal shapes")
        out = out + xs
        return out if mask is None else out.masked_fill(~mask.unsqueeze(-1), 0.0)


class Stacked(nn.Module):
    """Layers applied one after another; states are lists with one entry per layer.

    Children are named "0", "1", ... as in the NumPy track, so parameter names agree.
    """

    def __init__(self, layers: Sequence[nn.Module]) -> None:
        super().__init__()
        if not layers:
            raise ValueError("Stacked: needs at least one layer")
        for index, layer in enumerate(layers):
            self.add_module(str(index), layer)
        self.final_state = None

    @property
    def layers(self) -> list[nn.Module]:
        return list(self.children())

    @property
    def output_size(self) -> int:
        return self.layers[-1].output_size

    def forward(self, xs: torch.Tensor, mask: torch.Tensor | None = None, initial_state=None) -> torch.Tensor:
        layers = self.layers
        if initial_state is not None and len(initial_state) != len(layers):
            raise ValueError(f"initial_state: expected a list of {len(layers)} states, got {len(initial_state)}")
        states = []
        for index, layer in enumerate(layers):
            xs = layer(xs, mask, None if initial_state is None else initial_state[index])
            states.append(layer.final_state)
        self.final_state = states
        return xs
