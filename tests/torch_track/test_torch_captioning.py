"""Tests for attention_course/torch_track/captioning.py: parity of the caption decoder, the CNN end to end."""

import numpy as np
import pytest
import torch

from attention_course.core.configs import CaptionerConfig
from attention_course.numpy_track import captioning as np_captioning
from attention_course.torch_track import captioning as th_captioning
from attention_course.torch_track.base import ShapeError


def small(**options):
    values = dict(vocab_size=7, feature_size=3, embed_dim=2, hidden_size=3, attention_size=2, dtype="float64")
    return CaptionerConfig(**{**values, **options})


@pytest.mark.parametrize("reset_after", [False, True])
@pytest.mark.parametrize("coverage_weight, context", [(0.0, "attention"), (0.7, "attention"), (0.0, "static")])
def test_decoder_parity(parity, rng, reset_after, coverage_weight, context):
    c = small(reset_after=reset_after, coverage_weight=coverage_weight, context=context)
    decoder = np_captioning.CaptionDecoder(c, rng=3)
    module = th_captioning.CaptionDecoder(c, rng=3)
    parity.assert_same_parameters(decoder, module)
    module = parity.copied(decoder, module, rng)
    features = rng.standard_normal((2, 5, 3))
    decoder_input, decoder_target = rng.integers(0, 7, (2, 4)), rng.integers(0, 7, (2, 4))
    target_mask = parity.lengths_mask([4, 2], 4)
    loss = decoder.forward(features, decoder_input, decoder_target, target_mask)
    d_features = decoder.backward(1.0)
    features_t = parity.as_torch(features, requires_grad=True)
    loss_t = module(features_t, *(parity.as_torch(a) for a in (decoder_input, decoder_target, target_mask)))
    loss_t.backward()
    parity.assert_close("loss", loss_t, np.float64(loss))
    parity.assert_close("gradient of the features", features_t.grad, d_features)
    parity.assert_parameter_grads(decoder, module)
    parity.assert_close("attention weights", module.attention_weights, decoder.attention_weights)
    ids, alphas = decoder.generate(features, 1, 5)
    ids_t, alphas_t = module.generate(parity.as_torch(features), 1, 5)
    np.testing.assert_array_equal(ids_t.numpy(), ids)
    parity.assert_close("generated weights", alphas_t, alphas)


def test_coverage_penalty_agrees_with_the_numpy_track(rng):
    alphas = rng.dirichlet(np.ones(5), size=(3, 4))
    mask = np.arange(4)[None, :] < np.array([4, 1, 3])[:, None]
    want, _ = np_captioning.coverage_penalty(alphas, mask, 0.4)
    got = th_captioning.coverage_penalty(torch.from_numpy(alphas), torch.from_numpy(mask), 0.4)
    assert float(got) == pytest.approx(want, rel=1e-12)


def test_cnn_captioner_end_to_end_reaches_every_parameter():
    c = CaptionerConfig(9, feature_size=8, hidden_size=8, attention_size=4, image_size=32, grid_size=4,
                        cnn_channels=(4, 4))
    torch.manual_seed(0)
    model = th_captioning.CNNCaptioner(c, rng=0)
    images = torch.rand(2, 32, 32, 3)
    decoder_input = torch.tensor([[1, 3, 4], [1, 5, 0]])
    decoder_target = torch.tensor([[3, 4, 2], [5, 2, 0]])
    mask = decoder_target != 0
    loss = model(images, decoder_input, decoder_target, mask)
    loss.backward()
    assert model.attention_weights.shape == (2, 3, 16)
    no_gradient = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not no_gradient, no_gradient
    model.eval()
    ids, alphas = model.generate(images, 1, 4)
    assert ids.shape == (2, 4) and alphas.shape == (2, 4, 16)
    # the first step reads <bos> both ways: it looks at the same places
    torch.testing.assert_close(model.attend(images, decoder_input)[:, 0], alphas[:, 0])


def test_the_cnn_needs_a_grid_its_convolutions_can_reach():
    with pytest.raises(ValueError, match="must be grid_size 8"):
        th_captioning.ConvEncoder(CaptionerConfig(9, 8, image_size=64, grid_size=8, cnn_channels=(4, 4, 4)))
    encoder = th_captioning.ConvEncoder(CaptionerConfig(9, 8, image_size=64, grid_size=8, cnn_channels=(4, 4)))
    with pytest.raises(ShapeError, match="images"):
        encoder(torch.zeros(1, 3, 64, 64))
    assert encoder(torch.zeros(2, 64, 64, 3)).shape == (2, 64, 8)
