"""Tests for attention_course/torch_track/attention.py and functional.py.

Parity with the NumPy track (the four scores, WeightSum, AttentionWeight, Attention,
TimeAttention, masks included), ``torch.autograd.gradcheck`` in float64 on the from-scratch
functions and the score modules, and the fast ``scaled_dot_product_attention`` against the
reference (a query with no key gets zeros and a zero gradient, never NaN).
"""

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck
from torch.func import functional_call

from attention_course.numpy_track import attention as np_attention
from attention_course.torch_track import attention as th_attention
from attention_course.torch_track.base import ShapeError
from attention_course.torch_track.functional import (scaled_dot_product_attention,
                                                     scaled_dot_product_attention_reference)
from attention_course.torch_track.layers import masked_softmax

N, T_enc, T_dec, A = 3, 5, 4, 3
SCORES = ["dot", "scaled_dot", "general", "additive"]
# encoder and decoder widths: equal for the dot scores, different where the score allows it
SIZES = {"dot": (4, 4), "scaled_dot": (4, 4), "general": (4, 3), "additive": (4, 3)}
SOURCE_LENGTHS = {"no_mask": None, "ragged": [5, 2, 3], "fully_masked_row": [5, 0, 1]}


def source_mask(name, parity):
    lengths = SOURCE_LENGTHS[name]
    return None if lengths is None else parity.lengths_mask(lengths, T_enc)


def states(rng, score, single=False):
    H_enc, H_dec = SIZES[score]
    decoder_shape = (N, H_dec) if single else (N, T_dec, H_dec)
    return rng.standard_normal((N, T_enc, H_enc)), rng.standard_normal(decoder_shape)


# --- scores ----------------------------------------------------------------------------------


@pytest.mark.parametrize("attention_size", [None, A])
@pytest.mark.parametrize("score", SCORES)
def test_score_same_seed_same_initial_weights(parity, score, attention_size):
    H_enc, H_dec = SIZES[score]
    module = th_attention.make_score(score, H_enc, H_dec, attention_size, rng=7, dtype=torch.float64)
    parity.assert_same_parameters(np_attention.make_score(score, H_enc, H_dec, attention_size, rng=7), module)
    if score == "additive":
        assert module.W_a.shape == (H_dec, attention_size or H_dec)


@pytest.mark.parametrize("score", SCORES)
def test_score_parity(parity, rng, score):
    H_enc, H_dec = SIZES[score]
    layer = np_attention.make_score(score, H_enc, H_dec, A, rng=1)
    module = parity.copied(layer, th_attention.make_score(score, H_enc, H_dec, A), rng)
    encoder_states, decoder_states = states(rng, score)
    scores = layer.forward(encoder_states, decoder_states)
    d_scores = rng.standard_normal(scores.shape)
    d_encoder, d_decoder = layer.backward(d_scores)
    enc_t, dec_t = parity.as_torch(encoder_states, requires_grad=True), parity.as_torch(decoder_states, requires_grad=True)
    scores_t = module(enc_t, dec_t)
    (scores_t * torch.from_numpy(d_scores)).sum().backward()
    parity.assert_close("scores", scores_t, scores)
    parity.assert_close("d_encoder_states", enc_t.grad, d_encoder)
    parity.assert_close("d_decoder_states", dec_t.grad, d_decoder)
    parity.assert_parameter_grads(layer, module)


@pytest.mark.parametrize("score", SCORES)
def test_score_gradcheck(rng, score):
    H_enc, H_dec = SIZES[score]
    module = th_attention.make_score(score, H_enc, H_dec, A, rng=1, dtype=torch.float64)
    names = [name for name, _ in module.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in module.parameters())
    enc = torch.tensor(rng.standard_normal((2, 3, H_enc)), requires_grad=True)
    dec = torch.tensor(rng.standard_normal((2, 2, H_dec)), requires_grad=True)

    def scores(encoder_states, decoder_states, *values):
        return functional_call(module, dict(zip(names, values)), (encoder_states, decoder_states))

    assert gradcheck(scores, (enc, dec, *params))


def test_make_score_rejects_unknown_and_unequal_widths():
    with pytest.raises(ValueError, match="unknown score function 'cosine'"):
        th_attention.make_score("cosine", 4, 4)
    with pytest.raises(ValueError, match="equal encoder and decoder widths"):
        th_attention.make_score("dot", 4, 3)
    with pytest.raises(ValueError, match="give encoder_size and decoder_size"):
        th_attention.AttentionWeight("general")


# --- weighted sum, weights, attention --------------------------------------------------------


@pytest.mark.parametrize("single", [True, False], ids=["single", "batched"])
def test_weight_sum_parity(parity, rng, single):
    layer = np_attention.WeightSum()
    encoder_states = rng.standard_normal((N, T_enc, 4))
    weights = rng.standard_normal((N, T_enc) if single else (N, T_dec, T_enc))
    context = layer.forward(encoder_states, weights)
    d_context = rng.standard_normal(context.shape)
    d_encoder, d_weights = layer.backward(d_context)
    enc_t, w_t = parity.as_torch(encoder_states, requires_grad=True), parity.as_torch(weights, requires_grad=True)
    context_t = th_attention.WeightSum()(enc_t, w_t)
    (context_t * torch.from_numpy(d_context)).sum().backward()
    parity.assert_close("context", context_t, context)
    parity.assert_close("d_encoder_states", enc_t.grad, d_encoder)
    parity.assert_close("d_attention_weights", w_t.grad, d_weights)


