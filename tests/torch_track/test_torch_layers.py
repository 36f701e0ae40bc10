"""Tests for attention_course/torch_track/layers.py: parity with the NumPy layers, masks, dtypes.

With the same weights (copied by ``numpy_to_torch``) every torch layer's outputs and gradients
equal the NumPy layer's within 1e-10 in float64; with the same seed the initial weights are
identical without copying.
"""

import numpy as np
import pytest
import torch

from attention_course.numpy_track import layers as np_layers
from attention_course.torch_track import layers as th_layers
from attention_course.torch_track.base import ShapeError, resolve_dtype

N, T, D, V = 3, 4, 5, 7


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("make", [
    pytest.param(lambda module, seed, dtype: module.Embedding(V, D, rng=seed, dtype=dtype), id="embedding"),
    pytest.param(lambda module, seed, dtype: module.Affine(D, V, rng=seed, dtype=dtype), id="affine"),
    pytest.param(lambda module, seed, dtype: module.Affine(D, V, rng=seed, dtype=dtype, bias=False), id="affine_no_bias"),
])
def test_same_seed_same_initial_weights(parity, make, dtype):
    module = make(th_layers, 3, resolve_dtype(dtype))
    parity.assert_same_parameters(make(np_layers, 3, np.dtype(dtype)), module)
    assert all(p.dtype == resolve_dtype(dtype) for p in module.parameters())
    other = make(th_layers, 4, resolve_dtype(dtype))
    assert not torch.equal(next(other.parameters()), next(module.parameters())), "the seed must matter"


def test_embedding_parity_with_repeated_ids(parity, rng):
    layer = np_layers.Embedding(V, D, rng=1)
    module = parity.copied(layer, th_layers.Embedding(V, D), rng)
    ids = np.array([[0, 3, 3, 6], [1, 1, 1, 2], [6, 0, 3, 5]])  # repeated ids must add up
    out = layer.forward(ids)
    dout = rng.standard_normal(out.shape)
    layer.backward(dout)
    out_t = module(torch.from_numpy(ids))
    (out_t * torch.from_numpy(dout)).sum().backward()
    parity.assert_close("embedding", out_t, out)
    parity.assert_parameter_grads(layer, module)


def test_embedding_rejects_out_of_range_and_float_ids():
    module = th_layers.Embedding(V, D)
    with pytest.raises(ValueError, match="token id 7 is outside"):
        module(torch.tensor([[1, 7]]))
    with pytest.raises(ValueError, match="ids"):
        module(torch.zeros(2, 3))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(N, D), (N, T, D)])
def test_affine_parity(parity, rng, shape, bias):
    layer = np_layers.Affine(D, V, rng=1, bias=bias)
    module = parity.copied(layer, th_layers.Affine(D, V, bias=bias), rng)
    x = rng.standard_normal(shape)
    out = layer.forward(x)
    dout = rng.standard_normal(out.shape)
    dx = layer.backward(dout)
    x_t = parity.as_torch(x, requires_grad=True)
    out_t = module(x_t)
    (out_t * torch.from_numpy(dout)).sum().backward()
    parity.assert_close("affine", out_t, out)
    parity.assert_close("dx", x_t.grad, dx)
    parity.assert_parameter_grads(layer, module)


def test_affine_shape_error_names_the_argument():
    with pytest.raises(ShapeError, match=r"x: expected shape \(\.\.\., 5\)"):
        th_layers.Affine(D, V)(torch.zeros(2, 4))


MASKS = {
    "none": None,
    "ragged": np.array([[True, True, True, False], [True, False, False, False], [True] * 4]),
    "fully_masked_row": np.array([[True, True, False, False], [False] * 4, [True, False, True, True]]),
}


@pytest.mark.parametrize("mask_name", list(MASKS))
def test_softmax_parity(parity, rng, mask_name):
    mask = MASKS[mask_name]
    layer = np_layers.Softmax()
    x = rng.standard_normal((N, T)) * 3
    out = layer.forward(x, mask)
    dout = rng.standard_normal(out.shape)
    dx = layer.backward(dout)
    x_t = parity.as_torch(x, requires_grad=True)
    out_t = th_layers.Softmax()(x_t, parity.as_torch(mask))
    (out_t * torch.from_numpy(dout)).sum().backward()
    parity.assert_close("softmax", out_t, out)
    parity.assert_close("dx", x_t.grad, dx)
    parity.assert_close("masked_softmax", th_layers.masked_softmax(x_t, parity.as_torch(mask)),
                        np_layers.masked_softmax(x, mask))


