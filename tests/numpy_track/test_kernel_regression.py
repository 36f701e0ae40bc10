"""Tests for attention_course/numpy_track/kernel_regression.py: Nadaraya-Watson regression as attention."""

import numpy as np
import pytest

from attention_course.numpy_track.kernel_regression import KernelRegression
from attention_course.testing import ShapeError, check_layer_gradients


def test_the_prediction_is_the_gaussian_kernel_weighted_average(rng):
    queries, keys, values = rng.standard_normal(4), rng.standard_normal(6), rng.standard_normal(6)
    layer = KernelRegression(inverse_width=1.7)
    predictions = layer.forward(queries, keys, values)
    kernel = np.exp(-0.5 * ((queries[:, None] - keys[None, :]) * 1.7) ** 2)  # (Q, K)
    expected = (kernel * values).sum(axis=1) / kernel.sum(axis=1)
    np.testing.assert_allclose(predictions, expected, rtol=1e-12)
    np.testing.assert_allclose(layer.attention_weights.sum(axis=1), 1.0)


def test_a_narrow_kernel_returns_the_nearest_value_and_a_wide_one_the_mean():
    keys, values = np.array([0.0, 1.0, 2.0]), np.array([5.0, -1.0, 3.0])
    near = KernelRegression(inverse_width=100.0).forward(np.array([0.9]), keys, values)
    wide = KernelRegression(inverse_width=1e-4).forward(np.array([0.9]), keys, values)
    assert near[0] == pytest.approx(-1.0) and wide[0] == pytest.approx(values.mean(), abs=1e-6)


def test_masked_keys_get_no_weight(rng):
    keys = rng.standard_normal(5)
    mask = ~np.eye(5, dtype=bool)  # leave-one-out: a query may not use its own pair
    layer = KernelRegression()
    layer.forward(keys.copy(), keys, rng.standard_normal(5), mask)
    assert np.all(layer.attention_weights[~mask] == 0)


def test_backward_matches_central_differences(rng):
    layer = KernelRegression(inverse_width=0.8)
    inputs = {"queries": rng.standard_normal(3), "keys": rng.standard_normal(5), "values": rng.standard_normal(5)}
    mask = rng.random((3, 5)) < 0.8
    mask[:, 0] = True
    check_layer_gradients(layer, inputs, forward_kwargs={"mask": mask})


def test_a_wrong_shape_is_named():
    with pytest.raises(ShapeError, match="values"):
        KernelRegression().forward(np.zeros(2), np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="inverse_width"):
        KernelRegression(inverse_width=0.0)
