"""Tests for attention_course/numpy_track/pooling.py: the lectures' attention pooling, mean and last state."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core import initializers
from attention_course.numpy_track.pooling import AttentionPooling, LastStatePooling, MeanPooling
from attention_course.testing import ShapeError, check_layer_gradients

HYPOTHESIS = settings(max_examples=25, deadline=None)


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def lecture_attention(inputs, w_omega, b_omega, u_omega):
    """The lectures' TensorFlow function, line by line in NumPy (no mask: every step is real)."""
    v = np.tanh(np.tensordot(inputs, w_omega, axes=1) + b_omega)  # (B, T, A)
    vu = np.tensordot(v, u_omega, axes=1)  # (B, T)
    alphas = np.exp(vu) / np.exp(vu).sum(axis=1, keepdims=True)
    output = np.sum(inputs * alphas[:, :, None], axis=1)  # (B, D)
    return output, alphas


def test_attention_pooling_is_the_lectures_code(rng):
    layer = AttentionPooling(4, 3, rng=1)
    hs = rng.standard_normal((2, 5, 4))
    pooled = layer.forward(hs)
    want, alphas = lecture_attention(hs, layer.params["W_proj"], layer.params["b_proj"], layer.params["u_query"])
    np.testing.assert_allclose(pooled, want, rtol=1e-12)
    np.testing.assert_allclose(layer.attention_weights, alphas, rtol=1e-12)


def test_initial_values_are_the_lectures_normal_with_sd_0_1():
    layer = AttentionPooling(40, 30, rng=0)
    expected = initializers.attention_pooling(np.random.default_rng(0), 40, 30)
    for name in ("W_proj", "b_proj", "u_query"):
        np.testing.assert_array_equal(layer.params[name], expected[name])
    values = np.concatenate([value.ravel() for value in expected.values()])
    assert abs(values.std() - 0.1) < 0.01 and abs(values.mean()) < 0.01
    assert layer.params["W_proj"].shape == (40, 30) and layer.params["u_query"].shape == (30,)


@pytest.mark.parametrize("lengths", [[5, 3, 1], [5, 5, 5], [4, 0, 2]])
def test_attention_pooling_gradients(rng, lengths):
    layer = AttentionPooling(4, 3, rng=2)
    for _, value, _ in layer.named_parameters():  # larger than the initial values: a sharper softmax
        value[...] = rng.uniform(-1, 1, value.shape)
    hs = rng.standard_normal((3, 5, 4))
    check_layer_gradients(layer, {"hs": hs}, forward_kwargs={"mask": lengths_mask(lengths, 5)})


def test_mean_and_last_state_gradients(rng):
    hs = rng.standard_normal((3, 5, 4))
    mask = lengths_mask([5, 2, 0], 5)
    check_layer_gradients(MeanPooling(), {"hs": hs}, forward_kwargs={"mask": mask})
    check_layer_gradients(LastStatePooling(2), {"hs": hs}, forward_kwargs={"mask": mask})
    check_layer_gradients(LastStatePooling(4), {"hs": hs}, forward_kwargs={"mask": mask})
    check_layer_gradients(MeanPooling(), {"hs": hs})


@HYPOTHESIS
@given(lengths=st.lists(st.integers(1, 7), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_weights_sum_to_one_over_the_real_steps_and_padding_changes_nothing(lengths, seed):
    rng = np.random.default_rng(seed)
    T = max(lengths)
    layer = AttentionPooling(3, 4, rng=seed)
    hs = rng.standard_normal((len(lengths), T, 3))
    mask = lengths_mask(lengths, T)
    pooled = layer.forward(hs, mask)
    weights = layer.attention_weights
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)
    assert (weights[~mask] == 0).all()
    junk = np.where(mask[..., None], hs, rng.standard_normal(hs.shape) * 100)
    np.testing.assert_allclose(layer.forward(junk, mask), pooled, rtol=1e-12)
    # a longer padded batch pools the same
    wider = np.concatenate([hs, rng.standard_normal((len(lengths), 2, 3))], axis=1)
    np.testing.assert_allclose(layer.forward(wider, lengths_mask(lengths, T + 2)), pooled, rtol=1e-12)


def test_a_row_with_no_real_token_pools_to_zeros(rng):
    hs = rng.standard_normal((2, 3, 4))
    mask = lengths_mask([3, 0], 3)
    for layer in (AttentionPooling(4, 2, rng=0), MeanPooling(), LastStatePooling(2)):
        pooled = layer.forward(hs, mask)
        assert np.isfinite(pooled).all() and (pooled[1] == 0).all(), type(layer).__name__
        assert (pooled[0] != 0).any()


def test_mean_pooling_and_last_state_values(rng):
    hs = rng.standard_normal((2, 4, 6))
    mask = lengths_mask([4, 2], 4)
    np.testing.assert_allclose(MeanPooling().forward(hs, mask), [hs[0].mean(axis=0), hs[1, :2].mean(axis=0)])
    last = LastStatePooling(3).forward(hs, mask)
    np.testing.assert_array_equal(last[0], np.concatenate([hs[0, 3, :3], hs[0, 0, 3:]]))
    np.testing.assert_array_equal(last[1], np.concatenate([hs[1, 1, :3], hs[1, 0, 3:]]))


def test_float32_in_float32_out(rng):
    layer = AttentionPooling(4, 3, rng=0, dtype=np.float32)
    hs = rng.standard_normal((2, 3, 4)).astype(np.float32)
    pooled = layer.forward(hs, lengths_mask([3, 1], 3))
    assert pooled.dtype == np.float32 and layer.backward(np.ones_like(pooled)).dtype == np.float32


def test_wrong_shapes_name_the_argument(rng):
    layer = AttentionPooling(4, 3)
    with pytest.raises(ShapeError, match=r"hs: expected shape \(N, T, 4\), got \(2, 3, 5\)"):
        layer.forward(rng.standard_normal((2, 3, 5)))
    with pytest.raises(ShapeError, match="mask"):
        layer.forward(rng.standard_normal((2, 3, 4)), np.ones((2, 4), dtype=bool))
    with pytest.raises(ShapeError, match="forward_size"):
        LastStatePooling(7).forward(rng.standard_normal((2, 3, 4)))
