"""The basic layers in torch: Embedding, Affine, softmax (plain and masked), cross-entropy over time.

Same names, parameters and equations as ``attention_course.numpy_track.layers``; autograd does
the backward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core import initializers
from ..core.initializers import init_rng
from .base import ShapeError, check_tensor, register_params

__all__ = ["Embedding", "Affine", "Softmax", "softmax", "masked_softmax", "SoftmaxCrossEntropy"]


class Embedding(nn.Module):
    """``out[n, t] = W[ids[n, t]]``.

    Shapes:
        ids: (...) integer, values in [0, V).  W: (V, D).  returns: (..., D).
    """

    def __init__(self, vocab_size: int, embed_dim: int, *, rng=None, dtype=torch.float32) -> None:
        super().__init__()
        self.vocab_size, self.embed_dim = vocab_size, embed_dim
        register_params(self, initializers.embedding(init_rng(rng), vocab_size, embed_dim), dtype)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dtype == torch.bool:
            raise ValueError(f"ids: expected an integer tensor, got {getattr(ids, 'dtype', type(ids).__name__)}")
        # On a GPU an out-of-range id is a device-side assert that kills the process; check on the
        # CPU (on a GPU this would cost a sync every call; the vocabulary checks ids upstream).
        if ids.device.type == "cpu" and ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            bad = ids[(ids < 0) | (ids >= self.vocab_size)].flatten()[0]
            raise ValueError(f"ids: token id {int(bad)} is outside the vocabulary [0, {self.vocab_size})")
        return F.embedding(ids, self.W)


class Affine(nn.Module):
    """``out = x W + b`` over the last axis.

    Shapes:
        x: (..., D_in).  W: (D_in, D_out).  b: (D_out,).  returns: (..., D_out).
    """

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, rng=None,
                 dtype=torch.float32) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        register_params(self, initializers.affine(init_rng(rng), in_features, out_features, bias), dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1:] != (self.in_features,):
            raise ShapeError(f"x: expected shape (..., {self.in_features}), got {tuple(x.shape)}")
        b = getattr(self, "b", None)
        # F.linear computes x A^T + b; our W is (D_in, D_out), the lectures' layout.
        return F.linear(x, self.W.t(), b)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(x_j) / sum_k exp(x_k)`` (torch subtracts the maximum: it cannot overflow)."""
    return torch.softmax(x, dim=dim)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` where only positions with ``mask`` True take part.

    Masked positions get exactly zero weight; a row with no True position gets all zeros, and
    a zero gradient (no NaN).

    Shapes:
        scores: any.  mask: bool, broadcastable to ``scores``.  returns: ``scores.shape``.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    mask = mask.expand_as(scores)
    anything = mask.any(dim=dim, keepdim=True)
    # A fully masked row would be all -inf (NaN after softmax): give it zeros, then mask it out.
    filled = scores.masked_fill(~mask, float("-inf")).masked_fill(~anything, 0.0)
    return torch.softmax(filled, dim=dim).masked_fill(~mask, 0.0)


class Softmax(nn.Module):
    """Softmax (optionally masked) as a module."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return masked_softmax(x, mask, self.dim)


class SoftmaxCrossEntropy(nn.Module):
    """Mean cross-entropy over the real tokens: padding (``mask`` False) adds nothing. With
    ``label_smoothing`` eps, against ``(1 - eps) onehot + eps / V`` (see the NumPy track's).

    Shapes:
        logits: (N, T, V) or (N, V).  targets: (N, T) or (N,) integer.  mask: like targets, bool.
        returns: a 0-d tensor.
    """

    def __init__(self, label_smoothing: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must lie in [0, 1), got {label_smoothing}")
        self.label_smoothing = label_smoothing

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        check_tensor("targets", targets, tuple(logits.shape[:-1]), kind="int")
        if mask is not None:
            check_tensor("mask", mask, tuple(targets.shape), kind="bool")
        V = logits.shape[-1]
        losses = F.cross_entropy(logits.reshape(-1, V).float() if logits.dtype in (torch.float16, torch.bfloat16)
                                 else logits.reshape(-1, V), targets.reshape(-1), reduction="none",
                                 label_smoothing=self.label_smoothing)
        if mask is None:
            return losses.mean()
        weight = mask.reshape(-1).to(losses.dtype)
        return (losses * weight).sum() / weight.sum().clamp_min(1.0)