def test_weight_sum_checks_shapes():
    with pytest.raises(ShapeError, match="attention_weights"):
        th_attention.WeightSum()(torch.zeros(N, T_enc, 4), torch.zeros(N, T_enc + 1))


def _attention_parity(parity, rng, numpy_layer, module, score, mask, single, call):
    encoder_states, decoder_states = states(rng, score, single)
    out = numpy_layer.forward(encoder_states, decoder_states, mask)
    d_out = rng.standard_normal(out.shape)
    d_encoder, d_decoder = numpy_layer.backward(d_out)
    enc_t, dec_t = parity.as_torch(encoder_states, requires_grad=True), parity.as_torch(decoder_states, requires_grad=True)
    out_t = call(module, enc_t, dec_t, parity.as_torch(mask))
    (out_t * torch.from_numpy(d_out)).sum().backward()
    parity.assert_close("output", out_t, out)
    parity.assert_close("d_encoder_states", enc_t.grad, d_encoder)
    parity.assert_close("d_decoder_states", dec_t.grad, d_decoder)
    parity.assert_parameter_grads(numpy_layer, module)
    return out_t


@pytest.mark.parametrize("mask_name", list(SOURCE_LENGTHS))
@pytest.mark.parametrize("single", [True, False], ids=["single", "batched"])
@pytest.mark.parametrize("score", SCORES)
def test_attention_weight_parity(parity, rng, score, single, mask_name):
    H_enc, H_dec = SIZES[score]
    numpy_layer = np_attention.AttentionWeight(score, H_enc, H_dec, A, rng=1)
    module = parity.copied(numpy_layer, th_attention.AttentionWeight(score, H_enc, H_dec, A), rng)
    mask = source_mask(mask_name, parity)
    weights = _attention_parity(parity, rng, numpy_layer, module, score, mask, single,
                                lambda m, enc, dec, msk: m(enc, dec, msk))
    assert weights.shape == ((N, T_enc) if single else (N, T_dec, T_enc))
    if mask is not None:
        per_step = weights.unsqueeze(1) if single else weights  # (N, T_dec, T_enc)
        padding = (~torch.from_numpy(mask)).unsqueeze(1).expand_as(per_step)
        assert (per_step[padding] == 0).all(), "padding gets zero weight"


@pytest.mark.parametrize("mask_name", list(SOURCE_LENGTHS))
@pytest.mark.parametrize("single", [True, False], ids=["single", "batched"])
@pytest.mark.parametrize("score", SCORES)
def test_attention_parity(parity, rng, score, single, mask_name):
    H_enc, H_dec = SIZES[score]
    numpy_layer = np_attention.Attention(score, H_enc, H_dec, A, rng=1)
    module = parity.copied(numpy_layer, th_attention.Attention(score, H_enc, H_dec, A), rng)
    _attention_parity(parity, rng, numpy_layer, module, score, source_mask(mask_name, parity), single,
                      lambda m, enc, dec, msk: m(enc, dec, msk))
    parity.assert_close("attention_weights", module.attention_weights, numpy_layer.attention_weights)


@pytest.mark.parametrize("mask_name", list(SOURCE_LENGTHS))
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("score", SCORES)
def test_time_attention_parity(parity, rng, score, need_weights, mask_name):
    """``need_weights=False`` with ``scaled_dot`` is the ``F.scaled_dot_product_attention`` path."""
    H_enc, H_dec = SIZES[score]
    numpy_layer = np_attention.TimeAttention(score, H_enc, H_dec, A, rng=1)
    module = parity.copied(numpy_layer, th_attention.TimeAttention(score, H_enc, H_dec, A), rng)
    mask = source_mask(mask_name, parity)
    context = _attention_parity(parity, rng, numpy_layer, module, score, mask, False,
                                lambda m, enc, dec, msk: m(enc, dec, msk, need_weights=need_weights))
    if not need_weights and score == "scaled_dot":
        assert module.attention_weights is None
    else:
        parity.assert_close("attention_weights", module.attention_weights, numpy_layer.attention_weights)
    if mask_name == "fully_masked_row":
        assert (context[1] == 0).all(), "no source token: zero context"


def test_time_attention_needs_all_decoder_steps():
    with pytest.raises(ShapeError, match=r"decoder_states: expected shape \(N, T_dec, H_dec\)"):
        th_attention.TimeAttention("dot", 4, 4)(torch.zeros(N, T_enc, 4), torch.zeros(N, 4))


def test_parameter_free_score_learns_its_width_on_the_first_call(parity, rng):
    module = th_attention.Attention("dot")
    encoder_states, decoder_states = rng.standard_normal((N, T_enc, 6)), rng.standard_normal((N, 6))
    expected = np_attention.Attention("dot").forward(encoder_states, decoder_states)
    parity.assert_close("context", module(torch.from_numpy(encoder_states), torch.from_numpy(decoder_states)),
                        expected)
    with pytest.raises(ShapeError, match="decoder_states"):
        module(torch.from_numpy(encoder_states), torch.zeros(N, 5, dtype=torch.float64))


