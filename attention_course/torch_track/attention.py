"""Attention in torch: score functions, weighted sum, attention weights, the attention layer.

The same names, parameters and equations as ``attention_course.numpy_track.attention`` (read
its docstring). One addition: ``TimeAttention`` with the ``scaled_dot`` score and
``need_weights=False`` runs ``F.scaled_dot_product_attention`` (see ``functional``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import bind, score_sizes
from .base import ShapeError, check_tensor, register_params
from .functional import scaled_dot_product_attention
from .layers import masked_softmax

__all__ = ["SCORE_FUNCTIONS", "DotScore", "ScaledDotScore", "GeneralScore", "AdditiveScore", "make_score",
           "WeightSum", "AttentionWeight", "Attention", "TimeAttention"]


class _Score(nn.Module):
    name = None

    def __init__(self, encoder_size: int, decoder_size: int, attention_size: int | None = None, *, rng=None,
                 dtype=torch.float32) -> None:
        super().__init__()
        self.encoder_size, self.decoder_size = score_sizes(self.name, encoder_size, decoder_size)
        initial = initializers.score(init_rng(rng), self.name, self.encoder_size, self.decoder_size, attention_size)
        self.attention_size = initial["v_a"].shape[0] if "v_a" in initial else None
        register_params(self, initial, dtype)


class DotScore(_Score):
    """``e_ij = s_i . h_j``.  Shapes: encoder (N, T_enc, H), decoder (N, T_dec, H) -> (N, T_dec, T_enc)."""

    name = "dot"

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor) -> torch.Tensor:
        return decoder_states @ encoder_states.transpose(-1, -2)


class ScaledDotScore(DotScore):
    """``e_ij = s_i . h_j / sqrt(H)``."""

    name = "scaled_dot"

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor) -> torch.Tensor:
        return super().forward(encoder_states, decoder_states) / math.sqrt(self.encoder_size)


class GeneralScore(_Score):
    """``e_ij = s_i^T W_a h_j``.  W_a: (H_dec, H_enc)."""

    name = "general"

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor) -> torch.Tensor:
        return (decoder_states @ self.W_a) @ encoder_states.transpose(-1, -2)


class AdditiveScore(_Score):
    """``e_ij = v_a^T tanh(W_a s_i + U_a h_j)``.  W_a: (H_dec, A), U_a: (H_enc, A), v_a: (A,)."""

    name = "additive"

    def forward(self, encoder_states: torch.Tensor,
                decoder_states: torch.Tensor) -> torch.Tensor:
        ws = decoder_states @ self.W_a  # (N, T_dec, A)
        uh = encoder_states @ self.U_a  # (N, T_enc, A)
        hidden = torch.tanh(ws.unsqueeze(2) + uh.unsqueeze(1))  # (N, T_dec, T_enc, A)
        return hidden @ self.v_a  # (N, T_dec, T_enc)


SCORE_FUNCTIONS = bind("score", {cls.name: cls for cls in (DotScore, GeneralScore, AdditiveScore, ScaledDotScore)})


def make_score(score: str, encoder_size: int, decoder_size: int, attention_size: int | None = None, *, rng=None,
               dtype=torch.float32) -> nn.Module:
    """The score module named ``score``: one of "dot", "general", "additive", "scaled_dot"."""
    score_sizes(score, encoder_size, decoder_size)  # an unknown name or impossible widths: the clear error
    return SCORE_FUNCTIONS[score](encoder_size, decoder_size, attention_size, rng=rng, dtype=dtype)


class WeightSum(nn.Module):
    """``c_i = sum_j alpha_ij h_j``, for one decoder step (N, T_enc) or all (N, T_dec, T_enc)."""

    def forward(self, encoder_states: torch.Tensor, attention_weights: torch.Tensor) -> torch.Tensor:
        sizes = check_tensor("encoder_states", encoder_states, ("N", "T_enc", "H"))
        single = attention_weights.dim() == 2
        check_tensor("attention_weights", attention_weights, ("N", "T_enc") if single else ("N", None, "T_enc"), sizes)
        if single:
            return (attention_weights.unsqueeze(1) @ encoder_states).squeeze(1)
        return attention_weights @ encoder_states  # (N, T_dec, H)


class AttentionWeight(nn.Module):
    """``alpha_ij = softmax_j(a(s_i, h_j))``, padding masked out.

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, H_dec) or (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_enc) or (N, T_dec, T_enc).
    """

    def __init__(self, score: str = "dot", encoder_size: int | None = None, decoder_size: int | None = None,
                 attention_size: int | None = None, *, rng=None, dtype=torch.float32) -> None:
        super().__init__()
        self.score_name = score
        encoder_size, decoder_size = score_sizes(score, encoder_size, decoder_size)
        self.score = None
        if encoder_size is not None:
            self.score = make_score(score, encoder_size, decoder_size, attention_size, rng=rng, dtype=dtype)

    def _score_for(self, encoder_states: torch.Tensor) -> nn.Module:
        if self.score is None:  # a parameter-free score whose width is learned from the first call
            width = encoder_states.shape[-1]
            self.score = make_score(self.score_name, width, width)
        return self.score

    def _check(self, encoder_states, decoder_states, mask):
        score = self._score_for(encoder_states)
        sizes = check_tensor("encoder_states", encoder_states, ("N", "T_enc", score.encoder_size))
        single = decoder_states.dim() == 2
        check_tensor("decoder_states", decoder_states,
                     ("N", score.decoder_size) if single else ("N", "T_dec", score.decoder_size), sizes)
        if mask is not None:
            check_tensor("mask", mask, ("N", "T_enc"), sizes, kind="bool")
        return single

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        single = self._check(encoder_states, decoder_states, mask)
        queries = decoder_states.unsqueeze(1) if single else decoder_states  # (N, T_dec, H_dec)
        weights = masked_softmax(self.score(encoder_states, queries), None if mask is None else mask.unsqueeze(1))
        return weights.squeeze(1) if single else weights


class Attention(nn.Module):
    """Weights from a score function, then the weighted sum; ``attention_weights`` kept.

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, H_dec) or (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, H_enc) or (N, T_dec, H_enc).
    """

    def __init__(self, score: str = "dot", encoder_size: int | None = None, decoder_size: int | None = None,
                 attention_size: int | None = None, *, rng=None, dtype=torch.float32) -> None:
        super().__init__()
        self.attention_weight = AttentionWeight(score, encoder_size, decoder_size, attention_size, rng=rng,
                                                dtype=dtype)
        self.weight_sum = WeightSum()
        self.attention_weights = None

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor,
                mask: torch.Tensor | None = None, need_weights: bool = True) -> torch.Tensor:
        weights = self.attention_weight(encoder_states, decoder_states, mask)
        self.attention_weights = weights
        return self.weight_sum(encoder_states, weights)


class TimeAttention(Attention):
    """Attention for every decoder step at once.

    ``need_weights=False`` with the ``scaled_dot`` score dispatches to
    ``F.scaled_dot_product_attention`` (``attention_weights`` is then None).

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_dec, H_enc).
    """

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor,
                mask: torch.Tensor | None = None, need_weights: bool = True) -> torch.Tensor:
        if not isinstance(decoder_states, torch.Tensor) or decoder_states.dim() != 3:
            raise ShapeError(f"decoder_states: expected shape (N, T_dec, H_dec), "
                             f"got {tuple(getattr(decoder_states, 'shape', ()))}")
        if not need_weights and self.attention_weight.score_name == "scaled_dot":
            self.attention_weight._check(encoder_states, decoder_states, mask)
            self.attention_weights = None
            return scaled_dot_product_attention(decoder_states, encoder_states, encoder_states,
                                                None if mask is None else mask.unsqueeze(1))
        return super().forward(encoder_states, decoder_states, mask)
