"""Tests for attention_course/testing/checks.py: the exercises' checks, in the student's kernel.

(In the grader, the same calls go through the judge's proxies: ``tests/autograder``.)
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.testing import checks


def test_random_is_seeded_float64_and_scaled():
    a, b = checks.random((2, 3), seed=4), checks.random((2, 3), seed=4, scale=2.0)
    assert a.dtype == np.float64 and a.shape == (2, 3)
    np.testing.assert_array_equal(b, 2 * a)
    assert not np.array_equal(a, checks.random((2, 3), seed=5))
    np.testing.assert_array_equal(checks.lengths_mask([2, 0], 3), [[True, True, False], [False, False, False]])


def test_assertions_name_what_failed_and_where():
    checks.assert_close("x", np.ones(3), np.ones(3) + 1e-12)
    with pytest.raises(AssertionError, match=r"context: mismatch at index \(1,\): got 5, expected 2 \(1 of 3"):
        checks.assert_close("context", np.array([1.0, 5.0, 3.0]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(AssertionError, match=r"h: expected shape \(2, 3\), got \(3, 2\)"):
        checks.assert_shape("h", np.zeros((3, 2)), (2, 3))
    with pytest.raises(AssertionError, match=r"w: not finite at index \(0,\)"):
        checks.assert_close("w", np.array([np.nan]), np.array([0.0]))
    with pytest.raises(AssertionError, match=r"ids: differs at index \(1,\): got 3, expected 2"):
        checks.assert_equal("ids", np.array([1, 3]), np.array([1, 2]))
    with pytest.raises(AssertionError, match="g: not finite"):
        checks.assert_finite("g", np.array([1.0, np.inf]))


@pytest.mark.parametrize("value", [None, object(), "text", {"a": 1}, [1, None]])
def test_what_is_not_an_array_is_named(value):
    with pytest.raises(AssertionError, match="out: expected an array"):
        checks.as_array("out", value)


def test_arrays_tensors_numbers_and_lists_are_arrays():
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(checks.as_array("t", torch.ones(2, dtype=torch.bfloat16)), [1.0, 1.0])
    np.testing.assert_array_equal(checks.as_array("l", [1.0, torch.tensor(2.0)]), [1.0, 2.0])
    assert checks.as_array("n", 3.5) == 3.5


def test_check_gradients_finds_a_wrong_gradient():
    x = checks.random((3, 2), seed=1)
    dout = checks.random((3, 2), seed=2)
    checks.check_gradients(lambda: np.tanh(x), {"x": x}, {"x": dout * (1 - np.tanh(x) ** 2)}, dout)
    with pytest.raises(AssertionError, match="gradient of x: mismatch"):
        checks.check_gradients(lambda: np.tanh(x), {"x": x}, {"x": dout}, dout)
    with pytest.raises(AssertionError, match="no gradient for 'y'"):
        checks.check_gradients(lambda: x + 0, {"y": x}, {}, dout)


def test_vjp_differentiates_tensors_and_module_parameters_by_name():
    torch = pytest.importorskip("torch")
    linear = torch.nn.Linear(3, 2, dtype=torch.float64)
    x = checks.tensor(checks.random((4, 3), seed=1), requires_grad=True)
    constant = checks.tensor(checks.random((4, 2), seed=2))

    def f(x, layer, shift, scale=1.0):
        return scale * layer(x) + shift, x.sum()

    dout = checks.random((4, 2), seed=3)
    (out, total), grads = checks.vjp(f, (dout, None), x, layer=linear, shift=constant, scale=2.0)
    assert not out.requires_grad and torch.allclose(out, 2 * linear(x) + constant)
    assert sorted(grads) == ["0", "layer.bias", "layer.weight"]
    np.testing.assert_allclose(grads["0"], 2 * dout @ linear.weight.detach().numpy())
    np.testing.assert_allclose(grads["layer.weight"], 2 * dout.T @ x.detach().numpy())
    np.testing.assert_allclose(grads["layer.bias"], 2 * dout.sum(axis=0))


def test_vjp_gives_zeros_for_an_unused_input_and_refuses_nothing_to_differentiate():
    torch = pytest.importorskip("torch")
    a = checks.tensor(np.ones(2), requires_grad=True)
    b = checks.tensor(np.ones(2), requires_grad=True)
    _, grads = checks.vjp(lambda a, b: a * 3, np.ones(2), a=a, b=b)
    np.testing.assert_array_equal(grads["b"], [0.0, 0.0])
    np.testing.assert_array_equal(grads["a"], [3.0, 3.0])
    with pytest.raises(ValueError, match="no argument requires a gradient"):
        checks.vjp(lambda a: a, np.ones(2), torch.ones(2))
    with pytest.raises(AssertionError, match="returned 2 output"):
        checks.vjp(lambda a: (a, a), np.ones(2), a=a)


def test_vjp_defers_to_a_proxy():
    class Proxy:
        def course_remote_vjp(self, dout, args, kwargs):
            return ("remote", dout, args, kwargs)

    assert checks.vjp(Proxy(), 1.0, 2, k=3) == ("remote", 1.0, (2,), {"k": 3})


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_assert_close_fails_when_the_expected_value_is_not_finite(bad):
    expected = np.array([1.0, bad, 3.0])
    for got in (expected.copy(), np.array([1.0, 2.0, 3.0])):
        with pytest.raises(AssertionError, match=r"expected x: not finite at index \(1,\)"):
            checks.assert_close("x", got, expected)
