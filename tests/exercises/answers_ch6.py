"""Chapter 6's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch6a_bidirectional", "reverse_padded", "the whole row is flipped, padding included", """
        return xs[:, ::-1].copy()
    """),
    ("ch6a_bidirectional", "bidirectional_backward", "the backward half's input gradient is not reversed back", """
        lengths, forward_dir, backward_dir = cache
        H = dout.shape[-1] // 2
        real = (np.arange(dout.shape[1])[None, :] < np.asarray(lengths)[:, None])[:, :, None]
        dout = dout * real
        d_right = backward_dir.backward(reverse_padded(dout[..., H:], lengths))
        return forward_dir.backward(dout[..., :H]) + d_right, forward_dir.grads, backward_dir.grads
    """),
    ("ch6b_bigru_torch", "bigru_encode", "no packing: the backward direction starts in the padding", """
        out, final = gru(embedded)
        real = torch.arange(embedded.shape[1])[None, :] < torch.tensor(list(lengths))[:, None]
        return out * real[:, :, None], out[:, 0, out.shape[-1] // 2:]
    """),
    ("ch6b_bigru_torch", "bigru_encode", "the forward direction's final state instead of the backward one's", """
        packed = nn.utils.rnn.pack_padded_sequence(embedded, torch.tensor(list(lengths)), batch_first=True,
                                                   enforce_sorted=False)
        packed_out, final = gru(packed)
        hs, _ = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True, total_length=embedded.shape[1])
        return hs, final[0]
    """),
]

REFERENCE_CALLS = [
    ("ch6a_bidirectional", "bidirectional_forward", "Bidirectional around the directions' layers", """
        from attention_course.numpy_track import Bidirectional
        forward_dir, backward_dir = Direction(forward_weights), Direction(backward_weights)
        mask = np.arange(xs.shape[1])[None, :] < np.asarray(lengths)[:, None]
        hs = Bidirectional(forward_dir._rnn, backward_dir._rnn).forward(xs, mask)
        return hs, (lengths, forward_dir, backward_dir)
    """),
    ("ch6b_bigru_torch", "bigru_encode", "the NumPy Bidirectional GRU", """
        from attention_course.numpy_track import GRU, Bidirectional
        layer = Bidirectional(GRU(embedded.shape[2], gru.hidden_size, reset_after=True),
                              GRU(embedded.shape[2], gru.hidden_size, reset_after=True))
        return layer.forward(embedded.detach().numpy()), None
    """),
]
