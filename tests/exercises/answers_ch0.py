"""Chapter 0's answers to try (the format of ``exercise_helpers``): plausible wrong answers, each must cost
points, and an answer that calls the reference implementation."""

WRONG_ANSWERS = [
    ("ch0a_epanechnikov_kernel", "epanechnikov_forward", "the Gaussian kernel of the chapter, not Epanechnikov's", """
        h = bandwidth[0]
        u = (queries[:, None] - keys[None, :]) / h
        a = np.where(mask, np.exp(-0.5 * u * u), 0.0)
        total = a.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        weights = a / safe[:, None]
        estimates = weights @ values
        return estimates, (u, a, total, weights, values, estimates, h)
    """),
    ("ch0a_epanechnikov_kernel", "epanechnikov_forward", "a query with no key within h divides 0 by 0", """
        h = bandwidth[0]
        u = (queries[:, None] - keys[None, :]) / h
        a = np.where(mask & (np.abs(u) < 1.0), 1.0 - u * u, 0.0)
        total = a.sum(axis=1)
        weights = a / total[:, None]
        estimates = weights @ values
        return estimates, (u, a, total, weights, values, estimates, h)
    """),
    ("ch0a_epanechnikov_kernel", "epanechnikov_forward", "the mask applied after the normalisation", """
        h = bandwidth[0]
        u = (queries[:, None] - keys[None, :]) / h
        a = np.where(np.abs(u) < 1.0, 1.0 - u * u, 0.0)
        total = a.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        weights = np.where(mask, a / safe[:, None], 0.0)
        estimates = weights @ values
        return estimates, (u, np.where(mask, a, 0.0), total, weights, values, estimates, h)
    """),
    ("ch0a_epanechnikov_kernel", "epanechnikov_backward", "the normalisation treated as a constant (no -f_i term)", """
        u, a, total, weights, values, estimates, h = cache
        d_values = weights.T @ d_estimates
        d_a = d_estimates[:, None] * values[None, :] / np.where(total > 0, total, 1.0)[:, None]
        d_u = np.where(a > 0, -2.0 * u * d_a, 0.0)
        return d_u.sum(axis=1) / h, -d_u.sum(axis=0) / h, d_values, np.array([-(d_u * u).sum() / h])
    """),
    ("ch0a_epanechnikov_kernel", "epanechnikov_backward", "the bandwidth's gradient with the sign of u's", """
        u, a, total, weights, values, estimates, h = cache
        d_values = weights.T @ d_estimates
        d_a = d_estimates[:, None] * (values[None, :] - estimates[:, None]) / np.where(total > 0, total, 1.0)[:, None]
        d_u = np.where(a > 0, -2.0 * u * d_a, 0.0)
        return d_u.sum(axis=1) / h, -d_u.sum(axis=0) / h, d_values, np.array([(d_u * u).sum() / h])
    """),
]

REFERENCE_CALLS = [
    ("ch0a_epanechnikov_kernel", "epanechnikov_forward", "KernelRegression, the chapter's Gaussian", """
        from attention_course.numpy_track import KernelRegression
        layer = KernelRegression(1.0 / bandwidth[0])
        return layer.forward(queries, keys, values, mask), layer
    """),
]
