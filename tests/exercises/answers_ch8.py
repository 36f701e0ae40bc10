"""Chapter 8's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation, each must be flagged for review."""

# The body of local_p_forward with one piece swapped in: {window} decides which positions count,
# {sigma} is the Gaussian's width.
_LOCAL_P_FORWARD = """
    u = np.tanh(s @ W_p)
    gate = 1 / (1 + np.exp(-(u @ v_p)))
    p = lengths[:, None] * gate
    j = np.arange(hs.shape[1])
    window = {window}
    a = masked_softmax(s @ hs.transpose(0, 2, 1), window)
    sigma = {sigma}
    g = np.exp(-(j - p[..., None]) ** 2 / (2 * sigma ** 2))
    alpha = a * g
    return alpha @ hs, alpha, p, (hs, s, lengths, W_p, v_p, D, u, gate, p, a, g, alpha)
"""
_WINDOW = "(np.abs(j - np.floor(p + 0.5)[..., None]) <= D) & (j < lengths[:, None, None])"

# The body of local_p_backward with the gradient of p_i given as {d_p}.
_LOCAL_P_BACKWARD = """
    hs, s, lengths, W_p, v_p, D, u, gate, p, a, g, alpha = cache
    j = np.arange(hs.shape[1])
    sigma = D / 2
    d_alpha = dcontext @ hs.transpose(0, 2, 1)
    d_scores = softmax_backward(a, d_alpha * g)
    dhs = alpha.transpose(0, 2, 1) @ dcontext + d_scores.transpose(0, 2, 1) @ s
    ds = d_scores @ hs
    d_p = {d_p}
    d_gate_pre = d_p * lengths[:, None] * gate * (1 - gate)
    dv_p = np.einsum("nt,nta->a", d_gate_pre, u)
    d_u_pre = d_gate_pre[..., None] * v_p * (1 - u ** 2)
    dW_p = np.einsum("nth,nta->ha", s, d_u_pre)
    ds = ds + d_u_pre @ W_p.T
    return dhs, ds, dW_p, dv_p
"""

WRONG_ANSWERS = [
    ("ch8a_local_p_window", "local_p_forward", "the Gaussian's width is D, not D / 2",
     _LOCAL_P_FORWARD.format(window=_WINDOW, sigma="D")),
    ("ch8a_local_p_window", "local_p_forward", "the window runs on into the padding",
     _LOCAL_P_FORWARD.format(window="np.abs(j - np.floor(p + 0.5)[..., None]) <= D", sigma="D / 2")),
    ("ch8a_local_p_window", "local_p_forward", "the softmax runs over the whole sequence, not the window",
     _LOCAL_P_FORWARD.format(window="np.broadcast_to(j < lengths[:, None, None], (s.shape[0], s.shape[1], j.size))",
                             sigma="D / 2")),
    ("ch8a_local_p_window", "local_p_forward", "the window is centred on floor(p_i), not round(p_i)",
     _LOCAL_P_FORWARD.format(window=_WINDOW.replace("np.floor(p + 0.5)", "np.floor(p)"), sigma="D / 2")),
    ("ch8a_local_p_window", "local_p_backward", "no gradient through p_i: W_p and v_p never learn",
     _LOCAL_P_BACKWARD.format(d_p="np.zeros_like(p)")),
    ("ch8a_local_p_window", "local_p_backward", "the Gaussian's derivative has the wrong sign",
     _LOCAL_P_BACKWARD.format(d_p="(d_alpha * a * g * (p[..., None] - j)).sum(axis=-1) / sigma ** 2")),
    ("ch8b_reinforce_torch", "hard_sample", "the mode, not a sample: the argmax of the scores alone", """
        z = torch.argmax(scores, dim=-1)
        return hs[torch.arange(hs.shape[0]), z], z
    """),
    ("ch8b_reinforce_torch", "hard_sample", "the Gumbel noise enters with the wrong sign", """
        z = torch.argmax(scores + torch.log(-torch.log(u)), dim=-1)
        return hs[torch.arange(hs.shape[0]), z], z
    """),
    ("ch8b_reinforce_torch", "reinforce_surrogate", "the baseline is added, not subtracted", """
        log_alpha_z = torch.log_softmax(scores, dim=-1).gather(1, z[:, None])[:, 0]
        return ((loss + baseline).detach() * log_alpha_z).mean()
    """),
    ("ch8b_reinforce_torch", "reinforce_surrogate", "the probability of the sample, not its log", """
        alpha_z = torch.softmax(scores, dim=-1).gather(1, z[:, None])[:, 0]
        return ((loss - baseline).detach() * alpha_z).mean()
    """),
    ("ch8b_reinforce_torch", "reinforce_surrogate", "no detach: gradient flows into the loss and the baseline", """
        log_alpha_z = torch.log_softmax(scores, dim=-1).gather(1, z[:, None])[:, 0]
        return ((loss - baseline) * log_alpha_z).mean()
    """),
    ("ch8b_reinforce_torch", "reinforce_surrogate", "summed over the batch, not averaged", """
        log_alpha_z = torch.log_softmax(scores, dim=-1).gather(1, z[:, None])[:, 0]
        return ((loss - baseline).detach() * log_alpha_z).sum()
    """),
]

REFERENCE_CALLS = [
    ("ch8a_local_p_window", "local_p_forward", "LocalAttention", """
        from attention_course.numpy_track import LocalAttention
        N, T_enc, H = hs.shape
        layer = LocalAttention("dot", H, H, W_p.shape[1], kind="local-p", window=D)
        layer.params["W_p"][...], layer.params["v_p"][...] = W_p, v_p
        context = layer.forward(hs, s, np.arange(T_enc)[None, :] < lengths[:, None])
        return context, layer.attention_weights, layer.positions, layer
    """),
    ("ch8b_reinforce_torch", "hard_sample", "the torch track's gumbel_noise", """
        from attention_course.torch_track.hard_attention import gumbel_noise
        z = torch.argmax(scores + gumbel_noise(u), dim=-1)
        return hs[torch.arange(hs.shape[0]), z], z
    """),
]
