"""The judge's own DRAW read for ch3b_draw_read_torch: each filter row normalised in log space (log-sum-exp),
the glimpse as an explicit double sum over the grid; gradients by autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def _leaf(value):
    return torch.tensor(np.array(value, dtype=np.float64), requires_grad=True)


def _grads(outputs, leaves, douts):
    douts = [torch.tensor(np.array(d, dtype=np.float64)) for d in douts]
    grads = torch.autograd.grad(outputs, leaves, douts, allow_unused=True)
    return [(torch.zeros_like(leaf) if g is None else g).numpy() for leaf, g in zip(leaves, grads)]


def _filterbank(centre, log_delta, log_sigma2, n, size):
    positions = torch.arange(size, dtype=torch.float64)
    rows = []
    for i in range(n):
        mean = centre + (i - (n - 1) / 2) * torch.exp(log_delta)  # (N,)
        logits = -((positions[None, :] - mean[:, None]) ** 2) / (2 * torch.exp(log_sigma2)[:, None])
        rows.append(torch.exp(logits - torch.logsumexp(logits, dim=1, keepdim=True)))
    return torch.stack(rows, dim=1)  # (N, n, size)


def filterbank(centre, log_delta, log_sigma2, n, size, dout=None):
    """The filters (N, n, size); with ``dout`` also the gradients for (centre, log_delta, log_sigma2)."""
    leaves = [_leaf(v) for v in (centre, log_delta, log_sigma2)]
    out = _filterbank(*leaves, n, size)
    return out.detach().numpy() if dout is None else (out.detach().numpy(), _grads([out], leaves, [dout]))


def read(features, g_x, g_y, log_delta, log_sigma2, log_gamma, n, dout=None):
    """The glimpse (N, n, n, D); with ``dout`` also the gradients for every input but ``n``."""
    leaves = [_leaf(v) for v in (features, g_x, g_y, log_delta, log_sigma2, log_gamma)]
    feats, gx, gy, ld, ls, lg = leaves
    N, rows, columns, D = feats.shape
    across = _filterbank(gx, ld, ls, n, columns)  # (N, n, columns)
    down = _filterbank(gy, ld, ls, n, rows)  # (N, n, rows)
    glimpse = feats.new_zeros((N, n, n, D))
    for a in range(rows):
        for c in range(columns):
            glimpse = glimpse + (down[:, :, a][:, :, None, None] * across[:, :, c][:, None, :, None]
                                 * feats[:, a, c][:, None, None, :])
    glimpse = glimpse * torch.exp(lg)[:, None, None, None]
    return glimpse.detach().numpy() if dout is None else (glimpse.detach().numpy(), _grads([glimpse], leaves, [dout]))


def attention_parameters(N, rows, columns, seed, spread=1.0):
    """Random (g_x, g_y, log_delta, log_sigma2, log_gamma): centres inside the grid, and ``spread``
    scaling how far they may wander."""
    rng = np.random.default_rng(seed)
    g_x = rng.uniform(-0.5, columns - 0.5, N) * spread
    g_y = rng.uniform(-0.5, rows - 0.5, N) * spread
    return [g_x, g_y, rng.normal(0.0, 0.5, N), rng.normal(0.0, 0.7, N), rng.normal(0.0, 0.3, N)]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): each
# filter normalised as written, exp over its sum, which is 0 / 0 once the centre is far outside the grid.
# A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "each filter normalised as exp over its sum, not stably: NaN for a centre far outside the grid",
    "message": "normalise stably",
    "answers": {"gaussian_filterbank": """
        offsets = torch.arange(n, dtype=centre.dtype) - (n - 1) / 2
        means = centre[:, None] + offsets[None, :] * torch.exp(log_delta)[:, None]
        positions = torch.arange(size, dtype=centre.dtype)
        weights = torch.exp(-(positions[None, None, :] - means[:, :, None]) ** 2 / (2 * torch.exp(log_sigma2)[:, None, None]))
        return weights / weights.sum(dim=-1, keepdim=True)
    """},
}
