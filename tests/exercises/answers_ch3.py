"""Chapter 3's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch3a_multi_query_penalty", "multi_weighted_sum_forward", "the penalty without the identity (overlap only)", """
        G = A @ A.transpose(0, 2, 1)
        return A @ hs, (G ** 2).sum(axis=(1, 2)), (hs, A, G - np.eye(A.shape[1]))
    """),
    ("ch3a_multi_query_penalty", "multi_weighted_sum_backward", "the penalty's gradient counts one of G's two halves", """
        hs, A, G = cache
        return A.transpose(0, 2, 1) @ dM, dM @ hs.transpose(0, 2, 1) + 2.0 * dpenalty[:, None, None] * (G @ A)
    """),
    ("ch3a_multi_query_penalty", "multi_weighted_sum_backward", "the penalty sends no gradient", """
        hs, A, G = cache
        return A.transpose(0, 2, 1) @ dM, dM @ hs.transpose(0, 2, 1)
    """),
    ("ch3b_draw_read_torch", "gaussian_filterbank", "each filter normalised over the filters, not the positions", """
        offsets = torch.arange(n, dtype=centre.dtype) - (n - 1) / 2
        means = centre[:, None] + offsets[None, :] * torch.exp(log_delta)[:, None]
        positions = torch.arange(size, dtype=centre.dtype)
        logits = -(positions[None, None, :] - means[:, :, None]) ** 2 / (2 * torch.exp(log_sigma2)[:, None, None])
        return torch.softmax(logits, dim=1)
    """),
    ("ch3b_draw_read_torch", "gaussian_filterbank", "the grid of filters is off by half a stride (i - n / 2)", """
        offsets = torch.arange(n, dtype=centre.dtype) - n / 2
        means = centre[:, None] + offsets[None, :] * torch.exp(log_delta)[:, None]
        positions = torch.arange(size, dtype=centre.dtype)
        logits = -(positions[None, None, :] - means[:, :, None]) ** 2 / (2 * torch.exp(log_sigma2)[:, None, None])
        return torch.softmax(logits, dim=-1)
    """),
    ("ch3b_draw_read_torch", "draw_read", "the row and column filters swapped", """
        N, rows, columns, D = features.shape
        F_x = gaussian_filterbank(g_x, log_delta, log_sigma2, n, rows)
        F_y = gaussian_filterbank(g_y, log_delta, log_sigma2, n, columns)
        glimpse = torch.einsum("nia,nbad->nijd", F_x, features.transpose(1, 2), F_y)
        return torch.exp(log_gamma)[:, None, None, None] * glimpse
    """),
]

REFERENCE_CALLS = [
    ("ch3a_multi_query_penalty", "multi_weighted_sum_forward", "WeightSum, the penalty left out", """
        from attention_course.numpy_track import WeightSum
        layer = WeightSum()
        M = layer.forward(hs, A)
        return M, np.zeros(A.shape[0]), (hs, A, A)
    """),
]
