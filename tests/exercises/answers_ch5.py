"""Chapter 5's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch5a_location_attention", "location_attention_forward", "the kernel runs the other way (a convolution, not a correlation)", """
        T = hs.shape[1]
        r = Q.shape[0]
        half = (r - 1) // 2
        padded = np.pad(alpha_prev, ((0, 0), (half, half)))
        windows = np.stack([padded[:, m:m + T] for m in range(r)][::-1], axis=-1)
        act = np.tanh((s @ W_s)[:, None, :] + hs @ W_h + windows @ Q + b)
        alpha = masked_softmax(act @ w, mask)
        return np.einsum("nj,njh->nh", alpha, hs), alpha, (s, hs, W_s, W_h, Q, w, windows, act, alpha)
    """),
    ("ch5a_location_attention", "location_attention_backward", "the encoder states' path through the scores is missed", """
        s, hs, W_s, W_h, Q, w, windows, act, alpha = cache
        T, r = hs.shape[1], Q.shape[0]
        half = (r - 1) // 2
        dscores = softmax_backward(alpha, dalpha + np.einsum("njh,nh->nj", hs, dcontext))
        dpre = dscores[:, :, None] * w * (1.0 - act ** 2)
        dwindows = dpre @ Q.T
        dpadded = np.zeros((alpha.shape[0], T + r - 1))
        for m in range(r):
            dpadded[:, m:m + T] += dwindows[:, :, m]
        return (dpre.sum(axis=1) @ W_s.T, alpha[:, :, None] * dcontext[:, None, :], dpadded[:, half:half + T],
                s.T @ dpre.sum(axis=1), np.einsum("njh,nja->ha", hs, dpre), np.einsum("njm,nja->ma", windows, dpre),
                dpre.sum(axis=(0, 1)), np.einsum("nja,nj->a", act, dscores))
    """),
    ("ch5a_location_attention", "location_attention_backward", "the gradient arriving at the weights is ignored", """
        s, hs, W_s, W_h, Q, w, windows, act, alpha = cache
        T, r = hs.shape[1], Q.shape[0]
        half = (r - 1) // 2
        dscores = softmax_backward(alpha, np.einsum("njh,nh->nj", hs, dcontext))
        dpre = dscores[:, :, None] * w * (1.0 - act ** 2)
        dwindows = dpre @ Q.T
        dpadded = np.zeros((alpha.shape[0], T + r - 1))
        for m in range(r):
            dpadded[:, m:m + T] += dwindows[:, :, m]
        return (dpre.sum(axis=1) @ W_s.T, alpha[:, :, None] * dcontext[:, None, :] + dpre @ W_h.T,
                dpadded[:, half:half + T], s.T @ dpre.sum(axis=1), np.einsum("njh,nja->ha", hs, dpre),
                np.einsum("njm,nja->ma", windows, dpre), dpre.sum(axis=(0, 1)), np.einsum("nja,nj->a", act, dscores))
    """),
    ("ch5b_input_feeding_torch", "input_feeding_decoder", "the context is fed back, not the attentional vector", """
        s, fed = s0, torch.zeros_like(s0)
        h_tildes, alphas = [], []
        for i in range(ys.shape[1]):
            s, h_tilde, alpha = input_feeding_step(ys[:, i], s, fed, hs, mask, W_x, W_h, b, W_a, W_c, b_c)
            fed = torch.einsum("nj,njh->nh", alpha, hs)[:, :s0.shape[1]]
            h_tildes.append(h_tilde)
            alphas.append(alpha)
        return torch.stack(h_tildes, dim=1), torch.stack(alphas, dim=1)
    """),
    ("ch5b_input_feeding_torch", "input_feeding_decoder", "nothing is fed back (Luong's decoder of the chapter)", """
        s = s0
        h_tildes, alphas = [], []
        for i in range(ys.shape[1]):
            s, h_tilde, alpha = input_feeding_step(ys[:, i], s, torch.zeros_like(s0), hs, mask, W_x, W_h, b, W_a, W_c, b_c)
            h_tildes.append(h_tilde)
            alphas.append(alpha)
        return torch.stack(h_tildes, dim=1), torch.stack(alphas, dim=1)
    """),
    ("ch5b_input_feeding_torch", "input_feeding_step", "the padding is not masked", """
        s = torch.tanh(torch.cat([y, h_tilde_prev], dim=-1) @ W_x + s_prev @ W_h + b)
        alpha = torch.softmax(torch.einsum("nh,njh->nj", s @ W_a, hs), dim=-1)
        context = torch.einsum("nj,njh->nh", alpha, hs)
        return s, torch.tanh(torch.cat([context, s], dim=-1) @ W_c + b_c), alpha
    """),
]

REFERENCE_CALLS = [
    ("ch5a_location_attention", "location_attention_forward", "the numpy track's additive Attention, no location", """
        from attention_course.numpy_track import Attention
        layer = Attention("additive", hs.shape[-1], s.shape[-1], W_s.shape[1])
        context = layer.forward(hs, s, mask)
        return context, layer.attention_weights, layer
    """),
]
