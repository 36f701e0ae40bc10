"""Chapter 4's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch4a_l2_attention", "l2_attention_forward", "the general (dot) score of the projections, not the distance", """
        q, k = decoder_states @ W_Q, encoder_states @ W_K
        weights = masked_softmax(q @ k.transpose(0, 2, 1) / np.sqrt(W_Q.shape[1]), mask[:, None, :])
        return weights, (decoder_states, encoder_states, W_Q, W_K, q, k, weights)
    """),
    ("ch4a_l2_attention", "l2_attention_forward", "no scaling by the square root of A", """
        q, k = decoder_states @ W_Q, encoder_states @ W_K
        squared = ((q[:, :, None, :] - k[:, None, :, :]) ** 2).sum(axis=-1)
        weights = masked_softmax(-squared, mask[:, None, :])
        return weights, (decoder_states, encoder_states, W_Q, W_K, q, k, weights)
    """),
    ("ch4a_l2_attention", "l2_attention_backward", "the keys' squared lengths send no gradient", """
        decoder_states, encoder_states, W_Q, W_K, q, k, weights = cache
        dscores = softmax_backward(weights, dweights) / np.sqrt(W_Q.shape[1])
        dq = 2.0 * dscores @ k
        dk = 2.0 * dscores.transpose(0, 2, 1) @ q
        return (dq @ W_Q.T, dk @ W_K.T, np.einsum("nih,nia->ha", decoder_states, dq),
                np.einsum("njh,nja->ha", encoder_states, dk))
    """),
    ("ch4b_sparsemax_torch", "masked_sparsemax", "the padding takes part in the threshold", """
        ordered, _ = torch.sort(scores, dim=-1, descending=True)
        ranks = torch.arange(1, scores.shape[-1] + 1, dtype=scores.dtype)
        totals = torch.cumsum(ordered, dim=-1)
        k = (1 + ranks * ordered > totals).sum(dim=-1, keepdim=True)
        tau = (torch.gather(totals, -1, k - 1) - 1) / k.to(scores.dtype)
        return torch.where(mask[:, None, :], torch.clamp(scores - tau, min=0), torch.zeros_like(scores))
    """),
    ("ch4b_sparsemax_torch", "masked_sparsemax", "the masked softmax instead", """
        weights = torch.softmax(scores.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
        return torch.nan_to_num(weights)
    """),
    ("ch4b_sparsemax_torch", "sparsemax_backward", "the mean over the support is not subtracted", """
        return (weights > 0).to(dweights.dtype) * dweights
    """),
]

REFERENCE_CALLS = [
    ("ch4a_l2_attention", "l2_attention_forward", "the general score of the numpy track", """
        from attention_course.numpy_track import AttentionWeight
        layer = AttentionWeight("general", encoder_states.shape[-1], decoder_states.shape[-1])
        weights = layer.forward(encoder_states, decoder_states, mask)
        return weights, layer
    """),
]
