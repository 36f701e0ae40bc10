"""Chapter 8's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch8a_local_p_window", "localness_forward", "the width D used as the Gaussian's sigma", """
        lengths = np.asarray(lengths)
        u = np.tanh(s @ W_p)
        p = lengths[:, None] * sigmoid(u @ v_p)
        width = lengths[:, None] * sigmoid(u @ v_d)
        offsets = np.arange(hs.shape[1]) - p[..., None]
        bias = -offsets ** 2 / (2 * width[..., None] ** 2)
        real = (np.arange(hs.shape[1]) < lengths[:, None])[:, None, :]
        alpha = masked_softmax(s @ hs.transpose(0, 2, 1) + bias, real)
        return alpha @ hs, alpha, p, width, (hs, s, lengths, W_p, v_p, v_d, u, p, width, offsets, alpha)
    """),
    ("ch8a_local_p_window", "localness_forward", "Luong's way: the Gaussian multiplies the softmax", """
        lengths = np.asarray(lengths)
        u = np.tanh(s @ W_p)
        p = lengths[:, None] * sigmoid(u @ v_p)
        width = lengths[:, None] * sigmoid(u @ v_d)
        offsets = np.arange(hs.shape[1]) - p[..., None]
        real = (np.arange(hs.shape[1]) < lengths[:, None])[:, None, :]
        alpha = masked_softmax(s @ hs.transpose(0, 2, 1), real) * np.exp(-2 * offsets ** 2 / width[..., None] ** 2)
        return alpha @ hs, alpha, p, width, (hs, s, lengths, W_p, v_p, v_d, u, p, width, offsets, alpha)
    """),
    ("ch8a_local_p_window", "localness_backward", "no gradient through the width D", """
        hs, s, lengths, W_p, v_p, v_d, u, p, width, offsets, alpha = cache
        d_logits = softmax_backward(alpha, dcontext @ hs.transpose(0, 2, 1))
        dhs = alpha.transpose(0, 2, 1) @ dcontext + d_logits.transpose(0, 2, 1) @ s
        d_p_pre = 4 * (d_logits * offsets).sum(axis=-1) / width ** 2 * p * (1 - p / lengths[:, None])
        d_u_pre = d_p_pre[..., None] * v_p * (1 - u ** 2)
        return (dhs, d_logits @ hs + d_u_pre @ W_p.T, np.einsum("nth,nta->ha", s, d_u_pre),
                np.einsum("nt,nta->a", d_p_pre, u), np.zeros_like(v_d))
    """),
    ("ch8a_local_p_window", "localness_backward", "the sigmoid's derivative without the length S_n", """
        hs, s, lengths, W_p, v_p, v_d, u, p, width, offsets, alpha = cache
        d_logits = softmax_backward(alpha, dcontext @ hs.transpose(0, 2, 1))
        dhs = alpha.transpose(0, 2, 1) @ dcontext + d_logits.transpose(0, 2, 1) @ s
        d_p_pre = 4 * (d_logits * offsets).sum(axis=-1) / width ** 2 * p * (1 - p)
        d_width_pre = 4 * (d_logits * offsets ** 2).sum(axis=-1) / width ** 3 * width * (1 - width)
        d_u_pre = (d_p_pre[..., None] * v_p + d_width_pre[..., None] * v_d) * (1 - u ** 2)
        return (dhs, d_logits @ hs + d_u_pre @ W_p.T, np.einsum("nth,nta->ha", s, d_u_pre),
                np.einsum("nt,nta->a", d_p_pre, u), np.einsum("nt,nta->a", d_width_pre, u))
    """),
    ("ch8b_reinforce_torch", "masked_entropy", "0 * log 0 left in: NaN gradients on the padding", """
        log_alpha = torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return -torch.where(mask, log_alpha.exp() * log_alpha, torch.zeros_like(scores)).sum(dim=-1)
    """),
    ("ch8b_reinforce_torch", "masked_entropy", "the entropy over every position, padding included", """
        log_alpha = torch.log_softmax(scores, dim=-1)
        return -(log_alpha.exp() * log_alpha).sum(dim=-1)
    """),
    ("ch8b_reinforce_torch", "self_critical_surrogate", "the losses are not held constant", """
        masked_scores = scores.masked_fill(~mask, float("-inf"))
        rows = torch.arange(scores.shape[0])
        greedy = masked_scores.argmax(dim=-1)
        advantage = losses[rows, z] - losses[rows, greedy]
        log_alpha_z = torch.log_softmax(masked_scores, dim=-1)[rows, z]
        return (advantage * log_alpha_z - entropy_weight * masked_entropy(scores, mask)).mean()
    """),
    ("ch8b_reinforce_torch", "self_critical_surrogate", "the greedy choice may land on the padding", """
        masked_scores = scores.masked_fill(~mask, float("-inf"))
        rows = torch.arange(scores.shape[0])
        greedy = scores.argmax(dim=-1)
        advantage = (losses[rows, z] - losses[rows, greedy]).detach()
        log_alpha_z = torch.log_softmax(masked_scores, dim=-1)[rows, z]
        return (advantage * log_alpha_z - entropy_weight * masked_entropy(scores, mask)).mean()
    """),
    ("ch8b_reinforce_torch", "self_critical_surrogate", "the entropy bonus with the wrong sign", """
        masked_scores = scores.masked_fill(~mask, float("-inf"))
        rows = torch.arange(scores.shape[0])
        greedy = masked_scores.argmax(dim=-1)
        advantage = (losses[rows, z] - losses[rows, greedy]).detach()
        log_alpha_z = torch.log_softmax(masked_scores, dim=-1)[rows, z]
        return (advantage * log_alpha_z + entropy_weight * masked_entropy(scores, mask)).mean()
    """),
]

REFERENCE_CALLS = []
