"""Tests for attention_course/torch_track/kernel_regression.py against the NumPy track's layer."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from attention_course.numpy_track.kernel_regression import KernelRegression as NumpyKernelRegression  # noqa: E402
from attention_course.torch_track.kernel_regression import KernelRegression  # noqa: E402


def test_the_same_predictions_and_gradients_as_the_numpy_track(rng):
    queries, keys, values = rng.standard_normal(4), rng.standard_normal(7), rng.standard_normal(7)
    mask = rng.random((4, 7)) < 0.7
    mask[:, 2] = True
    numpy_layer, torch_layer = NumpyKernelRegression(1.3), KernelRegression(1.3)
    ours = numpy_layer.forward(queries, keys, values, mask)
    dout = rng.standard_normal(4)
    numpy_grads = numpy_layer.backward(dout)
    tensors = [torch.tensor(array, requires_grad=True) for array in (queries, keys, values)]
    theirs = torch_layer(*tensors, torch.from_numpy(mask))
    theirs.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(theirs.detach().numpy(), ours, rtol=1e-12)
    for tensor, grad in zip(tensors, numpy_grads):
        np.testing.assert_allclose(tensor.grad.numpy(), grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(torch_layer.inverse_width.grad.numpy(), numpy_layer.grads["inverse_width"], rtol=1e-10)
