"""Attention, built up as in the lectures: weighted sum, attention weights, the attention layer.

Notation (the book's): encoder states ``h_j`` (``encoder_states``, N x T_enc x H_enc), decoder
state ``s_i`` (``decoder_states``), scores ``e_ij = a(s_i, h_j)``, weights
``alpha_ij = softmax_j(e_ij)``, context ``c_i = sum_j alpha_ij h_j``.

Every layer here takes either one decoder step or all of them at once: a decoder state of
shape (N, H_dec) gives weights (N, T_enc) and a context (N, H_enc); decoder states of shape
(N, T_dec, H_dec) give weights (N, T_dec, T_enc) and contexts (N, T_dec, H_enc), computed with
batched matrix products instead of a loop over the decoder steps.

Padding: ``mask`` (N, T_enc) is True on real source tokens. Masked positions get exactly zero
weight; a row with no real token gets zero weights and a zero context (never NaN).
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import bind, score_sizes
from ..core.shapes import ShapeError, check_array
from .base import Layer, as_dtype, float_dtype
from .layers import masked_softmax, softmax_backward

__all__ = ["SCORE_FUNCTIONS", "DotScore", "ScaledDotScore", "GeneralScore", "AdditiveScore", "make_score",
           "WeightSum", "AttentionWeight", "Attention", "TimeAttention"]


def _transpose(x: np.ndarray) -> np.ndarray:
    return x.swapaxes(-1, -2)


class DotScore(Layer):
    """``e_ij = s_i . h_j`` (Luong's dot). Needs ``H_dec == H_enc``.

    Shapes:
        encoder_states: (N, T_enc, H).  decoder_states: (N, T_dec, H).  returns: (N, T_dec, T_enc).
    """

    name = "dot"

    def __init__(self, encoder_size: int, decoder_size: int, attention_size: int | None = None, *, rng=None,
                 dtype=np.float64) -> None:
        super().__init__()
        self.encoder_size, self.decoder_size = score_sizes(self.name, encoder_size, decoder_size)
        self._cache = None

    def _scale(self, dtype):
        return None

    def forward(self, encoder_states: np.ndarray,
                decoder_states: np.ndarray) -> np.ndarray:
        self._cache = (encoder_states, decoder_states)
        scores = decoder_states @ _transpose(encoder_states)  # (N, T_dec, T_enc)
        scale = self._scale(encoder_states.dtype)
        if scale is not None:
            scores *= scale
        return scores

    def backward(self, dscores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        encoder_states, decoder_states = self._cache
        scale = self._scale(dscores.dtype)
        if scale is not None:
            dscores = dscores * scale
        d_encoder = _transpose(dscores) @ decoder_states  # (N, T_enc, H)
        d_decoder = dscores @ encoder_states  # (N, T_dec, H)
        return d_encoder, d_decoder


class ScaledDotScore(DotScore):
    """``e_ij = s_i . h_j / sqrt(H)``: the Transformer's scaling keeps the scores' variance near 1."""

    name = "scaled_dot"

    def _scale(self, dtype):
        return dtype.type(1.0 / np.sqrt(self.encoder_size))


class GeneralScore(Layer):
    """``e_ij = s_i^T W_a h_j`` (Luong's general): a learned bilinear form.

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        W_a: (H_dec, H_enc).  returns: (N, T_dec, T_enc).
    """

    name = "general"

    def __init__(self, encoder_size: int, decoder_size: int, attention_size: int | None = None, *, rng=None,
                 dtype=np.float64) -> None:
        super().__init__()
        self.encoder_size, self.decoder_size = encoder_size, decoder_size
        self.add_params(initializers.score(init_rng(rng), self.name, encoder_size, decoder_size), dtype)
        self._cache = None

    def forward(self, encoder_states: np.ndarray,
                decoder_states: np.ndarray) -> np.ndarray:
        W_a = as_dtype(self.params["W_a"], decoder_states.dtype)
        queries = decoder_states @ W_a  # (N, T_dec, H_enc)
        self._cache = (encoder_states, decoder_states, queries)
        return queries @ _transpose(encoder_states)  # (N, T_dec, T_enc)

    def backward(self, dscores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        encoder_states, decoder_states, queries = self._cache
        H_dec, H_enc = self.decoder_size, self.encoder_size
        d_queries = dscores @ encoder_states  # (N, T_dec, H_enc)
        d_encoder = _transpose(dscores) @ queries  # (N, T_enc, H_enc)
        self.grads["W_a"][...] = (decoder_states.reshape(-1, H_dec).T
                                  @ d_queries.reshape(-1, H_enc))
        d_decoder = d_queries @ as_dtype(self.params["W_a"], dscores.dtype).T
        return d_encoder, d_decoder


class AdditiveScore(Layer):
    """``e_ij = v_a^T tanh(W_a s_i + U_a h_j)`` (Bahdanau's additive, or "concat", score).

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        W_a: (H_dec, A).  U_a: (H_enc, A).  v_a: (A,).  returns: (N, T_dec, T_enc).
    """

    name = "additive"

    def __init__(self, encoder_size: int, decoder_size: int, attention_size: int | None = None, *, rng=None,
                 dtype=np.float64) -> None:
        super().__init__()
        self.encoder_size, self.decoder_size = encoder_size, decoder_size
        self.add_params(initializers.score(init_rng(rng), self.name, encoder_size, decoder_size, attention_size), dtype)
        self.attention_size = self.params["v_a"].shape[0]
        self._cache = None

    def forward(self, encoder_states: np.ndarray,
                decoder_states: np.ndarray) -> np.ndarray:
        dtype = encoder_states.dtype
        W, U, v = (as_dtype(self.params[k], dtype) for k in ("W_a", "U_a", "v_a"))
        ws = decoder_states @ W  # (N, T_dec, A)
        uh = encoder_states @ U  # (N, T_enc, A)
        hidden = ws[:, :, None, :] + uh[:, None, :, :]  # (N, T_dec, T_enc, A)
        np.tanh(hidden, out=hidden)
        self._cache = (encoder_states, decoder_states, hidden)
        return hidden @ v  # (N, T_dec, T_enc)

    def backward(self, dscores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        encoder_states, decoder_states, hidden = self._cache
        dtype = dscores.dtype
        W, U, v = (as_dtype(self.params[k], dtype) for k in ("W_a", "U_a", "v_a"))
        A = self.attention_size
        self.grads["v_a"][...] = dscores.reshape(1, -1) @ hidden.reshape(-1, A)
        d_pre = dscores[..., None] * v  # (N, T_dec, T_enc, A)
        d_pre *= 1 - hidden * hidden
        d_ws = d_pre.sum(axis=2)  # (N, T_dec, A)
        d_uh = d_pre.sum(axis=1)  # (N, T_enc, A)
        s_rows = decoder_states.reshape(-1, self.decoder_size)  # (N * T_dec, H_dec)
        h_rows = encoder_states.reshape(-1, self.encoder_size)  # (N * T_enc, H_enc)
        self.grads["W_a"][...] = s_rows.T @ d_ws.reshape(-1, A)
        self.grads["U_a"][...] = h_rows.T @ d_uh.reshape(-1, A)
        return d_uh @ U.T, d_ws @ W.T


SCORE_FUNCTIONS = bind("score", {cls.name: cls for cls in (DotScore, GeneralScore, AdditiveScore, ScaledDotScore)})


def make_score(score: str, encoder_size: int, decoder_size: int, attention_size: int | None = None, *, rng=None,
               dtype=np.float64) -> Layer:
    """The score layer named ``score``: one of "dot", "general", "additive", "scaled_dot"."""
    score_sizes(score, encoder_size, decoder_size)  # an unknown name or impossible widths: the clear error
    return SCORE_FUNCTIONS[score](encoder_size, decoder_size, attention_size, rng=rng, dtype=dtype)


def _check_mask(mask, sizes: dict):
    if mask is not None:
        check_array("mask", mask, ("N", "T_enc"), sizes, kind="bool")


class WeightSum(Layer):
    """The context vector: the attention-weighted sum ``c_i = sum_j alpha_ij h_j``.

    A batched matrix product does it for every decoder step at once (no repeat, no loop).

    Shapes:
        encoder_states: (N, T_enc, H).  attention_weights: (N, T_enc) or (N, T_dec, T_enc).
        returns: (N, H) or (N, T_dec, H).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    @staticmethod
    def _check_inputs(encoder_states: np.ndarray, attention_weights: np.ndarray) -> bool:
        """Floats of matching shapes; True for the weights of a single decoder step."""
        float_dtype(encoder_states, "encoder_states")
        float_dtype(attention_weights, "attention_weights")
        sizes = check_array("encoder_states", encoder_states, ("N", "T_enc", "H"))
        single = attention_weights.ndim == 2
        check_array("attention_weights", attention_weights,
                    ("N", "T_enc") if single else ("N", None, "T_enc"), sizes)
        return single

    def forward(self, encoder_states: np.ndarray,
                attention_weights: np.ndarray) -> np.ndarray:
        single = self._check_inputs(encoder_states, attention_weights)
        weights = attention_weights[:, None, :] if single else attention_weights
        self._cache = (encoder_states, weights, single)
        context = weights @ encoder_states  # (N, T_dec, H)
        return context[:, 0] if single else context

    def backward(self, d_context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        encoder_states, weights, single = self._cache
        if single:
            d_context = d_context[:, None, :]
        d_encoder = _transpose(weights) @ d_context  # (N, T_enc, H)
        d_weights = d_context @ _transpose(encoder_states)  # (N, T_dec, T_enc)
        return d_encoder, (d_weights[:, 0] if single else d_weights)


class AttentionWeight(Layer):
    """Attention weights ``alpha_ij = softmax_j(a(s_i, h_j))``, padding masked out.

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, H_dec) or (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_enc) or (N, T_dec, T_enc).
    """

    def __init__(self, score: str = "dot", encoder_size: int | None = None, decoder_size: int | None = None,
                 attention_size: int | None = None, *, rng=None, dtype=np.float64) -> None:
        super().__init__()
        self.score_name = score
        encoder_size, decoder_size = score_sizes(score, encoder_size, decoder_size)
        self.score = None
        if encoder_size is not None:
            self.score = self.add_child("score", make_score(score, encoder_size, decoder_size, attention_size,
                                                            rng=rng, dtype=dtype))
        self._cache = None

    def _check_inputs(self, encoder_states: np.ndarray, decoder_states: np.ndarray,
                      mask: np.ndarray | None) -> bool:
        """Floats of matching shapes; True for the query of a single decoder step. A
        parameter-free score made without sizes takes its width from the first call."""
        float_dtype(encoder_states, "encoder_states")
        float_dtype(decoder_states, "decoder_states")
        if self.score is None:
            self.score = self.add_child("score", make_score(self.score_name, encoder_states.shape[-1],
                                                            encoder_states.shape[-1]))
        H_enc, H_dec = self.score.encoder_size, self.score.decoder_size
        sizes = check_array("encoder_states", encoder_states, ("N", "T_enc", H_enc))
        single = decoder_states.ndim == 2
        check_array("decoder_states", decoder_states, ("N", H_dec) if single else ("N", "T_dec", H_dec), sizes)
        _check_mask(mask, sizes)
        return single

    def forward(self, encoder_states: np.ndarray, decoder_states: np.ndarray,
                mask: np.ndarray | None = None) -> np.ndarray:
        single = self._check_inputs(encoder_states, decoder_states, mask)
        queries = decoder_states[:, None, :] if single else decoder_states
        scores = self.score.forward(encoder_states, queries)  # (N, T_dec, T_enc)
        weights = masked_softmax(scores, None if mask is None else mask[:, None, :])
        self._cache = (weights, single)
        return weights[:, 0] if single else weights

    def backward(self, d_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        weights, single = self._cache
        if single:
            d_weights = d_weights[:, None, :]
        d_scores = softmax_backward(weights, d_weights)
        d_encoder, d_decoder = self.score.backward(d_scores)
        return d_encoder, (d_decoder[:, 0] if single else d_decoder)


class Attention(Layer):
    """The attention layer: weights from a score function, then the weighted sum.

    ``forward(encoder_states, decoder_states, mask=None)`` returns the context;
    ``backward(d_context)`` returns ``(d_encoder_states, d_decoder_states)``; after ``forward``,
    ``attention_weights`` holds the weights.

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, H_dec) or (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, H_enc) or (N, T_dec, H_enc).
    """

    def __init__(self, score: str = "dot", encoder_size: int | None = None, decoder_size: int | None = None,
                 attention_size: int | None = None, *, rng=None, dtype=np.float64) -> None:
        super().__init__()
        self.attention_weight = self.add_child(
            "attention_weight", AttentionWeight(score, encoder_size, decoder_size, attention_size, rng=rng, dtype=dtype))
        self.weight_sum = self.add_child("weight_sum", WeightSum())
        self.attention_weights = None

    def forward(self, encoder_states: np.ndarray, decoder_states: np.ndarray,
                mask: np.ndarray | None = None) -> np.ndarray:
        weights = self.attention_weight.forward(encoder_states, decoder_states, mask)
        self.attention_weights = weights
        return self.weight_sum.forward(encoder_states, weights)

    def backward(self, d_context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d_encoder, d_weights = self.weight_sum.backward(d_context)
        d_encoder_from_scores, d_decoder = self.attention_weight.backward(d_weights)
        d_encoder += d_encoder_from_scores
        return d_encoder, d_decoder


class TimeAttention(Attention):
    """Attention for every decoder step at once (the classic ``TimeAttention`` interface).

    ``TimeAttention(score="dot")``; ``forward(encoder_states, decoder_states, mask=None)``
    returns the contexts of all decoder steps; ``backward(d_context)`` returns
    ``(d_encoder_states, d_decoder_states)``; ``attention_weights`` is (N, T_dec, T_enc).

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_dec, H_enc).
    """

    def forward(self, encoder_states: np.ndarray, decoder_states: np.ndarray,
                mask: np.ndarray | None = None) -> np.ndarray:
        if getattr(decoder_states, "ndim", 3) != 3:
            raise ShapeError("decoder_states: expected shape (N, T_dec, H_dec), "
                             f"got {decoder_states.shape}")
        return super().forward(encoder_states, decoder_states, mask)
