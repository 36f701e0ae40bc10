"""Chapter 3's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and answers that call the reference implementation."""

WRONG_ANSWERS = [
    ("ch3a_weight_sum", "weight_sum_backward", "dhs takes the last decoder step only, not the sum over steps", """
        if a.ndim == 2:
            return np.einsum("nj,nh->njh", a, dc), np.einsum("nh,njh->nj", dc, hs)
        return np.einsum("nj,nh->njh", a[:, -1], dc[:, -1]), np.einsum("nih,njh->nij", dc, hs)
    """),
    ("ch3a_weight_sum", "weight_sum_forward", "the weights' two time axes are swapped", """
        if a.ndim == 2:
            return np.einsum("nj,njh->nh", a, hs)
        return np.einsum("nji,njh->nih", a, hs)
    """),
    ("ch3b_context_torch", "context_matmul", "the weights are transposed", """
        return torch.bmm(a.transpose(1, 2), hs)
    """),
    ("ch3b_context_torch", "context_broadcast", "the sum runs over the hidden axis", """
        return (a[:, :, None] * hs).sum(dim=2)
    """),
]

REFERENCE_CALLS = [
    ("ch3a_weight_sum", "weight_sum_forward", "WeightSum", """
        from attention_course.numpy_track import WeightSum
        return WeightSum().forward(hs, a)
    """),
    ("ch3a_weight_sum", "weight_sum_backward", "a reference layer made before the tests start", """
        CAPTURED.forward(hs, a)
        return CAPTURED.backward(dc)
    """),
    ("ch3b_context_torch", "context_matmul", "the torch track's WeightSum", """
        from attention_course.torch_track import WeightSum
        return WeightSum()(hs, a)
    """),
]

REFERENCE_CALL_SETUP = {
    ("ch3a_weight_sum", "weight_sum_backward"): """
        from attention_course.numpy_track import WeightSum
        CAPTURED = WeightSum()
    """,
}
