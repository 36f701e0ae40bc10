"""The judge's own peephole LSTM step for ch1a_peephole_lstm: written in torch, every gradient by autograd.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import numpy as np
import torch


def inputs(N, D, H, seed, scale=1.0):
    """Random float64 (x, h_prev, c_prev, W_x, W_h, b, P), the peepholes P of size ``scale``."""
    rng = np.random.default_rng(seed)
    shapes = [(N, D), (N, H), (N, H), (D, 4 * H), (H, 4 * H), (4 * H,), (3, H)]
    values = [rng.standard_normal(shape) for shape in shapes]
    values[6] = values[6] * scale
    return values


def step(x, h_prev, c_prev, W_x, W_h, b, P, dh=None, dc=None):
    """(h, c) of the peephole step; with dh and dc also the gradients of sum(dh * h + dc * c) with
    respect to (x, h_prev, c_prev, W_x, W_h, b, P), in that order."""
    leaves = [torch.tensor(np.array(value, dtype=np.float64), requires_grad=True)
              for value in (x, h_prev, c_prev, W_x, W_h, b, P)]
    x_t, h_t, c_t, W_x_t, W_h_t, b_t, P_t = leaves
    pre_input, pre_forget, pre_candidate, pre_output = torch.chunk(x_t @ W_x_t + h_t @ W_h_t + b_t, 4, dim=1)
    forget_gate = torch.sigmoid(pre_forget + c_t * P_t[1])
    input_gate = torch.sigmoid(pre_input + c_t * P_t[0])
    new_cell = forget_gate * c_t + input_gate * torch.tanh(pre_candidate)
    new_hidden = torch.sigmoid(pre_output + new_cell * P_t[2]) * torch.tanh(new_cell)
    if dh is None:
        return new_hidden.detach().numpy(), new_cell.detach().numpy()
    grads = torch.autograd.grad([new_hidden, new_cell], leaves,
                                [torch.tensor(np.array(dh, dtype=np.float64)),
                                 torch.tensor(np.array(dc, dtype=np.float64))])
    return new_hidden.detach().numpy(), new_cell.detach().numpy(), [grad.numpy() for grad in grads]


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): the output
# gate peeking at the old cell state, as the input and forget gates do, with a backward pass that agrees with
# it (so a check of the backward pass against the forward pass cannot see it). A visible test must fail on it
# with a message that holds "message".
CORE_MISTAKE = {
    "what": "the output gate peeks at the old cell state c_{t-1}, not at the new c_t (forward and backward agreeing)",
    "message": "the output gate peeks at the new c_t",
    "answers": {"peephole_lstm_forward": """
        H = h_prev.shape[1]
        a = x @ W_x + h_prev @ W_h + b
        i = sigmoid(a[:, :H] + P[0] * c_prev)
        f = sigmoid(a[:, H:2 * H] + P[1] * c_prev)
        g = np.tanh(a[:, 2 * H:3 * H])
        c = f * c_prev + i * g
        o = sigmoid(a[:, 3 * H:] + P[2] * c_prev)
        squashed_c = np.tanh(c)
        return o * squashed_c, c, (x, h_prev, c_prev, W_x, W_h, P, i, f, g, o, c, squashed_c)
    """, "peephole_lstm_backward": """
        x, h_prev, c_prev, W_x, W_h, P, i, f, g, o, c, squashed_c = cache
        da_o = dh * squashed_c * o * (1.0 - o)
        dc_total = dc + dh * o * (1.0 - squashed_c ** 2)
        da_i, da_f, da_g = dc_total * g * i * (1.0 - i), dc_total * c_prev * f * (1.0 - f), dc_total * i * (1.0 - g ** 2)
        da = np.concatenate([da_i, da_f, da_g, da_o], axis=1)
        dP = np.stack([(da_i * c_prev).sum(axis=0), (da_f * c_prev).sum(axis=0), (da_o * c_prev).sum(axis=0)])
        return (da @ W_x.T, da @ W_h.T, dc_total * f + da_i * P[0] + da_f * P[1] + da_o * P[2], x.T @ da, h_prev.T @ da,
                da.sum(axis=0), dP)
    """},
}
