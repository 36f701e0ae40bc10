"""Local attention in torch (Luong et al. 2015, section 3.2): local-m and local-p.

The same names, parameters, equations and conventions as ``attention_course.numpy_track.local_attention``
(read its docstring): a window of ``2D + 1`` positions around ``round(p_i)``, a softmax of the
scores over the window's real tokens; ``p_i = min(i, S_n - 1)`` (local-m) or
``S_n sigmoid(v_p^T tanh(W_p s_i))`` (local-p, whose softmax is multiplied by
``exp(-(j - p_i)^2 / (2 sigma^2))``, ``sigma = D / 2``). Autograd does the backward pass, the gradient reaching ``W_p`` and ``v_p`` through the
Gaussian. Only the window is gathered and scored: a decoder step costs ``O(D H)``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import attention_spec
from .attention import make_score
from .base import ShapeError, check_tensor, register_params
from .layers import masked_softmax

__all__ = ["LocalAttention", "monotonic_positions"]


def monotonic_positions(lengths: torch.Tensor, T_dec: int, first_step: int = 0, dtype=torch.float32) -> torch.Tensor:
    """Local-m's ``p_i = i``, clipped to each sequence's last real token ``S_n - 1`` (0 for an empty one).

    Shapes:
        lengths: (N,) int.  returns: (N, T_dec) of ``dtype``, on ``lengths``' device.
    """
    steps = first_step + torch.arange(T_dec, device=lengths.device)  # (T_dec,)
    last = (lengths - 1).clamp_min(0)  # (N,)
    return torch.minimum(steps.unsqueeze(0), last.unsqueeze(1)).to(dtype)  # (N, T_dec)


class LocalAttention(nn.Module):
    """Local attention, local-m or local-p, for every decoder step at once.

    ``forward(encoder_states, decoder_states, mask=None, *, first_step=0)`` returns the contexts;
    afterwards ``positions`` is ``p_i`` (N, T_dec), ``window_weights`` (N, T_dec, 2D + 1) and
    ``attention_weights`` (N, T_dec, T_enc) the weights put back in place (zero outside the window
    and on padding). ``need_weights`` is accepted for ``TimeAttention``'s interface; the weights
    are always kept (the full matrix is only built when ``attention_weights`` is read).

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_dec, H_enc).  W_p: (H_dec, A).  v_p: (A,).
    """

    def __init__(self, score: str, encoder_size: int, decoder_size: int, attention_size: int | None = None, *,
                 kind: str = "local-m", window: int = 2, rng=None, dtype=torch.float32) -> None:
        super().__init__()
        spec = attention_spec(kind)
        if not spec.local:
            raise ValueError(f"LocalAttention: kind must be 'local-m' or 'local-p', got {kind!r}")
        if int(window) < 1:
            raise ValueError(f"window must be >= 1 (the half-width D), got {window}")
        rng = init_rng(rng)
        self.kind, self.window = kind, int(window)
        self.predictive = spec.positions == "predicted"
        self.sigma = self.window / 2
        self.score = make_score(score, encoder_size, decoder_size, attention_size, rng=rng, dtype=dtype)
        self.encoder_size, self.decoder_size = self.score.encoder_size, self.score.decoder_size
        if self.predictive:
            register_params(self, initializers.local_position(rng, self.decoder_size, attention_size), dtype)
        self.positions = None
        self.window_weights = None
        self._placement = None  # (window positions, inside, T_enc) of the last call

    @property
    def attention_weights(self) -> torch.Tensor | None:
        """The window weights put back in place: (N, T_dec, T_enc), zero outside each window."""
        if self._placement is None:
            return None
        index, inside, T_enc = self._placement
        N, T_dec, _ = index.shape
        weights = self.window_weights.masked_fill(~inside, 0.0)
        full = weights.new_zeros(N, T_dec, T_enc)
        return full.scatter_add(2, index.clamp(0, T_enc - 1), weights)

    def _aligned_positions(self, decoder_states, lengths, first_step):
        T_dec = decoder_states.shape[1]
        if not self.predictive:
            return monotonic_positions(lengths, T_dec, first_step, decoder_states.dtype)
        gate = torch.sigmoid(torch.tanh(decoder_states @ self.W_p) @ self.v_p)  # (N, T_dec)
        return lengths.unsqueeze(1).to(gate.dtype) * gate

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor, mask: torch.Tensor | None = None,
                need_weights: bool = True, *, first_step: int = 0) -> torch.Tensor:
        if not isinstance(decoder_states, torch.Tensor) or decoder_states.dim() != 3:
            raise ShapeError(f"decoder_states: expected shape (N, T_dec, H_dec), "
                             f"got {tuple(getattr(decoder_states, 'shape', ()))}")
        sizes = check_tensor("encoder_states", encoder_states, ("N", "T_enc", self.encoder_size))
        check_tensor("decoder_states", decoder_states, ("N", "T_dec", self.decoder_size), sizes)
        if mask is not None:
            check_tensor("mask", mask, ("N", "T_enc"), sizes, kind="bool")
        N, T_enc, H_enc = encoder_states.shape
        T_dec, H_dec = decoder_states.shape[1:]
        D, W = self.window, 2 * self.window + 1
        device = encoder_states.device
        lengths = (torch.full((N,), T_enc, device=device) if mask is None else mask.sum(dim=1))  # (N,) S_n

        positions = self._aligned_positions(decoder_states, lengths, first_step)  # (N, T_dec)
        centres = torch.floor(positions.detach() + 0.5).long()  # round(p_i): the window moves in jumps
        index = centres.unsqueeze(-1) + torch.arange(-D, D + 1, device=device)  # (N, T_dec, W)
        inside = (index >= 0) & (index < lengths.view(N, 1, 1))  # (N, T_dec, W)
        gather = index.clamp(0, T_enc - 1).reshape(N, T_dec * W, 1).expand(N, T_dec * W, H_enc)
        windows = encoder_states.gather(1, gather).reshape(N, T_dec, W, H_enc)  # (N, T_dec, W, H_enc)

        scores = self.score(windows.reshape(N * T_dec, W, H_enc),
                            decoder_states.reshape(N * T_dec, 1, H_dec)).reshape(N, T_dec, W)
        aligned = masked_softmax(scores, inside)  # (N, T_dec, W)
        distance = index.to(positions.dtype) - positions.unsqueeze(-1)  # (N, T_dec, W): j - p_i
        weights = aligned * torch.exp(-distance * distance / (2 * self.sigma ** 2)) if self.predictive else aligned
        context = (weights.unsqueeze(2) @ windows).squeeze(2)  # (N, T_dec, H_enc)

        self.positions, self.window_weights = positions, weights
        self._placement = (index, inside, T_enc)
        return context
