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
    ("ch6b_bigru_torch", "bilm_states", "the backward model reads the whole row from its end: it starts in the padding", """
        real = (torch.arange(embedded.shape[1]) < torch.as_tensor(lengths)[:, None])[..., None]
        forward, backward = [], []
        states = embedded
        for layer in forward_layers:
            states = torch.where(real, layer(states)[0], 0.0)
            forward.append(states)
        states = embedded.flip(1)
        for layer in backward_layers:
            states = layer(states)[0]
            backward.append(torch.where(real, states.flip(1), 0.0))
        return torch.stack(forward), torch.stack(backward)
    """),
    ("ch6b_bigru_torch", "bilm_states", "the directions crossed between layers: each model's upper layers read the other's states", """
        T = embedded.shape[1]
        lengths = torch.as_tensor(lengths)
        positions = torch.arange(T)
        real = (positions < lengths[:, None])[..., None]
        order = torch.where(positions < lengths[:, None], lengths[:, None] - 1 - positions, positions)[..., None]
        forward_in, backward_in = embedded, embedded
        forward, backward = [], []
        for forward_layer, backward_layer in zip(forward_layers, backward_layers):
            ahead = torch.where(real, forward_layer(forward_in)[0], 0.0)
            behind = torch.where(real, backward_layer(backward_in.gather(1, order.expand_as(backward_in)))[0], 0.0)
            behind = behind.gather(1, order.expand_as(behind))
            forward.append(ahead)
            backward.append(behind)
            forward_in, backward_in = behind, ahead
        return torch.stack(forward), torch.stack(backward)
    """),
    ("ch6b_bigru_torch", "bilm_nll", "the backward model predicts the next token, as the forward one does", """
        forward, backward = bilm_states(embedded, lengths, forward_layers, backward_layers)
        T = tokens.shape[1]
        last = torch.arange(T) + 1 < torch.as_tensor(lengths)[:, None]
        following = torch.roll(tokens, -1, dims=1)[..., None]
        forward_nll = -torch.log_softmax(forward[-1] @ W_out + b_out, dim=-1).gather(-1, following)[..., 0]
        backward_nll = -torch.log_softmax(backward[-1] @ W_out + b_out, dim=-1).gather(-1, following)[..., 0]
        return torch.where(last, forward_nll, 0.0), torch.where(last, backward_nll, 0.0)
    """),
    ("ch6b_bigru_torch", "elmo", "the mix weighs the levels by the raw logits, not their softmax", """
        forward, backward = bilm_states(embedded, lengths, forward_layers, backward_layers)
        real = (torch.arange(embedded.shape[1]) < torch.as_tensor(lengths)[:, None])[..., None]
        levels = torch.cat([torch.where(real, embedded, 0.0).repeat(1, 1, 2)[None], torch.cat([forward, backward], dim=-1)])
        return gamma * torch.einsum("l,lntd->ntd", mix_logits, levels)
    """),
]

REFERENCE_CALLS = [
    ("ch6b_bigru_torch", "bilm_states", "the torch track's reverse_padded for the backward model", """
        from attention_course.torch_track.recurrent import reverse_padded
        real = (torch.arange(embedded.shape[1]) < torch.as_tensor(lengths)[:, None])[..., None]
        forward, backward = [], []
        states = embedded
        for layer in forward_layers:
            states = torch.where(real, layer(states)[0], 0.0)
            forward.append(states)
        states = reverse_padded(embedded, torch.as_tensor(lengths))
        for layer in backward_layers:
            states = torch.where(real, layer(states)[0], 0.0)
            backward.append(reverse_padded(states, torch.as_tensor(lengths)))
        return torch.stack(forward), torch.stack(backward)
    """),
]
