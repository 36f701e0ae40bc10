"""The basic layers: Embedding, Affine, the softmax layer, softmax cross-entropy over time.

The softmax functions themselves (plain, masked, backward) live in ``attention_course.functional``,
shared with the book and the exercises; they are re-exported here.
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.initializers import init_rng
from ..core.shapes import ShapeError, check_array
from ..functional import masked_softmax, softmax, softmax_backward
from .base import Layer, as_dtype, float_dtype

__all__ = ["Embedding", "Affine", "Softmax", "softmax", "masked_softmax", "softmax_backward",
           "SoftmaxCrossEntropy"]


class Embedding(Layer):
    """Look up a row of ``W`` for every token id: ``out[n, t] = W[ids[n, t]]``.

    Shapes:
        ids: (...) integer, values in [0, V).  W: (V, D).  returns: (..., D).
    """

    def __init__(self, vocab_size: int, embed_dim: int, *, rng=None, dtype=np.float64) -> None:
        super().__init__()
        self.vocab_size, self.embed_dim = vocab_size, embed_dim
        self.add_params(initializers.embedding(init_rng(rng), vocab_size, embed_dim), dtype)
        self._ids = None

    def forward(self, ids: np.ndarray) -> np.ndarray:
        if not isinstance(ids, np.ndarray) or ids.dtype.kind not in "iu":
            raise ValueError(f"ids: expected an integer numpy array, got {getattr(ids, 'dtype', type(ids).__name__)}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            bad = ids[(ids < 0) | (ids >= self.vocab_size)].flat[0]
            raise ValueError(f"ids: token id {int(bad)} is outside the vocabulary [0, {self.vocab_size})")
        self._ids = ids
        return self.params["W"][ids]

    def backward(self, dout: np.ndarray) -> None:
        dW = self.grads["W"]
        dW[...] = 0
        # Repeated ids must add up, which fancy-index assignment would not do.
        np.add.at(dW, self._ids.reshape(-1), dout.reshape(-1, self.embed_dim))
        return None


class Affine(Layer):
    """``out = x W + b`` over the last axis.

    Shapes:
        x: (..., D_in).  W: (D_in, D_out).  b: (D_out,).  returns: (..., D_out).
    """

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, rng=None,
                 dtype=np.float64) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.add_params(initializers.affine(init_rng(rng), in_features, out_features, bias), dtype)
        self._x = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        dtype = float_dtype(x, "x")
        if x.shape[-1:] != (self.in_features,):
            raise ShapeError(f"x: expected shape (..., {self.in_features}), got {x.shape}")
        self._x = x
        out = x @ as_dtype(self.params["W"], dtype)
        if "b" in self.params:
            out += as_dtype(self.params["b"], dtype)
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        x2 = self._x.reshape(-1, self.in_features)
        d2 = dout.reshape(-1, self.out_features)
        self.grads["W"][...] = x2.T @ d2
        if "b" in self.params:
            self.grads["b"][...] = d2.sum(axis=0)
        return dout @ as_dtype(self.params["W"], dout.dtype).T


class Softmax(Layer):
    """Softmax (optionally masked) as a layer.

    Shapes:
        x: any.  mask: bool, broadcastable to x, or None.  returns: x.shape.
    """

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis
        self._out = None

    def forward(self, x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        float_dtype(x, "x")
        self._out = masked_softmax(x, mask, self.axis)
        return self._out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return softmax_backward(self._out, dout, self.axis)


class SoftmaxCrossEntropy(Layer):
    """Mean cross-entropy of a softmax over the last axis, counting only the real tokens.

    ``loss = -(1 / #real) sum_{n,t real} log softmax(logits[n, t])[targets[n, t]]``. Positions
    where ``mask`` is False (padding) add nothing to the loss and get a zero gradient.

    With ``label_smoothing`` = eps > 0 the target of each position is the distribution
    ``(1 - eps) onehot(target) + eps / V`` instead of the one-hot vector (Szegedy et al. 2016;
    the Transformer's eps = 0.1): the loss is the cross-entropy against it, and its gradient
    with respect to the logits is ``softmax(logits) - target distribution``.

    Shapes:
        logits: (N, T, V) or (N, V).  targets: (N, T) or (N,) integer.  mask: like targets, bool.
        returns: a float (the loss).
    """

    def __init__(self, label_smoothing: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must lie in [0, 1), got {label_smoothing}")
        self.label_smoothing = label_smoothing
        self._cache = None

    def forward(self, logits: np.ndarray, targets: np.ndarray, mask: np.ndarray | None = None) -> float:
        float_dtype(logits, "logits")
        check_array("targets", targets, logits.shape[:-1], kind="int")
        if mask is not None:
            check_array("mask", mask, targets.shape, kind="bool")
        V = logits.shape[-1]
        if targets.size and (targets.min() < 0 or targets.max() >= V):
            raise ValueError(f"targets: ids must lie in [0, {V}), got {int(targets.min())}..{int(targets.max())}")
        flat_logits = logits.reshape(-1, V)
        flat_targets = targets.reshape(-1)
        probs = softmax(flat_logits)  # a fresh array: the logits are left untouched
        rows = np.arange(flat_targets.size)
        picked = probs[rows, flat_targets]
        weight = np.ones(flat_targets.size, dtype=logits.dtype) if mask is None else mask.reshape(-1).astype(logits.dtype)
        count = max(weight.sum(), 1.0)
        eps = self.label_smoothing
        per_position = -np.log(np.maximum(picked, np.finfo(logits.dtype).tiny))
        if eps:
            # log softmax from the logits (not log of probs, which underflow): the mean over V of
            # -log p is the smoothing part of the cross-entropy against (1 - eps) onehot + eps / V.
            shifted = flat_logits - flat_logits.max(axis=-1, keepdims=True)
            log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
            per_position = (1 - eps) * per_position - eps * log_probs.mean(axis=-1)
        loss = (weight * per_position).sum() / count
        self._cache = (probs, flat_targets, weight, count, logits.shape)
        return float(loss)

    def backward(self, dout: float = 1.0) -> np.ndarray:
        probs, targets, weight, count, shape = self._cache
        eps = self.label_smoothing
        dlogits = probs - eps / probs.shape[-1] if eps else probs.copy()
        dlogits[np.arange(targets.size), targets] -= 1 - eps
        dlogits *= (weight * (dout / count))[:, None]
        return dlogits.reshape(shape)
