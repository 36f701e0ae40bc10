"""Chapter 5's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch5a_time_attention", "time_attention_backward", "no gradient to the encoder states through the weighted sum", """
        hs, s, alpha = cache
        dscores = softmax_backward(alpha, np.einsum("nih,njh->nij", dcontext, hs))
        return np.einsum("nij,nih->njh", dscores, s), np.einsum("nij,njh->nih", dscores, hs)
    """),
    ("ch5a_time_attention", "time_attention_forward", "padding not masked", """
        alpha = masked_softmax(np.einsum("nih,njh->nij", s, hs), None)
        return np.einsum("nij,njh->nih", alpha, hs), alpha, (hs, s, alpha)
    """),
    ("ch5b_attention_decoder", "combine_forward", "the state comes first in the concatenation", """
        joined = np.concatenate([s, context], axis=-1)
        h_tilde = np.tanh(joined @ W_c + b_c)
        return h_tilde, (joined, W_c, h_tilde, context.shape[-1])
    """),
    ("ch5b_attention_decoder", "combine_backward", "dW_c from the first example only (not summed over the batch)", """
        joined, W_c, h_tilde, H_enc = cache
        d_pre = dh_tilde * (1 - h_tilde ** 2)
        d_joined = d_pre @ W_c.T
        dW_c = np.einsum("tk,th->kh", joined[0], d_pre[0])
        return d_joined[..., :H_enc], d_joined[..., H_enc:], dW_c, d_pre.sum(axis=(0, 1))
    """),
    ("ch5b_attention_decoder", "decoder_outputs_torch", "padding not masked", """
        alpha = torch.softmax((s @ W_a) @ hs.transpose(1, 2), dim=-1)
        h_tilde = torch.tanh(torch.cat([alpha @ hs, s], dim=-1) @ W_c + b_c)
        return h_tilde @ W_o + b_o, alpha
    """),
]

REFERENCE_CALLS = [
    ("ch5a_time_attention", "time_attention_forward", "TimeAttention", """
        from attention_course.numpy_track import TimeAttention
        layer = TimeAttention("dot", hs.shape[-1], hs.shape[-1])
        context = layer.forward(hs, s, mask)
        return context, layer.attention_weights, layer
    """),
    ("ch5a_time_attention", "time_attention_backward", "the torch track, imported only while the tests run", """
        from attention_course.torch_track import TimeAttention
        return cache[0] * 0, cache[1] * 0
    """),
    ("ch5b_attention_decoder", "combine_forward", "Affine", """
        from attention_course.numpy_track import Affine
        affine = Affine(*W_c.shape)
        affine.params["W"][...], affine.params["b"][...] = W_c, b_c
        joined = np.concatenate([context, s], axis=-1)
        h_tilde = np.tanh(affine.forward(joined))
        return h_tilde, (joined, W_c, h_tilde, context.shape[-1])
    """),
]
