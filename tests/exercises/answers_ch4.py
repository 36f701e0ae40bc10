"""Chapter 4's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch4a_score_functions", "scaled_dot_score_backward", "the backward pass forgets the 1/sqrt(H)", """
        return np.einsum("nij,nik->njk", de, s), np.einsum("nij,njk->nik", de, hs)
    """),
    ("ch4a_score_functions", "general_score_backward", "dW_a is transposed", """
        dhs = np.einsum("nij,nie->nje", de, s @ W_a)
        ds = np.einsum("nij,njd->nid", de, hs @ W_a.T)
        return dhs, ds, np.einsum("nij,nid,nje->ed", de, s, hs)
    """),
    ("ch4a_score_functions", "additive_score_backward", "the tanh derivative is missing", """
        joint = np.tanh((s @ W_a)[:, :, None, :] + (hs @ U_a)[:, None, :, :])
        dv_a = np.einsum("nij,nija->a", de, joint)
        d_inside = de[..., None] * v_a
        d_s, d_h = d_inside.sum(axis=2), d_inside.sum(axis=1)
        return d_h @ U_a.T, d_s @ W_a.T, np.einsum("nid,nia->da", s, d_s), np.einsum("nje,nja->ea", hs, d_h), dv_a
    """),
    ("ch4b_masked_softmax", "masked_softmax_backward", "the second term of the softmax Jacobian is missing", """
        return alpha * dalpha
    """),
    ("ch4b_masked_softmax", "masked_softmax", "masked scores filled with -1e9: fully padded rows come out uniform", """
        masked = np.where(mask[:, None, :], e, -1e9)
        weights = np.exp(masked - masked.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)
    """),
    ("ch4b_masked_softmax", "masked_softmax", "no maximum subtracted: large scores overflow", """
        weights = np.where(mask[:, None, :], np.exp(e), 0.0)
        total = weights.sum(axis=-1, keepdims=True)
        return weights / np.where(total > 0, total, 1.0)
    """),
    ("ch4b_masked_softmax", "masked_softmax_torch", "-inf and torch.softmax: NaN on fully padded rows", """
        return torch.softmax(e.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    """),
]

REFERENCE_CALLS = [
    ("ch4a_score_functions", "dot_score", "DotScore", """
        from attention_course.numpy_track import DotScore
        return DotScore(hs.shape[-1], hs.shape[-1]).forward(hs, s)
    """),
    ("ch4b_masked_softmax", "masked_softmax", "the package's masked_softmax", """
        from attention_course.numpy_track import masked_softmax as reference
        return reference(e, mask[:, None, :])
    """),
]
