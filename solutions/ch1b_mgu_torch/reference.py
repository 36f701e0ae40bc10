"""The judge's own minimal gated unit for ch1b_mgu_torch: one sequence at a time, up to its length,
so that no padding is ever read; gradients by autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def _leaf(value):
    return torch.tensor(np.array(value, dtype=np.float64), requires_grad=True)


def parameters(D, H, seed, scale=1.0):
    """Random float64 (W_x, W_h, b)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) * scale for shape in ((D, 2 * H), (H, 2 * H), (2 * H,))]


def _unit(x, h, W_x, W_h, b):
    width = h.shape[-1]
    forget = torch.sigmoid(x @ W_x[:, :width] + h @ W_h[:, :width] + b[:width])
    candidate = torch.tanh(x @ W_x[:, width:] + (forget * h) @ W_h[:, width:] + b[width:])
    return h + forget * (candidate - h)


def step(x, h_prev, W_x, W_h, b, dout=None):
    """h_new; with ``dout`` also the gradients of sum(dout * h_new) for (x, h_prev, W_x, W_h, b)."""
    leaves = [_leaf(v) for v in (x, h_prev, W_x, W_h, b)]
    out = _unit(*leaves)
    if dout is None:
        return out.detach().numpy()
    grads = torch.autograd.grad(out, leaves, torch.tensor(np.array(dout, dtype=np.float64)))
    return out.detach().numpy(), [g.numpy() for g in grads]


def encode(xs, lengths, h0, W_x, W_h, b, d_states=None, d_last=None):
    """(states (N, T, H), last (N, H)) of sequences of the given lengths; with the upstream gradients,
    also the gradients for (xs, h0, W_x, W_h, b)."""
    leaves = [_leaf(v) for v in (xs, h0, W_x, W_h, b)]
    xs_t, h0_t, W_x_t, W_h_t, b_t = leaves
    N, T, _ = xs_t.shape
    rows, lasts = [], []
    for n in range(N):
        h = h0_t[n:n + 1]
        states = []
        for t in range(int(lengths[n])):
            h = _unit(xs_t[n:n + 1, t], h, W_x_t, W_h_t, b_t)
            states.append(h[0])
        padding = [torch.zeros_like(h0_t[n])] * (T - int(lengths[n]))
        rows.append(torch.stack(states + padding) if T else xs_t.new_zeros((0, h0_t.shape[1])))
        lasts.append(h[0])
    states, last = torch.stack(rows), torch.stack(lasts)
    if d_states is None:
        return states.detach().numpy(), last.detach().numpy()
    grads = torch.autograd.grad([states, last], leaves, [torch.tensor(np.array(d_states, dtype=np.float64)),
                                                          torch.tensor(np.array(d_last, dtype=np.float64))],
                                allow_unused=True)
    grads = [torch.zeros_like(leaf) if g is None else g for leaf, g in zip(leaves, grads)]
    return states.detach().numpy(), last.detach().numpy(), [g.numpy() for g in grads]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the
# previous state taken out of torch's graph, so the encoder's gradient never flows back in time. A
# visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the step detaches the previous state: no gradient flows back through time",
    "message": "no gradient reaches h_prev",
    "answers": {"mgu_step": """
        H = h_prev.shape[-1]
        h_prev = h_prev.detach()
        f = torch.sigmoid(x @ W_x[:, :H] + h_prev @ W_h[:, :H] + b[:H])
        candidate = torch.tanh(x @ W_x[:, H:] + (f * h_prev) @ W_h[:, H:] + b[H:])
        return (1 - f) * h_prev + f * candidate
    """},
}
