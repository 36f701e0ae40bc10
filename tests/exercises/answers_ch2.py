"""Chapter 2's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch2a_lstmp_encoder", "lstmp_encoder_forward", "the cell state, not the output, is projected", """
        H = c0.shape[1]
        r, c = r0, c0
        rs, steps = [], []
        for t in range(xs.shape[1]):
            a = xs[:, t] @ W_x + r @ W_h + b
            i, f, o = sigmoid(a[:, :H]), sigmoid(a[:, H:2 * H]), sigmoid(a[:, 3 * H:])
            g = np.tanh(a[:, 2 * H:3 * H])
            c_new = f * c + i * g
            tanh_c = np.tanh(c_new)
            steps.append((r, c, i, f, g, o, tanh_c, o * tanh_c))
            r, c = c_new @ W_r, c_new
            rs.append(r)
        return np.stack(rs, axis=1), (xs, W_x, W_h, W_r, steps)
    """),
    ("ch2a_lstmp_encoder", "lstmp_encoder_backward", "the gradient of r_t from step t + 1 is dropped", """
        xs, W_x, W_h, W_r, steps = cache
        dxs = np.zeros_like(xs)
        dW_x, dW_h, dW_r = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros_like(W_r)
        db = np.zeros_like(W_x[0])
        dr_next, dc_next = np.zeros_like(drs[:, 0]), np.zeros_like(steps[0][1])
        for t in range(xs.shape[1] - 1, -1, -1):
            r_prev, c_prev, i, f, g, o, tanh_c, h = steps[t]
            dr = drs[:, t]
            dW_r += h.T @ dr
            dh = dr @ W_r.T
            dc = dc_next + dh * o * (1.0 - tanh_c ** 2)
            da = np.concatenate([dc * g * i * (1.0 - i), dc * c_prev * f * (1.0 - f), dc * i * (1.0 - g ** 2),
                                 dh * tanh_c * o * (1.0 - o)], axis=1)
            dxs[:, t] = da @ W_x.T
            dW_x += xs[:, t].T @ da
            dW_h += r_prev.T @ da
            db += da.sum(axis=0)
            dr_next, dc_next = da @ W_h.T, dc * f
        return dxs, dr_next, dc_next, dW_x, dW_h, db, dW_r
    """),
    ("ch2a_lstmp_encoder", "lstmp_encoder_backward", "no gradient flows back through the cell state", """
        xs, W_x, W_h, W_r, steps = cache
        dxs = np.zeros_like(xs)
        dW_x, dW_h, dW_r = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros_like(W_r)
        db = np.zeros_like(W_x[0])
        dr_next = np.zeros_like(drs[:, 0])
        dc = np.zeros_like(steps[0][1])
        for t in range(xs.shape[1] - 1, -1, -1):
            r_prev, c_prev, i, f, g, o, tanh_c, h = steps[t]
            dr = drs[:, t] + dr_next
            dW_r += h.T @ dr
            dh = dr @ W_r.T
            dc = dh * o * (1.0 - tanh_c ** 2)
            da = np.concatenate([dc * g * i * (1.0 - i), dc * c_prev * f * (1.0 - f), dc * i * (1.0 - g ** 2),
                                 dh * tanh_c * o * (1.0 - o)], axis=1)
            dxs[:, t] = da @ W_x.T
            dW_x += xs[:, t].T @ da
            dW_h += r_prev.T @ da
            db += da.sum(axis=0)
            dr_next = da @ W_h.T
        return dxs, dr_next, dc * f, dW_x, dW_h, db, dW_r
    """),
    ("ch2b_qrnn_encoder_torch", "qrnn_gates", "the filter looks ahead (x_{t+m}, not x_{t-m})", """
        k, D, _ = W.shape
        N, T, _ = xs.shape
        H = b.shape[0] // 3
        padded = torch.cat([xs, xs.new_zeros((N, k - 1, D))], dim=1)
        pre = b + sum(padded[:, m:m + T] @ W[m] for m in range(k))
        return torch.tanh(pre[..., :H]), torch.sigmoid(pre[..., H:2 * H]), torch.sigmoid(pre[..., 2 * H:])
    """),
    ("ch2b_qrnn_encoder_torch", "fo_pool", "the forget gate weighs the candidate", """
        c = torch.zeros_like(z[:, 0])
        states = []
        for t in range(z.shape[1]):
            real = mask[:, t, None]
            c = torch.where(real, (1 - f[:, t]) * c + f[:, t] * z[:, t], c)
            states.append(torch.where(real, o[:, t] * c, torch.zeros_like(c)))
        return torch.stack(states, dim=1), c
    """),
    ("ch2b_qrnn_encoder_torch", "fo_pool", "the cell moves on through the padding", """
        c = torch.zeros_like(z[:, 0])
        states = []
        for t in range(z.shape[1]):
            c = f[:, t] * c + (1 - f[:, t]) * z[:, t]
            states.append(torch.where(mask[:, t, None], o[:, t] * c, torch.zeros_like(c)))
        return torch.stack(states, dim=1), c
    """),
]

REFERENCE_CALLS = [
    ("ch2a_lstmp_encoder", "lstmp_encoder_forward", "the numpy track's LSTM, without the projection", """
        from attention_course.numpy_track import LSTM
        layer = LSTM(xs.shape[2], c0.shape[1])
        layer.cell.params["W_x"][...], layer.cell.params["b"][...] = W_x, b
        return layer.forward(xs), layer
    """),
]