def test_attention_checks_the_mask():
    module = th_attention.Attention("dot", 4, 4)
    with pytest.raises(ShapeError, match="mask"):
        module(torch.zeros(N, T_enc, 4), torch.zeros(N, 4), torch.ones(N, T_enc + 1, dtype=torch.bool))
    with pytest.raises(ShapeError, match="mask"):
        module(torch.zeros(N, T_enc, 4), torch.zeros(N, 4), torch.ones(N, T_enc))


# --- gradcheck and the fast path -------------------------------------------------------------

MASKS = [
    pytest.param(None, id="no_mask"),
    pytest.param([[True, True, False, False], [False, False, False, False], [True, False, True, True]],
                 id="fully_masked_row"),
]


@pytest.mark.parametrize("mask", MASKS)
def test_masked_softmax_gradcheck(rng, mask):
    scores = torch.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    mask = None if mask is None else torch.tensor(mask)
    assert gradcheck(lambda x: masked_softmax(x, mask), (scores,))
    scores3 = torch.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)  # a (N, 1, T) key mask
    assert gradcheck(lambda x: masked_softmax(x, None if mask is None else mask[:, None, :]), (scores3,))


def qkv(rng, d=3, d_v=2, leading=(3,), T_q=2, T_k=4):
    return tuple(torch.tensor(rng.standard_normal((*leading, T, width)), requires_grad=True)
                 for T, width in ((T_q, d), (T_k, d), (T_k, d_v)))


@pytest.mark.parametrize("mask", MASKS)
def test_reference_attention_gradcheck_and_equation(rng, mask):
    query, key, value = qkv(rng)
    mask = None if mask is None else torch.tensor(mask)[:, None, :]  # (N, 1, T_k)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention_reference(q, k, v, mask)[0], (query, key, value))
    out, weights = scaled_dot_product_attention_reference(query, key, value, mask)
    expected = masked_softmax(query @ key.transpose(-1, -2) / np.sqrt(3), mask)
    assert torch.allclose(weights, expected, atol=1e-14, rtol=0)
    assert torch.allclose(out, expected @ value, atol=1e-14, rtol=0)


@pytest.mark.parametrize("leading", [(3,), (3, 2)], ids=["one_head", "two_heads"])
@pytest.mark.parametrize("mask", MASKS)
def test_fast_attention_equals_the_reference_and_passes_gradcheck(rng, mask, leading):
    query, key, value = qkv(rng, leading=leading)
    mask_t = None if mask is None else torch.tensor(mask).reshape(3, *([1] * (len(leading) - 1)), 1, 4)
    out = scaled_dot_product_attention(query, key, value, mask_t)
    expected, _ = scaled_dot_product_attention_reference(query, key, value, mask_t)
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask_t), (query, key, value))


def test_fast_attention_fully_masked_row_gives_zeros_and_zero_gradient(rng):
    query, key, value = qkv(rng)
    mask = torch.tensor(MASKS[1].values[0])[:, None, :]
    out = scaled_dot_product_attention(query, key, value, mask)
    out.sum().backward()
    for name, tensor in {"out": out, "dq": query.grad, "dk": key.grad, "dv": value.grad}.items():
        assert torch.isfinite(tensor).all(), f"{name} has NaN or inf"
    assert (out[1] == 0).all() and (query.grad[1] == 0).all()
    assert (key.grad[1] == 0).all() and (value.grad[1] == 0).all()
    assert (key.grad[0, 2:] == 0).all() and (value.grad[0, 2:] == 0).all(), "masked keys get no gradient"


@pytest.mark.parametrize("zeroes_empty_rows", [True, False], ids=["torch>=2.5 on the CPU", "mended"])
def test_fast_attention_fully_masked_row_both_code_paths(monkeypatch, zeroes_empty_rows):
    # torch >= 2.5 on the CPU zeroes a query with no key itself; elsewhere the course mends it. Both
    # paths must give zeros (and zero gradients) there and the reference's values elsewhere.
    from attention_course.torch_track import functional

    monkeypatch.setattr(functional, "SDPA_ZEROES_EMPTY_ROWS_ON_CPU", zeroes_empty_rows)
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(2, 1, 3, 4, dtype=torch.float64, generator=generator).requires_grad_()
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    k5 = torch.randn(2, 1, 5, 4, dtype=torch.float64, generator=generator).requires_grad_()
    v5 = torch.randn(2, 1, 5, 4, dtype=torch.float64, generator=generator).requires_grad_()
    mask[0, ..., 3:] = False
    mask[1] = False
    out = functional.scaled_dot_product_attention(q, k5, v5, mask)
    expected, _ = functional.scaled_dot_product_attention_reference(q, k5, v5, mask)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    out.sum().backward()
    assert not torch.isnan(q.grad).any() and torch.equal(q.grad[1], torch.zeros_like(q.grad[1]))
