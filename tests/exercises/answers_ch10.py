"""Chapter 10's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation, each must be flagged for review."""

WRONG_ANSWERS = [
    ("ch10a_multihead_backward", "multi_head_forward", "the scores are scaled by sqrt(d), not sqrt(d_k)", """
        N, T, d = x.shape
        d_k = d // num_heads

        def split(a):
            return a.reshape(N, T, num_heads, d_k).transpose(0, 2, 1, 3)

        Q, K, V = split(x @ W_q), split(x @ W_k), split(x @ W_v)
        scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d)
        mask = np.tril(np.ones((T, T), dtype=bool)) if causal else None
        weights = masked_softmax(scores, mask)
        concat = (weights @ V).transpose(0, 2, 1, 3).reshape(N, T, d)
        return concat @ W_o, weights, (x, W_q, W_k, W_v, W_o, Q, K, V, weights, concat)
    """),
    ("ch10a_multihead_backward", "multi_head_forward", "the heads are split without moving the head axis first", """
        N, T, d = x.shape
        d_k = d // num_heads

        def split(a):
            return a.reshape(N, num_heads, T, d_k)

        Q, K, V = split(x @ W_q), split(x @ W_k), split(x @ W_v)
        scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k)
        mask = np.tril(np.ones((T, T), dtype=bool)) if causal else None
        weights = masked_softmax(scores, mask)
        concat = (weights @ V).reshape(N, T, d)
        return concat @ W_o, weights, (x, W_q, W_k, W_v, W_o, Q, K, V, weights, concat)
    """),
    ("ch10a_multihead_backward", "multi_head_forward", "the causal mask keeps the future instead of the past", """
        N, T, d = x.shape
        d_k = d // num_heads

        def split(a):
            return a.reshape(N, T, num_heads, d_k).transpose(0, 2, 1, 3)

        Q, K, V = split(x @ W_q), split(x @ W_k), split(x @ W_v)
        scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k)
        mask = np.triu(np.ones((T, T), dtype=bool)) if causal else None
        weights = masked_softmax(scores, mask)
        concat = (weights @ V).transpose(0, 2, 1, 3).reshape(N, T, d)
        return concat @ W_o, weights, (x, W_q, W_k, W_v, W_o, Q, K, V, weights, concat)
    """),
    ("ch10a_multihead_backward", "multi_head_backward", "dx takes only the query's path", """
        x, W_q, W_k, W_v, W_o, Q, K, V, weights, concat = cache
        N, h, T, d_k = Q.shape
        d = h * d_k

        def split(a):
            return a.reshape(N, T, h, d_k).transpose(0, 2, 1, 3)

        def join(a):
            return a.transpose(0, 2, 1, 3).reshape(N * T, d)

        x2 = x.reshape(N * T, d)
        d_heads = split(dout @ W_o.T)
        dV = weights.transpose(0, 1, 3, 2) @ d_heads
        d_scores = softmax_backward(weights, d_heads @ V.transpose(0, 1, 3, 2)) / np.sqrt(d_k)
        dQ, dK, dV = join(d_scores @ K), join(d_scores.transpose(0, 1, 3, 2) @ Q), join(dV)
        dx = dQ @ W_q.T
        return dx.reshape(N, T, d), x2.T @ dQ, x2.T @ dK, x2.T @ dV, concat.reshape(N * T, d).T @ dout.reshape(N * T, d)
    """),
    ("ch10a_multihead_backward", "multi_head_backward", "the scores' gradient is not scaled by 1/sqrt(d_k)", """
        x, W_q, W_k, W_v, W_o, Q, K, V, weights, concat = cache
        N, h, T, d_k = Q.shape
        d = h * d_k

        def split(a):
            return a.reshape(N, T, h, d_k).transpose(0, 2, 1, 3)

        def join(a):
            return a.transpose(0, 2, 1, 3).reshape(N * T, d)

        x2 = x.reshape(N * T, d)
        d_heads = split(dout @ W_o.T)
        dV = weights.transpose(0, 1, 3, 2) @ d_heads
        d_scores = softmax_backward(weights, d_heads @ V.transpose(0, 1, 3, 2))
        dQ, dK, dV = join(d_scores @ K), join(d_scores.transpose(0, 1, 3, 2) @ Q), join(dV)
        dx = dQ @ W_q.T + dK @ W_k.T + dV @ W_v.T
        return dx.reshape(N, T, d), x2.T @ dQ, x2.T @ dK, x2.T @ dV, concat.reshape(N * T, d).T @ dout.reshape(N * T, d)
    """),
    ("ch10b_ntm_addressing_torch", "content_addressing", "a dot product in place of the cosine similarity", """
        return torch.softmax(strength.unsqueeze(-1) * (key @ memory.transpose(1, 2)), dim=-1)
    """),
    ("ch10b_ntm_addressing_torch", "content_addressing", "the softmax runs over the heads, not the locations", """
        dots = key @ memory.transpose(1, 2)
        norms = key.norm(dim=-1).unsqueeze(-1) * memory.norm(dim=-1).unsqueeze(1)
        return torch.softmax(strength.unsqueeze(-1) * dots / (norms + 1e-8), dim=1)
    """),
    ("ch10b_ntm_addressing_torch", "convolutional_shift", "the shift runs the wrong way round", """
        radius = shift.shape[-1] // 2
        return sum(shift[..., k + radius].unsqueeze(-1) * torch.roll(weights, -k, dims=-1)
                   for k in range(-radius, radius + 1))
    """),
    ("ch10b_ntm_addressing_torch", "convolutional_shift", "no wrap-around at the memory's ends", """
        radius = shift.shape[-1] // 2
        padded = torch.nn.functional.pad(weights, (radius, radius))
        R = weights.shape[-1]
        return sum(shift[..., k + radius].unsqueeze(-1) * padded[..., radius - k:radius - k + R]
                   for k in range(-radius, radius + 1))
    """),
    ("ch10b_ntm_addressing_torch", "sharpen", "the powers are not normalised", """
        return weights ** gamma.unsqueeze(-1)
    """),
    ("ch10b_ntm_addressing_torch", "sharpen", "a softmax of gamma * w in place of the power", """
        return torch.softmax(gamma.unsqueeze(-1) * weights, dim=-1)
    """),
]

REFERENCE_CALLS = [
    ("ch10a_multihead_backward", "multi_head_forward", "the course's MultiHeadAttention", """
        from attention_course.numpy_track.transformer import MultiHeadAttention
        layer = MultiHeadAttention(x.shape[-1], num_heads)
        for name, W in zip(("W_q", "W_k", "W_v", "W_o"), (W_q, W_k, W_v, W_o)):
            layer.params[name][...] = W
        return layer.forward(x, causal=causal), layer.attention_weights, None
    """),
    ("ch10b_ntm_addressing_torch", "sharpen", "the torch track's sharpen", """
        from attention_course.torch_track.ntm import sharpen as reference
        return reference(weights, gamma)
    """),
]
