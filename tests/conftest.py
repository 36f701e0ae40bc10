"""Shared test helpers.

``states``: nested recurrent states as flat lists of arrays, for the gradient checks. A state is
an array ``h``, a tuple ``(h, c)`` (LSTM), a ``(forward, backward)`` tuple (Bidirectional) or a
list with one state per layer (Stacked). ``check_layer_gradients`` perturbs arrays, so the
wrappers below take and return states as flat sequences of arrays.

``parity`` (where torch is installed): run a NumPy layer and its torch twin side by side. The
NumPy layer does ``forward`` and ``backward`` with a seeded random upstream gradient; the torch
module does ``forward`` and autograd with the same upstream gradient; ``parity`` then compares
outputs, final states, input and state gradients and every parameter gradient (by name), all in
float64. Only numpy, torch and the package are used, so the CUDA tests run with nothing else.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from attention_course.numpy_track.base import Layer

try:
    import torch
except ImportError:  # torch is an optional extra: the parity fixture then skips
    torch = None


def flatten_state(state) -> list[np.ndarray]:
    """Every array of a nested state, depth first."""
    if state is None:
        return []
    if isinstance(state, np.ndarray):
        return [state]
    return [array for part in state for array in flatten_state(part)]


def unflatten_state(template, arrays):
    """The nested structure of ``template`` filled from the iterator ``arrays``."""
    if isinstance(template, np.ndarray):
        return next(arrays)
    return type(template)(unflatten_state(part, arrays) for part in template)


class SequenceWithState(Layer):
    """A sequence layer seen as ``(xs, *initial_state) -> (outputs, *final_state)``.

    ``forward(xs, mask=None, **initial)`` takes the initial state as keyword arrays in the order
    of ``flatten_state(template)`` (any names); ``backward`` returns ``(dxs, *initial_state_grad)``.
    """

    def __init__(self, layer: Layer, template=None) -> None:
        super().__init__()
        self.layer = self.add_child("layer", layer)
        self.template = template

    def forward(self, xs, mask=None, **initial):
        state = unflatten_state(self.template, iter(initial.values())) if initial else None
        outputs = self.layer.forward(xs, mask, state)
        return (outputs, *flatten_state(self.layer.final_state))

    def backward(self, douts):
        d_outputs, *d_final = douts
        dxs = self.layer.backward(d_outputs, unflatten_state(self.layer.final_state, iter(d_final)))
        return (dxs, *flatten_state(self.layer.initial_state_grad))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def states() -> SimpleNamespace:
    """``states.flatten``, ``states.unflatten`` and ``states.SequenceWithState``."""
    return SimpleNamespace(flatten=flatten_state, unflatten=unflatten_state, SequenceWithState=SequenceWithState)


# --- parity of the two tracks (needs torch) ----------------------------------------------------

TOLERANCE = 1e-10


# --- nested states ---------------------------------------------------------------------------


def flatten(state) -> list:
    """Every array (or tensor) of a nested state, depth first."""
    if state is None:
        return []
    if isinstance(state, (np.ndarray, torch.Tensor)):
        return [state]
    return [leaf for part in state for leaf in flatten(part)]


def nested_map(function, state):
    """``state`` with ``function`` applied to every leaf, the nesting kept."""
    if state is None:
        return None
    if isinstance(state, (np.ndarray, torch.Tensor)):
        return function(state)
    return type(state)(nested_map(function, part) for part in state)


def random_like(state, rng: np.random.Generator):
    return nested_map(lambda array: rng.standard_normal(array.shape), state)


def as_torch(value, device="cpu", requires_grad: bool = False):
    """A nested structure of NumPy arrays as torch tensors on ``device`` (float leaves may require grad)."""

    def one(array):
        tensor = torch.from_numpy(np.array(array)).to(device)
        return tensor.requires_grad_() if requires_grad and tensor.is_floating_point() else tensor

    return nested_map(one, value)


def lengths_mask(lengths, T: int) -> np.ndarray:
    """(N, T) bool, True on the first ``lengths[n]`` steps of row n: padding at the end."""
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


# --- comparisons -----------------------------------------------------------------------------


def to_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").numpy()
    return np.asarray(value)


def assert_close(name: str, got, expected, tolerance: float = TOLERANCE) -> None:
    """``got`` (torch or NumPy) equals ``expected`` within ``tolerance``, or a message naming ``name``."""
    got, expected = to_numpy(got), to_numpy(expected)
    assert got.shape == expected.shape, f"{name}: shape {got.shape}, expected {expected.shape}"
    assert np.isfinite(got).all(), f"{name}: not finite: {got}"
    if got.size:
        error = np.abs(got.astype(np.float64) - expected.astype(np.float64)).max()
        assert error <= tolerance, f"{name}: off by {error:.3g} (tolerance {tolerance:g})"


def assert_nested_close(name: str, got, expected, tolerance: float = TOLERANCE) -> None:
    got, expected = flatten(got), flatten(expected)
    assert len(got) == len(expected), f"{name}: {len(got)} arrays, expected {len(expected)}"
    for index, (g, e) in enumerate(zip(got, expected)):
        assert_close(f"{name}[{index}]", g, e, tolerance)


def assert_same_parameters(numpy_layer, module) -> None:
    """Same names, shapes and values, exactly."""
    ours = {name: value for name, value, _ in numpy_layer.named_parameters()}
    theirs = dict(module.named_parameters())
    assert sorted(ours) == sorted(theirs), f"parameter names differ: {sorted(ours)} vs {sorted(theirs)}"
    for name, value in ours.items():
        np.testing.assert_array_equal(to_numpy(theirs[name]), value, err_msg=name)


def assert_parameter_grads(numpy_layer, module, tolerance: float = TOLERANCE) -> None:
    """Every torch parameter's ``.grad`` equals the NumPy layer's ``grads``, name for name.

    A parameter autograd never reached must have a zero NumPy gradient.
    """
    theirs = dict(module.named_parameters())
    names = []
    for name, value, grad in numpy_layer.named_parameters():
        torch_grad = theirs[name].grad
        assert_close(f"grad {name}", np.zeros_like(value) if torch_grad is None else torch_grad, grad, tolerance)
        names.append(name)
    assert sorted(names) == sorted(theirs), "parameter names differ"


def randomize(numpy_layer, rng: np.random.Generator, scale: float = 0.6):
    """Every parameter (biases included, which start at zero) drawn at random, in place."""
    for _, value, _ in numpy_layer.named_parameters():
        value[...] = rng.uniform(-scale, scale, value.shape)
    return numpy_layer


def copied(numpy_layer, module, rng: np.random.Generator, device="cpu"):
    """``module`` (float64, on ``device``) holding the NumPy layer's weights, randomized first."""
    from attention_course.convert import numpy_to_torch

    randomize(numpy_layer, rng)
    module = module.to(device=device, dtype=torch.float64)
    numpy_to_torch(numpy_layer, module)
    assert_same_parameters(numpy_layer, module)
    return module


