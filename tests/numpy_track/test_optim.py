"""Tests for attention_course/numpy_track/optim.py: in-place updates, Adam's first step, gradient clipping."""

import numpy as np
import pytest

from attention_course.numpy_track.base import Layer
from attention_course.numpy_track.layers import Affine
from attention_course.numpy_track.optim import SGD, Adam, clip_grad_norm


class Quadratic(Layer):
    """``loss = 0.5 * |W - target|^2`` for a (2, 3) parameter W."""

    def __init__(self, target):
        super().__init__()
        self.target = target
        self.add_param("W", np.zeros_like(target))

    def forward(self):
        return 0.5 * float(np.sum((self.params["W"] - self.target) ** 2))

    def backward(self):
        self.grads["W"][...] = self.params["W"] - self.target


def model_with_gradients(rng):
    model = Affine(3, 2, rng=rng)
    for _, _, grad in model.named_parameters():
        grad[...] = rng.standard_normal(grad.shape)
    return model


@pytest.mark.parametrize("optimizer_class", [SGD, Adam])
def test_updates_the_models_own_arrays_in_place(rng, optimizer_class):
    model = model_with_gradients(rng)
    held = {name: value for name, value, _ in model.named_parameters()}
    before = model.state_dict()
    optimizer_class(model, lr=0.1).step()
    for name, value, _ in model.named_parameters():
        assert value is held[name], f"{name} was replaced, not updated in place"
        assert not np.allclose(value, before[name]), f"{name} did not change"


def test_sgd_step_is_minus_lr_times_grad(rng):
    model = model_with_gradients(rng)
    before = model.state_dict()
    SGD(model, lr=0.5).step()
    for name, value, grad in model.named_parameters():
        np.testing.assert_allclose(value, before[name] - 0.5 * grad, rtol=1e-12)


def test_adams_first_step_is_lr_times_the_sign_of_the_gradient(rng):
    model = model_with_gradients(rng)
    before = model.state_dict()
    Adam(model, lr=0.01).step()
    for name, value, grad in model.named_parameters():
        np.testing.assert_allclose(value - before[name], -0.01 * np.sign(grad), rtol=1e-5)


def test_optimizers_read_the_gradients_written_in_place(rng):
    """The optimizer holds the grads arrays; a layer writing ``grads[...] = ...`` must reach it."""
    target = rng.standard_normal((2, 3))
    for optimizer_class, lr, steps in [(SGD, 0.5, 60), (Adam, 0.1, 300)]:
        model = Quadratic(target)
        optimizer = optimizer_class(model, lr=lr)
        for _ in range(steps):
            model.forward()
            model.backward()
            optimizer.step()
        assert model.forward() < 1e-6, optimizer_class.__name__


def test_an_optimizer_needs_parameters():
    with pytest.raises(ValueError, match="no parameters"):
        SGD(Layer())


def test_clip_grad_norm_scales_to_the_norm_and_returns_the_norm_before(rng):
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    held = list(grads)
    expected_norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
    directions = [g / expected_norm for g in grads]
    norm = clip_grad_norm(grads, max_norm=1.0)
    assert norm == pytest.approx(expected_norm, rel=1e-12)
    assert all(a is b for a, b in zip(grads, held)), "clipped in place"
    assert np.sqrt(sum(np.sum(g ** 2) for g in grads)) == pytest.approx(1.0, rel=1e-5)
    for g, direction in zip(grads, directions):
        np.testing.assert_allclose(g, direction, rtol=1e-5)


def test_clip_grad_norm_leaves_small_gradients_alone(rng):
    grads = [rng.standard_normal(4) * 0.01]
    before = grads[0].copy()
    norm = clip_grad_norm(grads, max_norm=1.0)
    assert norm == pytest.approx(np.linalg.norm(before))
    np.testing.assert_array_equal(grads[0], before)
    assert clip_grad_norm([np.full(4, 10.0)], max_norm=None) == pytest.approx(20.0)
