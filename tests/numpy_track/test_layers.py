"""Tests for attention_course/numpy_track/layers.py: Embedding, Affine, softmax, SoftmaxCrossEntropy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attention_course.numpy_track.layers import (Affine, Embedding, Softmax, SoftmaxCrossEntropy, masked_softmax,
                                                  softmax)
from attention_course.testing import ShapeError, check_layer_gradients

HYPOTHESIS = settings(max_examples=25, deadline=None)

scores_arrays = hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=5),
                           elements=st.floats(-50, 50))


# --- Embedding ------------------------------------------------------------------------------


def test_embedding_looks_up_rows(rng):
    embed = Embedding(7, 3, rng=rng)
    ids = np.array([[0, 6, 6], [2, 1, 0]])
    out = embed.forward(ids)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out[0, 1], embed.params["W"][6])


def test_embedding_gradient_adds_up_repeated_ids(rng):
    embed = Embedding(5, 3, rng=rng)
    ids = np.array([[1, 1, 4], [1, 0, 4]])  # 1 three times, 4 twice, 2 and 3 never
    check_layer_gradients(embed, {"ids": ids}, wrt=[])
    embed.forward(ids)
    embed.backward(np.ones((2, 3, 3)))
    np.testing.assert_array_equal(embed.grads["W"][:, 0], [1, 3, 0, 0, 2])


@pytest.mark.parametrize("ids, message", [
    (np.array([[0.0, 1.0]]), "ids: expected an integer"),
    (np.array([[0, 5]]), r"ids: token id 5 is outside the vocabulary \[0, 5\)"),
    (np.array([[-1, 0]]), "ids: token id -1 is outside"),
])
def test_embedding_rejects_bad_ids(ids, message):
    with pytest.raises(ValueError, match=message):
        Embedding(5, 2).forward(ids)


# --- Affine ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_affine_shapes_and_gradients(rng, bias):
    affine = Affine(4, 3, rng=rng, bias=bias)
    if bias:
        affine.params["b"][...] = rng.standard_normal(3)
    x = rng.standard_normal((2, 3, 4))
    out = affine.forward(x)
    assert out.shape == (2, 3, 3)
    expected = x @ affine.params["W"] + (affine.params["b"] if bias else 0)
    np.testing.assert_allclose(out, expected)
    check_layer_gradients(affine, {"x": x})


def test_affine_follows_the_input_dtype(rng):
    affine = Affine(4, 3, rng=rng)  # float64 parameters
    out = affine.forward(rng.standard_normal((2, 4)).astype(np.float32))
    assert out.dtype == np.float32
    assert affine.backward(np.ones((2, 3), dtype=np.float32)).dtype == np.float32


def test_affine_names_a_wrong_width():
    with pytest.raises(ShapeError, match=r"x: expected shape \(\.\.\., 4\), got \(2, 5\)"):
        Affine(4, 3).forward(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="x: expected a floating-point array"):
        Affine(4, 3).forward(np.zeros((2, 4), dtype=np.int64))


# --- softmax --------------------------------------------------------------------------------


@HYPOTHESIS
@given(scores_arrays)
def test_softmax_rows_are_distributions(scores):
    weights = softmax(scores)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


@HYPOTHESIS
@given(scores_arrays)
def test_masked_softmax_equals_softmax_when_nothing_is_masked(scores):
    mask = np.ones(scores.shape, dtype=bool)
    np.testing.assert_allclose(masked_softmax(scores, mask), softmax(scores), rtol=1e-12, atol=1e-300)
    assert np.array_equal(masked_softmax(scores, None), softmax(scores))


@HYPOTHESIS
@given(scores_arrays, st.data())
def test_masked_weights_are_exactly_zero_and_real_ones_sum_to_one(scores, data):
    mask = data.draw(hnp.arrays(bool, scores.shape))
    before = scores.copy()
    weights = masked_softmax(scores, mask)
    assert np.array_equal(scores, before), "the scores must be left untouched"
    assert np.all(weights[~mask] == 0)
    has_real = mask.any(axis=-1)
    np.testing.assert_allclose(weights.sum(axis=-1)[has_real], 1.0, rtol=1e-12)
    assert np.all(weights.sum(axis=-1)[~has_real] == 0), "a fully masked row gets zero weights"
    assert np.all(np.isfinite(weights))


def test_masked_softmax_ignores_garbage_under_the_mask():
    scores = np.array([[1.0, 2.0, np.inf, np.nan], [0.5, -1.0, 1e308, -np.inf]])
    mask = np.array([[True, True, False, False], [True, True, False, False]])
    expected = np.concatenate([softmax(scores[:, :2]), np.zeros((2, 2))], axis=1)
    np.testing.assert_array_equal(masked_softmax(scores, mask), expected)


@pytest.mark.parametrize("dtype, big", [(np.float32, 1e4), (np.float64, 1e300)])
def test_huge_scores_do_not_overflow(dtype, big):
    scores = np.array([[big, -big, 0.0], [big, big * 0.5, -big]], dtype=dtype)
    for weights in (softmax(scores), masked_softmax(scores, np.array([True, True, False]))):
        assert weights.dtype == dtype
        assert np.all(np.isfinite(weights))
        np.testing.assert_allclose(weights[:, 0], 1.0)


@pytest.mark.parametrize("masked", [False, True])
def test_softmax_layer_gradients(rng, masked):
    x = rng.standard_normal((2, 3, 4))
    mask = rng.random((2, 1, 4)) < 0.6 if masked else None
    if masked:
        mask[0, 0] = False  # a fully masked row: zero weights, zero gradient
    layer = Softmax()
    check_layer_gradients(layer, {"x": x}, forward_kwargs={"mask": mask})
    if masked:
        layer.forward(x, mask)
        dx = layer.backward(rng.standard_normal(x.shape))
        assert np.all(dx[np.broadcast_to(~mask, x.shape)] == 0)


# --- SoftmaxCrossEntropy --------------------------------------------------------------------


def test_cross_entropy_value_counts_only_real_tokens(rng):
    logits = rng.standard_normal((2, 3, 5))
    targets = np.array([[1, 4, 0], [2, 0, 0]])
    mask = np.array([[True, True, False], [True, False, False]])
    loss = SoftmaxCrossEntropy().forward(logits, targets, mask)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    expected = -(log_probs[0, 0, 1] + log_probs[0, 1, 4] + log_probs[1, 0, 2]) / 3
    assert loss == pytest.approx(expected, rel=1e-12)
    unmasked = SoftmaxCrossEntropy().forward(logits, targets)
    assert unmasked == pytest.approx(-np.take_along_axis(log_probs, targets[..., None], -1).mean(), rel=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 5), (4, 5)])
def test_cross_entropy_gradients_with_a_mask(rng, shape):
    logits = rng.standard_normal(shape)
    targets = rng.integers(0, shape[-1], shape[:-1])
    mask = rng.random(shape[:-1]) < 0.7
    mask.flat[0] = True
    layer = SoftmaxCrossEntropy()
    check_layer_gradients(layer, {"logits": logits, "targets": targets, "mask": mask})
    layer.forward(logits, targets, mask)
    dlogits = layer.backward()
    assert np.all(dlogits[~mask] == 0), "padding gets no gradient"


def test_cross_entropy_matches_torch_with_ignore_index(rng):
    torch = pytest.importorskip("torch")
    pad = 0
    logits = rng.standard_normal((3, 4, 6))
    targets = rng.integers(1, 6, (3, 4))
    targets[0, 2:] = pad
    targets[2, 1:] = pad
    layer = SoftmaxCrossEntropy()
    loss = layer.forward(logits, targets, targets != pad)
    dlogits = layer.backward(1.0)

    logits_t = torch.tensor(logits, requires_grad=True)
    loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(-1, 6), torch.tensor(targets).reshape(-1),
                                               ignore_index=pad)
    loss_t.backward()
    assert loss == pytest.approx(loss_t.item(), abs=1e-12)
    np.testing.assert_allclose(dlogits, logits_t.grad.numpy(), rtol=0, atol=1e-12)


def test_cross_entropy_of_huge_logits_is_finite():
    logits = np.array([[1e4, -1e4, 0.0]], dtype=np.float32)
    layer = SoftmaxCrossEntropy()
    assert np.isfinite(layer.forward(logits, np.array([1])))
    assert np.all(np.isfinite(layer.backward()))


@pytest.mark.parametrize("targets, mask, message", [
    (np.zeros((2, 4), dtype=np.int64), None, r"targets: expected shape \(2, 3\), got \(2, 4\)"),
    (np.zeros((2, 3)), None, "targets: expected an? int array"),
    (np.full((2, 3), 5), None, r"targets: ids must lie in \[0, 5\)"),
    (np.zeros((2, 3), dtype=np.int64), np.ones((3, 2), dtype=bool), r"mask: expected shape \(2, 3\), got \(3, 2\)"),
    (np.zeros((2, 3), dtype=np.int64), np.ones((2, 3)), "mask: expected a bool array"),
])
def test_cross_entropy_names_bad_arguments(targets, mask, message):
    with pytest.raises(ValueError, match=message):
        SoftmaxCrossEntropy().forward(np.zeros((2, 3, 5)), targets, mask)


def test_label_smoothing_is_the_cross_entropy_against_the_smoothed_target(rng):
    logits, targets = rng.standard_normal((2, 3, 5)), rng.integers(0, 5, size=(2, 3))
    mask = np.array([[True, True, False], [True, True, True]])
    eps, V = 0.1, 5
    smoothed = np.full((2, 3, V), eps / V) + (1 - eps) * np.eye(V)[targets]  # (N, T, V)
    log_p = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    expected = -(smoothed * log_p).sum(axis=-1)[mask].mean()
    layer = SoftmaxCrossEntropy(label_smoothing=eps)
    assert layer.forward(logits, targets, mask) == pytest.approx(expected, rel=1e-12)
    assert SoftmaxCrossEntropy().forward(logits, targets, mask) > layer.forward(logits, targets, mask) - 1.0
    check_layer_gradients(layer, {"logits": logits}, forward_kwargs={"targets": targets, "mask": mask}, wrt=["logits"])
    with pytest.raises(ValueError, match="label_smoothing"):
        SoftmaxCrossEntropy(label_smoothing=1.0)
