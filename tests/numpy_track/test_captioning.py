"""Tests for attention_course/numpy_track/captioning.py: soft attention over a grid, the caption decoder."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core.configs import CaptionerConfig
from attention_course.numpy_track.base import Layer
from attention_course.numpy_track.captioning import CaptionDecoder, GridAttention, coverage_penalty
from attention_course.testing import ShapeError, check_layer_gradients


def small(**options):
    values = dict(vocab_size=7, feature_size=3, embed_dim=2, hidden_size=3, attention_size=2, dtype="float64")
    return CaptionerConfig(**{**values, **options})


def randomized(layer, rng, scale=0.6):
    for _, value, _ in layer.named_parameters():
        value[...] = rng.uniform(-scale, scale, value.shape)
    return layer


def captions(rng, N=2, T=4):
    decoder_input = rng.integers(0, 7, (N, T))
    decoder_target = rng.integers(0, 7, (N, T))
    target_mask = np.arange(T)[None, :] < np.array([T, T - 2])[:, None]
    return decoder_input, decoder_target, target_mask


class OneStep(Layer):
    """``GridAttention`` as a layer, (features, h_prev) -> (context, alpha), for the gradient check."""

    def __init__(self, attention):
        super().__init__()
        self.attention = self.add_child("attention", attention)

    def forward(self, features, h_prev):
        self._features = features
        keys = self.attention.project(features)
        context, alpha, self._cache = self.attention.step(features, keys, h_prev)
        return context, alpha

    def backward(self, douts):
        d_context, d_alpha = douts
        self.zero_grads()
        d_features, d_keys, d_h = self.attention.step_backward(d_context, d_alpha, self._cache)
        return d_features + self.attention.project_backward(self._features, d_keys), d_h


def test_one_attention_step_values_and_gradients(rng):
    attention = randomized(GridAttention(3, 4, 2, rng=0), rng)
    features, h = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 4))
    step = OneStep(attention)
    context, alpha = step.forward(features, h)
    W, U, v = (attention.params[name] for name in ("W_a", "U_a", "v_a"))
    scores = np.tanh(h[1] @ W + features[1] @ U) @ v  # e_l = v_a . tanh(h W_a + f_l U_a)
    np.testing.assert_allclose(alpha[1], np.exp(scores) / np.exp(scores).sum(), rtol=1e-12)
    np.testing.assert_allclose(context[1], alpha[1] @ features[1], rtol=1e-12)
    check_layer_gradients(step, {"features": features, "h_prev": h})


def test_coverage_penalty_is_xu_et_als_and_its_gradient_is_right(rng):
    alphas = rng.dirichlet(np.ones(4), size=(2, 3))  # (N, T, L), rows sum to 1
    mask = np.array([[True, True, True], [True, False, False]])
    penalty, grad = coverage_penalty(alphas, mask, 0.5)
    totals = np.stack([alphas[0].sum(axis=0), alphas[1, 0]])
    assert penalty == pytest.approx(0.5 * ((1 - totals) ** 2).sum() / 2, rel=1e-12)
    assert (grad[1, 1:] == 0).all()
    eps = 1e-6
    for index in [(0, 1, 2), (1, 0, 3)]:
        bumped = alphas.copy()
        bumped[index] += eps
        assert grad[index] == pytest.approx((coverage_penalty(bumped, mask, 0.5)[0] - penalty) / eps, rel=1e-4)
    # attention that gives every cell exactly one unit over the caption costs nothing
    assert coverage_penalty(np.eye(4)[None], None, 1.0)[0] == 0


@pytest.mark.parametrize("reset_after", [False, True])
@pytest.mark.parametrize("coverage_weight", [0.0, 0.7])
def test_every_gradient_of_the_decoder_features_included(rng, reset_after, coverage_weight):
    decoder = randomized(CaptionDecoder(small(reset_after=reset_after, coverage_weight=coverage_weight), rng=0), rng)
    decoder_input, decoder_target, target_mask = captions(rng)
    features = rng.standard_normal((2, 4, 3))
    check_layer_gradients(decoder, {"features": features},
                          forward_kwargs=dict(decoder_input=decoder_input, decoder_target=decoder_target,
                                              target_mask=target_mask), rtol=1e-5)


def test_the_static_baseline_reads_one_vector_of_the_image_whatever_the_state(rng):
    """No attention: every word reads the mean of the grid's features; permuting the cells changes
    nothing, where it moves the attention decoder's weights with them; its gradients are right."""
    decoder = randomized(CaptionDecoder(small(context="static"), rng=0), rng)
    assert not any(name.startswith("attention.") for name, _, _ in decoder.named_parameters())
    decoder_input, decoder_target, target_mask = captions(rng)
    features = rng.standard_normal((2, 4, 3))
    loss = decoder.forward(features, decoder_input, decoder_target, target_mask)
    np.testing.assert_allclose(decoder.attention_weights, 0.25)
    permuted = features[:, [2, 0, 3, 1]]
    assert decoder.forward(permuted, decoder_input, decoder_target, target_mask) == pytest.approx(loss, rel=1e-12)
    attentive = randomized(CaptionDecoder(small(), rng=0), rng)
    attentive.forward(features, decoder_input, decoder_target, target_mask)
    weights = attentive.attention_weights
    attentive.forward(permuted, decoder_input, decoder_target, target_mask)
    np.testing.assert_allclose(attentive.attention_weights, weights[:, :, [2, 0, 3, 1]], rtol=1e-10)
    check_layer_gradients(decoder, {"features": features},
                          forward_kwargs=dict(decoder_input=decoder_input, decoder_target=decoder_target,
                                              target_mask=target_mask), rtol=1e-5)
    with pytest.raises(ValueError, match="context must be one of"):
        small(context="hard")


