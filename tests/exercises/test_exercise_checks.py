"""``attention_course.testing.exercise``: fresh private copies, tamper detection, the reference guard, the checks.

These run in the test process itself; the notebooks' own use of the module is exercised by
``test_exercise_notebooks.py``.
"""

from __future__ import annotations

import builtins
import sys
import types

import numpy as np
import pytest

import attention_course.testing as course_testing
from attention_course.numpy_track import (DotScore, GeneralScore, ScaledDotScore, TimeAttention, WeightSum, attention,
                                          masked_softmax)
from attention_course.testing import exercise, gradcheck
from attention_course.testing.exercise import REFERENCE_CALL_MESSAGE, TamperingError, load_checks


@pytest.fixture
def checks():
    return load_checks()


@pytest.fixture(autouse=True)
def clean_after():
    """Every test leaves an interpreter in which nothing counts as tampered with."""
    yield
    load_checks()


def test_every_load_is_a_new_private_copy():
    first, second = load_checks(), load_checks()
    assert first is not second and first.assert_close is not second.assert_close
    assert first.__file__ == exercise.__file__
    assert all(module is not first for module in sys.modules.values())


def test_a_clean_interpreter_verifies_also_with_torch_and_the_whole_package():
    pytest.importorskip("torch")
    import importlib
    import pkgutil

    import attention_course

    for info in pkgutil.walk_packages(attention_course.__path__, "attention_course."):
        if not info.name.endswith("__main__"):
            try:
                importlib.import_module(info.name)
            except ImportError:
                pass
    load_checks()


def _replace_code(function, replacement):
    return lambda monkeypatch: monkeypatch.setattr(function, "__code__", replacement.__code__)


TAMPERING = {
    "numpy.allclose rebound": (lambda mp: mp.setattr(np, "allclose", lambda *a, **k: True), "numpy.allclose"),
    "numpy.testing.assert_allclose rebound": (
        lambda mp: mp.setattr(np.testing, "assert_allclose", lambda *a, **k: None), "numpy.testing.assert_allclose"),
    "numpy.allclose's code swapped": (
        _replace_code(np.allclose._implementation, lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: True),
        "numpy.allclose was modified"),
    "numpy.allclose's defaults widened": (
        lambda mp: mp.setattr(np.allclose._implementation, "__defaults__", (1e300, 1e300, False)), "default arguments"),
    "numpy.tanh swapped for another ufunc": (lambda mp: mp.setattr(np, "tanh", np.sin), "numpy.tanh"),
    "numpy.ndarray replaced by a subclass": (
        lambda mp: mp.setattr(np, "ndarray", type("ndarray", (np.ndarray,), {})), "numpy.ndarray"),
    "a check helper rebound in attention_course.testing": (
        lambda mp: mp.setattr(course_testing, "assert_grads_close", lambda *a, **k: None),
        "attention_course.testing.assert_grads_close"),
    "a check helper's code swapped": (
        _replace_code(gradcheck.numerical_vjp, lambda f, x, dout, eps=1e-6: x * 0),
        "attention_course.testing.gradcheck.numerical_vjp"),
    "a check helper's tolerances widened": (
        lambda mp: mp.setattr(gradcheck.assert_grads_close, "__defaults__", (1e300, 1e300)), "default arguments"),
    "the installed exercise module patched": (
        lambda mp: mp.setattr(exercise, "assert_close", lambda *a, **k: None), "attention_course.testing.exercise"),
    "a reference method replaced": (lambda mp: mp.setattr(WeightSum, "forward", lambda self, hs, a: hs),
                                    "WeightSum.forward"),
    "an imported reference function rebound": (
        lambda mp: mp.setattr(attention, "masked_softmax", lambda scores, mask, axis=-1: scores),
        "attention_course.numpy_track.attention.masked_softmax"),
    "a module swapped in sys.modules": (
        lambda mp: mp.setitem(sys.modules, "attention_course.numpy_track.layers", types.ModuleType("fake")),
        "attention_course.numpy_track.layers"),
    "a builtin replaced": (lambda mp: mp.setattr(builtins, "divmod", lambda a, b: (0, 0)), "the builtin divmod"),
}


