"""Tests for attention_course/numpy_track/classifier.py: the BiGRU classifier with attention pooling."""

import numpy as np
import pytest

from attention_course.core.configs import ClassifierConfig
from attention_course.numpy_track.classifier import BinaryCrossEntropy, SequenceClassifier, sigmoid
from attention_course.testing import check_layer_gradients
from attention_course.testing.gradcheck import assert_grads_close, numerical_vjp


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def small(pooling="attention", num_classes=2, **options):
    return ClassifierConfig(11, num_classes=num_classes, embed_dim=3, hidden_size=2, attention_size=3,
                            pooling=pooling, dtype="float64", **options)


def batch(rng, N=3, T=5, lengths=(5, 3, 1), classes=2):
    ids = rng.integers(3, 11, (N, T))
    mask = lengths_mask(lengths, T)
    ids[~mask] = 0
    return ids, mask, rng.integers(0, classes, N)


def test_binary_cross_entropy_values_and_gradient(rng):
    logits = rng.standard_normal(6) * 3
    labels = np.array([0, 1, 1, 0, 1, 0])
    layer = BinaryCrossEntropy()
    loss = layer.forward(logits, labels)
    p = 1 / (1 + np.exp(-logits))
    assert loss == pytest.approx(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)), rel=1e-12)
    check_layer_gradients(layer, {"logits": logits}, forward_kwargs={"labels": labels}, params=False)
    assert np.isfinite(layer.forward(np.array([1e4, -1e4]), np.array([0, 1])))  # no overflow
    with pytest.raises(ValueError, match="labels: expected 0 or 1"):
        layer.forward(logits, labels + 1)


@pytest.mark.parametrize("pooling", ["attention", "mean", "last"])
@pytest.mark.parametrize("num_classes", [2, 3])
def test_every_parameter_gradient(rng, pooling, num_classes):
    model = SequenceClassifier(small(pooling, num_classes, reset_after=pooling == "mean"), rng=0)
    for _, value, _ in model.named_parameters():
        value[...] = rng.uniform(-0.7, 0.7, value.shape)
    ids, mask, labels = batch(rng, classes=num_classes)
    model.forward(ids, mask, labels)
    model.backward()
    analytic = {name: grad.copy() for name, _, grad in model.named_parameters()}
    # embed W; W_x, W_h, b, b_h of each direction; W_proj, b_proj, u_query; out W, b
    assert len(analytic) == 1 + 2 * 4 + (3 if pooling == "attention" else 0) + 2
    for name, value, _ in model.named_parameters():
        numeric = numerical_vjp(lambda: np.array(model.forward(ids, mask, labels)), value, np.array(1.0))
        assert_grads_close(name, analytic[name], numeric, rtol=1e-5, atol=1e-8)


def test_predict_and_pooling_weights(rng):
    model = SequenceClassifier(small(), rng=0)
    ids, mask, labels = batch(rng)
    probabilities = model.predict(ids, mask)
    assert probabilities.shape == (3, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    np.testing.assert_allclose(probabilities[:, 1], sigmoid(model.logits(ids, mask)))
    weights = model.pooling_weights(ids, mask)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert (weights[~mask] == 0).all()
    mean = SequenceClassifier(small("mean"), rng=0).pooling_weights(ids, mask)
    np.testing.assert_allclose(mean[2], [1, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="last-state pooling"):
        SequenceClassifier(small("last"), rng=0).pooling_weights(ids, mask)
    three = SequenceClassifier(small(num_classes=3), rng=0).predict(ids, mask)
    assert three.shape == (3, 3)
    np.testing.assert_allclose(three.sum(axis=1), 1.0)


def test_padding_changes_nothing(rng):
    model = SequenceClassifier(small(), rng=0)
    ids, mask, labels = batch(rng)
    before = model.predict(ids, mask)
    junk = np.where(mask, ids, rng.integers(3, 11, ids.shape))
    np.testing.assert_allclose(model.predict(junk, mask), before, rtol=1e-12)


def test_embeddings_start_as_the_lectures_uniform_in_plus_minus_one():
    W = SequenceClassifier(ClassifierConfig(500, embed_dim=40), rng=0).embed.params["W"]
    assert W.min() >= -1 and W.max() <= 1 and W.std() == pytest.approx(1 / np.sqrt(3), rel=0.05)


def test_same_seed_same_weights_and_the_config_is_checked():
    first = SequenceClassifier(small(), rng=3).state_dict()
    again = SequenceClassifier(small(), rng=3).state_dict()
    assert all(np.array_equal(first[name], again[name]) for name in first)
    with pytest.raises(ValueError, match="pooling must be one of"):
        small("max")
    with pytest.raises(ValueError, match="num_classes must be >= 2"):
        small(num_classes=1)
