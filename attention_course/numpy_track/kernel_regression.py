"""Nadaraya-Watson kernel regression (Nadaraya 1964; Watson 1964): attention before the name.

Given pairs ``(x_j, y_j)``, predict ``y`` at a new ``x`` by averaging the ``y_j``, each weighted by
how close its ``x_j`` lies to ``x``. With a Gaussian kernel the weights are a softmax of scores,
and the three roles of attention appear: the new ``x`` is the **query**, the ``x_j`` are the
**keys**, the ``y_j`` the **values**::

    e_ij = -(omega (q_i - k_j))^2 / 2,   alpha_ij = softmax_j(e_ij),   f(q_i) = sum_j alpha_ij v_j

``omega`` (the parameter ``inverse_width``) is the one parameter: the inverse of the Gaussian kernel's width (a large ``omega``, a narrow
kernel that trusts only the nearest keys; a small one, a wide kernel that averages many).
``mask`` (Q, K) is False where a query may not use a key, for example its own pair when the
width is learned on the training data itself (leave-one-out).
"""

from __future__ import annotations

import numpy as np

from ..core.shapes import check_array
from .base import Layer, as_dtype, float_dtype
from .layers import masked_softmax, softmax_backward

__all__ = ["KernelRegression"]


class KernelRegression(Layer):
    """Nadaraya-Watson regression with a Gaussian kernel of learned inverse width ``omega`` (``inverse_width``).

    After ``forward``, ``attention_weights`` holds ``alpha``.

    Shapes:
        queries: (Q,).  keys: (K,).  values: (K,).  mask: (Q, K) bool or None.
        inverse_width: (1,).
        returns: (Q,); ``attention_weights``: (Q, K).
    """

    def __init__(self, inverse_width: float = 1.0, dtype="float64") -> None:
        super().__init__()
        if not inverse_width > 0:
            raise ValueError(f"inverse_width must be > 0, got {inverse_width}")
        self.add_param("inverse_width", np.array([inverse_width], dtype=dtype))
        self.attention_weights = None
        self._cache = None

    def _check_inputs(self, queries, keys, values, mask) -> np.dtype:
        """Check the shapes (a wrong one raises a ``ShapeError`` naming it); the float dtype."""
        dtype = float_dtype(queries, "queries")
        sizes = check_array("queries", queries, ("Q",))
        sizes = check_array("keys", keys, ("K",), sizes)
        check_array("values", values, ("K",), sizes)
        if mask is not None:
            check_array("mask", mask, ("Q", "K"), sizes, kind="bool")
        return dtype

    def forward(self, queries: np.ndarray, keys: np.ndarray, values: np.ndarray,
                mask: np.ndarray | None = None) -> np.ndarray:
        dtype = self._check_inputs(queries, keys, values, mask)
        w = as_dtype(self.params["inverse_width"], dtype)[0]
        difference = queries[:, None] - keys[None, :]  # (Q, K)
        scores = -0.5 * (w * difference) ** 2
        alpha = masked_softmax(scores, mask)  # (Q, K)
        self.attention_weights = alpha
        self._cache = (difference, alpha, values, w)
        return alpha @ values  # (Q,)

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gradients of ``queries``, ``keys`` and ``values``; ``inverse_width``'s into ``grads``."""
        difference, alpha, values, w = self._cache
        dvalues = alpha.T @ dout  # (K,)
        dscores = softmax_backward(alpha, dout[:, None] * values[None, :])  # (Q, K)
        self.grads["inverse_width"][...] = -(dscores * w * difference ** 2).sum()
        ddifference = -(w ** 2) * difference * dscores  # (Q, K)
        return ddifference.sum(axis=1), -ddifference.sum(axis=0), dvalues
