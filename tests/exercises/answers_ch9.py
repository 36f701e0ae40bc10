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
    ("ch9b_caption_attention_torch", "gated_grid_attention", "the gate scales the weights' softmax input instead", """
        keys = features @ U_a
        queries = previous_states @ W_a
        beta = torch.sigmoid(previous_states @ w_beta + b_beta)
        energies = beta[..., None] * (torch.tanh(queries[:, :, None, :] + keys[:, None, :, :]) @ v_a)
        alpha = torch.softmax(energies, dim=-1)
        return alpha @ features, alpha, beta
    """),
    ("ch9b_caption_attention_torch", "gated_grid_attention", "the softmax over the steps instead of the cells", """
        keys = features @ U_a
        queries = previous_states @ W_a
        alpha = torch.softmax(torch.tanh(queries[:, :, None, :] + keys[:, None, :, :]) @ v_a, dim=1)
        beta = torch.sigmoid(previous_states @ w_beta + b_beta)
        return beta[..., None] * (alpha @ features), alpha, beta
    """),
    ("ch9b_caption_attention_torch", "deep_output_logits", "the embedding of the previous word left out", """
        return (states @ L_h + contexts @ L_z) @ L_o
    """),
]

REFERENCE_CALLS = [
    ("ch9b_caption_attention_torch", "gated_grid_attention", "the torch track's GridAttention", """
        from attention_course.torch_track import GridAttention
        layer = GridAttention(features.shape[-1], previous_states.shape[-1], W_a.shape[1])
        beta = torch.sigmoid(previous_states @ w_beta + b_beta)
        return beta, None, beta
    """),
]
