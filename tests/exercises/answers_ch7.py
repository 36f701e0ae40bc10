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
    ("ch7b_dense_stack_torch", "rhn_step", "the carry and transform gates swapped", """
        s = s_prev
        for layer in range(R_H.shape[0]):
            pre_h, pre_t = s @ R_H[layer] + b_H[layer], s @ R_T[layer] + b_T[layer]
            if layer == 0:
                pre_h, pre_t = pre_h + x @ W_H, pre_t + x @ W_T
            gate = torch.sigmoid(pre_t)
            s = torch.tanh(pre_h) * (1 - gate) + s * gate
        return s
    """),
    ("ch7b_dense_stack_torch", "rhn_step", "the input enters every micro-layer", """
        s = s_prev
        for layer in range(R_H.shape[0]):
            gate = torch.sigmoid(x @ W_T + s @ R_T[layer] + b_T[layer])
            s = torch.tanh(x @ W_H + s @ R_H[layer] + b_H[layer]) * gate + s * (1 - gate)
        return s
    """),
    ("ch7b_dense_stack_torch", "transition_gradient_norms", "the norms listed from the top down", """
        states = [s_prev.detach().requires_grad_(True)]
        for layer in range(R_H.shape[0]):
            one = slice(layer, layer + 1)
            states.append(rhn_step(x if layer == 0 else torch.zeros_like(x), states[-1], W_H, W_T, R_H[one], R_T[one],
                                   b_H[one], b_T[one]))
        grads = torch.autograd.grad((states[-1] * dout).sum(), states)
        return torch.stack([grad.norm() for grad in grads]).flip(0)
    """),
]

REFERENCE_CALLS = []
