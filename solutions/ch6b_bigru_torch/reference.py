"""The judge's own bidirectional language model (ch6b, Peters et al. 2018): every sentence alone, cut to its
length (no padding is ever read), the backward model fed the sentence flipped; the losses and ELMo's mix
position by position; gradients by autograd, for copies of the GRU modules.

Never released: the judge binds this module to ``reference`` in the hidden tests.
"""

import copy

import numpy as np
import torch


def _leaf(value):
    return torch.tensor(np.asarray(value, dtype=np.float64), requires_grad=True)


def _copies(layers, prefix):
    """Copies of the modules, and their parameters keyed as checks.vjp keys them."""
    copies = [copy.deepcopy(layer) for layer in layers]
    named = {f"{prefix}[{k}].{name}": parameter for k, layer in enumerate(copies)
             for name, parameter in layer.named_parameters()}
    return copies, named


def _run(sentence, layers):
    """Every layer's states (L, length, H) of one unpadded sentence (length, D), read in the order given."""
    found, states = [], sentence[None]
    for layer in layers:
        states = layer(states)[0]
        found.append(states[0])
    return torch.stack(found)


def _states(embedded, lengths, forward_layers, backward_layers):
    """(forward, backward), each (L, N, T, H), zero on the padding."""
    T = embedded.shape[1]
    H = forward_layers[0].hidden_size
    rows_forward, rows_backward = [], []
    for n, length in enumerate(int(L) for L in lengths):
        sentence = embedded[n, :length]
        ahead = _run(sentence, forward_layers)
        behind = _run(sentence.flip(0), backward_layers).flip(1)
        pad = torch.zeros((ahead.shape[0], T - length, H), dtype=torch.float64)
        rows_forward.append(torch.cat([ahead, pad], dim=1))
        rows_backward.append(torch.cat([behind, pad], dim=1))
    return torch.stack(rows_forward, dim=1), torch.stack(rows_backward, dim=1)


def _gradients(outputs, douts, leaves):
    pairs = [(o, torch.as_tensor(np.asarray(d, dtype=np.float64))) for o, d in zip(outputs, douts) if d is not None]
    total = sum((o * d).sum() for o, d in pairs)
    if not total.requires_grad:  # no prediction at all (every sentence of length 1): nothing reaches the inputs
        return {name: torch.zeros_like(leaf).numpy() for name, leaf in leaves.items()}
    grads = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
    return {name: (torch.zeros_like(leaf) if g is None else g).numpy() for (name, leaf), g in zip(leaves.items(), grads)}


def bilm_states(embedded, lengths, forward_layers, backward_layers, douts):
    """((forward, backward), {gradient name as checks.vjp keys it: gradient})."""
    x = _leaf(embedded)
    forward_copies, forward_named = _copies(forward_layers, "forward_layers")
    backward_copies, backward_named = _copies(backward_layers, "backward_layers")
    outputs = _states(x, lengths, forward_copies, backward_copies)
    grads = _gradients(outputs, douts, {"embedded": x, **forward_named, **backward_named})
    return [o.detach().numpy() for o in outputs], grads


def _nll(embedded, tokens, lengths, forward_layers, backward_layers, W_out, b_out):
    forward, backward = _states(embedded, lengths, forward_layers, backward_layers)
    N, T = tokens.shape
    forward_nll = [[embedded.new_zeros(()) for _ in range(T)] for _ in range(N)]
    backward_nll = [[embedded.new_zeros(()) for _ in range(T)] for _ in range(N)]
    for n, length in enumerate(int(L) for L in lengths):
        for j in range(length):
            if j + 1 < length:
                log_p = torch.log_softmax(forward[-1, n, j] @ W_out + b_out, dim=0)
                forward_nll[n][j] = -log_p[int(tokens[n, j + 1])]
            if j >= 1:
                log_p = torch.log_softmax(backward[-1, n, j] @ W_out + b_out, dim=0)
                backward_nll[n][j] = -log_p[int(tokens[n, j - 1])]
    return (torch.stack([torch.stack(row) for row in forward_nll]),
            torch.stack([torch.stack(row) for row in backward_nll]))


def bilm_nll(embedded, tokens, lengths, forward_layers, backward_layers, W_out, b_out, douts):
    """((forward_nll, backward_nll), {gradient name: gradient}); ``douts`` None: the values only."""
    x, W, b = _leaf(embedded), _leaf(W_out), _leaf(b_out)
    forward_copies, forward_named = _copies(forward_layers, "forward_layers")
    backward_copies, backward_named = _copies(backward_layers, "backward_layers")
    outputs = _nll(x, np.asarray(tokens), lengths, forward_copies, backward_copies, W, b)
    values = [o.detach().numpy() for o in outputs]
    if douts is None:
        return values, None
    return values, _gradients(outputs, douts, {"embedded": x, "W_out": W, "b_out": b, **forward_named, **backward_named})


def elmo(embedded, lengths, forward_layers, backward_layers, mix_logits, gamma, dout):
    """(ELMo (N, T, 2H), {gradient name: gradient})."""
    x, w, g = _leaf(embedded), _leaf(mix_logits), _leaf(gamma)
    forward_copies, forward_named = _copies(forward_layers, "forward_layers")
    backward_copies, backward_named = _copies(backward_layers, "backward_layers")
    forward, backward = _states(x, lengths, forward_copies, backward_copies)
    weights = torch.exp(w - w.max()) / torch.exp(w - w.max()).sum()
    N, T, H = x.shape
    rows = []
    for n in range(N):
        row = []
        for j in range(T):
            if j < int(lengths[n]):
                total = weights[0] * torch.cat([x[n, j], x[n, j]])
                for level in range(len(forward_layers)):
                    total = total + weights[level + 1] * torch.cat([forward[level, n, j], backward[level, n, j]])
                row.append(g * total)
            else:
                row.append(x.new_zeros(2 * H))
        rows.append(torch.stack(row))
    out = torch.stack(rows)
    return out.detach().numpy(), _gradients([out], [dout], {"embedded": x, "mix_logits": w, "gamma": g,
                                                              **forward_named, **backward_named})


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): each model
# "predicts" the token at its own position, which its state has just read, so the loss falls to nothing
# without the model learning anything. A visible test must fail on it with a message that holds "message".
CORE_MISTAKE = {
    "what": "each model predicts the token at its own position, which its state has already read",
    "message": "a state never predicts a token it has read",
    "answers": {"bilm_nll": """
        forward, backward = bilm_states(embedded, lengths, forward_layers, backward_layers)
        real = torch.arange(tokens.shape[1]) < torch.as_tensor(lengths)[:, None]
        forward_nll = -torch.log_softmax(forward[-1] @ W_out + b_out, dim=-1).gather(-1, tokens[..., None])[..., 0]
        backward_nll = -torch.log_softmax(backward[-1] @ W_out + b_out, dim=-1).gather(-1, tokens[..., None])[..., 0]
        return torch.where(real, forward_nll, 0.0), torch.where(real, backward_nll, 0.0)
    """},
}