# --- whole procedures ------------------------------------------------------------------------


def sequence_parity(numpy_layer, module, xs, mask, initial_state, rng, device="cpu",
                    tolerance: float = TOLERANCE) -> None:
    """A sequence layer (recurrent, Bidirectional, Stacked, Residual) against its torch twin.

    Compares outputs, ``final_state``, the input gradient, the initial state's gradient (when
    one is given), and every parameter gradient, for random gradients of the outputs and of the
    final state.
    """
    hs = numpy_layer.forward(xs, mask, initial_state)
    final = numpy_layer.final_state
    d_hs, d_final = rng.standard_normal(hs.shape), random_like(final, rng)
    d_xs = numpy_layer.backward(d_hs, d_final)

    module.zero_grad(set_to_none=True)
    xs_t = as_torch(xs, device, requires_grad=True)
    init_t = as_torch(initial_state, device, requires_grad=True)
    hs_t = module(xs_t, as_torch(mask, device), init_t)
    final_t = module.final_state
    loss = (hs_t * as_torch(d_hs, device)).sum()
    for f, d in zip(flatten(final_t), flatten(d_final), strict=True):
        loss = loss + (f * as_torch(d, device)).sum()
    loss.backward()

    assert hs_t.dtype == torch.float64 and hs_t.device == xs_t.device
    assert_close("outputs", hs_t, hs, tolerance)
    assert_nested_close("final_state", final_t, final, tolerance)
    assert_close("input gradient", xs_t.grad, d_xs, tolerance)
    if initial_state is not None:
        assert_nested_close("initial state gradient", [t.grad for t in flatten(init_t)],
                            flatten(numpy_layer.initial_state_grad), tolerance)
    assert_parameter_grads(numpy_layer, module, tolerance)


def model_parity(numpy_model, module, batch: dict, device="cpu", tolerance: float = TOLERANCE) -> None:
    """A whole model: the loss and every parameter gradient (``backward(1.0)`` vs ``loss.backward()``)."""
    loss = numpy_model.forward(**batch)
    numpy_model.backward(1.0)
    module.zero_grad(set_to_none=True)
    loss_t = module(**{name: as_torch(value, device) for name, value in batch.items()})
    loss_t.backward()
    assert loss_t.dtype == torch.float64
    assert_close("loss", loss_t, np.float64(loss), tolerance)
    assert_parameter_grads(numpy_model, module, tolerance)


@pytest.fixture(scope="session")
def parity() -> SimpleNamespace:
    """The helpers above, for the test files (which cannot import this conftest)."""
    if torch is None:
        pytest.skip("torch is not installed")
    return SimpleNamespace(
        TOLERANCE=TOLERANCE, flatten=flatten, nested_map=nested_map, random_like=random_like, as_torch=as_torch,
        lengths_mask=lengths_mask, to_numpy=to_numpy, assert_close=assert_close,
        assert_nested_close=assert_nested_close, assert_same_parameters=assert_same_parameters,
        assert_parameter_grads=assert_parameter_grads, randomize=randomize, copied=copied,
        sequence_parity=sequence_parity, model_parity=model_parity)
