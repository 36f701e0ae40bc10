"""Tests for attention_course/testing/gradcheck.py: the checker must pass right and fail wrong gradients."""

import numpy as np
import pytest

from attention_course.numpy_track.base import Layer
from attention_course.testing import assert_grads_close, check_layer_gradients, numerical_vjp, relative_error


def test_numerical_vjp_of_a_square_is_two_x_times_dout(rng):
    x = rng.standard_normal((3, 4))
    dout = rng.standard_normal((3, 4))
    numeric = numerical_vjp(lambda: x ** 2, x, dout)
    np.testing.assert_allclose(numeric, 2 * x * dout, rtol=1e-8, atol=1e-9)


def test_numerical_vjp_sums_over_a_tuple_of_outputs_and_restores_x(rng):
    x = rng.standard_normal(5)
    original = x.copy()
    dout = (rng.standard_normal(5), rng.standard_normal(()))
    numeric = numerical_vjp(lambda: (np.sin(x), np.sum(x ** 3)), x, dout)
    np.testing.assert_allclose(numeric, np.cos(x) * dout[0] + 3 * x ** 2 * dout[1], rtol=1e-7, atol=1e-9)
    assert np.array_equal(x, original), "numerical_vjp must leave x as it found it"


def test_numerical_vjp_perturbs_a_non_contiguous_x_in_place(rng):
    base = rng.standard_normal((3, 4))
    x = base[:, 1]  # a strided view: f reads base, so the perturbation must reach base
    dout = rng.standard_normal(3)
    numeric = numerical_vjp(lambda: base[:, 1] ** 2, x, dout)
    np.testing.assert_allclose(numeric, 2 * x * dout, rtol=1e-8, atol=1e-9)


def test_numerical_vjp_insists_on_float64():
    x = np.ones(3, dtype=np.float32)
    with pytest.raises(TypeError, match="float64"):
        numerical_vjp(lambda: x * 2, x, np.ones(3))


def test_relative_error_is_absolute_for_small_values_and_relative_for_large():
    assert relative_error(np.array([1e-3]), np.array([2e-3])) == pytest.approx(1e-3)
    assert relative_error(np.array([1000.0]), np.array([1001.0])) == pytest.approx(1 / 1001)
    assert relative_error(np.zeros(0), np.zeros(0)) == 0.0


def test_assert_grads_close_accepts_equal_gradients():
    grad = np.arange(6.0).reshape(2, 3)
    assert_grads_close("W", grad, grad + 1e-12)


def test_assert_grads_close_names_the_parameter_and_the_worst_index():
    numeric = np.zeros((3, 4))
    analytic = numeric.copy()
    analytic[0, 0] = 0.1
    analytic[1, 2] = 1.0  # the worst entry
    with pytest.raises(AssertionError) as error:
        assert_grads_close("W_h", analytic, numeric)
    message = str(error.value)
    assert "W_h" in message
    assert "(1, 2)" in message
    assert "2 of 12" in message


def test_assert_grads_close_rejects_non_finite_and_misshapen_gradients():
    with pytest.raises(AssertionError, match=r"b.*not finite at index \(1,\)"):
        assert_grads_close("b", np.array([0.0, np.nan]), np.zeros(2))
    with pytest.raises(AssertionError, match="shape"):
        assert_grads_close("b", np.zeros(3), np.zeros(4))


class MatMul(Layer):
    """``y = tanh(x W) + x`` with a correct backward, or one of two classic mistakes."""

    def __init__(self, mistake=None, size=3):
        super().__init__()
        self.mistake = mistake
        self.add_param("W", np.random.default_rng(1).standard_normal((size, size)))

    def forward(self, x):
        self.x = x
        self.y = np.tanh(x @ self.params["W"])
        return self.y + x

    def backward(self, dout):
        dpre = dout * (1 - self.y ** 2)
        W = self.params["W"]
        dW = self.x.T @ dpre
        self.grads["W"][...] = dW.T if self.mistake == "transposed dW" else dW
        dx = dpre @ (W if self.mistake == "untransposed W" else W.T)
        if self.mistake != "missing skip term":
            dx = dx + dout
        return dx


def test_check_layer_gradients_passes_a_correct_layer(rng):
    check_layer_gradients(MatMul(), {"x": rng.standard_normal((2, 3))})


@pytest.mark.parametrize("mistake, culprit", [
    ("missing skip term", "input 'x'"),
    ("untransposed W", "input 'x'"),
    ("transposed dW", "parameter 'W'"),
])
def test_check_layer_gradients_fails_a_wrong_backward(rng, mistake, culprit):
    with pytest.raises(AssertionError, match=culprit):
        check_layer_gradients(MatMul(mistake), {"x": rng.standard_normal((2, 3))})


class TwoOutputs(Layer):
    """``(x * y, sum(x))``: two inputs, two outputs; ``forget_second`` drops the second output's gradient."""

    def __init__(self, forget_second=False):
        super().__init__()
        self.forget_second = forget_second

    def forward(self, x, y):
        self.x, self.y = x, y
        return x * y, x.sum(axis=-1)

    def backward(self, douts):
        d_product, d_sum = douts
        dx = d_product * self.y
        if not self.forget_second:
            dx = dx + d_sum[..., None]
        return dx, d_product * self.x


def test_check_layer_gradients_handles_tuples_of_inputs_and_outputs(rng):
    inputs = {"x": rng.standard_normal((2, 3)), "y": rng.standard_normal((2, 3))}
    check_layer_gradients(TwoOutputs(), inputs)
    with pytest.raises(AssertionError, match="input 'x'"):
        check_layer_gradients(TwoOutputs(forget_second=True), inputs)


def test_check_layer_gradients_insists_on_float64_inputs():
    with pytest.raises(TypeError, match="'x'.*float64"):
        check_layer_gradients(MatMul(), {"x": np.ones((2, 3), dtype=np.float32)})
