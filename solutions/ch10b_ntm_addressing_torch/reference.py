"""The judge's own least-recently-used access (ch10b, Santoro et al. 2016): one example at a time, the least used
locations by sorting (ties to the lower index: exactly n of them, so the write weights are the paper's convex
combination), the write row by row; gradients by torch's autograd."""

import numpy as np
import torch


def least_used(usage, num_reads):
    """(N, R) NumPy zeros and ones: the num_reads least used locations of each row, at a tie the lower
    index first (a stable sort)."""
    usage = np.asarray(usage, dtype=np.float64)
    found = np.zeros_like(usage)
    for n, row in enumerate(usage):
        found[n, np.argsort(row, kind="stable")[:num_reads]] = 1.0
    return found


def _step(memory, key, alpha, read_prev, usage_prev, gamma):
    """One example: memory (R, C), key (C,), alpha (), read_prev (R,), usage_prev (R,)."""
    R = memory.shape[0]
    erased = int(np.argmin(usage_prev.detach().numpy()))  # the least used; at a tie the lowest index (argmin's rule)
    lu = torch.zeros(R, dtype=torch.float64)
    lu[erased] = 1.0
    g = 1 / (1 + torch.exp(-alpha))
    write = g * read_prev + (1 - g) * lu
    rows = [(torch.zeros_like(memory[i]) if i == erased else memory[i]) + write[i] * key for i in range(R)]
    new_memory = torch.stack(rows)
    cosine = torch.stack([key @ row / (torch.sqrt(key @ key) * torch.sqrt(row @ row)) for row in rows])
    read_weights = torch.exp(cosine - cosine.max()) / torch.exp(cosine - cosine.max()).sum()
    read = sum(read_weights[i] * rows[i] for i in range(R))
    return read, new_memory, read_weights, write, gamma * usage_prev + read_weights + write


def lrua_step(inputs, gamma, douts):
    """((read, memory, read_weights, write_weights, usage), {input name: gradient})."""
    leaves = {name: torch.tensor(np.asarray(value, dtype=np.float64), requires_grad=True) for name, value in inputs.items()}
    N = leaves["memory"].shape[0]
    per_example = [_step(leaves["memory"][n], leaves["key"][n], leaves["alpha"][n], leaves["read_prev"][n],
                         leaves["usage_prev"][n], gamma) for n in range(N)]
    outputs = [torch.stack([example[k] for example in per_example]) for k in range(5)]
    total = sum((value * torch.as_tensor(d)).sum() for value, d in zip(outputs, douts))
    grads = torch.autograd.grad(total, list(leaves.values()))
    return [value.detach().numpy() for value in outputs], {name: g.numpy() for name, g in zip(leaves, grads)}


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the least
# used location written into without being erased first, so a new fact is added onto the old one it should
# replace. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the least used location is not erased before the write",
    "message": "erased, then the key written in",
    "answers": {"lrua_step": """
        least = least_used(usage_prev, 1)
        gate = torch.sigmoid(alpha)[:, None]
        write_weights = gate * read_prev + (1 - gate) * least
        memory = memory + write_weights[..., None] * key[:, None, :]
        similarity = torch.einsum("nc,nrc->nr", key, memory) / (key.norm(dim=-1)[:, None] * memory.norm(dim=-1))
        read_weights = torch.softmax(similarity, dim=-1)
        read = torch.einsum("nr,nrc->nc", read_weights, memory)
        return read, memory, read_weights, write_weights, gamma * usage_prev + read_weights + write_weights
    """},
}
