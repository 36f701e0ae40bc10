"""The judge's own key-value memory hops (ch9a, Miller et al. 2016): one story at a time over its real slots only,
one hop after another in column-vector form as the paper writes it; gradients by torch's autograd."""

import numpy as np
import torch


def _hops(query, keys, values, mask, R):
    finals, all_weights = [], []
    N, S, _ = keys.shape
    H = R.shape[0]
    for n in range(N):
        real = torch.as_tensor(np.flatnonzero(np.asarray(mask[n])))
        k, v = keys[n][real], values[n][real]  # (S_n, d)
        q = query[n][:, None]  # a column
        weights = []
        for j in range(H):
            p = torch.softmax((k @ q)[:, 0], dim=0)
            o = v.T @ p[:, None]
            q = R[j].T @ (q + o)  # rows (q + o) R[j], as the paper's columns R^T (q + o)
            weights.append(torch.zeros(S, dtype=torch.float64).index_put((real,), p))
        finals.append(q[:, 0])
        all_weights.append(torch.stack(weights))
    return torch.stack(finals), torch.stack(all_weights)


def _leaves(*arrays):
    return [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]


def kv_memory(query, keys, values, mask, R):
    """(the final query, the weights of every hop)."""
    query, keys, values, R = _leaves(query, keys, values, R)
    final, weights = _hops(query, keys, values, mask, R)
    return final.detach().numpy(), weights.detach().numpy()


def kv_memory_gradients(query, keys, values, mask, R, d_final):
    """(d_query, d_keys, d_values, dR) of sum(d_final * final)."""
    leaves = _leaves(query, keys, values, R)
    final, _ = _hops(leaves[0], leaves[1], leaves[2], mask, leaves[3])
    return [g.numpy() for g in torch.autograd.grad((final * torch.as_tensor(d_final)).sum(), leaves)]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): each hop's query
# differentiated through its scores only, dropping its direct path into q_{j+1} = (q_j + o_j) R[j]. A visible test
# must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the query's direct path into the next hop is dropped: it gets a gradient through its scores only",
    "message": "directly into q_{j+1}",
    "answers": {"kv_memory_backward": """
        queries, weights, keys, values, R = cache
        d_keys, d_values, dR = np.zeros_like(keys), np.zeros_like(values), np.zeros_like(R)
        d_q = d_final
        for j in range(len(R) - 1, -1, -1):
            q, p = queries[j], weights[j]
            dR[j] = (q + np.einsum("ns,nsd->nd", p, values)).T @ d_q
            d_sum = d_q @ R[j].T
            d_values += np.einsum("ns,nd->nsd", p, d_sum)
            d_scores = softmax_backward(p, np.einsum("nd,nsd->ns", d_sum, values))
            d_keys += np.einsum("ns,nd->nsd", d_scores, q)
            d_q = np.einsum("ns,nsd->nd", d_scores, keys)
        return d_q, d_keys, d_values, dR
    """},
}
