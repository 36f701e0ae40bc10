"""The judge's own location-sensitive attention step for ch5a_location_attention: the convolution as a
sum over the kernel's taps with explicit bounds (or, for the checks at a realistic size, torch's
conv1d) of the previous weights on the real positions only, the masked softmax in log space, gradients
by torch's autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch

NAMES = ("s", "hs", "alpha_prev", "W_s", "W_h", "Q", "b", "w")


def inputs(N, T, H_dec, H_enc, A, width, lengths, seed, scale=1.0):
    """Random float64 (s, hs, alpha_prev, W_s, W_h, Q, b, w) and the mask; alpha_prev is a distribution
    over each source's real positions, as the previous step's weights are."""
    rng = np.random.default_rng(seed)
    mask = np.arange(T)[None, :] < np.asarray(lengths)[:, None]
    logits = rng.standard_normal((N, T)) * 2
    alpha_prev = np.where(mask, np.exp(logits), 0.0)
    alpha_prev /= np.maximum(alpha_prev.sum(axis=1, keepdims=True), 1e-300)
    arrays = [rng.standard_normal((N, H_dec)), rng.standard_normal((N, T, H_enc)), alpha_prev,
              rng.standard_normal((H_dec, A)) * scale / np.sqrt(H_dec),
              rng.standard_normal((H_enc, A)) * scale / np.sqrt(H_enc),
              rng.standard_normal((width, A)) * scale * 2, rng.standard_normal(A) * 0.5 * scale,
              rng.standard_normal(A) * scale]
    return arrays, mask


def _location_by_taps(prev_t, Q_t):
    """f_j = sum over the taps m of alpha_prev[j + m - half] Q[m], the bounds written out: (N, T, A)."""
    N, T = prev_t.shape
    width = Q_t.shape[0]
    half = (width - 1) // 2
    location = prev_t.new_zeros((N, T, Q_t.shape[1]))
    for tap in range(width):
        for j in range(T):
            source = j + tap - half
            if 0 <= source < T:
                location[:, j] = location[:, j] + prev_t[:, source, None] * Q_t[tap]
    return location


def _location_by_convolution(prev_t, Q_t):
    """The same features from torch's conv1d (a cross-correlation, zero-padded by half the width on each
    side): one call for the whole batch, for the checks at a realistic size."""
    kernels = Q_t.T[:, None, :]  # (A, 1, width): one output channel per attention unit
    return torch.nn.functional.conv1d(prev_t[:, None, :], kernels, padding=(Q_t.shape[0] - 1) // 2).transpose(1, 2)


def step(s, hs, alpha_prev, W_s, W_h, Q, b, w, mask, dcontext=None, dalpha=None, convolution=False):
    """(context, alpha); with the upstream gradients also the gradients for the eight float inputs.
    ``convolution``: the location features from ``conv1d`` rather than tap by tap (the same values,
    fast at a realistic size)."""
    leaves = [torch.tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in (s, hs, alpha_prev, W_s, W_h, Q, b, w)]
    s_t, hs_t, prev_t, W_s_t, W_h_t, Q_t, b_t, w_t = leaves
    real = torch.tensor(np.array(mask, dtype=bool))
    counted = torch.where(real, prev_t, torch.zeros_like(prev_t))  # alpha_prev counts on the real positions only
    location = (_location_by_convolution if convolution else _location_by_taps)(counted, Q_t)
    scores = torch.tanh((s_t @ W_s_t)[:, None, :] + hs_t @ W_h_t + location + b_t) @ w_t  # (N, T)
    logits = torch.where(real, scores, torch.full_like(scores, -np.inf))
    has_real = real.any(dim=1, keepdim=True)
    logits = torch.where(has_real, logits, torch.zeros_like(logits))
    alpha = torch.where(real, torch.exp(logits - torch.logsumexp(logits, dim=1, keepdim=True)), torch.zeros_like(scores))
    context = torch.einsum("nj,njh->nh", alpha, hs_t)
    if dcontext is None:
        return context.detach().numpy(), alpha.detach().numpy()
    grads = torch.autograd.grad([context, alpha], leaves, [torch.tensor(np.array(dcontext, dtype=np.float64)),
                                                           torch.tensor(np.array(dalpha, dtype=np.float64))])
    return context.detach().numpy(), alpha.detach().numpy(), [g.numpy() for g in grads]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the kernel run
# the other way (a convolution where the equation correlates), with a backward pass that agrees with it, so that
# a check of the backward pass against the forward pass cannot see it. A visible test must fail on it with a
# message that holds "message".
CORE_MISTAKE = {
    "what": "the kernel runs the other way (tap m meets alpha_prev[j - m + (r - 1) / 2]), forward and backward agreeing",
    "message": "a correlation, as written",
    "answers": {"location_attention_forward": """
        T = hs.shape[1]
        r = Q.shape[0]
        half = (r - 1) // 2
        padded = np.pad(np.where(mask, alpha_prev, 0.0), ((0, 0), (half, half)))
        windows = np.stack([padded[:, r - 1 - m:r - 1 - m + T] for m in range(r)], axis=-1)
        act = np.tanh((s @ W_s)[:, None, :] + hs @ W_h + windows @ Q + b)
        alpha = masked_softmax(act @ w, mask)
        return np.einsum("nj,njh->nh", alpha, hs), alpha, (s, hs, W_s, W_h, Q, w, windows, act, alpha, mask)
    """, "location_attention_backward": """
        s, hs, W_s, W_h, Q, w, windows, act, alpha, mask = cache
        T = hs.shape[1]
        r = Q.shape[0]
        half = (r - 1) // 2
        dscores = softmax_backward(alpha, dalpha + np.einsum("njh,nh->nj", hs, dcontext))
        dpre = dscores[:, :, None] * w * (1.0 - act ** 2)
        d_query = dpre.sum(axis=1)
        dwindows = dpre @ Q.T
        dpadded = np.zeros((alpha.shape[0], T + r - 1))
        for m in range(r):
            dpadded[:, r - 1 - m:r - 1 - m + T] += dwindows[:, :, m]
        return (d_query @ W_s.T, alpha[:, :, None] * dcontext[:, None, :] + dpre @ W_h.T, dpadded[:, half:half + T] * mask,
                s.T @ d_query, np.einsum("njh,nja->ha", hs, dpre), np.einsum("njm,nja->ma", windows, dpre),
                dpre.sum(axis=(0, 1)), np.einsum("nja,nj->a", act, dscores))
    """},
}
