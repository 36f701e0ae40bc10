"""Tests for attention_course/numpy_track/attention.py: scores, weights, context, masks, parity with torch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.numpy_track.attention import (SCORE_FUNCTIONS, Attention, AttentionWeight, TimeAttention,
                                                     WeightSum, make_score)
from attention_course.testing import ShapeError, check_layer_gradients

HYPOTHESIS = settings(max_examples=25, deadline=None)

N, T_enc, T_dec, H = 3, 5, 2, 4
SCORES = sorted(SCORE_FUNCTIONS)  # additive, dot, general, scaled_dot


def sizes_for(score):
    """(H_enc, H_dec): unequal where the score allows it, so that a transposed weight is caught."""
    return (H, H) if score in ("dot", "scaled_dot") else (H, 3)


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def states_for(score, rng, t_enc=T_enc, t_dec=T_dec):
    H_enc, H_dec = sizes_for(score)
    return rng.standard_normal((N, t_enc, H_enc)), rng.standard_normal((N, t_dec, H_dec))


def time_attention(score, seed=0):
    H_enc, H_dec = sizes_for(score)
    return TimeAttention(score, H_enc, H_dec, attention_size=3, rng=seed)


# --- scores ---------------------------------------------------------------------------------


@pytest.mark.parametrize("score", SCORES)
def test_score_values(rng, score):
    encoder_states, decoder_states = states_for(score, rng)
    layer = make_score(score, *sizes_for(score), attention_size=3, rng=rng)
    scores = layer.forward(encoder_states, decoder_states)
    assert scores.shape == (N, T_dec, T_enc)
    n, i, j = 1, 1, 3
    s, h = decoder_states[n, i], encoder_states[n, j]
    expected = {
        "dot": lambda: s @ h,
        "scaled_dot": lambda: s @ h / np.sqrt(H),
        "general": lambda: s @ layer.params["W_a"] @ h,
        "additive": lambda: layer.params["v_a"] @ np.tanh(s @ layer.params["W_a"] + h @ layer.params["U_a"]),
    }[score]()
    assert scores[n, i, j] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("score", SCORES)
def test_score_gradients(rng, score):
    encoder_states, decoder_states = states_for(score, rng)
    layer = make_score(score, *sizes_for(score), attention_size=3, rng=rng)
    check_layer_gradients(layer, {"encoder_states": encoder_states, "decoder_states": decoder_states})


def test_unknown_score_names_the_choices():
    with pytest.raises(ValueError, match=r"score: unknown score function 'cosine'; choose one of \['additive'"):
        make_score("cosine", 4, 4)
    with pytest.raises(ValueError, match="unknown score function 'cosine'"):
        TimeAttention("cosine", 4, 4)


@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_dot_scores_need_equal_widths(score):
    with pytest.raises(ValueError, match=f"score '{score}' needs equal encoder and decoder widths, got 4 and 3"):
        make_score(score, 4, 3)
    with pytest.raises(ValueError, match="needs equal encoder and decoder widths, got 4 and 3"):
        TimeAttention(score, encoder_size=4, decoder_size=3)


def test_scores_with_parameters_need_their_sizes():
    with pytest.raises(ValueError, match="score 'general' has parameters: give encoder_size and decoder_size"):
        AttentionWeight("general")


# --- WeightSum ------------------------------------------------------------------------------


@pytest.mark.parametrize("batched", [False, True], ids=["single_step", "all_steps"])
def test_weight_sum(rng, batched):
    encoder_states = rng.standard_normal((N, T_enc, H))
    weights = rng.random((N, T_dec, T_enc) if batched else (N, T_enc))
    layer = WeightSum()
    context = layer.forward(encoder_states, weights)
    assert context.shape == ((N, T_dec, H) if batched else (N, H))
    expected = np.einsum("n...j,njh->n...h", weights, encoder_states)
    np.testing.assert_allclose(context, expected, rtol=1e-12)
    check_layer_gradients(layer, {"encoder_states": encoder_states, "attention_weights": weights})


def test_weight_sum_names_mismatched_arguments(rng):
    with pytest.raises(ShapeError, match=r"attention_weights: expected shape \(N=3, T_enc=5\), got \(3, 4\)"):
        WeightSum().forward(rng.standard_normal((N, T_enc, H)), rng.random((N, 4)))
    with pytest.raises(ShapeError, match=r"encoder_states: expected shape \(N, T_enc, H\), got \(3, 5\)"):
        WeightSum().forward(rng.standard_normal((N, T_enc)), rng.random((N, T_enc)))


# --- AttentionWeight, Attention, TimeAttention ---------------------------------------------


@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("batched", [False, True], ids=["single_step", "all_steps"])
@pytest.mark.parametrize("score", SCORES)
def test_attention_weight_gradients(rng, score, batched, masked):
    encoder_states, decoder_states = states_for(score, rng)
    if not batched:
        decoder_states = decoder_states[:, 0]
    mask = lengths_mask([5, 3, 1], T_enc) if masked else None
    layer = AttentionWeight(score, *sizes_for(score), attention_size=3, rng=rng)
    weights = layer.forward(encoder_states, decoder_states, mask)
    assert weights.shape == ((N, T_dec, T_enc) if batched else (N, T_enc))
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    check_layer_gradients(layer, {"encoder_states": encoder_states, "decoder_states": decoder_states},
                          forward_kwargs={"mask": mask})


@pytest.mark.parametrize("score", SCORES)
def test_attention_single_step_gradients(rng, score):
    encoder_states, decoder_states = states_for(score, rng)
    H_enc, H_dec = sizes_for(score)
    layer = Attention(score, H_enc, H_dec, attention_size=3, rng=rng)
    context = layer.forward(encoder_states, decoder_states[:, 0], lengths_mask([5, 2, 4], T_enc))
    assert context.shape == (N, H_enc) and layer.attention_weights.shape == (N, T_enc)
    check_layer_gradients(layer, {"encoder_states": encoder_states, "decoder_states": decoder_states[:, 0]},
                          forward_kwargs={"mask": lengths_mask([5, 2, 4], T_enc)})


def test_one_step_equals_the_matching_step_of_time_attention(rng):
    encoder_states, decoder_states = states_for("general", rng)
    mask = lengths_mask([5, 2, 4], T_enc)
    all_steps = time_attention("general").forward(encoder_states, decoder_states, mask)
    one_step = Attention("general", *sizes_for("general"), attention_size=3, rng=0)
    np.testing.assert_allclose(one_step.forward(encoder_states, decoder_states[:, 1], mask), all_steps[:, 1],
                               rtol=1e-12)


@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("score", SCORES)
def test_time_attention_gradients(rng, score, masked):
    encoder_states, decoder_states = states_for(score, rng)
    mask = lengths_mask([5, 3, 0], T_enc) if masked else None  # the last row has no real token
    check_layer_gradients(time_attention(score), {"encoder_states": encoder_states, "decoder_states": decoder_states},
                          forward_kwargs={"mask": mask})


def test_dot_attention_learns_its_width_on_the_first_call(rng):
    layer = TimeAttention("dot")
    encoder_states = rng.standard_normal((N, T_enc, H))
    context = layer.forward(encoder_states, rng.standard_normal((N, T_dec, H)))
    assert context.shape == (N, T_dec, H)
    with pytest.raises(ShapeError, match="decoder_states"):
        layer.forward(encoder_states, rng.standard_normal((N, T_dec, H + 1)))


@HYPOTHESIS
@given(score=st.sampled_from(SCORES), lengths=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       extra=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_weights_sum_to_one_and_padding_changes_nothing(score, lengths, extra, seed):
    """Appended positions, masked out, get zero weight whatever garbage they hold."""
    rng = np.random.default_rng(seed)
    layer = time_attention(score, seed)
    n, t = len(lengths), max(lengths)
    H_enc, H_dec = sizes_for(score)
    encoder_states = rng.standard_normal((n, t + extra, H_enc))
    decoder_states = rng.standard_normal((n, T_dec, H_dec))
    mask = lengths_mask(lengths, t + extra)
    encoder_states[~mask] = rng.uniform(-1e3, 1e3, ((~mask).sum(), H_enc))
    context = layer.forward(encoder_states, decoder_states, mask)
    weights = layer.attention_weights
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(weights[np.broadcast_to(~mask[:, None, :], weights.shape)] == 0)
    for row, length in enumerate(lengths):
        alone = layer.forward(encoder_states[row:row + 1, :length], decoder_states[row:row + 1])
        np.testing.assert_allclose(context[row:row + 1], alone, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weights[row:row + 1, :, :length], layer.attention_weights, rtol=1e-10,
                                   atol=1e-14)


@pytest.mark.parametrize("score", SCORES)
def test_a_fully_padded_row_gives_zero_weights_context_and_gradients(rng, score):
    encoder_states, decoder_states = states_for(score, rng)
    mask = lengths_mask([5, 0, 2], T_enc)
    layer = time_attention(score)
    context = layer.forward(encoder_states, decoder_states, mask)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(layer.attention_weights))
    assert np.all(layer.attention_weights[1] == 0) and np.all(context[1] == 0)
    d_encoder, d_decoder = layer.backward(rng.standard_normal(context.shape))
    assert np.all(np.isfinite(d_encoder)) and np.all(np.isfinite(d_decoder))
    assert np.all(d_encoder[1] == 0) and np.all(d_decoder[1] == 0)
    assert np.all(d_encoder[~mask] == 0), "padding gets no gradient"


@pytest.mark.parametrize("score", ["dot", "general"])
def test_huge_scores_do_not_overflow_in_float32(rng, score):
    encoder_states = (rng.standard_normal((N, T_enc, H)) * 100).astype(np.float32)
    decoder_states = (rng.standard_normal((N, T_dec, H)) * 100).astype(np.float32)
    layer = TimeAttention(score, H, H, rng=rng)
    if score == "general":
        layer.attention_weight.score.params["W_a"][...] = np.eye(H)
    context = layer.forward(encoder_states, decoder_states, lengths_mask([5, 3, 2], T_enc))
    scores = np.abs(decoder_states @ encoder_states.transpose(0, 2, 1))
    assert scores.max() > 1e4, "the test needs scores big enough to overflow exp in float32"
    assert context.dtype == np.float32 and layer.attention_weights.dtype == np.float32
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(layer.attention_weights))
    d_encoder, d_decoder = layer.backward(np.ones_like(context))
    assert d_encoder.dtype == np.float32 and np.all(np.isfinite(d_encoder)) and np.all(np.isfinite(d_decoder))


@pytest.mark.parametrize("score", SCORES)
def test_time_attention_follows_the_input_dtype(rng, score):
    encoder_states, decoder_states = states_for(score, rng)
    layer = time_attention(score)  # float64 parameters
    context = layer.forward(encoder_states.astype(np.float32), decoder_states.astype(np.float32))
    assert context.dtype == np.float32
    np.testing.assert_allclose(context, layer.forward(encoder_states, decoder_states), atol=1e-5)


# --- errors ---------------------------------------------------------------------------------


def test_bad_shapes_name_the_argument_the_expected_and_the_got(rng):
    layer = TimeAttention("general", encoder_size=4, decoder_size=3, rng=rng)
    encoder_states = rng.standard_normal((N, T_enc, 4))
    decoder_states = rng.standard_normal((N, T_dec, 3))
    with pytest.raises(ShapeError, match=r"encoder_states: expected shape \(N, T_enc, 4\), got \(3, 5, 6\)"):
        layer.forward(rng.standard_normal((N, T_enc, 6)), decoder_states)
    with pytest.raises(ShapeError, match=r"decoder_states: expected shape \(N=3, T_dec, 3\), got \(2, 2, 3\)"):
        layer.forward(encoder_states, decoder_states[:2])
    with pytest.raises(ShapeError, match=r"decoder_states: expected shape \(N, T_dec, H_dec\), got \(3, 3\)"):
        layer.forward(encoder_states, decoder_states[:, 0])
    with pytest.raises(ShapeError, match=r"mask: expected shape \(N=3, T_enc=5\), got \(3, 4\)"):
        layer.forward(encoder_states, decoder_states, np.ones((N, 4), dtype=bool))
    with pytest.raises(ShapeError, match="mask: expected a bool array"):
        layer.forward(encoder_states, decoder_states, np.ones((N, T_enc)))
    with pytest.raises(ValueError, match="encoder_states: expected a floating-point array"):
        layer.forward(encoder_states.astype(np.int64), decoder_states)


# --- parity with torch autograd -------------------------------------------------------------


def torch_scores(torch, score, enc, dec, params):
    """The four scores written directly in torch. ``enc`` (N, T_enc, H_enc), ``dec`` (N, T_dec, H_dec)."""
    if score == "dot":
        return dec @ enc.transpose(1, 2)
    if score == "scaled_dot":
        return dec @ enc.transpose(1, 2) / enc.shape[-1] ** 0.5
    if score == "general":
        return dec @ params["W_a"] @ enc.transpose(1, 2)
    hidden = torch.tanh((dec @ params["W_a"])[:, :, None, :] + (enc @ params["U_a"])[:, None, :, :])
    return hidden @ params["v_a"]  # (N, T_dec, T_enc)


@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("score", SCORES)
def test_time_attention_matches_torch_autograd(rng, score, masked):
    torch = pytest.importorskip("torch")
    encoder_states, decoder_states = states_for(score, rng)
    mask = lengths_mask([5, 3, 1], T_enc) if masked else np.ones((N, T_enc), dtype=bool)
    d_context = rng.standard_normal((N, T_dec, sizes_for(score)[0]))

    layer = time_attention(score)
    context = layer.forward(encoder_states, decoder_states, mask if masked else None)
    d_encoder, d_decoder = layer.backward(d_context)

    score_layer = layer.attention_weight.score
    params = {k: torch.tensor(v, requires_grad=True) for k, v in score_layer.params.items()}
    enc = torch.tensor(encoder_states, requires_grad=True)
    dec = torch.tensor(decoder_states, requires_grad=True)
    scores = torch_scores(torch, score, enc, dec, params)
    scores = scores.masked_fill(~torch.tensor(mask)[:, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    expected = weights @ enc
    expected.backward(torch.tensor(d_context))

    close = dict(rtol=0, atol=1e-12)
    np.testing.assert_allclose(context, expected.detach().numpy(), **close)
    np.testing.assert_allclose(layer.attention_weights, weights.detach().numpy(), **close)
    np.testing.assert_allclose(d_encoder, enc.grad.numpy(), **close, err_msg="d_encoder_states")
    np.testing.assert_allclose(d_decoder, dec.grad.numpy(), **close, err_msg="d_decoder_states")
    assert set(params) == set(score_layer.grads)
    for name, param in params.items():
        np.testing.assert_allclose(score_layer.grads[name], param.grad.numpy(), **close, err_msg=name)
