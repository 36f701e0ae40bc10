"""The judge's own recurrent highway network (ch7b, Zilly et al. 2017): one example at a time, each micro-layer
written out with the input term only where it belongs; the gradient norms from the micro-layers' Jacobians,
multiplied back from the top (torch.autograd.functional.jacobian), not from autograd's intermediate gradients.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def parameters(D, H, L, seed, scale=1.0):
    """Random float64 (W_H, W_T, R_H, R_T, b_H, b_T)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) * scale for shape in ((D, H), (D, H), (L, H, H), (L, H, H))] + \
        [rng.standard_normal((L, H)) for _ in range(2)]


def _tensors(values):
    return [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in values]


def _micro_layer(x_term_h, x_term_t, s, R_H, R_T, b_H, b_T):
    """One micro-layer for one example: s (H,), the input's terms already computed (or zero)."""
    h = torch.tanh(x_term_h + s @ R_H + b_H)
    t = 1 / (1 + torch.exp(-(x_term_t + s @ R_T + b_T)))
    return t * h + (1 - t) * s


def _step(x, s, W_H, W_T, R_H, R_T, b_H, b_T):
    """s_L for one example (x (D,), s (H,))."""
    for layer in range(R_H.shape[0]):
        if layer == 0:
            s = _micro_layer(x @ W_H, x @ W_T, s, R_H[0], R_T[0], b_H[0], b_T[0])
        else:
            s = _micro_layer(0.0, 0.0, s, R_H[layer], R_T[layer], b_H[layer], b_T[layer])
    return s


def rhn_step(x, s_prev, W_H, W_T, R_H, R_T, b_H, b_T, dout):
    """(s (N, H), the gradients of sum(dout * s) for the eight inputs, in order)."""
    leaves = _tensors([x, s_prev, W_H, W_T, R_H, R_T, b_H, b_T])
    out = torch.stack([_step(leaves[0][n], leaves[1][n], *leaves[2:]) for n in range(leaves[0].shape[0])])
    grads = torch.autograd.grad((out * torch.as_tensor(np.asarray(dout, dtype=np.float64))).sum(), leaves)
    return out.detach().numpy(), [g.numpy() for g in grads]


def transition_gradient_norms(x, s_prev, W_H, W_T, R_H, R_T, b_H, b_T, dout):
    """(L + 1,) norms of dL/ds_l, L = sum(dout * s_L): the upstream gradient carried down through each
    micro-layer's Jacobian, example by example."""
    x, s_prev, W_H, W_T, R_H, R_T, b_H, b_T = (torch.tensor(np.asarray(v, dtype=np.float64))
                                               for v in (x, s_prev, W_H, W_T, R_H, R_T, b_H, b_T))
    L = R_H.shape[0]
    per_level = [[] for _ in range(L + 1)]
    for n in range(x.shape[0]):
        states = [s_prev[n]]
        maps = []
        for layer in range(L):
            x_h, x_t = (x[n] @ W_H, x[n] @ W_T) if layer == 0 else (0.0, 0.0)

            def micro(s, layer=layer, x_h=x_h, x_t=x_t):
                return _micro_layer(x_h, x_t, s, R_H[layer], R_T[layer], b_H[layer], b_T[layer])

            maps.append(micro)
            states.append(micro(states[-1]))
        delta = torch.as_tensor(np.asarray(dout, dtype=np.float64)[n])
        per_level[L].append(delta)
        for layer in reversed(range(L)):
            jacobian = torch.autograd.functional.jacobian(maps[layer], states[layer])  # (H, H): d s_{l+1} / d s_l
            delta = jacobian.T @ delta
            per_level[layer].append(delta)
    return np.array([float(torch.linalg.norm(torch.stack(level))) for level in per_level])


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the input fed
# into every micro-layer, which makes the step a stack of L highway layers over x rather than one transition of
# depth L. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the input enters every micro-layer, not only the first",
    "message": "x enters the first micro-layer only",
    "answers": {"rhn_step": """
        s = s_prev
        for layer in range(R_H.shape[0]):
            gate = torch.sigmoid(x @ W_T + s @ R_T[layer] + b_T[layer])
            s = torch.tanh(x @ W_H + s @ R_H[layer] + b_H[layer]) * gate + s * (1 - gate)
        return s
    """},
}
