"""The judges' fast paths give what their slow references give.

Four references compute their values one example, position or pair at a time (ch5a tap by tap,
ch7a position by position, ch8a step by step, ch10a pair by pair): independent of the solutions,
and far too slow for the hidden checks at a realistic size. Those checks call a fast path of the
same module instead (``convolution=True``, ``at_once=True``): here each fast path is compared with
its own module's slow path, values and gradients, on small inputs with the exercise's edge cases
(padding, a kernel wider than the source, clipped distances, causal masks).
"""

from __future__ import annotations

import numpy as np
import pytest

from autograder.references import load_reference
from exercise_helpers import SOLUTIONS

pytest.importorskip("torch")


def reference(name: str):
    return load_reference(SOLUTIONS / name / "reference.py")


def assert_same(slow, fast) -> None:
    assert len(slow) == len(fast)
    for index, (want, got) in enumerate(zip(slow, fast)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"output {index}")


def random(shape, seed, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


@pytest.mark.parametrize("N, T, H_dec, H_enc, A, width, lengths", [
    (3, 6, 4, 3, 5, 3, [6, 4, 1]), (2, 4, 2, 2, 3, 5, [4, 2]), (1, 2, 1, 3, 2, 7, [2]), (2, 5, 3, 1, 2, 1, [5, 3])])
def test_location_attention_by_convolution(N, T, H_dec, H_enc, A, width, lengths):
    module = reference("ch5a_location_attention")
    arrays, mask = module.inputs(N, T, H_dec, H_enc, A, width, lengths, seed=T + width, scale=1.3)
    upstream = {"dcontext": random((N, H_enc), 1), "dalpha": random((N, T), 2)}
    slow = module.step(*arrays, mask, **upstream)
    fast = module.step(*arrays, mask, **upstream, convolution=True)
    assert_same(slow[:2] + tuple(slow[2]), fast[:2] + tuple(fast[2]))


@pytest.mark.parametrize("lengths, T, D", [([4, 1, 3], 4, 5), ([2], 2, 1), ([3, 6, 2, 1], 6, 2)])
def test_highway_at_once(lengths, T, D):
    module = reference("ch7a_highway")
    N = len(lengths)
    mask = np.arange(T)[None, :] < np.asarray(lengths)[:, None]
    inputs = [random((N, T, D), 1), mask, random((D, D), 2, 1.5), random((D,), 3), random((D, D), 4, 1.5),
              random((D,), 5)]
    dys = random((N, T, D), 6)
    assert_same(module.highway_gradients(*inputs, dys), module.highway_gradients(*inputs, dys, at_once=True))
    layers = [{"W_H": random((D, D), 10 + k, 1.2), "b_H": random((D,), 20 + k), "W_T": random((D, D), 30 + k, 1.2),
               "b_T": random((D,), 40 + k)} for k in range(3)]
    assert_same([module.highway_gradient_norms(inputs[0], mask, layers, dys)],
                [module.highway_gradient_norms(inputs[0], mask, layers, dys, at_once=True)])


@pytest.mark.parametrize("lengths, T_dec, H, A", [([9, 5, 1], 5, 3, 2), ([4, 2], 3, 2, 3), ([3, 7, 6, 1], 4, 1, 2)])
def test_local_p_window_at_once(lengths, T_dec, H, A):
    module = reference("ch8a_local_p_window")
    N, T_enc = len(lengths), max(lengths) + 1
    inputs = [random((N, T_enc, H), 1), random((N, T_dec, H), 2, 1.5), np.array(lengths), random((H, A), 3),
              random((A,), 4, 2.0), random((A,), 5, 2.0)]
    dcontext = random((N, T_dec, H), 6)
    assert_same(module.localness_gradients(*inputs, dcontext),
                module.localness_gradients(*inputs, dcontext, at_once=True))


@pytest.mark.parametrize("N, T, d, h, c, causal", [(2, 5, 8, 2, 2, False), (3, 4, 6, 3, 1, True),
                                                   (1, 6, 4, 4, 9, False), (1, 5, 6, 2, 0, True)])
def test_relative_attention_at_once(N, T, d, h, c, causal):
    module = reference("ch10a_multihead_backward")
    inputs = [random((N, T, d), 1)] + [random((d, d), 2 + i, 0.7) for i in range(4)] + \
             [random((2 * c + 1, d // h), 7), random((2 * c + 1, d // h), 8)]
    dout = random((N, T, d), 9)
    assert_same(module.relative_attention_gradients(*inputs, h, causal, dout),
                module.relative_attention_gradients(*inputs, h, causal, dout, at_once=True))
