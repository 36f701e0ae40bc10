"""Chapter 9's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch9a_attention_pooling", "structured_attention_forward", "the softmax over the hops instead of the positions", """
        hidden = np.tanh(hs @ W_s1)
        A = masked_softmax(hidden @ W_s2, mask[:, :, None], axis=-1).transpose(0, 2, 1)
        excess = A @ A.transpose(0, 2, 1) - np.eye(A.shape[1])
        return A @ hs, A, float((excess ** 2).sum() / len(hs)), (hs, hidden, A, excess, W_s1, W_s2)
    """),
    ("ch9a_attention_pooling", "structured_attention_forward", "the penalty without the identity: ||A A^T||^2", """
        hidden = np.tanh(hs @ W_s1)
        A = masked_softmax((hidden @ W_s2).transpose(0, 2, 1), mask[:, None, :])
        excess = A @ A.transpose(0, 2, 1)
        return A @ hs, A, float((excess ** 2).sum() / len(hs)), (hs, hidden, A, excess, W_s1, W_s2)
    """),
    ("ch9a_attention_pooling", "structured_attention_backward", "the penalty's gradient is 2 (A A^T - I) A", """
        hs, hidden, A, excess, W_s1, W_s2 = cache
        dA = dM @ hs.transpose(0, 2, 1) + d_penalty * 2 * excess @ A / len(hs)
        d_scores = softmax_backward(A, dA).transpose(0, 2, 1)
        d_pre = (d_scores @ W_s2.T) * (1 - hidden ** 2)
        return (A.transpose(0, 2, 1) @ dM + d_pre @ W_s1.T, np.einsum("nth,nta->ha", hs, d_pre),
                np.einsum("nta,ntr->ar", hidden, d_scores))
    """),
    ("ch9a_attention_pooling", "structured_attention_backward", "hs's gradient only as the values of M", """
        hs, hidden, A, excess, W_s1, W_s2 = cache
        dA = dM @ hs.transpose(0, 2, 1) + d_penalty * 4 * excess @ A / len(hs)
        d_scores = softmax_backward(A, dA).transpose(0, 2, 1)
        d_pre = (d_scores @ W_s2.T) * (1 - hidden ** 2)
        return (A.transpose(0, 2, 1) @ dM, np.einsum("nth,nta->ha", hs, d_pre),
                np.einsum("nta,ntr->ar", hidden, d_scores))
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
