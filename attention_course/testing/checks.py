"""The checks the exercises' test cells use: clear assertions, seeded inputs, gradient checks.

A test cell is written once and runs in two places:

* in the student's own kernel (JupyterHub, or locally), where the student's functions are plain
  Python functions: the visible tests give their messages there;
* in the grader's judge, a separate process that never runs the student's code: there the
  student's names are proxies that send their arguments (plain data: numbers, strings, arrays,
  tensors, lists, tuples, dicts, and the ``torch.nn`` modules listed in the grader) to the
  sandbox and return plain data. A test cell therefore calls the student's functions only with
  such arguments, compares what comes back with values it computes itself, and asks for
  gradients of torch code through ``vjp`` (autograd runs where the student's code runs).

Nothing here guards against tampering: in the grader, nothing the student's code does can reach
this module; in the student's own kernel, a student who patches it only fools themselves.
"""

from __future__ import annotations

import numpy as np

__all__ = ["random", "lengths_mask", "tensor", "as_array", "assert_shape", "assert_close", "assert_equal",
           "assert_finite", "numerical_vjp", "check_gradients", "vjp"]


def random(shape, seed: int, scale: float = 1.0) -> np.ndarray:
    """Standard normal values times ``scale``, float64, the same for a seed everywhere."""
    return np.random.default_rng(seed).standard_normal(tuple(shape)) * scale


def lengths_mask(lengths, T: int) -> np.ndarray:
    """(N, T) bool, True on the first ``lengths[n]`` steps of row n: padding at the end."""
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def tensor(array, requires_grad: bool = False, dtype=None):
    """A torch tensor from a NumPy array (float64 stays float64; bools and ints keep their kind)."""
    import torch

    value = torch.from_numpy(np.array(array))
    if dtype is not None:
        value = value.to(dtype)
    return value.requires_grad_(True) if requires_grad else value


def as_array(name: str, value) -> np.ndarray:
    """``value`` (a NumPy array, a torch tensor, a number or a list of numbers) as a NumPy array.

    Raises:
        AssertionError naming ``name`` when ``value`` is something else (an object, None).
    """
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        value = value.detach().cpu()
        return value.float().numpy() if str(value.dtype) == "torch.bfloat16" else value.numpy()
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        try:
            array = np.asarray([as_array(f"{name}[{i}]", item) for i, item in enumerate(value)])
        except (AssertionError, ValueError):
            array = None
        if array is not None and array.dtype != object:
            return array
    raise AssertionError(f"{name}: expected an array (or tensor), got {_describe(value)}")


def _describe(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}" if len(text) <= 80 else f"a {type(value).__name__}"


def assert_shape(name: str, value, shape) -> None:
    """``value``'s shape is exactly ``shape``."""
    got = as_array(name, value).shape
    if tuple(got) != tuple(shape):
        raise AssertionError(f"{name}: expected shape {tuple(shape)}, got {tuple(got)}")


def assert_close(name: str, got, expected, rtol: float = 1e-7, atol: float = 1e-9) -> None:
    """``|got - expected| <= atol + rtol * |expected|`` everywhere; shapes must agree exactly.

    The message names ``name``, the worst index and both values there. Both must be finite: an
    expected value that is NaN or infinite fails too (a comparison with it proves nothing).
    """
    got, expected = as_array(name, got), as_array(f"expected {name}", expected)
    if got.shape != expected.shape:
        raise AssertionError(f"{name}: expected shape {expected.shape}, got {got.shape}")
    if got.dtype.kind not in "biufc":
        raise AssertionError(f"{name}: expected numbers, got dtype {got.dtype}")
    if expected.dtype.kind not in "biufc":
        raise AssertionError(f"expected {name}: not numbers (dtype {expected.dtype})")
    got, expected = got.astype(np.float64), expected.astype(np.float64)
    if not np.isfinite(expected).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(expected))[0])
        raise AssertionError(f"expected {name}: not finite at index {index}: {expected[index]} (the test's own "
                             "expected value: nothing can be compared with it)")
    if not np.isfinite(got).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(got))[0])
        raise AssertionError(f"{name}: not finite at index {index}: {got[index]}")
    excess = np.abs(got - expected) - (atol + rtol * np.abs(expected))
    if excess.size and excess.max() > 0:
        index = tuple(int(i) for i in np.unravel_index(np.argmax(excess), excess.shape))
        raise AssertionError(f"{name}: mismatch at index {index}: got {got[index]:.10g}, expected "
                             f"{expected[index]:.10g} ({int((excess > 0).sum())} of {excess.size} entries off)")


def assert_equal(name: str, got, expected) -> None:
    """Exactly equal, shapes included."""
    got, expected = as_array(name, got), as_array(f"expected {name}", expected)
    if got.shape != expected.shape:
        raise AssertionError(f"{name}: expected shape {expected.shape}, got {got.shape}")
    if not np.array_equal(got, expected):
        index = tuple(int(i) for i in np.argwhere(got != expected)[0])
        raise AssertionError(f"{name}: differs at index {index}: got {got[index]}, expected {expected[index]}")


