"""Chapter 1's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch1a_peephole_lstm", "peephole_lstm_forward", "the output gate peeks at the old cell state", """
        H = h_prev.shape[1]
        a = x @ W_x + h_prev @ W_h + b
        i = sigmoid(a[:, :H] + P[0] * c_prev)
        f = sigmoid(a[:, H:2 * H] + P[1] * c_prev)
        g = np.tanh(a[:, 2 * H:3 * H])
        c = f * c_prev + i * g
        o = sigmoid(a[:, 3 * H:] + P[2] * c_prev)
        squashed_c = np.tanh(c)
        return o * squashed_c, c, (x, h_prev, c_prev, W_x, W_h, P, i, f, g, o, c, squashed_c)
    """),
    ("ch1a_peephole_lstm", "peephole_lstm_backward", "c_t's path through the output gate's peephole is missed", """
        x, h_prev, c_prev, W_x, W_h, P, i, f, g, o, c, squashed_c = cache
        da_o = dh * squashed_c * o * (1.0 - o)
        dc_total = dc + dh * o * (1.0 - squashed_c ** 2)
        da_i, da_f, da_g = dc_total * g * i * (1.0 - i), dc_total * c_prev * f * (1.0 - f), dc_total * i * (1.0 - g ** 2)
        da = np.concatenate([da_i, da_f, da_g, da_o], axis=1)
        dP = np.stack([(da_i * c_prev).sum(axis=0), (da_f * c_prev).sum(axis=0), (da_o * c).sum(axis=0)])
        return (da @ W_x.T, da @ W_h.T, dc_total * f + da_i * P[0] + da_f * P[1], x.T @ da, h_prev.T @ da,
                da.sum(axis=0), dP)
    """),
    ("ch1a_peephole_lstm", "peephole_lstm_backward", "c_prev's paths through the gates' peepholes are missed", """
        x, h_prev, c_prev, W_x, W_h, P, i, f, g, o, c, squashed_c = cache
        da_o = dh * squashed_c * o * (1.0 - o)
        dc_total = dc + dh * o * (1.0 - squashed_c ** 2) + da_o * P[2]
        da_i, da_f, da_g = dc_total * g * i * (1.0 - i), dc_total * c_prev * f * (1.0 - f), dc_total * i * (1.0 - g ** 2)
        da = np.concatenate([da_i, da_f, da_g, da_o], axis=1)
        dP = np.stack([(da_i * c_prev).sum(axis=0), (da_f * c_prev).sum(axis=0), (da_o * c).sum(axis=0)])
        return da @ W_x.T, da @ W_h.T, dc_total * f, x.T @ da, h_prev.T @ da, da.sum(axis=0), dP
    """),
    ("ch1b_mgu_torch", "mgu_step", "the gate weighs the old state (the update the other way round)", """
        H = h_prev.shape[-1]
        f = torch.sigmoid(x @ W_x[:, :H] + h_prev @ W_h[:, :H] + b[:H])
        candidate = torch.tanh(x @ W_x[:, H:] + (f * h_prev) @ W_h[:, H:] + b[H:])
        return f * h_prev + (1 - f) * candidate
    """),
    ("ch1b_mgu_torch", "mgu_step", "the gate acts after the recurrent product (torch's GRU form)", """
        H = h_prev.shape[-1]
        f = torch.sigmoid(x @ W_x[:, :H] + h_prev @ W_h[:, :H] + b[:H])
        candidate = torch.tanh(x @ W_x[:, H:] + f * (h_prev @ W_h[:, H:]) + b[H:])
        return (1 - f) * h_prev + f * candidate
    """),
    ("ch1b_mgu_torch", "mgu_encode", "the state moves on through the padding", """
        h = h0
        states = []
        for t in range(xs.shape[1]):
            h = mgu_step(xs[:, t], h, W_x, W_h, b)
            states.append(torch.where(mask[:, t, None], h, torch.zeros_like(h)))
        return torch.stack(states, dim=1), h
    """),
]

REFERENCE_CALLS = [
    ("ch1a_peephole_lstm", "peephole_lstm_forward", "LSTMCell, the peepholes left out", """
        from attention_course.numpy_track import LSTMCell
        cell = LSTMCell(x.shape[1], h_prev.shape[1])
        cell.params["W_x"][...], cell.params["W_h"][...], cell.params["b"][...] = W_x, W_h, b
        h, c = cell.forward(x, (h_prev, c_prev))
        return h, c, cell
    """),
]