def test_the_regulariser_is_added_to_the_cross_entropy(rng):
    decoder_input, decoder_target, target_mask = captions(rng)
    features = rng.standard_normal((2, 4, 3))
    plain = CaptionDecoder(small(), rng=0)
    loss = plain.forward(features, decoder_input, decoder_target, target_mask)
    regularised = CaptionDecoder(small(coverage_weight=0.3), rng=0)
    penalty, _ = coverage_penalty(plain.attention_weights, target_mask, 0.3)
    assert penalty > 0
    assert regularised.forward(features, decoder_input, decoder_target, target_mask) == pytest.approx(loss + penalty)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), L=st.integers(1, 6))
def test_weights_sum_to_one_and_teacher_forcing_matches_generation(seed, L):
    rng = np.random.default_rng(seed)
    decoder = randomized(CaptionDecoder(small(), rng=seed), rng, scale=1.0)
    features = rng.standard_normal((3, L, 3))
    ids, generated = decoder.generate(features, start_id=1, max_length=4)
    assert ids.shape == (3, 4) and generated.shape == (3, 4, L)
    np.testing.assert_allclose(generated.sum(axis=-1), 1.0, rtol=1e-12)
    # feeding the generated words back under teacher forcing looks at the same places
    decoder_input = np.concatenate([np.ones((3, 1), dtype=np.int64), ids[:, :-1]], axis=1)
    np.testing.assert_allclose(decoder.attend(features, decoder_input), generated, rtol=1e-10)


def test_generation_stops_when_every_caption_has_ended(rng):
    decoder = CaptionDecoder(small(), rng=0)
    decoder.out.params["b"][...] = 0
    decoder.out.params["b"][2] = 100.0  # <eos> always wins
    ids, alphas = decoder.generate(rng.standard_normal((2, 4, 3)), start_id=1, max_length=6, stop_id=2)
    assert ids.shape == (2, 1) and (ids == 2).all() and alphas.shape == (2, 1, 4)


def test_float32_and_wrong_shapes(rng):
    decoder = CaptionDecoder(small(dtype="float32"), rng=0)
    decoder_input, decoder_target, target_mask = captions(rng)
    features = rng.standard_normal((2, 4, 3)).astype(np.float32)
    decoder.forward(features, decoder_input, decoder_target, target_mask)
    assert decoder.backward().dtype == np.float32
    with pytest.raises(ShapeError, match=r"features: expected shape \(N, L, 3\)"):
        decoder.forward(features[..., :2], decoder_input, decoder_target)
    with pytest.raises(ShapeError, match="decoder_target"):
        decoder.forward(features, decoder_input, decoder_target[:, :2])


def test_the_config_is_checked():
    with pytest.raises(ValueError, match="coverage_weight must be >= 0"):
        small(coverage_weight=-0.1)
    with pytest.raises(ValueError, match="grid_size must divide image_size"):
        small(grid_size=5)
