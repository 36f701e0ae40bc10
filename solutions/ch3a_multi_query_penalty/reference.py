"""The judge's own multi-query weighted sum and penalty for ch3a_multi_query_penalty: one example and one
pair of weight rows at a time, gradients by torch's autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def weights(N, r, T, seed, lengths=None, sharpness=1.0):
    """Random rows of attention weights (N, r, T): non-negative, each summing to 1 over the first
    ``lengths[n]`` positions and zero on the padding after them."""
    rng = np.random.default_rng(seed)
    lengths = [T] * N if lengths is None else lengths
    rows = np.zeros((N, r, T))
    for n, length in enumerate(lengths):
        logits = rng.standard_normal((r, length)) * sharpness
        rows[n, :, :length] = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return rows


def forward(hs, A, dM=None, dpenalty=None):
    """(M, penalty); with the upstream gradients also the gradients for (hs, A)."""
    hs_t = torch.tensor(np.array(hs, dtype=np.float64), requires_grad=True)
    A_t = torch.tensor(np.array(A, dtype=np.float64), requires_grad=True)
    N, r, T = A_t.shape
    sums, penalties = [], []
    for n in range(N):
        sums.append(torch.stack([(A_t[n, k][:, None] * hs_t[n]).sum(dim=0) for k in range(r)]))
        total = hs_t.new_zeros(())
        for k in range(r):
            for l in range(r):
                overlap = torch.dot(A_t[n, k], A_t[n, l]) - (1.0 if k == l else 0.0)
                total = total + overlap * overlap
        penalties.append(total)
    M, penalty = torch.stack(sums), torch.stack(penalties)
    if dM is None:
        return M.detach().numpy(), penalty.detach().numpy()
    grads = torch.autograd.grad([M, penalty], [hs_t, A_t], [torch.tensor(np.array(dM, dtype=np.float64)),
                                                             torch.tensor(np.array(dpenalty, dtype=np.float64))])
    return M.detach().numpy(), penalty.detach().numpy(), [g.numpy() for g in grads]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the penalty's
# gradient from one of the two terms of its differential (2 G A instead of 4 G A), as if A appeared in G once.
# A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the penalty's gradient keeps one of the two terms of its differential: 2 G A instead of 4 G A",
    "message": "both terms",
    "answers": {"multi_weighted_sum_backward": """
        hs, A, G = cache
        return A.transpose(0, 2, 1) @ dM, dM @ hs.transpose(0, 2, 1) + 2.0 * dpenalty[:, None, None] * (G @ A)
    """},
}
