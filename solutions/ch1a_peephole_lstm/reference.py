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
