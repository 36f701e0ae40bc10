"""The judge's own soft local window (ch8a, Yang et al. 2018): one decoder step of one example at a time, over its
real tokens only (or, for the checks at a realistic size, the whole batch at once, the padding masked out of the
softmax); gradients by torch's autograd."""

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


def _attend_at_once(hs, s, lengths, W_p, v_p, v_d):
    """The same four outputs for every example and decoder step in one pass."""
    T_enc = hs.shape[1]
    S = torch.as_tensor(np.asarray(lengths), dtype=torch.float64)[:, None]  # (N, 1)
    hidden = torch.tanh(s @ W_p)  # (N, T_dec, A)
    centre = S * torch.sigmoid(hidden @ v_p)  # (N, T_dec)
    sigma = S * torch.sigmoid(hidden @ v_d) / 2
    positions = torch.arange(T_enc, dtype=torch.float64)
    logits = s @ hs.transpose(1, 2) - (positions - centre[..., None]) ** 2 / (2 * sigma[..., None] ** 2)
    padding = (positions[None, :] >= S)[:, None, :]  # (N, 1, T_enc)
    alpha = torch.softmax(logits.masked_fill(padding, -np.inf), dim=-1)
    return alpha @ hs, alpha, centre, 2 * sigma


def _leaves(hs, s, W_p, v_p, v_d):
    return [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in (hs, s, W_p, v_p, v_d)]


def localness(hs, s, lengths, W_p, v_p, v_d):
    """(context, alpha, p, D) as NumPy arrays."""
    hs, s, W_p, v_p, v_d = _leaves(hs, s, W_p, v_p, v_d)
    return [value.detach().numpy() for value in _attend(hs, s, lengths, W_p, v_p, v_d)]


def localness_gradients(hs, s, lengths, W_p, v_p, v_d, dcontext, at_once=False):
    """(dhs, ds, dW_p, dv_p, dv_d) of sum(dcontext * context). ``at_once``: every example and step in one
    pass (the same values, fast at a realistic size)."""
    leaves = _leaves(hs, s, W_p, v_p, v_d)
    context = (_attend_at_once if at_once else _attend)(leaves[0], leaves[1], lengths, *leaves[2:])[0]
    return [g.numpy() for g in torch.autograd.grad((context * torch.as_tensor(dcontext)).sum(), leaves)]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): s differentiated
# through the dot scores alone, as if the Gaussian bias were a constant, so no gradient reaches the predicted centre
# and width. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the Gaussian bias is treated as a constant: s gets no gradient through p and D, nor do W_p, v_p, v_d",
    "message": "through p and through D",
    "answers": {"localness_backward": """
        hs, s, lengths, W_p, v_p, v_d, u, p, width, offsets, alpha = cache
        d_logits = softmax_backward(alpha, dcontext @ hs.transpose(0, 2, 1))
        dhs = alpha.transpose(0, 2, 1) @ dcontext + d_logits.transpose(0, 2, 1) @ s
        return dhs, d_logits @ hs, np.zeros_like(W_p), np.zeros_like(v_p), np.zeros_like(v_d)
    """},
}
