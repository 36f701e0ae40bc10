"""The judge's own sparsemax for ch4b_sparsemax_torch: the threshold found by bisection, then made exact
from the support it selects, one row at a time in NumPy; the Jacobian from Martins & Astudillo's
formula.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np


def _row(z):
    """sparsemax of one row of real scores (at least one)."""
    low, high = z.max() - 1.0, z.max()  # sum(max(z - tau, 0)) is 1 somewhere in between
    for _ in range(200):
        middle = (low + high) / 2
        if np.maximum(z - middle, 0).sum() > 1:
            low = middle
        else:
            high = middle
    support = z > low
    tau = (z[support].sum() - 1) / support.sum()
    return np.maximum(z - tau, 0)


def sparsemax(scores, mask):
    """Sparsemax over the last axis among the positions where ``mask`` (broadcast) is True; rows
    with no such position are all zeros."""
    scores = np.asarray(scores, dtype=np.float64)
    real = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    out = np.zeros_like(scores)
    for index in np.ndindex(scores.shape[:-1]):
        if real[index].any():
            out[index][real[index]] = _row(scores[index][real[index]])
    return out


def jacobian_vector(weights, dweights):
    """d(scores) for upstream d(weights): on the support S, dw_j - mean_S(dw); zero elsewhere."""
    weights, dweights = np.asarray(weights, dtype=np.float64), np.asarray(dweights, dtype=np.float64)
    out = np.zeros_like(weights)
    for index in np.ndindex(weights.shape[:-1]):
        support = weights[index] > 0
        if support.any():
            out[index][support] = dweights[index][support] - dweights[index][support].mean()
    return out


def scores_with_ties(N, T_dec, T_enc, seed, spread=1.0):
    """Random scores (N, T_dec, T_enc) of the given spread."""
    return np.random.default_rng(seed).standard_normal((N, T_dec, T_enc)) * spread


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the
# threshold taken over every real position, as if all were in the support (the projection onto the plane
# sum(p) = 1, then clipped), so the weights neither sum to one nor find the support. A visible test must
# fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the threshold is computed over every real position, not over the support k(z)",
    "message": "the support is",
    "answers": {"masked_sparsemax": """
        real = mask[:, None, :].expand_as(scores)
        count = real.sum(dim=-1, keepdim=True)
        total = torch.where(real, scores, torch.zeros_like(scores)).sum(dim=-1, keepdim=True)
        tau = (total - 1) / count.clamp(min=1).to(scores.dtype)
        weights = torch.clamp(scores - tau, min=0)
        return torch.where(real, weights, torch.zeros_like(weights))
    """},
}
