"""Chapter 6's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch6a_bidirectional", "gated_merge_forward", "the mean runs over the padding too (divides by T)", """
        N, T, H = forward_states.shape
        lengths = np.asarray(lengths)
        real = (np.arange(T) < lengths[:, None])[:, :, None]
        both = np.concatenate([forward_states, backward_states], axis=-1)
        gate = sigmoid(both @ W_g + b_g)
        annotations = (gate * forward_states + (1 - gate) * backward_states) * real
        mean = annotations.mean(axis=1)
        s0 = np.tanh(mean @ W_init + b_init)
        return annotations, s0, (both, gate, real, np.full(N, T), mean, s0, W_g, W_init)
    """),
    ("ch6a_bidirectional", "gated_merge_forward", "the gate weighs the backward direction", """
        N, T, H = forward_states.shape
        lengths = np.asarray(lengths)
        real = (np.arange(T) < lengths[:, None])[:, :, None]
        both = np.concatenate([forward_states, backward_states], axis=-1)
        gate = sigmoid(both @ W_g + b_g)
        annotations = ((1 - gate) * forward_states + gate * backward_states) * real
        mean = annotations.sum(axis=1) / lengths[:, None]
        s0 = np.tanh(mean @ W_init + b_init)
        return annotations, s0, (both, gate, real, lengths, mean, s0, W_g, W_init)
    """),
    ("ch6a_bidirectional", "gated_merge_backward", "no gradient through the mean that s0 starts from", """
        both, gate, real, lengths, mean, s0, W_g, W_init = cache
        H = gate.shape[-1]
        d_pre_s0 = d_s0 * (1 - s0 ** 2)
        d_a = d_annotations * real
        forward_states, backward_states = both[..., :H], both[..., H:]
        d_gate_pre = d_a * (forward_states - backward_states) * gate * (1 - gate)
        d_both = d_gate_pre @ W_g.T
        return (d_a * gate + d_both[..., :H], d_a * (1 - gate) + d_both[..., H:],
                np.einsum("ntk,nth->kh", both, d_gate_pre), d_gate_pre.sum(axis=(0, 1)), mean.T @ d_pre_s0,
                d_pre_s0.sum(axis=0))
    """),
    ("ch6a_bidirectional", "gated_merge_backward", "the states' gradient misses the path through the gate", """
        both, gate, real, lengths, mean, s0, W_g, W_init = cache
        H = gate.shape[-1]
        d_pre_s0 = d_s0 * (1 - s0 ** 2)
        d_a = (d_annotations + (d_pre_s0 @ W_init.T / lengths[:, None])[:, None, :]) * real
        forward_states, backward_states = both[..., :H], both[..., H:]
        d_gate_pre = d_a * (forward_states - backward_states) * gate * (1 - gate)
        return (d_a * gate, d_a * (1 - gate), np.einsum("ntk,nth->kh", both, d_gate_pre),
                d_gate_pre.sum(axis=(0, 1)), mean.T @ d_pre_s0, d_pre_s0.sum(axis=0))
    """),
    ("ch6b_bigru_torch", "interleaved_encoder", "right to left over the whole row: the reading starts in the padding", """
        N, T, _ = embedded.shape
        real = torch.arange(T) < torch.as_tensor(lengths)[:, None]

        def read(xs, weights, reverse):
            W_x, W_h, b = weights["W_x"], weights["W_h"], weights["b"]
            H = W_h.shape[0]
            state = xs.new_zeros(N, H)
            states = [None] * T
            for t in (range(T - 1, -1, -1) if reverse else range(T)):
                x_part = xs[:, t] @ W_x + b
                h_part = state @ W_h[:, :2 * H]
                reset = torch.sigmoid(x_part[:, :H] + h_part[:, :H])
                update = torch.sigmoid(x_part[:, H:2 * H] + h_part[:, H:])
                state = (1 - update) * state + update * torch.tanh(x_part[:, 2 * H:] + (reset * state) @ W_h[:, 2 * H:])
                states[t] = state * real[:, t, None]
            return torch.stack(states, dim=1)

        states = embedded
        for depth, weights in enumerate(layers):
            states = read(states, weights, reverse=depth % 2 == 1)
        return states
    """),
    ("ch6b_bigru_torch", "interleaved_encoder", "torch.nn.GRU's form: the reset gate after the recurrent matrix", """
        N, T, _ = embedded.shape
        real = torch.arange(T) < torch.as_tensor(lengths)[:, None]

        def read(xs, weights, reverse):
            W_x, W_h, b = weights["W_x"], weights["W_h"], weights["b"]
            H = W_h.shape[0]
            state = xs.new_zeros(N, H)
            states = [None] * T
            for t in (range(T - 1, -1, -1) if reverse else range(T)):
                x_part = xs[:, t] @ W_x + b
                h_part = state @ W_h
                reset = torch.sigmoid(x_part[:, :H] + h_part[:, :H])
                update = torch.sigmoid(x_part[:, H:2 * H] + h_part[:, H:2 * H])
                new_state = (1 - update) * state + update * torch.tanh(x_part[:, 2 * H:] + reset * h_part[:, 2 * H:])
                state = torch.where(real[:, t, None], new_state, state)
                states[t] = torch.where(real[:, t, None], new_state, torch.zeros_like(new_state))
            return torch.stack(states, dim=1)

        states = embedded
        for depth, weights in enumerate(layers):
            states = read(states, weights, reverse=depth % 2 == 1)
        return states
    """),
    ("ch6b_bigru_torch", "interleaved_encoder", "every layer reads left to right", """
        N, T, _ = embedded.shape
        states = embedded
        for weights in layers:
            W_x, W_h, b = weights["W_x"], weights["W_h"], weights["b"]
            H = W_h.shape[0]
            state, outputs = states.new_zeros(N, H), []
            for t in range(T):
                x_part = states[:, t] @ W_x + b
                h_part = state @ W_h[:, :2 * H]
                reset = torch.sigmoid(x_part[:, :H] + h_part[:, :H])
                update = torch.sigmoid(x_part[:, H:2 * H] + h_part[:, H:])
                state = (1 - update) * state + update * torch.tanh(x_part[:, 2 * H:] + (reset * state) @ W_h[:, 2 * H:])
                outputs.append(state * (t < torch.as_tensor(lengths))[:, None])
            states = torch.stack(outputs, dim=1)
        return states
    """),
]

REFERENCE_CALLS = [
    ("ch6b_bigru_torch", "interleaved_encoder", "the torch track's GRU in the lectures' form, layer by layer", """
        from attention_course.torch_track import GRU
        mask = torch.arange(embedded.shape[1]) < torch.as_tensor(lengths)[:, None]
        states = embedded
        for depth, weights in enumerate(layers):
            layer = GRU(states.shape[-1], weights["W_h"].shape[0], reverse=depth % 2 == 1, fused=False, dtype=states.dtype)
            states = layer(states, mask)
        return states
    """),
]
