"""The judge's own gated merge and Nematus start (ch6a): one sentence at a time, gradients by torch's autograd."""

import numpy as np
import torch


def _one_sentence(forward_states, backward_states, W_g, b_g, W_init, b_init):
    """Annotations (L, H) and s0 (H_dec,) of one sentence without its padding."""
    gate = torch.sigmoid(torch.cat([forward_states, backward_states], dim=1) @ W_g + b_g)
    annotations = gate * forward_states + (1 - gate) * backward_states
    return annotations, torch.tanh(annotations.mean(dim=0) @ W_init + b_init)


def _run(forward_states, backward_states, lengths, W_g, b_g, W_init, b_init):
    leaves = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)
              for a in (forward_states, backward_states, W_g, b_g, W_init, b_init)]
    fwd, bwd, W_g, b_g, W_init, b_init = leaves
    N, T, H = fwd.shape
    annotations = torch.zeros((N, T, H), dtype=torch.float64)
    starts = []
    for n, length in enumerate(int(L) for L in lengths):
        sentence, s0 = _one_sentence(fwd[n, :length], bwd[n, :length], W_g, b_g, W_init, b_init)
        annotations = annotations.index_put((torch.tensor(n), torch.arange(length)), sentence)
        starts.append(s0)
    return leaves, annotations, torch.stack(starts)


def gated_merge(forward_states, backward_states, lengths, W_g, b_g, W_init, b_init):
    """(annotations (N, T, H), s0 (N, H_dec)) as NumPy arrays."""
    _, annotations, s0 = _run(forward_states, backward_states, lengths, W_g, b_g, W_init, b_init)
    return annotations.detach().numpy(), s0.detach().numpy()


def gated_merge_gradients(forward_states, backward_states, lengths, W_g, b_g, W_init, b_init, d_annotations, d_s0):
    """The gradients of sum(d_annotations * annotations) + sum(d_s0 * s0) with respect to every input but lengths,
    in the order forward_states, backward_states, W_g, b_g, W_init, b_init."""
    leaves, annotations, s0 = _run(forward_states, backward_states, lengths, W_g, b_g, W_init, b_init)
    total = (annotations * torch.as_tensor(d_annotations)).sum() + (s0 * torch.as_tensor(d_s0)).sum()
    return [grad.numpy() for grad in torch.autograd.grad(total, leaves, allow_unused=False)]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the mean that s_0
# starts from taken over all T positions, the padding counted, with a backward pass that agrees with it. A visible
# test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "the mean for s_0 runs over all T positions (divides by T), forward and backward agreeing",
    "message": "the mean runs over its real tokens only",
    "answers": {"gated_merge_forward": """
        N, T, H = forward_states.shape
        lengths = np.asarray(lengths)
        real = (np.arange(T) < lengths[:, None])[:, :, None]
        both = np.concatenate([forward_states, backward_states], axis=-1)
        gate = sigmoid(both @ W_g + b_g)
        annotations = (gate * forward_states + (1 - gate) * backward_states) * real
        mean = annotations.sum(axis=1) / T
        s0 = np.tanh(mean @ W_init + b_init)
        return annotations, s0, (both, gate, real, np.full(N, T), mean, s0, W_g, W_init)
    """},
}
