"""The judge's own LSTMP encoder for ch2a_lstmp_encoder: written in torch, every gradient by autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def inputs(N, T, D, H, P, seed, scale=1.0):
    """Random float64 (xs, r0, c0, W_x, W_h, b, W_r), the weights of size ``scale``."""
    rng = np.random.default_rng(seed)
    shapes = [(N, T, D), (N, P), (N, H), (D, 4 * H), (P, 4 * H), (4 * H,), (H, P)]
    return [rng.standard_normal(shape) * (scale if k >= 3 else 1.0) for k, shape in enumerate(shapes)]


def encode(xs, r0, c0, W_x, W_h, b, W_r, d_rs=None):
    """Every projected state r_1..r_T, (N, T, P); with ``d_rs`` also the gradients of sum(d_rs * rs)
    for (xs, r0, c0, W_x, W_h, b, W_r), in that order."""
    leaves = [torch.tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in (xs, r0, c0, W_x, W_h, b, W_r)]
    xs_t, r, c, W_x_t, W_h_t, b_t, W_r_t = leaves
    projected = []
    for t in range(xs_t.shape[1]):
        pre_in, pre_forget, pre_cand, pre_out = torch.chunk(xs_t[:, t] @ W_x_t + r @ W_h_t + b_t, 4, dim=-1)
        c = torch.sigmoid(pre_forget) * c + torch.sigmoid(pre_in) * torch.tanh(pre_cand)
        r = (torch.sigmoid(pre_out) * torch.tanh(c)) @ W_r_t
        projected.append(r)
    rs = torch.stack(projected, dim=1)
    if d_rs is None:
        return rs.detach().numpy()
    grads = torch.autograd.grad(rs, leaves, torch.tensor(np.array(d_rs, dtype=np.float64)))
    return rs.detach().numpy(), [g.numpy() for g in grads]
