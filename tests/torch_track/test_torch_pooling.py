"""Tests for attention_course/torch_track/pooling.py: parity with the NumPy track's pooling layers."""

import pytest
import torch

from attention_course.numpy_track import pooling as np_pooling
from attention_course.torch_track import pooling as th_pooling
from attention_course.torch_track.base import ShapeError

LAYERS = {
    "attention": (lambda track, **dtype: track.AttentionPooling(4, 3, rng=5, **dtype)),
    "mean": (lambda track, **dtype: track.MeanPooling()),
    "last": (lambda track, **dtype: track.LastStatePooling(2)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("lengths", [None, [5, 2, 1], [5, 0, 3]])
def test_pooling_parity(parity, rng, name, lengths):
    layer = LAYERS[name](np_pooling)
    module = LAYERS[name](th_pooling, dtype=torch.float64)
    if name == "attention":
        parity.assert_same_parameters(layer, module)
        module = parity.copied(layer, module, rng)
    hs = rng.standard_normal((3, 5, 4))
    mask = None if lengths is None else parity.lengths_mask(lengths, 5)
    pooled = layer.forward(hs, mask)
    d_pooled = rng.standard_normal(pooled.shape)
    d_hs = layer.backward(d_pooled)
    hs_t = parity.as_torch(hs, requires_grad=True)
    pooled_t = module(hs_t, parity.as_torch(mask))
    (pooled_t * parity.as_torch(d_pooled)).sum().backward()
    parity.assert_close("pooled", pooled_t, pooled)
    parity.assert_close("gradient of hs", hs_t.grad, d_hs)
    if name == "attention":
        parity.assert_close("attention weights", module.attention_weights, layer.attention_weights)
        parity.assert_parameter_grads(layer, module)


def test_gradcheck_and_device_agnostic_float32():
    module = th_pooling.AttentionPooling(3, 2, rng=0, dtype=torch.float64)
    hs = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    assert torch.autograd.gradcheck(lambda x: module(x, mask), (hs,))
    module32 = th_pooling.AttentionPooling(3, 2, rng=0)
    assert module32(hs.detach().float(), mask).dtype == torch.float32


def test_wrong_shapes_name_the_argument():
    with pytest.raises(ShapeError, match=r"hs: expected shape \(N, T, 4\)"):
        th_pooling.AttentionPooling(4, 3)(torch.zeros(2, 3, 5))
    with pytest.raises(ShapeError, match="mask"):
        th_pooling.MeanPooling()(torch.zeros(2, 3, 5), torch.ones(2, 4, dtype=torch.bool))
