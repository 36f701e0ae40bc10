"""Chapter 9's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch9a_key_value_memory", "kv_memory_forward", "the memory network's update, q + o, with no turn by R", """
        queries, weights = [query], []
        for R_j in R:
            p = masked_softmax(np.einsum("nd,nsd->ns", queries[-1], keys), mask)
            weights.append(p)
            queries.append(queries[-1] + np.einsum("ns,nsd->nd", p, values))
        return queries[-1], np.stack(weights, axis=1), (queries, weights, keys, values, R)
    """),
    ("ch9a_key_value_memory", "kv_memory_forward", "the turned read alone: q <- o R, the query not carried", """
        queries, weights = [query], []
        for R_j in R:
            p = masked_softmax(np.einsum("nd,nsd->ns", queries[-1], keys), mask)
            weights.append(p)
            queries.append(np.einsum("ns,nsd->nd", p, values) @ R_j)
        return queries[-1], np.stack(weights, axis=1), (queries, weights, keys, values, R)
    """),
    ("ch9a_key_value_memory", "kv_memory_backward", "the keys' and values' gradients kept from the first hop only", """
        queries, weights, keys, values, R = cache
        dR = np.zeros_like(R)
        d_q = d_final
        for j in range(len(R) - 1, -1, -1):
            q, p = queries[j], weights[j]
            dR[j] = (q + np.einsum("ns,nsd->nd", p, values)).T @ d_q
            d_sum = d_q @ R[j].T
            d_values = np.einsum("ns,nd->nsd", p, d_sum)
            d_scores = softmax_backward(p, np.einsum("nd,nsd->ns", d_sum, values))
            d_keys = np.einsum("ns,nd->nsd", d_scores, q)
            d_q = d_sum + np.einsum("ns,nsd->nd", d_scores, keys)
        return d_q, d_keys, d_values, dR
    """),
    ("ch9a_key_value_memory", "kv_memory_backward", "the query's gradient only through the scores", """
        queries, weights, keys, values, R = cache
        d_keys, d_values, dR = np.zeros_like(keys), np.zeros_like(values), np.zeros_like(R)
        d_q = d_final
        for j in range(len(R) - 1, -1, -1):
            q, p = queries[j], weights[j]
            dR[j] = (q + np.einsum("ns,nsd->nd", p, values)).T @ d_q
            d_sum = d_q @ R[j].T
            d_values += np.einsum("ns,nd->nsd", p, d_sum)
            d_scores = softmax_backward(p, np.einsum("nd,nsd->ns", d_sum, values))
            d_keys += np.einsum("ns,nd->nsd", d_scores, q)
            d_q = np.einsum("ns,nsd->nd", d_scores, keys)
        return d_q, d_keys, d_values, dR
    """),
    ("ch9b_caption_attention_torch", "visual_sentinel", "the gate inside the tanh (tanh(g * m))", """
        return torch.tanh(torch.sigmoid(inputs @ W_x + previous_states @ W_h) * memory_cells)
    """),
    ("ch9b_caption_attention_torch", "adaptive_attention", "the sentinel gated apart by a sigmoid, the cells' softmax alone", """
        queries = states @ W_g
        cells = torch.tanh((features @ W_v)[:, None, :, :] + queries[:, :, None, :]) @ w_h
        beta = torch.sigmoid(torch.tanh(sentinels @ W_s + queries) @ w_h)
        alpha = torch.softmax(cells, dim=-1)
        contexts = (1 - beta[..., None]) * (alpha @ features) + beta[..., None] * sentinels
        return contexts, torch.cat([(1 - beta[..., None]) * alpha, beta[..., None]], dim=-1), beta
    """),
    ("ch9b_caption_attention_torch", "adaptive_attention", "the sentinel scored with the cells' matrix W_v", """
        queries = states @ W_g
        cells = torch.tanh((features @ W_v)[:, None, :, :] + queries[:, :, None, :]) @ w_h
        sentinel = torch.tanh(sentinels @ W_v + queries) @ w_h
        alpha_hat = torch.softmax(torch.cat([cells, sentinel[..., None]], dim=-1), dim=-1)
        return alpha_hat[..., :-1] @ features + alpha_hat[..., -1:] * sentinels, alpha_hat, alpha_hat[..., -1]
    """),
    ("ch9b_caption_attention_torch", "adaptive_attention", "the softmax over the steps instead of the candidates", """
        queries = states @ W_g
        cells = torch.tanh((features @ W_v)[:, None, :, :] + queries[:, :, None, :]) @ w_h
        sentinel = torch.tanh(sentinels @ W_s + queries) @ w_h
        alpha_hat = torch.softmax(torch.cat([cells, sentinel[..., None]], dim=-1), dim=1)
        return alpha_hat[..., :-1] @ features + alpha_hat[..., -1:] * sentinels, alpha_hat, alpha_hat[..., -1]
    """),
]

REFERENCE_CALLS = [
    ("ch9b_caption_attention_torch", "adaptive_attention", "the torch track's GridAttention for the cells", """
        from attention_course.torch_track import GridAttention
        layer = GridAttention(features.shape[-1], states.shape[-1], W_v.shape[1], dtype=features.dtype)
        queries = states @ W_g
        sentinel = torch.tanh(sentinels @ W_s + queries) @ w_h
        beta = torch.sigmoid(sentinel)
        return beta[..., None] * sentinels, None, beta
    """),
]
