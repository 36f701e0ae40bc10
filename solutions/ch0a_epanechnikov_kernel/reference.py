"""The judge's own Epanechnikov estimate for ch0a_epanechnikov_kernel: the kernel as a clamp, the masked
sum as a product, written in torch, every gradient by autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def inputs(Q, K, h, seed, masked=False):
    """Random float64 (queries, keys, values, bandwidth) and a bool mask: the queries spread over and
    beyond the keys (some with no key within ``h``), with ``masked`` about a quarter of the pairs masked."""
    rng = np.random.default_rng(seed)
    keys = rng.uniform(-2.0, 2.0, K)
    queries = rng.uniform(-3.0, 3.0, Q)
    values = rng.standard_normal(K)
    mask = rng.random((Q, K)) > 0.25 if masked else np.ones((Q, K), dtype=bool)
    return [queries, keys, values, np.array([float(h)]), mask]


def _estimates(queries, keys, values, bandwidth, mask):
    q, k, v, h = (torch.tensor(np.array(x, dtype=np.float64), requires_grad=True)
                  for x in (queries, keys, values, bandwidth))
    allowed = torch.tensor(np.array(mask, dtype=bool)).to(torch.float64)
    kernel = torch.clamp(1.0 - ((q.unsqueeze(1) - k.unsqueeze(0)) / h) ** 2, min=0.0) * allowed  # (Q, K)
    total = kernel.sum(dim=1)
    found = total > 0
    estimates = torch.where(found, (kernel @ v) / torch.where(found, total, torch.ones_like(total)),
                            torch.zeros_like(total))
    return estimates, (q, k, v, h)


def estimates(queries, keys, values, bandwidth, mask):
    """The estimates (Q,)."""
    return _estimates(queries, keys, values, bandwidth, mask)[0].detach().numpy()


def gradients(queries, keys, values, bandwidth, mask, d_estimates):
    """The gradients of sum(d_estimates * estimates) with respect to (queries, keys, values, bandwidth)."""
    out, leaves = _estimates(queries, keys, values, bandwidth, mask)
    grads = torch.autograd.grad(out, leaves, torch.tensor(np.array(d_estimates, dtype=np.float64)))
    return [grad.numpy() for grad in grads]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the weights'
# normalisation forgotten in the backward pass, d f_i / d a_ij = v_j / sum_l a_il without the - f_i of the quotient
# rule. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the quotient rule's - f_i is left out: d f_i / d a_ij taken as v_j / sum_l a_il",
    "message": "by the quotient rule",
    "answers": {"epanechnikov_backward": """
        u, a, total, weights, values, estimates, h = cache
        safe = np.where(total > 0, total, 1.0)
        d_a = d_estimates[:, None] * values[None, :] / safe[:, None]
        d_u = np.where(a > 0, -2.0 * u * d_a, 0.0)
        return d_u.sum(axis=1) / h, -d_u.sum(axis=0) / h, weights.T @ d_estimates, np.array([-(d_u * u).sum() / h])
    """},
}
