"""Pooling over time: one vector from every state of a sequence, for a classifier (chapter 9).

A many-to-one model reads a whole sequence and must decide from one vector. Three ways to get it
from the encoder states ``h_1 .. h_T`` (``hs``, N x T x H), padding excluded by ``mask``:

* ``AttentionPooling``: the lectures' TensorFlow code (its ``w_omega``, ``b_omega``,
  ``u_omega`` are ``W_proj``, ``b_proj``, ``u_query`` here)::

      v_t = tanh(h_t W_proj + b_proj)        # (N, T, A)
      e_t = v_t . u_query                     # (N, T)
      alpha = softmax_t(e_t)                  # over the real steps
      pooled = sum_t alpha_t h_t              # (N, H)

  It is additive attention (chapter 4) whose query is not a decoder state but a learned vector
  ``u_query``: "which step holds what this task needs?", asked the same way of every sequence.
* ``MeanPooling``: every real step weighs ``1 / length`` (attention with equal weights).
* ``LastStatePooling``: what a plain RNN classifier reads, the final states; for a bidirectional
  encoder the forward half at the last real step and the backward half at the first.

``mask`` (N, T) is True on real tokens, padding at the end; a row with no real token pools to
zeros.
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.initializers import init_rng
from ..core.shapes import ShapeError, check_array
from .base import Layer, as_dtype, float_dtype
from .layers import masked_softmax, softmax_backward

__all__ = ["AttentionPooling", "MeanPooling", "LastStatePooling"]


def _check_inputs(hs: np.ndarray, mask: np.ndarray | None, width: int | None = None) -> dict:
    float_dtype(hs, "hs")
    sizes = check_array("hs", hs, ("N", "T", "H" if width is None else width))
    if mask is not None:
        check_array("mask", mask, ("N", "T"), sizes, kind="bool")
    return sizes


class AttentionPooling(Layer):
    """Attention pooling with a learned query: ``pooled = sum_t alpha_t h_t``.

    ``v_t = tanh(h_t W_proj + b_proj)``, ``alpha = softmax_t(v_t . u_query)`` over the real
    steps. After ``forward``, ``attention_weights`` holds ``alpha``.

    Shapes:
        hs: (N, T, H).  mask: (N, T) bool or None.
        W_proj: (H, A).  b_proj: (A,).  u_query: (A,).
        returns: pooled (N, H); ``attention_weights``: (N, T).
    """

    def __init__(self, input_size: int, attention_size: int, *, rng=None, dtype=np.float64) -> None:
        super().__init__()
        self.input_size, self.attention_size = input_size, attention_size
        self.add_params(initializers.attention_pooling(init_rng(rng), input_size, attention_size), dtype)
        self.attention_weights = None
        self._cache = None

    @property
    def output_size(self) -> int:
        return self.input_size

    def forward(self, hs: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        _check_inputs(hs, mask, self.input_size)
        W, b, u = (as_dtype(self.params[name], hs.dtype)
                   for name in ("W_proj", "b_proj", "u_query"))
        v = np.tanh(hs @ W + b)  # (N, T, A)
        scores = v @ u  # (N, T)
        alpha = masked_softmax(scores, mask)  # (N, T)
        self.attention_weights = alpha
        self._cache = (hs, v, alpha)
        return np.einsum("nt,nth->nh", alpha, hs)  # (N, H)

    def backward(self, d_pooled: np.ndarray) -> np.ndarray:
        hs, v, alpha = self._cache
        N, T, H = hs.shape
        A = self.attention_size
        W = as_dtype(self.params["W_proj"], d_pooled.dtype)
        u = as_dtype(self.params["u_query"], d_pooled.dtype)
        d_hs = alpha[:, :, None] * d_pooled[:, None, :]  # through the weighted sum
        d_alpha = np.einsum("nh,nth->nt", d_pooled, hs)  # (N, T)
        d_scores = softmax_backward(alpha, d_alpha)  # (N, T); zero on padding
        self.grads["u_query"][...] = d_scores.reshape(1, -1) @ v.reshape(-1, A)
        d_pre = d_scores[:, :, None] * u * (1 - v * v)  # (N, T, A)
        self.grads["W_proj"][...] = hs.reshape(-1, H).T @ d_pre.reshape(-1, A)
        self.grads["b_proj"][...] = d_pre.sum(axis=(0, 1))
        d_hs += d_pre @ W.T  # the path through the scores
        return d_hs


class MeanPooling(Layer):
    """The average of the real steps: ``pooled = (1 / length) sum_{t real} h_t``.

    Shapes:
        hs: (N, T, H).  mask: (N, T) bool or None.  returns: (N, H).
    """

    def __init__(self) -> None:
        super().__init__()
        self._weights = None

    def forward(self, hs: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        _check_inputs(hs, mask)
        N, T, H = hs.shape
        real = np.ones((N, T), dtype=hs.dtype) if mask is None else mask.astype(hs.dtype)
        self._weights = real / np.maximum(real.sum(axis=1, keepdims=True), 1)  # (N, T)
        return np.einsum("nt,nth->nh", self._weights, hs)

    def backward(self, d_pooled: np.ndarray) -> np.ndarray:
        return self._weights[:, :, None] * d_pooled[:, None, :]


class LastStatePooling(Layer):
    """The final states: ``[h_last→ ; h_1←]`` for a bidirectional encoder, ``h_last`` otherwise.

    The first ``forward_size`` columns of ``hs`` are read at each row's last real step (where
    the forward direction ends), the other columns at the first step (where the backward
    direction ends).

    Shapes:
        hs: (N, T, H).  mask: (N, T) bool or None.  returns: (N, H).
    """

    def __init__(self, forward_size: int) -> None:
        super().__init__()
        self.forward_size = forward_size
        self._cache = None

    def forward(self, hs: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        _check_inputs(hs, mask)
        N, T, H = hs.shape
        if not 0 < self.forward_size <= H:
            raise ShapeError(f"hs: expected at least forward_size={self.forward_size} columns, got {H}")
        lengths = np.full(N, T) if mask is None else mask.sum(axis=1)
        last = np.maximum(lengths - 1, 0)
        rows = np.arange(N)
        F = self.forward_size
        pooled = np.concatenate([hs[rows, last, :F], hs[:, 0, F:]], axis=1)  # (N, H)
        pooled[lengths == 0] = 0
        self._cache = (hs.shape, last, lengths > 0)
        return pooled

    def backward(self, d_pooled: np.ndarray) -> np.ndarray:
        shape, last, nonempty = self._cache
        F = self.forward_size
        d_pooled = d_pooled * nonempty[:, None]
        d_hs = np.zeros(shape, dtype=d_pooled.dtype)
        rows = np.arange(shape[0])
        d_hs[rows, last, :F] = d_pooled[:, :F]
        d_hs[:, 0, F:] += d_pooled[:, F:]
        return d_hs
