"""The judge's own interleaved GRU encoder (ch6b): every sentence alone, without padding, one vector at a time."""

import numpy as np
import torch


def _tensor(value):
    return torch.tensor(np.asarray(value, dtype=np.float64), requires_grad=True)


def _read(sentence, W_x, W_h, b, backwards):
    """The states (L, H) of one unpadded sentence (L, D_in), in its own order."""
    H = W_h.shape[0]
    W_xr, W_xz, W_xn = W_x[:, :H], W_x[:, H:2 * H], W_x[:, 2 * H:]
    W_hr, W_hz, W_hn = W_h[:, :H], W_h[:, H:2 * H], W_h[:, 2 * H:]
    b_r, b_z, b_n = b[:H], b[H:2 * H], b[2 * H:]
    order = list(range(len(sentence)))[::-1] if backwards else list(range(len(sentence)))
    h = torch.zeros(H, dtype=torch.float64)
    found = {}
    for t in order:
        x = sentence[t]
        r = torch.sigmoid(x @ W_xr + h @ W_hr + b_r)
        z = torch.sigmoid(x @ W_xz + h @ W_hz + b_z)
        h = (1 - z) * h + z * torch.tanh(x @ W_xn + (r * h) @ W_hn + b_n)
        found[t] = h
    return torch.stack([found[t] for t in range(len(sentence))])


def _padded(rows, T):
    """(N, T, H) from N unpadded (L_n, H) rows, zeros after each."""
    H = rows[0].shape[1]
    return torch.stack([torch.cat([row, torch.zeros((T - len(row), H), dtype=torch.float64)]) for row in rows])


def _encode(xs, lengths, layers):
    """The top states (N, T, H), zero on padding: each sentence through every layer on its own."""
    rows = []
    for n, length in enumerate(int(L) for L in lengths):
        current = xs[n, :length]
        for depth, layer in enumerate(layers):
            current = _read(current, layer["W_x"], layer["W_h"], layer["b"], backwards=depth % 2 == 1)
        rows.append(current)
    return _padded(rows, xs.shape[1])


def _layer_leaves(layers):
    return [{key: _tensor(value) for key, value in layer.items()} for layer in layers]


def interleaved_encoder(embedded, lengths, layers, dout):
    """(top states, {"embedded": ..., 0: {"W_x": ..., ...}, 1: {...}, ...})."""
    embedded = _tensor(embedded)
    leaves = _layer_leaves(layers)
    top = _encode(embedded, lengths, leaves)
    order = [embedded] + [layer[key] for layer in leaves for key in ("W_x", "W_h", "b")]
    grads = [g.numpy() for g in torch.autograd.grad((top * torch.as_tensor(dout)).sum(), order)]
    found = {"embedded": grads[0]}
    for k in range(len(layers)):
        found[k] = dict(zip(("W_x", "W_h", "b"), grads[1 + 3 * k:4 + 3 * k]))
    return top.detach().numpy(), found
