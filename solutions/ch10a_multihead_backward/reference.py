"""The judge's own relative-position self-attention (ch10a, Shaw et al. 2018): one example, head and query at a
time, the relative vectors looked up pair by pair (or, for the checks at a realistic size, every pair at once,
through a one-hot table of the clipped distances); gradients by torch's autograd."""

import math

import numpy as np
import torch


def _attend(x, W_q, W_k, W_v, W_o, rel_k, rel_v, num_heads, causal):
    N, T, d = x.shape
    d_k = d // num_heads
    c = (rel_k.shape[0] - 1) // 2
    outputs, all_weights = [], []
    for n in range(N):
        heads, head_weights = [], []
        for m in range(num_heads):
            columns = slice(m * d_k, (m + 1) * d_k)
            q, k, v = x[n] @ W_q[:, columns], x[n] @ W_k[:, columns], x[n] @ W_v[:, columns]
            rows, weight_rows = [], []
            for i in range(T):
                keys = range(i + 1) if causal else range(T)
                nearest = [min(max(j - i, -c), c) + c for j in keys]
                scores = torch.stack([q[i] @ (k[j] + rel_k[r]) for j, r in zip(keys, nearest)]) / math.sqrt(d_k)
                alpha = torch.softmax(scores, dim=0)
                rows.append(sum(alpha[t] * (v[j] + rel_v[r]) for t, (j, r) in enumerate(zip(keys, nearest))))
                weight_rows.append(torch.cat([alpha, torch.zeros(T - len(alpha), dtype=torch.float64)]))
            heads.append(torch.stack(rows))
            head_weights.append(torch.stack(weight_rows))
        outputs.append(torch.cat(heads, dim=1) @ W_o)
        all_weights.append(torch.stack(head_weights))
    return torch.stack(outputs), torch.stack(all_weights)


def _attend_at_once(x, W_q, W_k, W_v, W_o, rel_k, rel_v, num_heads, causal):
    """The same (out, weights), every example, head and pair in one pass: ``buckets[i, j, r]`` is 1 where
    the clipped distance from query i to key j is the r-th of the tables' rows."""
    N, T, d = x.shape
    d_k = d // num_heads
    c = (rel_k.shape[0] - 1) // 2
    distance = torch.arange(T)[None, :] - torch.arange(T)[:, None]  # (T, T): j - i
    buckets = torch.nn.functional.one_hot(distance.clamp(-c, c) + c, 2 * c + 1).to(x.dtype)  # (T, T, 2c + 1)

    def heads(W):
        return (x @ W).reshape(N, T, num_heads, d_k).permute(0, 2, 1, 3)  # (N, h, T, d_k)

    q, k, v = heads(W_q), heads(W_k), heads(W_v)
    scores = (q @ k.transpose(-1, -2) + torch.einsum("nhir,ijr->nhij", q @ rel_k.T, buckets)) / math.sqrt(d_k)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -np.inf)
    weights = torch.softmax(scores, dim=-1)  # (N, h, T, T)
    heads_out = weights @ v + torch.einsum("nhij,ijr->nhir", weights, buckets) @ rel_v
    return heads_out.permute(0, 2, 1, 3).reshape(N, T, d) @ W_o, weights


def _leaves(*arrays):
    return [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]


def relative_attention(x, W_q, W_k, W_v, W_o, rel_k, rel_v, num_heads, causal):
    """(out, weights)."""
    out, weights = _attend(*_leaves(x, W_q, W_k, W_v, W_o, rel_k, rel_v), num_heads, causal)
    return out.detach().numpy(), weights.detach().numpy()


def relative_attention_gradients(x, W_q, W_k, W_v, W_o, rel_k, rel_v, num_heads, causal, dout, at_once=False):
    """(dx, dW_q, dW_k, dW_v, dW_o, drel_k, drel_v) of sum(dout * out). ``at_once``: every pair in one pass
    (the same values, fast at a realistic size)."""
    leaves = _leaves(x, W_q, W_k, W_v, W_o, rel_k, rel_v)
    out, _ = (_attend_at_once if at_once else _attend)(*leaves, num_heads, causal)
    return [g.numpy() for g in torch.autograd.grad((out * torch.as_tensor(dout)).sum(), leaves)]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the tables'
# gradients written with fancy-index assignment, which keeps one pair per repeated index instead of the sum over
# all of them. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the tables' gradients keep one pair per distance (fancy-index assignment) instead of summing them all",
    "message": "the sum over all the pairs at its distance",
    "answers": {"relative_attention_backward": """
        x, W_q, W_k, W_v, W_o, rel_k, index, a_k, a_v, Q, K, V, weights, concat = cache
        N, h, T, d_k = Q.shape
        d = h * d_k
        dW_o = concat.reshape(N * T, d).T @ dout.reshape(N * T, d)
        d_heads = (dout @ W_o.T).reshape(N, T, h, d_k).transpose(0, 2, 1, 3)
        d_weights = d_heads @ V.transpose(0, 1, 3, 2) + np.einsum("nhid,ijd->nhij", d_heads, a_v)
        dV = weights.transpose(0, 1, 3, 2) @ d_heads
        d_scores = softmax_backward(weights, d_weights) / np.sqrt(d_k)
        dQ = d_scores @ K + np.einsum("nhij,ijd->nhid", d_scores, a_k)
        dK = d_scores.transpose(0, 1, 3, 2) @ Q
        drel_k, drel_v = np.zeros_like(rel_k), np.zeros_like(rel_k)
        drel_k[index] += np.einsum("nhij,nhid->ijd", d_scores, Q)
        drel_v[index] += np.einsum("nhij,nhid->ijd", weights, d_heads)
        dQ, dK, dV = (a.transpose(0, 2, 1, 3).reshape(N * T, d) for a in (dQ, dK, dV))
        x2 = x.reshape(N * T, d)
        dx = dQ @ W_q.T + dK @ W_k.T + dV @ W_v.T
        return dx.reshape(N, T, d), x2.T @ dQ, x2.T @ dK, x2.T @ dV, dW_o, drel_k, drel_v
    """},
}