def test_masked_softmax_fully_masked_row_is_zero_with_zero_gradient(parity, rng):
    mask = torch.from_numpy(MASKS["fully_masked_row"])
    scores = torch.tensor(rng.standard_normal((N, T)) * 1e3, requires_grad=True)  # huge: must not overflow
    weights = th_layers.masked_softmax(scores, mask)
    weights.pow(2).sum().backward()
    assert torch.isfinite(weights).all() and torch.isfinite(scores.grad).all()
    assert (weights[~mask] == 0).all(), "masked positions get exactly zero weight"
    assert (weights[1] == 0).all() and (scores.grad[1] == 0).all()
    assert torch.allclose(weights.sum(-1)[[0, 2]], torch.ones(2, dtype=weights.dtype))


def test_masked_softmax_broadcasts_a_key_mask_over_queries(parity, rng):
    scores = rng.standard_normal((2, 3, 4))
    mask = np.array([[True, True, False, False], [True, True, True, True]])[:, None, :]  # (N, 1, T_enc)
    parity.assert_close("broadcast", th_layers.masked_softmax(torch.from_numpy(scores), torch.from_numpy(mask)),
                        np_layers.masked_softmax(scores, mask))


@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize("timed", [True, False])
def test_softmax_cross_entropy_parity(parity, rng, mask_name, timed):
    mask = MASKS[mask_name]
    if not timed:
        mask = None if mask is None else mask[:, 0]
    logits = rng.standard_normal((N, T, V) if timed else (N, V)) * 2
    targets = rng.integers(0, V, logits.shape[:-1])
    layer = np_layers.SoftmaxCrossEntropy()
    loss = layer.forward(logits, targets, mask)
    dlogits = layer.backward(0.7)
    logits_t = parity.as_torch(logits, requires_grad=True)
    loss_t = th_layers.SoftmaxCrossEntropy()(logits_t, torch.from_numpy(targets), parity.as_torch(mask))
    (loss_t * 0.7).backward()
    assert loss_t.dim() == 0
    parity.assert_close("loss", loss_t, np.float64(loss))
    parity.assert_close("dlogits", logits_t.grad, dlogits)


def test_softmax_cross_entropy_ignores_padding_and_is_zero_when_everything_is_padding(rng):
    logits = torch.tensor(rng.standard_normal((N, T, V)))
    targets = torch.tensor(rng.integers(0, V, (N, T)))
    mask = torch.from_numpy(MASKS["ragged"])
    loss_layer = th_layers.SoftmaxCrossEntropy()
    changed_logits, changed_targets = logits.clone(), targets.clone()
    changed_logits[~mask] = 100.0
    changed_targets[~mask] = 0
    assert torch.equal(loss_layer(logits, targets, mask), loss_layer(changed_logits, changed_targets, mask))
    assert float(loss_layer(logits, targets, torch.zeros(N, T, dtype=torch.bool))) == 0.0


def test_softmax_cross_entropy_checks_shapes():
    with pytest.raises(ShapeError, match="targets"):
        th_layers.SoftmaxCrossEntropy()(torch.zeros(N, T, V), torch.zeros(N, T + 1, dtype=torch.long))
    with pytest.raises(ShapeError, match="mask"):
        th_layers.SoftmaxCrossEntropy()(torch.zeros(N, T, V), torch.zeros(N, T, dtype=torch.long),
                                        torch.ones(N, T))


@pytest.mark.parametrize("given, expected", [(torch.float64, torch.float64), (np.float32, torch.float32),
                                             ("float64", torch.float64), ("bfloat16", torch.bfloat16)])
def test_resolve_dtype(given, expected):
    assert resolve_dtype(given) is expected


def test_resolve_dtype_rejects_integers():
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype("int32")


def test_label_smoothing_matches_the_numpy_track(parity, rng):
    mask = MASKS["ragged"]
    logits = rng.standard_normal((N, T, V)) * 2
    targets = rng.integers(0, V, logits.shape[:-1])
    layer = np_layers.SoftmaxCrossEntropy(label_smoothing=0.1)
    loss = layer.forward(logits, targets, mask)
    dlogits = layer.backward(1.0)
    logits_t = parity.as_torch(logits, requires_grad=True)
    loss_t = th_layers.SoftmaxCrossEntropy(label_smoothing=0.1)(logits_t, torch.from_numpy(targets),
                                                                parity.as_torch(mask))
    loss_t.backward()
    parity.assert_close("loss", loss_t, np.float64(loss))
    parity.assert_close("dlogits", logits_t.grad, dlogits)
    assert loss != pytest.approx(np_layers.SoftmaxCrossEntropy().forward(logits, targets, mask))
