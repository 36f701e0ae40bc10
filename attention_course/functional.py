"""Stateless building blocks in NumPy: the softmax (plain and masked), its backward pass, the sigmoid.

The NumPy track's layers, the book's pages and the exercise notebooks all use these, so they sit
on neutral ground: this module imports nothing but NumPy. It is also what an exercise notebook may
import besides the data sets and the checks (the grading sandbox offers exactly those), so it holds
only the blocks every chapter builds on, never a layer an exercise asks for.
"""

from __future__ import annotations

import numpy as np

__all__ = ["softmax", "masked_softmax", "softmax_backward", "sigmoid"]


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(x_j) / sum_k exp(x_k)``, stable: the row maximum is subtracted first."""
    shifted = x - x.max(axis=axis, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=axis, keepdims=True)
    return shifted


def masked_softmax(scores: np.ndarray, mask: np.ndarray | None,
                   axis: int = -1) -> np.ndarray:
    """Softmax over ``axis`` where only positions with ``mask`` True take part.

    Masked positions get exactly zero weight; a row with no True position gets all zeros
    (no NaN): there is nothing to attend to, so the context it produces is zero. The
    maximum over the *unmasked* scores is subtracted first, so huge scores cannot
    overflow.

    Shapes:
        scores: any, e.g. (N, T_dec, T_enc).  mask: bool, broadcastable to ``scores``.
        returns: ``scores.shape``.
    """
    if mask is None:
        return softmax(scores, axis)
    mask = np.broadcast_to(mask, scores.shape)
    shifted = np.where(mask, scores, -np.inf)
    row_max = shifted.max(axis=axis, keepdims=True)
    row_max[~np.isfinite(row_max)] = 0  # a fully masked row: all -inf, so exp gives 0
    shifted -= row_max
    np.exp(shifted, out=shifted)
    total = shifted.sum(axis=axis, keepdims=True)
    total[total == 0] = 1  # fully masked rows: 0 / 1 = 0
    shifted /= total
    return shifted


def softmax_backward(weights: np.ndarray, dweights: np.ndarray,
                     axis: int = -1) -> np.ndarray:
    """The softmax vector-Jacobian product: ``dx_j = y_j (dy_j - sum_k dy_k y_k)``.

    Holds for the masked softmax too: a masked position has ``y_j = 0``, so its gradient
    is 0.
    """
    return weights * (dweights - (dweights * weights).sum(axis=axis, keepdims=True))


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))``, written with tanh so that it cannot overflow for large ``|x|``."""
    return 0.5 * (np.tanh(0.5 * x) + 1.0)
