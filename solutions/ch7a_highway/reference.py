"""The judge's own highway layer (ch7a): one position at a time (or, for the checks at a realistic size, the
whole batch at once), gradients by torch's autograd."""

import numpy as np
import torch


def _as_tensors(*arrays):
    return [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]


def _layer(xs, mask, W_H, b_H, W_T, b_T):
    """The layer's outputs (N, T, D), built position by position (zeros on padding)."""
    N, T, D = xs.shape
    rows = []
    for n in range(N):
        row = []
        for t in range(T):
            x = xs[n, t]
            if mask[n, t]:
                transform = torch.sigmoid(x @ W_T + b_T)
                row.append(transform * torch.tanh(x @ W_H + b_H) + (1 - transform) * x)
            else:
                row.append(torch.zeros(D, dtype=torch.float64))
        rows.append(torch.stack(row))
    return torch.stack(rows)


def _layer_at_once(xs, mask, W_H, b_H, W_T, b_T):
    """The same outputs, every position in one pass (zeros on the padding)."""
    transform = torch.sigmoid(xs @ W_T + b_T)
    ys = transform * torch.tanh(xs @ W_H + b_H) + (1 - transform) * xs
    return torch.where(torch.as_tensor(mask)[:, :, None], ys, torch.zeros_like(ys))


def highway(xs, mask, W_H, b_H, W_T, b_T):
    tensors = _as_tensors(xs, W_H, b_H, W_T, b_T)
    return _layer(tensors[0], np.asarray(mask), *tensors[1:]).detach().numpy()


def highway_gradients(xs, mask, W_H, b_H, W_T, b_T, dys, at_once=False):
    """(dxs, dW_H, db_H, dW_T, db_T). ``at_once``: every position in one pass (the same values, fast at a
    realistic size)."""
    tensors = _as_tensors(xs, W_H, b_H, W_T, b_T)
    ys = (_layer_at_once if at_once else _layer)(tensors[0], np.asarray(mask), *tensors[1:])
    return [g.numpy() for g in torch.autograd.grad((ys * torch.as_tensor(dys)).sum(), tensors)]


def highway_gradient_norms(xs, mask, layers, dys, at_once=False):
    """[||dL/dx_0||, ..., ||dL/dx_L||] for L = sum(dys * x_L), by autograd through the whole stack.
    ``at_once``: each layer over every position in one pass."""
    mask = np.asarray(mask)
    layer_of = _layer_at_once if at_once else _layer
    levels = [torch.tensor(np.asarray(xs, dtype=np.float64), requires_grad=True)]
    for layer in layers:
        W_H, b_H, W_T, b_T = (torch.as_tensor(np.asarray(layer[key], dtype=np.float64))
                              for key in ("W_H", "b_H", "W_T", "b_T"))
        levels.append(layer_of(levels[-1], mask, W_H, b_H, W_T, b_T))
    grads = torch.autograd.grad((levels[-1] * torch.as_tensor(dys)).sum(), levels)
    # the top's own gradient is dys where the top depends on it: the real positions
    grads = list(grads[:-1]) + [torch.as_tensor(np.where(mask[:, :, None], dys, 0.0))]
    return np.array([float(torch.linalg.norm(g)) for g in grads])


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the gate's path
# left out of dxs, as if t did not depend on x (only the transform and the carry path send the input a gradient).
# A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the gate's path is left out of dxs (t treated as if it did not depend on x)",
    "message": "through the gate t",
    "answers": {"highway_backward": """
        xs, keep, transformed, gate, W_H, W_T = cache
        dys = np.where(keep, dys, 0.0)
        d_h_pre = dys * gate * (1 - transformed ** 2)
        d_t_pre = dys * (transformed - xs) * gate * (1 - gate)
        dxs = dys * (1 - gate) + d_h_pre @ W_H.T
        return (dxs, np.einsum("ntd,nte->de", xs, d_h_pre), d_h_pre.sum(axis=(0, 1)), np.einsum("ntd,nte->de", xs, d_t_pre),
                d_t_pre.sum(axis=(0, 1)))
    """},
}
