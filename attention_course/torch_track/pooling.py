"""Pooling over time in torch: attention pooling (the lectures' code), mean and last state.

The same names, parameters and equations as ``attention_course.numpy_track.pooling`` (read its
docstring); autograd does the backward pass::

    v_t = tanh(h_t W_proj + b_proj),  alpha = softmax_t(v_t . u_query),  pooled = sum_t alpha_t h_t

``mask`` (N, T) is True on real tokens, padding at the end; a row with no real token pools to zeros.
"""

from __future__ import annotations

import torch
from torch import nn

from ..core import initializers
from ..core.initializers import init_rng
from .base import ShapeError, check_tensor, register_params
from .layers import masked_softmax

__all__ = ["AttentionPooling", "MeanPooling", "LastStatePooling"]


def _check_inputs(hs: torch.Tensor, mask: torch.Tensor | None, width: int | None = None) -> dict:
    sizes = check_tensor("hs", hs, ("N", "T", "H" if width is None else width))
    if mask is not None:
        check_tensor("mask", mask, ("N", "T"), sizes, kind="bool")
    return sizes


class AttentionPooling(nn.Module):
    """Attention pooling with a learned query: ``pooled = sum_t alpha_t h_t``.

    After ``forward``, ``attention_weights`` holds ``alpha`` (detached).

    Shapes:
        hs: (N, T, H).  mask: (N, T) bool or None.
        W_proj: (H, A).  b_proj: (A,).  u_query: (A,).
        returns: pooled (N, H); ``attention_weights``: (N, T).
    """

    def __init__(self, input_size: int, attention_size: int, *, rng=None, dtype=torch.float32) -> None:
        super().__init__()
        self.input_size, self.attention_size = input_size, attention_size
        register_params(self, initializers.attention_pooling(init_rng(rng), input_size, attention_size), dtype)
        self.attention_weights = None

    @property
    def output_size(self) -> int:
        return self.input_size

    def forward(self, hs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_inputs(hs, mask, self.input_size)
        v = torch.tanh(hs @ self.W_proj + self.b_proj)  # (N, T, A)
        alpha = masked_softmax(v @ self.u_query, mask)  # (N, T)
        self.attention_weights = alpha.detach()
        return torch.einsum("nt,nth->nh", alpha, hs)  # (N, H)


class MeanPooling(nn.Module):
    """The average of the real steps.  Shapes: hs (N, T, H), mask (N, T) -> (N, H)."""

    def forward(self, hs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_inputs(hs, mask)
        if mask is None:
            return hs.mean(dim=1)
        real = mask.to(hs.dtype)
        weights = real / real.sum(dim=1, keepdim=True).clamp_min(1)  # (N, T)
        return torch.einsum("nt,nth->nh", weights, hs)


class LastStatePooling(nn.Module):
    """The final states: the first ``forward_size`` columns at the last real step, the rest at the first.

    Shapes:
        hs: (N, T, H).  mask: (N, T) bool or None.  returns: (N, H).
    """

    def __init__(self, forward_size: int) -> None:
        super().__init__()
        self.forward_size = forward_size

    def forward(self, hs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_inputs(hs, mask)
        N, T, H = hs.shape
        if not 0 < self.forward_size <= H:
            raise ShapeError(f"hs: expected at least forward_size={self.forward_size} columns, got {H}")
        F = self.forward_size
        lengths = torch.full((N,), T, device=hs.device) if mask is None else mask.sum(dim=1)
        last = (lengths - 1).clamp_min(0)
        rows = torch.arange(N, device=hs.device)
        pooled = torch.cat([hs[rows, last, :F], hs[:, 0, F:]], dim=1)  # (N, H)
        return pooled.masked_fill((lengths == 0).unsqueeze(1), 0.0)
