"""The judge's own show-attend-tell pieces (ch9b): one example, one step and one cell at a time, gradients by
autograd. ``douts`` None: values only."""

import numpy as np
import torch


def _leaves(inputs):
    return {name: torch.tensor(np.asarray(value, dtype=np.float64), requires_grad=True) for name, value in inputs.items()}


def _grads(total, leaves):
    return {name: g.numpy() for name, g in zip(leaves, torch.autograd.grad(total, list(leaves.values())))}


def gated_grid_attention(inputs, douts):
    """((contexts, alpha, beta), {input name: gradient}) for sum(douts[0] * contexts) + ... ."""
    x = _leaves(inputs)
    features, states = x["features"], x["previous_states"]
    N, L, D = features.shape
    T = states.shape[1]
    contexts, weights, gates = [], [], []
    for n in range(N):
        for t in range(T):
            h = states[n, t]
            energies = torch.stack([x["v_a"] @ torch.tanh(h @ x["W_a"] + features[n, l] @ x["U_a"]) for l in range(L)])
            alpha = torch.exp(energies - energies.max()) / torch.exp(energies - energies.max()).sum()
            beta = 1 / (1 + torch.exp(-(h @ x["w_beta"] + x["b_beta"])))
            contexts.append(beta * sum(alpha[l] * features[n, l] for l in range(L)))
            weights.append(alpha)
            gates.append(beta)
    outputs = (torch.stack(contexts).reshape(N, T, D), torch.stack(weights).reshape(N, T, L),
               torch.stack(gates).reshape(N, T))
    values = tuple(value.detach().numpy() for value in outputs)
    if douts is None:
        return values, None
    total = sum((value * torch.as_tensor(d)).sum() for value, d in zip(outputs, douts))
    return values, _grads(total, x)


def deep_output_logits(inputs, dlogits):
    """(logits, {input name: gradient}) for sum(dlogits * logits)."""
    x = _leaves(inputs)
    N, T, _ = x["states"].shape
    logits = torch.stack([torch.stack([(x["embedded_previous"][n, t] + x["states"][n, t] @ x["L_h"]
                                        + x["contexts"][n, t] @ x["L_z"]) @ x["L_o"] for t in range(T)])
                          for n in range(N)])
    return logits.detach().numpy(), _grads((logits * torch.as_tensor(dlogits)).sum(), x)
