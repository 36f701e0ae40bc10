"""A many-to-one classifier with attention pooling in torch: the lectures' TensorFlow model.

The same classes, parameter names and initial values as
``attention_course.numpy_track.classifier`` for the same seed (read its docstring).
``fused=True`` runs the recurrent layers with torch's fused kernels where they exist (the GRU
with ``reset_after=True``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core import initializers
from ..core.configs import ClassifierConfig
from ..core.initializers import init_rng
from .base import check_tensor, resolve_dtype
from .layers import Affine, Embedding
from .pooling import AttentionPooling, LastStatePooling, MeanPooling
from .seq2seq import make_recurrent

__all__ = ["BinaryCrossEntropy", "SequenceClassifier", "make_pooling"]


class BinaryCrossEntropy(nn.Module):
    """Mean binary cross-entropy of ``sigmoid(logits)`` (``F.binary_cross_entropy_with_logits``).

    Shapes:
        logits: (N,) float.  labels: (N,) 0 or 1.  returns: a 0-d tensor.
    """

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        sizes = check_tensor("logits", logits, ("N",))
        check_tensor("labels", labels, ("N",), sizes, kind="int")
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def make_pooling(config: ClassifierConfig, rng=None) -> nn.Module:
    """The pooling module that ``config.pooling`` names."""
    if config.pooling == "attention":
        return AttentionPooling(config.encoder_output_size, config.attention_size, rng=rng,
                                dtype=resolve_dtype(config.dtype))
    if config.pooling == "mean":
        return MeanPooling()
    return LastStatePooling(config.hidden_size)


class SequenceClassifier(nn.Module):
    """Embedding, recurrent encoder, pooling over time, affine; sigmoid or softmax.

    ``forward(ids, mask, labels)`` returns the mean cross-entropy; ``predict(ids, mask)`` the
    class probabilities (N, num_classes); ``attention_weights`` holds ``alpha`` (attention
    pooling) after either.

    Shapes:
        ids: (N, T) int.  mask: (N, T) bool.  labels: (N,) int.  returns: a 0-d tensor.
    """

    def __init__(self, config: ClassifierConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        self.embed = Embedding(c.vocab_size, c.embed_dim, rng=0, dtype=dtype)  # the lectures' U(-1, 1):
        with torch.no_grad():
            self.embed.W.copy_(torch.from_numpy(initializers.uniform_embedding(rng, c.vocab_size, c.embed_dim)["W"]))
        self.rnn = make_recurrent(c.cell, c.embed_dim, c.hidden_size, bidirectional=c.bidirectional,
                                  reset_after=c.reset_after, fused=fused, rng=rng, dtype=dtype)
        self.pooling = make_pooling(c, rng)
        self.out = Affine(c.encoder_output_size, c.num_logits, rng=rng, dtype=dtype)
        self.loss_layer = BinaryCrossEntropy()

    @property
    def attention_weights(self) -> torch.Tensor | None:
        return getattr(self.pooling, "attention_weights", None)

    def logits(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(N,) for two classes, (N, C) for more."""
        sizes = check_tensor("ids", ids, ("N", "T"), kind="int")
        if mask is not None:
            check_tensor("mask", mask, ("N", "T"), sizes, kind="bool")
        hs = self.rnn(self.embed(ids), mask)  # (N, T, H_out)
        logits = self.out(self.pooling(hs, mask))  # (N, num_logits)
        return logits[:, 0] if self.config.num_logits == 1 else logits

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None, labels: torch.Tensor) -> torch.Tensor:
        logits = self.logits(ids, mask)
        check_tensor("labels", labels, (ids.shape[0],), kind="int")
        if self.config.num_logits == 1:
            return self.loss_layer(logits, labels)
        return F.cross_entropy(logits, labels)

    @torch.no_grad()
    def pooling_weights(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The weight of each step's state in the pooled vector, (N, T): ``alpha``, or ``1 / length``."""
        if self.config.pooling == "last":
            raise ValueError("pooling_weights: last-state pooling has no weights over the steps")
        self.logits(ids, mask)
        if self.config.pooling == "attention":
            return self.pooling.attention_weights
        dtype = self.embed.W.dtype
        real = torch.ones(ids.shape, dtype=dtype, device=ids.device) if mask is None else mask.to(dtype)
        return real / real.sum(dim=1, keepdim=True).clamp_min(1)

    @torch.no_grad()
    def predict(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Class probabilities, (N, num_classes)."""
        logits = self.logits(ids, mask)
        if self.config.num_logits == 1:
            p = torch.sigmoid(logits)
            return torch.stack([1 - p, p], dim=1)
        return torch.softmax(logits, dim=-1)