def assert_finite(name: str, value) -> None:
    array = as_array(name, value)
    if not np.isfinite(array).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise AssertionError(f"{name}: not finite at index {index}: {array[index]}")


def _outputs(value) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [as_array(f"output {i}", v).astype(np.float64) for i, v in enumerate(value)]
    return [as_array("output", value).astype(np.float64)]


def numerical_vjp(f, x: np.ndarray, dout, eps: float = 1e-6) -> np.ndarray:
    """``dout^T (d f / d x)`` by central differences; ``f()`` reads ``x``, which is perturbed in place."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float64:
        raise TypeError("numerical_vjp: x must be a float64 NumPy array")
    douts = [as_array("dout", d) for d in (dout if isinstance(dout, (tuple, list)) else [dout])]
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + eps
        plus = _outputs(f())
        x[index] = original - eps
        minus = _outputs(f())
        x[index] = original
        grad[index] = sum(np.sum(d * (p - m)) for d, p, m in zip(douts, plus, minus)) / (2 * eps)
    return grad


def check_gradients(f, inputs: dict, grads: dict, dout, eps: float = 1e-6, rtol: float = 1e-5,
                    atol: float = 1e-7) -> None:
    """Each ``grads[name]`` matches central differences of ``f()`` with respect to ``inputs[name]``.

    ``f`` takes no arguments and reads the float64 arrays in ``inputs``; ``dout`` is the upstream
    gradient of its output (a tuple for several outputs).
    """
    for name, x in inputs.items():
        if name not in grads:
            raise AssertionError(f"no gradient for {name!r} to check")
        assert_close(f"gradient of {name}", grads[name], numerical_vjp(f, x, dout, eps), rtol, atol)


def _leaves(value, path: str, found: list) -> None:
    """Every tensor that requires a gradient, and every parameter of a module, with its path."""
    import torch

    if isinstance(value, torch.nn.Module):
        for name, parameter in value.named_parameters():
            if parameter.requires_grad:
                found.append((f"{path}.{name}", parameter))
    elif isinstance(value, torch.Tensor):
        if value.requires_grad:
            found.append((path, value))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _leaves(item, f"{path}[{index}]", found)
    elif isinstance(value, dict):
        for key, item in value.items():
            _leaves(item, f"{path}[{key!r}]", found)


def vjp(fn, dout, /, *args, **kwargs):
    """Call ``fn(*args, **kwargs)`` and differentiate ``sum(dout * output)`` with torch's autograd.

    Returns ``(output, grads)``: the output with its tensors detached, and the gradient (a float64
    NumPy array) of every argument tensor that requires a gradient, keyed by the argument's name
    (a keyword argument) or position (``"0"``), and of every parameter of a ``torch.nn`` module
    argument (``"gru.weight_ih_l0"``). An input the output does not depend on gets zeros. ``dout``
    matches the output: one array, or a tuple with ``None`` for an output to leave out.

    In the grader this runs where the student's code runs (the proxy of ``fn`` forwards the call).
    """
    remote = getattr(type(fn), "course_remote_vjp", None)
    if remote is not None:
        return remote(fn, dout, args, kwargs)
    import torch

    leaves: list = []
    for index, value in enumerate(args):
        _leaves(value, str(index), leaves)
    for key, value in kwargs.items():
        _leaves(value, key, leaves)
    if not leaves:
        raise ValueError("vjp: no argument requires a gradient (make inputs with tensor(..., requires_grad=True))")
    output = fn(*args, **kwargs)
    outputs = list(output) if isinstance(output, (tuple, list)) else [output]
    douts = list(dout) if isinstance(dout, (tuple, list)) else [dout]
    if len(douts) != len(outputs):
        raise AssertionError(f"the function returned {len(outputs)} output(s), the test has {len(douts)} "
                             "upstream gradient(s)")
    pairs = []
    for index, (out, d) in enumerate(zip(outputs, douts)):
        if d is None:
            continue
        if not isinstance(out, torch.Tensor):
            raise AssertionError(f"output {index}: expected a torch tensor, got {_describe(out)}")
        if out.requires_grad:
            pairs.append((out, torch.as_tensor(as_array("dout", d), dtype=out.dtype, device=out.device)))
    grads = torch.autograd.grad([o for o, _ in pairs], [leaf for _, leaf in leaves], [d for _, d in pairs],
                                allow_unused=True) if pairs else [None] * len(leaves)
    result = {}
    for (path, leaf), grad in zip(leaves, grads):
        value = torch.zeros_like(leaf) if grad is None else grad
        result[path] = value.detach().cpu().double().numpy()

    def detached(value):
        if isinstance(value, torch.Tensor):
            return value.detach()
        if isinstance(value, (tuple, list)):
            return type(value)(detached(item) for item in value)
        return value

    return detached(output), result
