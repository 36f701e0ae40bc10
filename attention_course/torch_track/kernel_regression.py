"""Nadaraya-Watson kernel regression in torch: the same name, parameter and equations as
``attention_course.numpy_track.kernel_regression`` (read its docstring); autograd does the
backward pass::

    e_ij = -(omega (q_i - k_j))^2 / 2,   alpha_ij = softmax_j(e_ij),   f(q_i) = sum_j alpha_ij v_j
"""

from __future__ import annotations

import torch
from torch import nn

from .base import check_tensor, resolve_dtype
from .layers import masked_softmax

__all__ = ["KernelRegression"]


class KernelRegression(nn.Module):
    """Nadaraya-Watson regression with a Gaussian kernel of learned inverse width ``omega`` (``inverse_width``).

    Shapes:
        queries: (Q,).  keys: (K,).  values: (K,).  mask: (Q, K) bool or None.
        inverse_width: (1,).
        returns: (Q,); ``attention_weights``: (Q, K), detached.
    """

    def __init__(self, inverse_width: float = 1.0, dtype=torch.float64) -> None:
        super().__init__()
        if not inverse_width > 0:
            raise ValueError(f"inverse_width must be > 0, got {inverse_width}")
        self.inverse_width = nn.Parameter(torch.tensor([inverse_width], dtype=resolve_dtype(dtype)))
        self.attention_weights = None

    @staticmethod
    def _check_inputs(queries, keys, values, mask) -> None:
        """Check the shapes: a wrong one raises a ``ShapeError`` naming it."""
        sizes = check_tensor("queries", queries, ("Q",))
        sizes = check_tensor("keys", keys, ("K",), sizes)
        check_tensor("values", values, ("K",), sizes)
        if mask is not None:
            check_tensor("mask", mask, ("Q", "K"), sizes, kind="bool")

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        self._check_inputs(queries, keys, values, mask)
        difference = queries[:, None] - keys[None, :]  # (Q, K)
        alpha = masked_softmax(-0.5 * (self.inverse_width * difference) ** 2, mask)  # (Q, K)
        self.attention_weights = alpha.detach()
        return alpha @ values  # (Q,)
