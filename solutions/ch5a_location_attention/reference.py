"""The judge's own location-sensitive attention step for ch5a_location_attention: the convolution as a
sum over the kernel's taps with explicit bounds, the masked softmax in log space, gradients by
torch's autograd.

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


def step(s, hs, alpha_prev, W_s, W_h, Q, b, w, mask, dcontext=None, dalpha=None):
    """(context, alpha); with the upstream gradients also the gradients for the eight float inputs."""
    leaves = [torch.tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in (s, hs, alpha_prev, W_s, W_h, Q, b, w)]
    s_t, hs_t, prev_t, W_s_t, W_h_t, Q_t, b_t, w_t = leaves
    N, T, _ = hs_t.shape
    width = Q_t.shape[0]
    half = (width - 1) // 2
    location = hs_t.new_zeros((N, T, Q_t.shape[1]))
    for tap in range(width):
        for j in range(T):
            source = j + tap - half
            if 0 <= source < T:
                location[:, j] = location[:, j] + prev_t[:, source, None] * Q_t[tap]
    scores = torch.tanh((s_t @ W_s_t)[:, None, :] + hs_t @ W_h_t + location + b_t) @ w_t  # (N, T)
    real = torch.tensor(np.array(mask, dtype=bool))
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
