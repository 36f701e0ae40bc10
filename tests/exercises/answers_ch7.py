"""Chapter 7's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch7a_residual", "block_backward", "the skip connection's identity path is missing", """
        xs, W, branch, keep, skip = cache
        d_pre = dys * keep * (1 - branch ** 2)
        return d_pre @ W.T, np.einsum("ntd,nte->de", xs, d_pre), d_pre.sum(axis=(0, 1))
    """),
    ("ch7a_residual", "block_backward", "the gradient on padded positions is not masked", """
        xs, W, branch, keep, skip = cache
        d_pre = dys * (1 - branch ** 2)
        dxs = d_pre @ W.T + (dys if skip else 0)
        return dxs, np.einsum("ntd,nte->de", xs, d_pre), d_pre.sum(axis=(0, 1))
    """),
    ("ch7b_stacked_residual_torch", "stacked_rnn", "a skip connection around the first layer too", """
        outputs, current = [], xs
        for rnn in layers:
            out, _ = rnn(current)
            if residual:
                out = out + current
            outputs.append(out)
            current = out
        return current, outputs
    """),
    ("ch7b_stacked_residual_torch", "layer_gradient_norms", "the norms are shifted by one level", """
        xs = xs.detach().requires_grad_(True)
        top, outputs = stacked_rnn(xs, layers, residual)
        grads = torch.autograd.grad((top * dout).sum(), [xs] + outputs)
        return [float(g.norm()) for g in grads[1:]] + [float(dout.norm())]
    """),
]

REFERENCE_CALLS = [
    ("ch7a_residual", "block_forward", "Residual", """
        from attention_course.numpy_track import Residual
        return Residual(None).forward(xs, mask), None
    """),
    ("ch7b_stacked_residual_torch", "stacked_rnn", "the torch track's Stacked and Residual", """
        from attention_course.torch_track import make_recurrent
        stack = make_recurrent("rnn", xs.shape[-1], layers[0].hidden_size, num_layers=len(layers), residual=residual)
        return stack(xs), []
    """),
]
