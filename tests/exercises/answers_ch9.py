"""Chapter 9's exercises: plausible wrong answers (each must cost points) and calls of the reference
implementation (each must be flagged for review). Loaded by ``exercise_helpers``; the format is its
``WRONG_ANSWERS`` and ``REFERENCE_CALLS``: (notebook, function, what is wrong, the body of the answer)."""

WRONG_ANSWERS = [
    ("ch9a_attention_pooling", "attention_pooling_forward", "the padding takes part in the softmax", """
        v = np.tanh(np.einsum("nth,ha->nta", hs, W_proj) + b_proj)
        alpha = masked_softmax(np.einsum("nta,a->nt", v, u_query), None)
        pooled = np.einsum("nt,nth->nh", alpha, hs)
        return pooled, alpha, (hs, v, alpha, W_proj, u_query)
    """),
    ("ch9a_attention_pooling", "attention_pooling_forward", "no tanh: the scores are linear in h", """
        v = np.einsum("nth,ha->nta", hs, W_proj) + b_proj
        alpha = masked_softmax(np.einsum("nta,a->nt", v, u_query), mask)
        pooled = np.einsum("nt,nth->nh", alpha, hs)
        return pooled, alpha, (hs, v, alpha, W_proj, u_query)
    """),
    ("ch9a_attention_pooling", "attention_pooling_backward", "d_hs only through the weighted sum, not the scores", """
        hs, v, alpha, W_proj, u_query = cache
        d_scores = softmax_backward(alpha, np.einsum("nh,nth->nt", d_pooled, hs))
        d_pre = np.einsum("nt,a->nta", d_scores, u_query) * (1 - v ** 2)
        d_hs = np.einsum("nt,nh->nth", alpha, d_pooled)
        return d_hs, np.einsum("nth,nta->ha", hs, d_pre), d_pre.sum(axis=(0, 1)), np.einsum("nt,nta->a", d_scores, v)
    """),
    ("ch9a_attention_pooling", "attention_pooling_backward", "the softmax's Jacobian left out", """
        hs, v, alpha, W_proj, u_query = cache
        d_scores = alpha * np.einsum("nh,nth->nt", d_pooled, hs)
        d_pre = np.einsum("nt,a->nta", d_scores, u_query) * (1 - v ** 2)
        d_hs = np.einsum("nt,nh->nth", alpha, d_pooled) + np.einsum("nta,ha->nth", d_pre, W_proj)
        return d_hs, np.einsum("nth,nta->ha", hs, d_pre), d_pre.sum(axis=(0, 1)), np.einsum("nt,nta->a", d_scores, v)
    """),
    ("ch9b_caption_attention_torch", "grid_attention", "the softmax runs over the batch, not the cells", """
        query = (h_prev @ W_a)[:, None, :]
        energies = torch.tanh(torch.einsum("nld,da->nla", features, U_a) + query) @ v_a
        weights = torch.softmax(energies, dim=0)
        return torch.einsum("nl,nld->nd", weights, features), weights
    """),
    ("ch9b_caption_attention_torch", "grid_attention", "no tanh between the sum and v_a", """
        query = (h_prev @ W_a)[:, None, :]
        energies = (torch.einsum("nld,da->nla", features, U_a) + query) @ v_a
        weights = torch.softmax(energies, dim=-1)
        return torch.einsum("nl,nld->nd", weights, features), weights
    """),
    ("ch9b_caption_attention_torch", "doubly_stochastic_penalty", "the padded steps are counted", """
        received = alphas.sum(dim=1)
        return weight * torch.square(1.0 - received).sum() / alphas.shape[0]
    """),
    ("ch9b_caption_attention_torch", "doubly_stochastic_penalty", "averaged over the cells instead of summed", """
        received = torch.einsum("ntl,nt->nl", alphas, step_mask.to(alphas.dtype))
        return weight * torch.square(1.0 - received).mean(dim=1).sum() / alphas.shape[0]
    """),
]

REFERENCE_CALLS = [
    ("ch9a_attention_pooling", "attention_pooling_forward", "AttentionPooling", """
        from attention_course.numpy_track import AttentionPooling
        layer = AttentionPooling(hs.shape[2], W_proj.shape[1])
        layer.params["W_proj"][...], layer.params["b_proj"][...], layer.params["u_query"][...] = W_proj, b_proj, u_query
        return layer.forward(hs, mask), layer.attention_weights, layer
    """),
    ("ch9b_caption_attention_torch", "grid_attention", "the torch track's GridAttention", """
        from attention_course.torch_track.captioning import GridAttention
        layer = GridAttention(features.shape[2], h_prev.shape[1], W_a.shape[1], dtype=features.dtype)
        with torch.no_grad():
            layer.W_a.copy_(W_a), layer.U_a.copy_(U_a), layer.v_a.copy_(v_a)
        return layer(features, h_prev)
    """),
]
