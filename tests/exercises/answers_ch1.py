"""Chapter 1's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch1a_lstm_backward", "lstm_step_backward", "the cell state's gradient ignores the path through h_t", """
        x, h_prev, c_prev, W_x, W_h, i, f, g, o, tanh_c = cache
        dc_total = dc
        da = np.concatenate([dc_total * g * i * (1 - i), dc_total * c_prev * f * (1 - f), dc_total * i * (1 - g ** 2),
                             dh * tanh_c * o * (1 - o)], axis=1)
        return da @ W_x.T, da @ W_h.T, dc_total * f, x.T @ da, h_prev.T @ da, da.sum(axis=0)
    """),
    ("ch1a_lstm_backward", "lstm_step_backward", "the bias gradient is averaged, not summed, over the batch", """
        x, h_prev, c_prev, W_x, W_h, i, f, g, o, tanh_c = cache
        dc_total = dc + dh * o * (1 - tanh_c ** 2)
        da = np.concatenate([dc_total * g * i * (1 - i), dc_total * c_prev * f * (1 - f), dc_total * i * (1 - g ** 2),
                             dh * tanh_c * o * (1 - o)], axis=1)
        return da @ W_x.T, da @ W_h.T, dc_total * f, x.T @ da, h_prev.T @ da, da.mean(axis=0)
    """),
    ("ch1b_gru_step_torch", "gru_step", "the reset gate acts after the recurrent product (torch's form)", """
        H = h_prev.shape[-1]
        from_x = x @ W_x + b
        r = torch.sigmoid(from_x[:, :H] + h_prev @ W_h[:, :H] + b_h[:H])
        z = torch.sigmoid(from_x[:, H:2 * H] + h_prev @ W_h[:, H:2 * H] + b_h[H:2 * H])
        n = torch.tanh(from_x[:, 2 * H:] + r * (h_prev @ W_h[:, 2 * H:] + b_h[2 * H:]))
        return (1 - z) * h_prev + z * n
    """),
    ("ch1b_gru_step_torch", "gru_step", "the update gate weighs the old state", """
        H = h_prev.shape[-1]
        from_x = x @ W_x + b
        r = torch.sigmoid(from_x[:, :H] + h_prev @ W_h[:, :H] + b_h[:H])
        z = torch.sigmoid(from_x[:, H:2 * H] + h_prev @ W_h[:, H:2 * H] + b_h[H:2 * H])
        n = torch.tanh(from_x[:, 2 * H:] + (r * h_prev) @ W_h[:, 2 * H:] + b_h[2 * H:])
        return z * h_prev + (1 - z) * n
    """),
]

REFERENCE_CALLS = [
    ("ch1a_lstm_backward", "lstm_step_backward", "LSTMCell's backward", """
        from attention_course.numpy_track import LSTMCell
        x, h_prev, c_prev, W_x, W_h, i, f, g, o, tanh_c = cache
        cell = LSTMCell(x.shape[1], h_prev.shape[1])
        cell.params["W_x"][...], cell.params["W_h"][...] = W_x, W_h
        cell.forward(x, (h_prev, c_prev))
        dx, (dh_prev, dc_prev) = cell.backward((dh, dc))
        return dx, dh_prev, dc_prev, cell.grads["W_x"], cell.grads["W_h"], cell.grads["b"]
    """),
    ("ch1b_gru_step_torch", "gru_step", "the torch track's GRUCell", """
        from attention_course.torch_track import GRUCell
        cell = GRUCell(x.shape[1], h_prev.shape[1], reset_after=False).double()
        return cell(x, h_prev)
    """),
]
