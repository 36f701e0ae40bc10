"""A many-to-one classifier with attention pooling: the lectures' TensorFlow model (chapter 9).

Embedding, a bidirectional GRU over the tokens, pooling over time (``pooling``: attention, mean
or last state), and one affine layer; two classes end in a sigmoid (one logit, as in the
lectures' code), more classes in a softmax::

    h_t = [h_t→ ; h_t←] = BiGRU(E x)_t     # (N, T, 2H)
    pooled = sum_t alpha_t h_t              # (N, 2H)
    logit = pooled W_out + b_out            # (N, 1), or (N, C) for C > 2 classes
    p(y = 1 | x) = sigmoid(logit)
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.configs import ClassifierConfig
from ..core.initializers import init_rng
from ..core.shapes import check_array
from ..functional import sigmoid
from .base import Layer, float_dtype
from .layers import Affine, Embedding, SoftmaxCrossEntropy, softmax
from .pooling import AttentionPooling, LastStatePooling, MeanPooling
from .seq2seq import make_recurrent

__all__ = ["BinaryCrossEntropy", "SequenceClassifier", "make_pooling", "sigmoid"]


class BinaryCrossEntropy(Layer):
    """Mean binary cross-entropy of ``sigmoid(logits)``, as TensorFlow's
    ``sigmoid_cross_entropy_with_logits``: ``max(z, 0) - z y + log(1 + exp(-|z|))``.

    Its gradient with respect to the logit is ``(sigmoid(z) - y) / N``.

    Shapes:
        logits: (N,) float.  labels: (N,) 0 or 1.  returns: a float (the loss).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    @staticmethod
    def _check_inputs(logits: np.ndarray, labels: np.ndarray) -> None:
        """A wrong shape raises a ``ShapeError``, a label other than 0 or 1 a ``ValueError``."""
        float_dtype(logits, "logits")
        sizes = check_array("logits", logits, ("N",))
        check_array("labels", labels, ("N",), sizes, kind="int")
        if labels.size and not np.isin(labels, (0, 1)).all():
            raise ValueError(f"labels: expected 0 or 1, got {np.unique(labels).tolist()}")

    def forward(self, logits: np.ndarray, labels: np.ndarray) -> float:
        self._check_inputs(logits, labels)
        y = labels.astype(logits.dtype)
        losses = np.maximum(logits, 0) - logits * y + np.log1p(np.exp(-np.abs(logits)))
        self._cache = (logits, y)
        return float(losses.mean())

    def backward(self, dout: float = 1.0) -> np.ndarray:
        logits, y = self._cache
        return (sigmoid(logits) - y) * (dout / max(len(y), 1))


def make_pooling(config: ClassifierConfig, rng=None) -> Layer:
    """The pooling layer that ``config.pooling`` names."""
    dtype = np.dtype(config.dtype)
    if config.pooling == "attention":
        return AttentionPooling(config.encoder_output_size, config.attention_size, rng=rng, dtype=dtype)
    if config.pooling == "mean":
        return MeanPooling()
    return LastStatePooling(config.hidden_size)


class SequenceClassifier(Layer):
    """Embedding, recurrent encoder (bidirectional by default), pooling over time, affine.

    ``forward(ids, mask, labels)`` returns the mean cross-entropy (sigmoid for two classes,
    softmax for more); ``backward()`` fills every gradient; ``predict(ids, mask)`` returns the
    class probabilities. With attention pooling, ``attention_weights`` holds ``alpha`` after
    either call.

    Built from ``config`` (a ``ClassifierConfig``): ``vocab_size``, ``num_classes``,
    ``embed_dim``, ``hidden_size`` (per direction), ``attention_size``, ``cell``,
    ``bidirectional``, ``pooling``, ``reset_after``, ``dtype``. Weights are drawn in the order
    embedding (uniform in ±1, as in the lectures' code), recurrent layers, pooling, output (as on
    the torch track).

    Shapes:
        ids: (N, T) int.  mask: (N, T) bool, True on real tokens.  labels: (N,) int.
        returns: the loss (a float); ``predict``: (N, num_classes).
    """

    def __init__(self, config: ClassifierConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = np.dtype(c.dtype)
        # The lectures' embeddings, uniform in ±1: large inputs keep each state close to its own token.
        self.embed = self.add_child("embed", Embedding(c.vocab_size, c.embed_dim, rng=0, dtype=dtype))
        self.embed.params["W"][...] = initializers.uniform_embedding(rng, c.vocab_size, c.embed_dim)["W"]
        self.rnn = self.add_child("rnn", make_recurrent(c.cell, c.embed_dim, c.hidden_size, bidirectional=c.bidirectional,
                                                        reset_after=c.reset_after, rng=rng, dtype=dtype))
        self.pooling = self.add_child("pooling", make_pooling(c, rng))
        self.out = self.add_child("out", Affine(c.encoder_output_size, c.num_logits, rng=rng, dtype=dtype))
        self.loss_layer = BinaryCrossEntropy() if c.num_logits == 1 else SoftmaxCrossEntropy()

    @property
    def attention_weights(self) -> np.ndarray | None:
        """``alpha`` (N, T) of the last call, for attention pooling; None for the others."""
        return getattr(self.pooling, "attention_weights", None)

    def logits(self, ids: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """The output layer's values: (N,) for two classes, (N, C) for more."""
        sizes = check_array("ids", ids, ("N", "T"), kind="int")
        if mask is not None:
            check_array("mask", mask, ("N", "T"), sizes, kind="bool")
        hs = self.rnn.forward(self.embed.forward(ids), mask)  # (N, T, H_out)
        logits = self.out.forward(self.pooling.forward(hs, mask))  # (N, num_logits)
        return logits[:, 0] if self.config.num_logits == 1 else logits

    def forward(self, ids: np.ndarray, mask: np.ndarray | None, labels: np.ndarray) -> float:
        logits = self.logits(ids, mask)
        check_array("labels", labels, (ids.shape[0],), kind="int")
        return self.loss_layer.forward(logits, labels)

    def backward(self, dloss: float = 1.0) -> None:
        d_logits = self.loss_layer.backward(dloss)
        if self.config.num_logits == 1:
            d_logits = d_logits[:, None]
        d_hs = self.pooling.backward(self.out.backward(d_logits))
        self.embed.backward(self.rnn.backward(d_hs))

    def pooling_weights(self, ids: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """The weight of each step's state in the pooled vector, (N, T).

        ``alpha`` for attention pooling, ``1 / length`` on the real steps for mean pooling.

        Raises:
            ValueError: for last-state pooling, whose two halves come from different steps.
        """
        if self.config.pooling == "last":
            raise ValueError("pooling_weights: last-state pooling has no weights over the steps")
        self.logits(ids, mask)
        if self.config.pooling == "attention":
            return self.pooling.attention_weights
        real = np.ones(ids.shape) if mask is None else mask.astype(np.float64)
        return real / np.maximum(real.sum(axis=1, keepdims=True), 1)

    def predict(self, ids: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Class probabilities, (N, num_classes): ``[1 - p, p]`` for two classes."""
        logits = self.logits(ids, mask)
        if self.config.num_logits == 1:
            p = sigmoid(logits)
            return np.stack([1 - p, p], axis=1)
        return softmax(logits)
