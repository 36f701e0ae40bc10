"""The judge's own adaptive attention with a visual sentinel (ch9b, Lu et al. 2017): one example, one step and one
candidate at a time, the plain attention's context and the sentinel gate combined as the paper's equation 11 writes
them (beta s + (1 - beta) c); gradients by autograd. ``douts`` None: values only.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def _leaves(inputs):
    return {name: torch.tensor(np.asarray(value, dtype=np.float64), requires_grad=True) for name, value in inputs.items()}


def _finish(outputs, douts, leaves):
    values = tuple(value.detach().numpy() for value in outputs)
    if douts is None:
        return values, None
    total = sum((value * torch.as_tensor(np.asarray(d, dtype=np.float64))).sum() for value, d in zip(outputs, douts))
    return values, {name: g.numpy() for name, g in zip(leaves, torch.autograd.grad(total, list(leaves.values())))}


def visual_sentinel(inputs, douts):
    """(sentinels (N, T, H), {input name: gradient})."""
    x = _leaves(inputs)
    N, T, _ = x["inputs"].shape
    rows = []
    for n in range(N):
        for t in range(T):
            gate = 1 / (1 + torch.exp(-(x["inputs"][n, t] @ x["W_x"] + x["previous_states"][n, t] @ x["W_h"])))
            rows.append(gate * torch.tanh(x["memory_cells"][n, t]))
    out = torch.stack(rows).reshape(N, T, -1)
    values, grads = _finish([out], None if douts is None else [douts], x)
    return values[0], grads


def adaptive_attention(inputs, douts):
    """((contexts, alpha_hat, beta), {input name: gradient})."""
    x = _leaves(inputs)
    features, states, sentinels = x["features"], x["states"], x["sentinels"]
    N, k, H = features.shape
    T = states.shape[1]
    contexts, weights, gates = [], [], []
    for n in range(N):
        for t in range(T):
            query = states[n, t] @ x["W_g"]
            scores = [x["w_h"] @ torch.tanh(features[n, i] @ x["W_v"] + query) for i in range(k)]
            scores.append(x["w_h"] @ torch.tanh(sentinels[n, t] @ x["W_s"] + query))
            scores = torch.stack(scores)
            shifted = torch.exp(scores - scores.max())
            alpha_hat = shifted / shifted.sum()
            beta = alpha_hat[k]
            cells = shifted[:k] / shifted[:k].sum()  # the plain attention over the cells alone
            plain = sum(cells[i] * features[n, i] for i in range(k))
            contexts.append(beta * sentinels[n, t] + (1 - beta) * plain)
            weights.append(alpha_hat)
            gates.append(beta)
    outputs = (torch.stack(contexts).reshape(N, T, H), torch.stack(weights).reshape(N, T, k + 1),
               torch.stack(gates).reshape(N, T))
    return _finish(outputs, douts, x)


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the sentinel
# gated apart from the cells (beta from a sigmoid of its own score, the cells' softmax alone), the way Xu et
# al.'s gating scalar works, instead of one softmax in which the sentinel competes with the cells. A visible
# test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the sentinel is gated apart (beta a sigmoid of its score) instead of competing with the cells in one softmax",
    "message": "the sentinel competes with the cells in one softmax",
    "answers": {"adaptive_attention": """
        queries = states @ W_g
        cells = torch.tanh((features @ W_v)[:, None, :, :] + queries[:, :, None, :]) @ w_h
        beta = torch.sigmoid(torch.tanh(sentinels @ W_s + queries) @ w_h)
        alpha = torch.softmax(cells, dim=-1)
        contexts = (1 - beta[..., None]) * (alpha @ features) + beta[..., None] * sentinels
        return contexts, torch.cat([(1 - beta[..., None]) * alpha, beta[..., None]], dim=-1), beta
    """},
}
