"""The judge's own input-feeding decoder for ch5b_input_feeding_torch: one example at a time, the
attention over the real source positions only (no mask needed), the concatenations written as
sums of products with the blocks of each matrix; gradients by autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch

PARAMETERS = ("W_x", "W_h", "b", "W_a", "W_c", "b_c")


def parameters(D, H, H_enc, seed, scale=1.0):
    """Random float64 (W_x, W_h, b, W_a, W_c, b_c)."""
    rng = np.random.default_rng(seed)
    shapes = [(D + H, H), (H, H), (H,), (H, H_enc), (H_enc + H, H), (H,)]
    return [rng.standard_normal(shape) * scale / np.sqrt(shape[0]) if len(shape) == 2 else
            rng.standard_normal(shape) * 0.5 for shape in shapes]


def _leaves(values):
    return [torch.tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in values]


def _step(y, s_prev, feed, states, W_x, W_h, b, W_a, W_c, b_c):
    """One example: y (D,), s_prev (H,), feed (H,), states (L, H_enc) of its real positions only."""
    D, H_enc = y.shape[0], states.shape[1]
    s = torch.tanh(y @ W_x[:D] + feed @ W_x[D:] + s_prev @ W_h + b)
    scores = states @ (W_a.T @ s)  # (L,)
    weights = torch.exp(scores - scores.max())
    weights = weights / weights.sum()
    context = weights @ states
    return s, torch.tanh(context @ W_c[:H_enc] + s @ W_c[H_enc:] + b_c), weights


def _grads(outputs, leaves, douts):
    douts = [torch.tensor(np.array(d, dtype=np.float64)) for d in douts]
    grads = torch.autograd.grad(outputs, leaves, douts, allow_unused=True)
    return [(torch.zeros_like(leaf) if g is None else g).numpy() for leaf, g in zip(leaves, grads)]


def step(y, s_prev, h_tilde_prev, hs, lengths, params, douts=None):
    """(s, h_tilde, alpha) of one step for a batch; with ``douts`` (three arrays) also the gradients
    for (y, s_prev, h_tilde_prev, hs, *params)."""
    leaves = _leaves([y, s_prev, h_tilde_prev, hs, *params])
    y_t, s_t, feed_t, hs_t = leaves[:4]
    T = hs_t.shape[1]
    outs = [[], [], []]
    for n, length in enumerate(lengths):
        s, h_tilde, weights = _step(y_t[n], s_t[n], feed_t[n], hs_t[n, :length], *leaves[4:])
        outs[0].append(s)
        outs[1].append(h_tilde)
        outs[2].append(torch.cat([weights, weights.new_zeros(T - length)]))
    outputs = [torch.stack(o) for o in outs]
    values = [o.detach().numpy() for o in outputs]
    return values if douts is None else (values, _grads(outputs, leaves, douts))


def decode(ys, hs, lengths, s0, params, douts=None):
    """(h_tildes (N, T_dec, H), alphas (N, T_dec, T_enc)), the fed vector starting at zero; with
    ``douts`` (two arrays) also the gradients for (ys, hs, s0, *params)."""
    leaves = _leaves([ys, hs, s0, *params])
    ys_t, hs_t, s0_t = leaves[:3]
    N, T_dec, _ = ys_t.shape
    T = hs_t.shape[1]
    tildes, alphas = [], []
    for n, length in enumerate(lengths):
        s, feed = s0_t[n], s0_t.new_zeros(s0_t.shape[1])
        rows_tilde, rows_alpha = [], []
        for t in range(T_dec):
            s, feed, weights = _step(ys_t[n, t], s, feed, hs_t[n, :length], *leaves[3:])
            rows_tilde.append(feed)
            rows_alpha.append(torch.cat([weights, weights.new_zeros(T - length)]))
        tildes.append(torch.stack(rows_tilde))
        alphas.append(torch.stack(rows_alpha))
    outputs = [torch.stack(tildes), torch.stack(alphas)]
    values = [o.detach().numpy() for o in outputs]
    return values if douts is None else (values, _grads(outputs, leaves, douts))


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the
# chapter's Luong decoder, which feeds nothing back. A visible test must fail on it with a message that
# holds "message".
CORE_MISTAKE = {
    "what": "nothing is fed back: every step gets a zero h_tilde_prev (the chapter's Luong decoder)",
    "message": "must be fed h_tilde",
    "answers": {"input_feeding_decoder": """
        s = s0
        h_tildes, alphas = [], []
        for i in range(ys.shape[1]):
            s, h_tilde, alpha = input_feeding_step(ys[:, i], s, torch.zeros_like(s0), hs, mask, W_x, W_h, b, W_a, W_c, b_c)
            h_tildes.append(h_tilde)
            alphas.append(alpha)
        return torch.stack(h_tildes, dim=1), torch.stack(alphas, dim=1)
    """},
}
