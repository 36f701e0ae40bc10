"""The judge's own soft local window (ch8a, Yang et al. 2018): one decoder step of one example at a time, over its
real tokens only; gradients by torch's autograd."""

import numpy as np
import torch


def _attend(hs, s, lengths, W_p, v_p, v_d):
    N, T_dec, H = s.shape
    T_enc = hs.shape[1]
    contexts, weights, centres, widths = [], [], [], []
    for n in range(N):
        S = int(lengths[n])
        keys = hs[n, :S]  # the real tokens only
        positions = torch.arange(S, dtype=torch.float64)
        for i in range(T_dec):
            query = s[n, i]
            hidden = torch.tanh(query @ W_p)
            centre = S * torch.sigmoid(hidden @ v_p)
            sigma = S * torch.sigmoid(hidden @ v_d) / 2
            logits = keys @ query - (positions - centre) ** 2 / (2 * sigma ** 2)
            alpha = torch.softmax(logits, dim=0)
            contexts.append(alpha @ keys)
            weights.append(torch.cat([alpha, torch.zeros(T_enc - S, dtype=torch.float64)]))
            centres.append(centre)
            widths.append(2 * sigma)
    shape = (N, T_dec)
    return (torch.stack(contexts).reshape(N, T_dec, H), torch.stack(weights).reshape(N, T_dec, T_enc),
            torch.stack(centres).reshape(shape), torch.stack(widths).reshape(shape))


def _leaves(hs, s, W_p, v_p, v_d):
    return [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in (hs, s, W_p, v_p, v_d)]


def localness(hs, s, lengths, W_p, v_p, v_d):
    """(context, alpha, p, D) as NumPy arrays."""
    hs, s, W_p, v_p, v_d = _leaves(hs, s, W_p, v_p, v_d)
    return [value.detach().numpy() for value in _attend(hs, s, lengths, W_p, v_p, v_d)]


def localness_gradients(hs, s, lengths, W_p, v_p, v_d, dcontext):
    """(dhs, ds, dW_p, dv_p, dv_d) of sum(dcontext * context)."""
    leaves = _leaves(hs, s, W_p, v_p, v_d)
    context = _attend(leaves[0], leaves[1], lengths, *leaves[2:])[0]
    return [g.numpy() for g in torch.autograd.grad((context * torch.as_tensor(dcontext)).sum(), leaves)]
