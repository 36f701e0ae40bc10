"""Attention as functions: the from-scratch version to read, and the fast one to run.

``scaled_dot_product_attention_reference`` is the equation written out:
``softmax(Q K^T / sqrt(d)) V`` with padding masked. ``scaled_dot_product_attention`` computes
the same thing with ``torch.nn.functional.scaled_dot_product_attention`` (flash or
memory-efficient kernels on a GPU), and adds what the course's masks promise: a query with no
key to attend to gets a zero output, never NaN.

Shapes (any leading dimensions, e.g. (N, h, T, d) for several heads):
    query: (..., T_q, d).  key: (..., T_k, d).  value: (..., T_k, d_v).
    mask: bool, True where a key takes part, broadcastable to (..., T_q, T_k); e.g. (N, 1, T_k).
    returns: (..., T_q, d_v).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .layers import masked_softmax

__all__ = ["scaled_dot_product_attention", "scaled_dot_product_attention_reference"]


def scaled_dot_product_attention_reference(
        query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
        mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q K^T / sqrt(d)) V``, step by step.

    Returns ``(output, attention_weights)``.
    """
    d = query.shape[-1]
    scores = query @ key.transpose(-1, -2) / math.sqrt(d)  # (..., T_q, T_k)
    weights = masked_softmax(scores, mask)
    return weights @ value, weights


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


# From torch 2.5 on, SDPA's CPU kernels give a query with no key a zero output (a "safe"
# softmax); the CUDA memory-efficient kernel in bfloat16 does not (seen with torch 2.11 on an
# H200), nor does anything before 2.5: there the course mends it.
SDPA_ZEROES_EMPTY_ROWS_ON_CPU = _version(torch.__version__) >= (2, 5)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor,
                                 value: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """The fast path: ``F.scaled_dot_product_attention``, fully masked rows giving
    zeros."""
    safe_kernel = SDPA_ZEROES_EMPTY_ROWS_ON_CPU and query.device.type == "cpu"
    if mask is None or safe_kernel:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    # A query row whose keys are all masked: let it see every key (no NaN), then zero
    # its output. No branch on whether such a row exists: that would cost a device sync
    # at every call.
    anything = mask.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask | ~anything)
    return torch.where(anything, out, 0.0)
