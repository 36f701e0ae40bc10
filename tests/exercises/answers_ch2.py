"""Chapter 2's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch2a_encoder_states", "rnn_encoder_backward", "no gradient carried from step t+1 back to step t", """
        xs, states, W_x, W_h = cache
        N, T, D = xs.shape
        dxs = np.empty_like(xs)
        dW_x, dW_h, db = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros(W_h.shape[0])
        for t in range(T - 1, -1, -1):
            local = dhs[:, t] * (1 - states[:, t + 1] ** 2)
            dxs[:, t] = local @ W_x.T
            dW_x += xs[:, t].T @ local
            dW_h += states[:, t].T @ local
            db += local.sum(axis=0)
        return dxs, local @ W_h.T, dW_x, dW_h, db
    """),
    ("ch2a_encoder_states", "rnn_encoder_backward", "dW_h uses the new state instead of the previous one", """
        xs, states, W_x, W_h = cache
        N, T, D = xs.shape
        dxs = np.empty_like(xs)
        dW_x, dW_h, db = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros(W_h.shape[0])
        carried = np.zeros_like(states[:, 0])
        for t in range(T - 1, -1, -1):
            local = (dhs[:, t] + carried) * (1 - states[:, t + 1] ** 2)
            dxs[:, t] = local @ W_x.T
            dW_x += xs[:, t].T @ local
            dW_h += states[:, t + 1].T @ local
            db += local.sum(axis=0)
            carried = local @ W_h.T
        return dxs, carried, dW_x, dW_h, db
    """),
    ("ch2b_encoder_padding_torch", "encode_padded", "the state moves on over the padding", """
        N, T, _ = xs.shape
        h = xs.new_zeros((N, W_h.shape[0]))
        outputs = []
        for t in range(T):
            real = mask[:, t].unsqueeze(1)
            h = torch.tanh(xs[:, t] @ W_x + h @ W_h + b)
            outputs.append(torch.where(real, h, torch.zeros_like(h)))
        return torch.stack(outputs, dim=1), h
    """),
    ("ch2b_encoder_padding_torch", "encode_padded", "padded positions output the held state instead of zeros", """
        N, T, _ = xs.shape
        h = xs.new_zeros((N, W_h.shape[0]))
        outputs = []
        for t in range(T):
            real = mask[:, t].unsqueeze(1)
            h = torch.where(real, torch.tanh(xs[:, t] @ W_x + h @ W_h + b), h)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h
    """),
]

REFERENCE_CALLS = [
    ("ch2a_encoder_states", "rnn_encoder_forward", "the NumPy RNN layer", """
        from attention_course.numpy_track import RNN
        layer = RNN(xs.shape[2], h0.shape[1])
        layer.cell.params["W_x"][...], layer.cell.params["W_h"][...], layer.cell.params["b"][...] = W_x, W_h, b
        return layer.forward(xs, initial_state=h0), layer
    """),
    ("ch2b_encoder_padding_torch", "encode_padded", "the NumPy RNN layer, wrapped in tensors", """
        from attention_course.numpy_track import RNN
        layer = RNN(xs.shape[2], W_h.shape[0])
        hs = layer.forward(xs.detach().numpy(), mask.numpy())
        return torch.from_numpy(hs), torch.from_numpy(layer.final_state)
    """),
]
