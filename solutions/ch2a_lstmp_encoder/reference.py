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


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the gradient
# at r_t taken from drs[:, t] alone, dropping what step t + 1 sends back through W_h, so the recurrence through
# the projection carries nothing back in time. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "what step t + 1 sends back to r_t through W_h is dropped: only drs[:, t] reaches r_t",
    "message": "add what step t + 1 sends back",
    "answers": {"lstmp_encoder_backward": """
        xs, W_x, W_h, W_r, steps = cache
        dxs = np.zeros_like(xs)
        dW_x, dW_h, dW_r = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros_like(W_r)
        db = np.zeros_like(W_x[0])
        dr_prev = np.zeros_like(drs[:, 0])
        dc_next = np.zeros_like(steps[0][1])
        for t in range(xs.shape[1] - 1, -1, -1):
            r_prev, c_prev, i, f, g, o, tanh_c, h = steps[t]
            dr = drs[:, t]
            dW_r += h.T @ dr
            dh = dr @ W_r.T
            dc = dc_next + dh * o * (1.0 - tanh_c ** 2)
            da = np.concatenate([dc * g * i * (1.0 - i), dc * c_prev * f * (1.0 - f), dc * i * (1.0 - g ** 2),
                                 dh * tanh_c * o * (1.0 - o)], axis=1)
            dxs[:, t] = da @ W_x.T
            dW_x += xs[:, t].T @ da
            dW_h += r_prev.T @ da
            db += da.sum(axis=0)
            dr_prev, dc_next = da @ W_h.T, dc * f
        return dxs, dr_prev, dc_next, dW_x, dW_h, db, dW_r
    """},
}
