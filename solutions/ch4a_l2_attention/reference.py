"""The judge's own L2-distance attention weights for ch4a_l2_attention: the distances from their
definition (differences, not the expanded square), the softmax in log space over the real
positions only, gradients by torch's autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def inputs(N, T_dec, T_enc, H_dec, H_enc, A, seed, scale=1.0):
    """Random float64 (decoder_states, encoder_states, W_Q, W_K)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N, T_dec, H_dec)), rng.standard_normal((N, T_enc, H_enc)),
            rng.standard_normal((H_dec, A)) * scale / np.sqrt(H_dec),
            rng.standard_normal((H_enc, A)) * scale / np.sqrt(H_enc)]


def weights(decoder_states, encoder_states, W_Q, W_K, mask, dweights=None):
    """The attention weights (N, T_dec, T_enc); with ``dweights`` also the gradients for
    (decoder_states, encoder_states, W_Q, W_K)."""
    leaves = [torch.tensor(np.array(v, dtype=np.float64), requires_grad=True)
              for v in (decoder_states, encoder_states, W_Q, W_K)]
    s, h, W_Q_t, W_K_t = leaves
    queries, keys = s @ W_Q_t, h @ W_K_t
    differences = queries[:, :, None, :] - keys[:, None, :, :]  # (N, T_dec, T_enc, A)
    scores = -(differences ** 2).sum(dim=-1) / np.sqrt(W_Q_t.shape[1])
    real = torch.tensor(np.array(mask, dtype=bool))[:, None, :].expand_as(scores)
    logits = torch.where(real, scores, torch.full_like(scores, -np.inf))
    any_real = real.any(dim=-1, keepdim=True)
    safe = torch.where(any_real, logits, torch.zeros_like(logits))
    out = torch.where(real, torch.exp(safe - torch.logsumexp(safe, dim=-1, keepdim=True)), torch.zeros_like(scores))
    if dweights is None:
        return out.detach().numpy()
    grads = torch.autograd.grad(out, leaves, torch.tensor(np.array(dweights, dtype=np.float64)))
    return out.detach().numpy(), [g.numpy() for g in grads]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the |k_j|^2 term
# of the distance treated like |q_i|^2, as if the softmax cancelled it; it does not, for it differs across the
# positions j of a row. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the |k_j|^2 term sends no gradient (treated like |q_i|^2, which the softmax cancels)",
    "message": "through |k|^2",
    "answers": {"l2_attention_backward": """
        decoder_states, encoder_states, W_Q, W_K, q, k, weights = cache
        dscores = softmax_backward(weights, dweights) / np.sqrt(W_Q.shape[1])
        dq = 2.0 * dscores @ k - 2.0 * dscores.sum(axis=2)[:, :, None] * q
        dk = 2.0 * dscores.transpose(0, 2, 1) @ q
        dW_Q = np.einsum("nih,nia->ha", decoder_states, dq)
        dW_K = np.einsum("njh,nja->ha", encoder_states, dk)
        return dq @ W_Q.T, dk @ W_K.T, dW_Q, dW_K
    """},
}
