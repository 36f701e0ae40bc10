"""Numerical gradient checks: central differences in float64, in vector-Jacobian form.

``backward(dout)`` returns the vector-Jacobian product ``dout^T J``; the numerical check
computes exactly that quantity, one input element at a time::

    grad[i] = sum(dout * (f(x + eps e_i) - f(x - eps e_i))) / (2 eps)

so a layer is checked against what its ``backward`` is supposed to return, with no Jacobian
ever built.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["numerical_vjp", "assert_grads_close", "check_layer_gradients", "relative_error"]


def _outputs_as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def numerical_vjp(f: Callable[[], object], x: np.ndarray, dout, eps: float = 1e-6) -> np.ndarray:
    """The vector-Jacobian product ``dout^T (d f / d x)`` by central differences.

    ``f`` takes no arguments and reads ``x``, which is modified in place (and restored) one
    element at a time; ``f`` returns an array or a tuple of arrays, matched by ``dout``.

    Shapes:
        x: any, float64.  dout: the shape(s) of ``f()``.  returns: ``x.shape``.
    """
    if x.dtype != np.float64:
        raise TypeError(f"numerical_vjp: x must be float64 for a reliable check, got {x.dtype}")
    douts = _outputs_as_tuple(dout)
    grad = np.zeros_like(x)
    # Index x itself: x.reshape(-1) would be a copy for a non-contiguous x (a slice), and f would never see the writes.
    for i in np.ndindex(x.shape):
        original = x[i]
        x[i] = original + eps
        plus = _outputs_as_tuple(f())
        plus = tuple(np.array(p, dtype=np.float64, copy=True) for p in plus)
        x[i] = original - eps
        minus = _outputs_as_tuple(f())
        x[i] = original
        grad[i] = sum(np.sum(d * (p - m)) for d, p, m in zip(douts, plus, minus)) / (2 * eps)
    return grad


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max(1, |a|, |b|), elementwise: small for both small and large values."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))))


def assert_grads_close(name: str, analytic, numeric, rtol: float = 1e-6, atol: float = 1e-8) -> None:
    """Assert ``|analytic - numeric| <= atol + rtol * |numeric|`` everywhere.

    On failure the message names the gradient, the worst index and both values there, e.g.
    ``"gradient of W_h: mismatch at index (2, 5): analytic 0.1234, numerical 0.2345 (...)"``.
    """
    analytic = np.asarray(analytic)
    numeric = np.asarray(numeric)
    if analytic.shape != numeric.shape:
        raise AssertionError(f"gradient of {name}: analytic shape {analytic.shape} != numerical shape {numeric.shape}")
    if not np.all(np.isfinite(analytic)):
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(analytic))[0])
        raise AssertionError(f"gradient of {name}: analytic gradient is not finite at index {index}: {analytic[index]}")
    excess = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
    if excess.size and excess.max() > 0:
        index = tuple(int(i) for i in np.unravel_index(np.argmax(excess), excess.shape))
        raise AssertionError(
            f"gradient of {name}: mismatch at index {index}: analytic {analytic[index]:.10g}, "
            f"numerical {numeric[index]:.10g} (|diff| {abs(analytic[index] - numeric[index]):.3g} > "
            f"atol {atol:g} + rtol {rtol:g} * |numerical|; {int((excess > 0).sum())} of {excess.size} entries off)"
        )


def check_layer_gradients(layer, inputs: dict, wrt: tuple | list | None = None, forward_kwargs: dict | None = None,
                          seed: int = 0, eps: float = 1e-6, rtol: float = 1e-6, atol: float = 1e-8,
                          params: bool = True) -> None:
    """Check a layer's ``backward`` against central differences, for its parameters and inputs.

    ``layer.forward(**inputs, **forward_kwargs)`` returns an array or a tuple of arrays;
    ``layer.backward(dout)`` returns the input gradients: one array, or a tuple in the order of
    ``wrt`` (the names of the differentiable inputs; default: all float inputs, in the order
    given). Parameter gradients are read from ``layer.named_parameters()`` after ``backward``.
    A random upstream gradient ``dout`` (seeded) makes the check a vector-Jacobian product.

    Raises:
        AssertionError naming the first parameter or input whose gradient is off, and where.
    """
    forward_kwargs = dict(forward_kwargs or {})
    inputs = dict(inputs)
    if wrt is None:
        wrt = [k for k, v in inputs.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    for key in wrt:
        if inputs[key].dtype != np.float64:
            raise TypeError(f"check_layer_gradients: input {key!r} must be float64, got {inputs[key].dtype}")

    def run():
        return layer.forward(**inputs, **forward_kwargs)

    out = run()
    rng = np.random.default_rng(seed)
    douts = tuple(rng.standard_normal(np.shape(o)) for o in _outputs_as_tuple(out))
    dout = douts if isinstance(out, tuple) else douts[0]
    input_grads = layer.backward(dout)
    if not isinstance(input_grads, tuple):
        input_grads = (input_grads,)
    if len(wrt) > len(input_grads):
        raise AssertionError(f"backward returned {len(input_grads)} gradients for inputs {list(wrt)}")
    analytic_params = {}
    if params:
        analytic_params = {name: grad.copy() for name, _, grad in layer.named_parameters()}
    for key, grad in zip(wrt, input_grads):
        numeric = numerical_vjp(run, inputs[key], dout, eps)
        assert_grads_close(f"input {key!r}", grad, numeric, rtol, atol)
    if params:
        for name, value, _ in layer.named_parameters():
            if value.dtype != np.float64:
                raise TypeError(f"check_layer_gradients: parameter {name!r} must be float64, got {value.dtype}")
            numeric = numerical_vjp(run, value, dout, eps)
            assert_grads_close(f"parameter {name!r}", analytic_params[name], numeric, rtol, atol)
