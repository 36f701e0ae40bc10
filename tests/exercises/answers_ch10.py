"""Chapter 10's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch10a_multihead_backward", "relative_attention_forward", "distances i - j instead of j - i", """
        N, T, d = x.shape
        d_k = d // num_heads
        clip = rel_k.shape[0] // 2
        index = np.clip(np.arange(T)[:, None] - np.arange(T), -clip, clip) + clip
        a_k, a_v = rel_k[index], rel_v[index]

        def split(a):
            return a.reshape(N, T, num_heads, d_k).transpose(0, 2, 1, 3)

        Q, K, V = split(x @ W_q), split(x @ W_k), split(x @ W_v)
        scores = (Q @ K.transpose(0, 1, 3, 2) + np.einsum("nhid,ijd->nhij", Q, a_k)) / np.sqrt(d_k)
        weights = masked_softmax(scores, np.tril(np.ones((T, T), dtype=bool)) if causal else None)
        heads = weights @ V + np.einsum("nhij,ijd->nhid", weights, a_v)
        concat = heads.transpose(0, 2, 1, 3).reshape(N, T, d)
        return concat @ W_o, weights, (x, W_q, W_k, W_v, W_o, rel_k, index, a_k, a_v, Q, K, V, weights, concat)
    """),
    ("ch10a_multihead_backward", "relative_attention_forward", "the value table left out of the heads", """
        N, T, d = x.shape
        d_k = d // num_heads
        clip = rel_k.shape[0] // 2
        index = np.clip(np.arange(T) - np.arange(T)[:, None], -clip, clip) + clip
        a_k, a_v = rel_k[index], rel_v[index]

        def split(a):
            return a.reshape(N, T, num_heads, d_k).transpose(0, 2, 1, 3)

        Q, K, V = split(x @ W_q), split(x @ W_k), split(x @ W_v)
        scores = (Q @ K.transpose(0, 1, 3, 2) + np.einsum("nhid,ijd->nhij", Q, a_k)) / np.sqrt(d_k)
        weights = masked_softmax(scores, np.tril(np.ones((T, T), dtype=bool)) if causal else None)
        concat = (weights @ V).transpose(0, 2, 1, 3).reshape(N, T, d)
        return concat @ W_o, weights, (x, W_q, W_k, W_v, W_o, rel_k, index, a_k, a_v, Q, K, V, weights, concat)
    """),
    ("ch10a_multihead_backward", "relative_attention_backward", "a table entry keeps the gradient of one pair only", """
        x, W_q, W_k, W_v, W_o, rel_k, index, a_k, a_v, Q, K, V, weights, concat = cache
        N, h, T, d_k = Q.shape
        d = h * d_k

        def join(a):
            return a.transpose(0, 2, 1, 3).reshape(N * T, d)

        dW_o = concat.reshape(N * T, d).T @ dout.reshape(N * T, d)
        d_heads = (dout @ W_o.T).reshape(N, T, h, d_k).transpose(0, 2, 1, 3)
        d_weights = d_heads @ V.transpose(0, 1, 3, 2) + np.einsum("nhid,ijd->nhij", d_heads, a_v)
        dV = weights.transpose(0, 1, 3, 2) @ d_heads
        d_scores = softmax_backward(weights, d_weights) / np.sqrt(d_k)
        dQ = d_scores @ K + np.einsum("nhij,ijd->nhid", d_scores, a_k)
        dK = d_scores.transpose(0, 1, 3, 2) @ Q
        drel_k, drel_v = np.zeros_like(rel_k), np.zeros_like(rel_k)
        drel_k[index] = np.einsum("nhij,nhid->ijd", d_scores, Q)
        drel_v[index] = np.einsum("nhij,nhid->ijd", weights, d_heads)
        dQ, dK, dV = join(dQ), join(dK), join(dV)
        x2 = x.reshape(N * T, d)
        dx = dQ @ W_q.T + dK @ W_k.T + dV @ W_v.T
        return dx.reshape(N, T, d), x2.T @ dQ, x2.T @ dK, x2.T @ dV, dW_o, drel_k, drel_v
    """),
    ("ch10a_multihead_backward", "relative_attention_backward", "the queries' gradient misses the key table's term", """
        x, W_q, W_k, W_v, W_o, rel_k, index, a_k, a_v, Q, K, V, weights, concat = cache
        N, h, T, d_k = Q.shape
        d = h * d_k

        def join(a):
            return a.transpose(0, 2, 1, 3).reshape(N * T, d)

        dW_o = concat.reshape(N * T, d).T @ dout.reshape(N * T, d)
        d_heads = (dout @ W_o.T).reshape(N, T, h, d_k).transpose(0, 2, 1, 3)
        d_weights = d_heads @ V.transpose(0, 1, 3, 2) + np.einsum("nhid,ijd->nhij", d_heads, a_v)
        dV = weights.transpose(0, 1, 3, 2) @ d_heads
        d_scores = softmax_backward(weights, d_weights) / np.sqrt(d_k)
        dQ = d_scores @ K
        dK = d_scores.transpose(0, 1, 3, 2) @ Q
        drel_k, drel_v = np.zeros_like(rel_k), np.zeros_like(rel_k)
        np.add.at(drel_k, index, np.einsum("nhij,nhid->ijd", d_scores, Q))
        np.add.at(drel_v, index, np.einsum("nhij,nhid->ijd", weights, d_heads))
        dQ, dK, dV = join(dQ), join(dK), join(dV)
        x2 = x.reshape(N * T, d)
        dx = dQ @ W_q.T + dK @ W_k.T + dV @ W_v.T
        return dx.reshape(N, T, d), x2.T @ dQ, x2.T @ dK, x2.T @ dV, dW_o, drel_k, drel_v
    """),
    ("ch10b_ntm_addressing_torch", "least_used", "strictly smaller than the n-th smallest (ties and the n-th itself left out)", """
        threshold = torch.kthvalue(usage, num_reads, dim=-1).values
        return (usage < threshold[:, None]).to(usage.dtype)
    """),
    ("ch10b_ntm_addressing_torch", "lrua_step", "no erase before the write", """
        least = least_used(usage_prev, 1)
        gate = torch.sigmoid(alpha)[:, None]
        write_weights = gate * read_prev + (1 - gate) * least
        memory = memory + write_weights[..., None] * key[:, None, :]
        similarity = torch.einsum("nc,nrc->nr", key, memory) / (key.norm(dim=-1)[:, None] * memory.norm(dim=-1))
        read_weights = torch.softmax(similarity, dim=-1)
        read = torch.einsum("nr,nrc->nc", read_weights, memory)
        return read, memory, read_weights, write_weights, gamma * usage_prev + read_weights + write_weights
    """),
    ("ch10b_ntm_addressing_torch", "lrua_step", "the read from the memory before the write", """
        least = least_used(usage_prev, 1)
        gate = torch.sigmoid(alpha)[:, None]
        write_weights = gate * read_prev + (1 - gate) * least
        old = memory
        memory = memory * (1 - least)[..., None] + write_weights[..., None] * key[:, None, :]
        similarity = torch.einsum("nc,nrc->nr", key, old) / (key.norm(dim=-1)[:, None] * old.norm(dim=-1))
        read_weights = torch.softmax(similarity, dim=-1)
        read = torch.einsum("nr,nrc->nc", read_weights, old)
        return read, memory, read_weights, write_weights, gamma * usage_prev + read_weights + write_weights
    """),
]

REFERENCE_CALLS = [
    ("ch10b_ntm_addressing_torch", "lrua_step", "the torch track's NTM content addressing", """
        from attention_course.torch_track.ntm import ContentAddressing
        return ContentAddressing()(memory, key[:, None], torch.ones_like(alpha)[:, None]), None, None, None, None
    """),
]
