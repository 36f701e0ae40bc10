"""Chapter 7's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch7a_highway", "highway_forward", "the gate weighs the carried input (t and 1 - t swapped)", """
        keep = mask[:, :, None]
        transformed = np.tanh(xs @ W_H + b_H)
        gate = sigmoid(xs @ W_T + b_T)
        ys = np.where(keep, (1 - gate) * transformed + gate * xs, 0.0)
        return ys, (xs, keep, transformed, 1 - gate, W_H, W_T)
    """),
    ("ch7a_highway", "highway_forward", "a residual block: x + t * h(x)", """
        keep = mask[:, :, None]
        transformed = np.tanh(xs @ W_H + b_H)
        gate = sigmoid(xs @ W_T + b_T)
        return np.where(keep, gate * transformed + xs, 0.0), (xs, keep, transformed, gate, W_H, W_T)
    """),
    ("ch7a_highway", "highway_backward", "the carry path's gradient is missing", """
        xs, keep, transformed, gate, W_H, W_T = cache
        dys = np.where(keep, dys, 0.0)
        d_h_pre = dys * gate * (1 - transformed ** 2)
        d_t_pre = dys * (transformed - xs) * gate * (1 - gate)
        dxs = d_h_pre @ W_H.T + d_t_pre @ W_T.T
        return (dxs, np.einsum("ntd,nte->de", xs, d_h_pre), d_h_pre.sum(axis=(0, 1)),
                np.einsum("ntd,nte->de", xs, d_t_pre), d_t_pre.sum(axis=(0, 1)))
    """),
    ("ch7a_highway", "highway_backward", "the gate's gradient forgets that the carried input moves too", """
        xs, keep, transformed, gate, W_H, W_T = cache
        dys = np.where(keep, dys, 0.0)
        d_h_pre = dys * gate * (1 - transformed ** 2)
        d_t_pre = dys * transformed * gate * (1 - gate)
        dxs = dys * (1 - gate) + d_h_pre @ W_H.T + d_t_pre @ W_T.T
        return (dxs, np.einsum("ntd,nte->de", xs, d_h_pre), d_h_pre.sum(axis=(0, 1)),
                np.einsum("ntd,nte->de", xs, d_t_pre), d_t_pre.sum(axis=(0, 1)))
    """),
    ("ch7a_highway", "highway_gradient_norms", "the top's norm counts the padding", """
        caches, level = [], xs
        for layer in layers:
            level, cache = highway_forward(level, mask, layer["W_H"], layer["b_H"], layer["W_T"], layer["b_T"])
            caches.append(cache)
        grad = dys
        norms = [np.linalg.norm(grad)]
        for cache in caches[::-1]:
            grad = highway_backward(grad, cache)[0]
            norms.append(np.linalg.norm(grad))
        return np.array(norms[::-1])
    """),
    ("ch7b_dense_stack_torch", "stacked_rnn", "each layer reads only the input and the layer just below", """
        outputs = []
        for rnn in layers:
            inputs = torch.cat([xs] + outputs[-1:], dim=-1) if dense else (outputs[-1] if outputs else xs)
            inputs = torch.cat([inputs, torch.zeros(*inputs.shape[:2], rnn.input_size - inputs.shape[-1],
                                                    dtype=inputs.dtype)], dim=-1)
            states, _ = rnn(inputs)
            outputs.append(states)
        return outputs[-1], outputs
    """),
    ("ch7b_dense_stack_torch", "stacked_rnn", "the earlier layers first, the input last", """
        outputs = []
        for rnn in layers:
            inputs = torch.cat(outputs + [xs], dim=-1) if dense else (outputs[-1] if outputs else xs)
            states, _ = rnn(inputs)
            outputs.append(states)
        return outputs[-1], outputs
    """),
    ("ch7b_dense_stack_torch", "layer_gradient_norms", "the norms listed from the top down", """
        xs = xs.detach().requires_grad_(True)
        top, outputs = stacked_rnn(xs, layers, dense)
        grads = torch.autograd.grad((top * dout).sum(), [xs] + outputs)
        return torch.stack([grad.norm() for grad in grads]).flip(0)
    """),
]

REFERENCE_CALLS = []
