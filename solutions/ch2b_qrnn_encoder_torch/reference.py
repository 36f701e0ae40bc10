"""The judge's own quasi-recurrent encoder for ch2b_qrnn_encoder_torch: every gate from a sum over the
filter's taps written out step by step, the pooling one sentence at a time up to its length (so no
padding is ever read), gradients by autograd.

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


def _gates(xs, W, b):
    width, _, three_h = W.shape
    H = three_h // 3
    N, T, _ = xs.shape
    steps = []
    for t in range(T):
        total = b.expand(N, three_h)
        for tap in range(width):
            if t - tap >= 0:
                total = total + xs[:, t - tap] @ W[tap]
        steps.append(total)
    pre = torch.stack(steps, dim=1)
    return torch.tanh(pre[..., :H]), torch.sigmoid(pre[..., H:2 * H]), torch.sigmoid(pre[..., 2 * H:])


def _pool(z, f, o, lengths):
    N, T, H = z.shape
    rows, cells = [], []
    for n in range(N):
        c = z.new_zeros(H)
        states = []
        for t in range(int(lengths[n])):
            c = f[n, t] * c + (1 - f[n, t]) * z[n, t]
            states.append(o[n, t] * c)
        rows.append(torch.stack(states + [z.new_zeros(H)] * (T - int(lengths[n]))))
        cells.append(c)
    return torch.stack(rows), torch.stack(cells)


def gates(xs, W, b, douts=None):
    """(z, f, o), each (N, T, H); with ``douts`` (three arrays) also the gradients for (xs, W, b)."""
    leaves = [_leaf(v) for v in (xs, W, b)]
    out = _gates(*leaves)
    values = [v.detach().numpy() for v in out]
    return values if douts is None else (values, _grads(list(out), leaves, douts))


def pool(z, f, o, lengths, d_states=None, d_cell=None):
    """(states, last cell); with the upstream gradients also the gradients for (z, f, o)."""
    leaves = [_leaf(v) for v in (z, f, o)]
    states, cell = _pool(*leaves, lengths)
    values = [states.detach().numpy(), cell.detach().numpy()]
    return values if d_states is None else (values, _grads([states, cell], leaves, [d_states, d_cell]))


def encode(xs, lengths, W, b, d_states=None, d_cell=None):
    """(states, last cell) of the whole encoder; with the upstream gradients also those for (xs, W, b)."""
    leaves = [_leaf(v) for v in (xs, W, b)]
    states, cell = _pool(*_gates(*leaves), lengths)
    values = [states.detach().numpy(), cell.detach().numpy()]
    return values if d_states is None else (values, _grads([states, cell], leaves, [d_states, d_cell]))


def parameters(width, D, H, seed, scale=1.0):
    """Random float64 (W, b): W (width, D, 3H), b (3H,)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((width, D, 3 * H)) * scale, rng.standard_normal(3 * H) * scale]


def gate_values(N, T, H, seed):
    """Random (z, f, o) in the ranges of tanh and the sigmoid."""
    rng = np.random.default_rng(seed)
    return [np.tanh(rng.standard_normal((N, T, H)) * 2)] + \
        [1 / (1 + np.exp(-rng.standard_normal((N, T, H)) * 2)) for _ in range(2)]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): an
# unmasked (centred) convolution, whose gates at step t see later inputs. A visible test must fail on it
# with a message that holds "message".
CORE_MISTAKE = {
    "what": "the convolution is not masked: a centred window lets step t see later inputs",
    "message": "sees no later input",
    "answers": {"qrnn_gates": """
        k, D, _ = W.shape
        N, T, _ = xs.shape
        H = b.shape[0] // 3
        padded = torch.cat([xs.new_zeros((N, k - 1 - k // 2, D)), xs, xs.new_zeros((N, k // 2, D))], dim=1)
        pre = b + sum(padded[:, k - 1 - m:k - 1 - m + T] @ W[m] for m in range(k))
        return torch.tanh(pre[..., :H]), torch.sigmoid(pre[..., H:2 * H]), torch.sigmoid(pre[..., 2 * H:])
    """},
}
