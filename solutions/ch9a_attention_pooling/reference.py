"""The judge's own structured self-attention (ch9a, Lin et al. 2017): one sentence at a time over its real tokens,
hop by hop, the penalty from its definition; gradients by torch's autograd."""

import numpy as np
import torch


def _run(hs, mask, W_s1, W_s2):
    N, T, H = hs.shape
    r = W_s2.shape[1]
    embeddings, annotations, penalties = [], [], []
    for n in range(N):
        length = int(np.asarray(mask[n]).sum())
        states = hs[n, :length]  # the real tokens (the mask is a prefix)
        hops = torch.stack([torch.softmax(torch.tanh(states @ W_s1) @ W_s2[:, k], dim=0) for k in range(r)])  # (r, L)
        embeddings.append(hops @ states)
        annotations.append(torch.cat([hops, torch.zeros((r, T - length), dtype=torch.float64)], dim=1))
        gram = hops @ hops.T
        penalties.append(sum(((gram[k, m] - float(k == m)) ** 2 for k in range(r) for m in range(r))))
    return torch.stack(embeddings), torch.stack(annotations), torch.stack(penalties).mean()


def _leaves(*arrays):
    return [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]


def structured_attention(hs, mask, W_s1, W_s2):
    """(M, A, penalty)."""
    hs, W_s1, W_s2 = _leaves(hs, W_s1, W_s2)
    M, A, penalty = _run(hs, mask, W_s1, W_s2)
    return M.detach().numpy(), A.detach().numpy(), float(penalty)


def structured_attention_gradients(hs, mask, W_s1, W_s2, dM, d_penalty):
    """(d_hs, dW_s1, dW_s2) of sum(dM * M) + d_penalty * penalty."""
    leaves = _leaves(hs, W_s1, W_s2)
    M, _, penalty = _run(leaves[0], mask, leaves[1], leaves[2])
    total = (M * torch.as_tensor(dM)).sum() + d_penalty * penalty
    return [g.numpy() for g in torch.autograd.grad(total, leaves)]