@pytest.mark.parametrize("case", TAMPERING)
def test_tampering_is_named(case, monkeypatch):
    tamper, named = TAMPERING[case]
    tamper(monkeypatch)
    with pytest.raises(AssertionError, match=named.replace(".", r"\.")) as caught:
        load_checks()
    assert caught.type.__name__ == TamperingError.__name__  # the class of the fresh copy that raised it


def test_torch_autograd_replaced_is_named(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.autograd, "grad", lambda *a, **k: None)
    with pytest.raises(AssertionError, match=r"torch\.autograd\.grad was replaced"):
        load_checks()


def test_the_comparisons_use_no_numpy_function_and_no_numpy_random(monkeypatch):
    reference = load_checks().random((3, 4), seed=5)
    monkeypatch.setattr(np, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(np.testing, "assert_allclose", lambda *a, **k: None)
    monkeypatch.setattr(np.random, "default_rng", lambda *a, **k: None)
    monkeypatch.setattr(exercise, "assert_close", lambda *a, **k: None)  # the installed copy, not the fresh one
    checks = load_checks(verify=False)
    assert (checks.random((3, 4), seed=5) == reference).all()
    with pytest.raises(AssertionError, match=r"mismatch at index \(1, 2\)"):
        bad = reference.copy()
        bad[1, 2] += 1e-3
        checks.assert_close("x", bad, reference)


# ---------------------------------------------------------------------------------------------- the guard
def test_the_guard_blocks_reference_classes_their_bases_and_functions(checks):
    hs, s = checks.random((2, 3, 4), seed=1), checks.random((2, 2, 4), seed=2)
    made_before = WeightSum()  # a bound method taken before the guard still runs the guarded code
    bound = made_before.forward
    guarded = (WeightSum.forward, DotScore.backward, TimeAttention.forward, masked_softmax)
    originals = {fn: fn.__code__ for fn in guarded}
    with checks.forbid_reference("WeightSum", "ScaledDotScore", "TimeAttention", "masked_softmax"):
        inherited = ScaledDotScore.__new__(ScaledDotScore)  # its backward is DotScore's
        for call in (lambda: WeightSum(), lambda: bound(hs, s[:, 0, :3]), lambda: TimeAttention("dot", 4, 4),
                     lambda: masked_softmax(s, None), lambda: inherited.backward(s)):
            with pytest.raises(RuntimeError, match=REFERENCE_CALL_MESSAGE):
                call()
        GeneralScore(4, 4).forward(hs, s)  # neither named nor a base of a named class: allowed
    assert all(fn.__code__ is code for fn, code in originals.items()), "every code object is restored"
    TimeAttention("dot", 4, 4).forward(hs, s)  # super() inside still works after the swap back


def test_the_guard_restores_after_an_error(checks):
    original = WeightSum.forward.__code__
    with pytest.raises(ZeroDivisionError):
        with checks.forbid_reference("WeightSum"):
            1 / 0
    assert WeightSum.forward.__code__ is original


def test_a_reference_imported_while_guarded_is_refused(checks, monkeypatch):
    with pytest.raises(RuntimeError, match="it imported attention_course._probe"):
        with checks.forbid_reference("WeightSum"):
            monkeypatch.setitem(sys.modules, "attention_course._probe", types.ModuleType("attention_course._probe"))
    monkeypatch.delitem(sys.modules, "attention_course._probe")


def test_the_guard_can_block_autograd(checks):
    torch = pytest.importorskip("torch")
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    with checks.forbid_reference("softmax", autograd=True):
        with pytest.raises(RuntimeError, match="autograd"):
            (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_the_guard_names_what_it_cannot_find(checks):
    with pytest.raises(LookupError, match="NoSuchLayer"):
        with checks.forbid_reference("NoSuchLayer"):
            pass


# ---------------------------------------------------------------------------------------------- the checks
def test_random_is_seeded_uniform_float64(checks):
    a = checks.random((4, 5), seed=3, scale=2.0)
    assert type(a) is np.ndarray and a.dtype == np.float64 and a.shape == (4, 5)
    assert (checks.random((4, 5), seed=3, scale=2.0) == a).all()
    assert not (checks.random((4, 5), seed=4, scale=2.0) == a).any()
    assert -2.0 <= a.min() and a.max() < 2.0 and a.std() > 0.5


def test_lengths_mask(checks):
    mask = checks.lengths_mask([2, 0, 3], 3)
    assert mask.dtype == bool and mask.tolist() == [[True, True, False], [False, False, False], [True, True, True]]


class _Subclass(np.ndarray):
    pass


@pytest.mark.parametrize("value, message", [
    ([1.0, 2.0], "expected a numpy array, got list"),
    (np.zeros(2).view(_Subclass), "expected a numpy array, got _Subclass"),
    (np.zeros(2, dtype=object), "expected a floating-point array"),
    (np.zeros(2, dtype=int), "expected a floating-point array"),
])
def test_only_exact_float_arrays_are_compared(checks, value, message):
    with pytest.raises(AssertionError, match=message):
        checks.assert_close("x", value, np.zeros(2))


def test_assert_close_and_its_messages(checks):
    x = checks.random((2, 3), seed=1)
    checks.assert_close("x", x, x + 1e-12)
    with pytest.raises(AssertionError, match=r"x: expected shape \(2, 3\), got \(3, 2\)"):
        checks.assert_close("x", x.T.copy(), x)
    with pytest.raises(AssertionError, match=r"not finite at index \(0, 1\)"):
        bad = x.copy()
        bad[0, 1] = np.nan
        checks.assert_close("x", bad, x)
    with pytest.raises(AssertionError, match="differs at index"):
        checks.assert_equal("mask", np.array([True, False]), np.array([True, True]))
    with pytest.raises(AssertionError, match=r"expected shape \(3,\), got \(2, 3\)"):
        checks.assert_shape("x", x, (3,))


def test_numerical_gradients_match_the_analytic_ones(checks):
    x, w = checks.random((3, 2), seed=1), checks.random((3, 2), seed=2)
    dout = (checks.random((3, 2), seed=3), checks.random((2,), seed=4))

    def f():
        return np.tanh(x) * w, (x * x).sum(axis=0)

    analytic = dout[0] * w * (1 - np.tanh(x) ** 2) + dout[1] * 2 * x
    checks.assert_close("vjp", checks.numerical_vjp(f, x, dout), analytic, rtol=1e-7, atol=1e-9)
    checks.check_gradients(f, {"x": x}, {"x": analytic}, dout)
    with pytest.raises(AssertionError, match="gradient of x: mismatch"):
        checks.check_gradients(f, {"x": x}, {"x": analytic * 1.01}, dout)


def test_autograd_vjp(checks):
    torch = pytest.importorskip("torch")
    x = checks.tensor(checks.random((2, 3), seed=1), requires_grad=True)
    unused = checks.tensor(np.ones(2), requires_grad=True)
    dout = checks.random((2, 3), seed=2)
    grads = checks.autograd_vjp(torch.sin(x), {"x": x}, dout)
    checks.assert_close("grad", grads["x"], dout * np.cos(checks.as_array("x", x)))
    with pytest.raises(AssertionError, match="no gradient reaches unused"):
        checks.autograd_vjp(torch.sin(x), {"x": x, "unused": unused}, dout)
    with pytest.raises(AssertionError, match="does not depend on the inputs"):
        checks.autograd_vjp(torch.sin(x).detach(), {"x": x}, dout)

    class Sneaky(torch.Tensor):
        pass

    with pytest.raises(AssertionError, match="expected a torch.Tensor, got Sneaky"):
        checks.autograd_vjp(torch.sin(x).as_subclass(Sneaky), {"x": x}, dout)
