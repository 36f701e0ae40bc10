"""Tests for attention_course/torch_track/local_attention.py: parity with the NumPy track (every score,
local-m and local-p, padding, a fully padded row), gradcheck, and the attention model with it."""

import dataclasses

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck
from torch.func import functional_call

from attention_course.numpy_track import local_attention as np_local
from attention_course.numpy_track import seq2seq as np_seq2seq
from attention_course.torch_track import local_attention as th_local
from attention_course.torch_track import seq2seq as th_seq2seq
from attention_course.torch_track.base import ShapeError

N, T_enc, T_dec, A = 3, 9, 4, 3
SCORES = ["dot", "scaled_dot", "general", "additive"]
SIZES = {"dot": (4, 4), "scaled_dot": (4, 4), "general": (4, 3), "additive": (4, 3)}
KINDS = ["local-m", "local-p"]
SOURCE_LENGTHS = {"no_mask": None, "ragged": [9, 4, 2], "fully_masked_row": [9, 0, 1]}


def both(score, kind, window=2, seed=1):
    H_enc, H_dec = SIZES[score]
    return (np_local.LocalAttention(score, H_enc, H_dec, A, kind=kind, window=window, rng=seed),
            th_local.LocalAttention(score, H_enc, H_dec, A, kind=kind, window=window, rng=seed, dtype=torch.float64))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("score", SCORES)
def test_same_seed_same_initial_weights(parity, score, kind):
    numpy_layer, module = both(score, kind, seed=7)
    parity.assert_same_parameters(numpy_layer, module)
    assert ("W_p" in dict(module.named_parameters())) == (kind == "local-p")


@pytest.mark.parametrize("lengths_name", list(SOURCE_LENGTHS))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("score", SCORES)
def test_parity(parity, rng, score, kind, lengths_name):
    numpy_layer, module = both(score, kind)
    module = parity.copied(numpy_layer, module, rng)
    H_enc, H_dec = SIZES[score]
    encoder_states, decoder_states = rng.standard_normal((N, T_enc, H_enc)), rng.standard_normal((N, T_dec, H_dec))
    lengths = SOURCE_LENGTHS[lengths_name]
    mask = None if lengths is None else parity.lengths_mask(lengths, T_enc)
    context = numpy_layer.forward(encoder_states, decoder_states, mask)
    d_context = rng.standard_normal(context.shape)
    d_encoder, d_decoder = numpy_layer.backward(d_context)
    enc_t = parity.as_torch(encoder_states, requires_grad=True)
    dec_t = parity.as_torch(decoder_states, requires_grad=True)
    context_t = module(enc_t, dec_t, parity.as_torch(mask))
    (context_t * torch.from_numpy(d_context)).sum().backward()
    parity.assert_close("context", context_t, context)
    parity.assert_close("positions", module.positions, numpy_layer.positions)
    parity.assert_close("attention_weights", module.attention_weights, numpy_layer.attention_weights)
    parity.assert_close("d_encoder_states", enc_t.grad, d_encoder)
    parity.assert_close("d_decoder_states", dec_t.grad, d_decoder)
    parity.assert_parameter_grads(numpy_layer, module)
    if lengths_name == "fully_masked_row":
        assert (context_t[1] == 0).all() and (enc_t.grad[1] == 0).all() and (dec_t.grad[1] == 0).all()


def test_monotonic_positions_match(parity):
    lengths = np.array([6, 2, 0])
    parity.assert_close("p_i", th_local.monotonic_positions(torch.from_numpy(lengths), 5, first_step=1,
                                                            dtype=torch.float64),
                        np_local.monotonic_positions(lengths, 5, first_step=1))


@pytest.mark.parametrize("score", ["general", "additive"])
def test_gradcheck_through_the_predicted_position(rng, score):
    """torch's own check, in float64, of every input and parameter of local-p."""
    H_enc, H_dec = SIZES[score]
    module = th_local.LocalAttention(score, H_enc, H_dec, A, kind="local-p", window=2, rng=3, dtype=torch.float64)
    names = [name for name, _ in module.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in module.parameters())
    enc = torch.tensor(rng.standard_normal((2, 7, H_enc)), requires_grad=True)
    dec = torch.tensor(rng.standard_normal((2, 3, H_dec)), requires_grad=True)
    mask = torch.tensor(np.arange(7)[None] < np.array([[7], [4]]))

    def context(encoder_states, decoder_states, *values):
        return functional_call(module, dict(zip(names, values)), (encoder_states, decoder_states, mask))

    assert gradcheck(context, (enc, dec, *params))


def test_attention_weights_are_zero_outside_the_window(rng):
    module = th_local.LocalAttention("dot", 4, 4, kind="local-m", window=1, dtype=torch.float64)
    mask = torch.from_numpy(np.arange(T_enc)[None] < np.array([[9], [3], [6]]))
    module(torch.tensor(rng.standard_normal((N, T_enc, 4))), torch.tensor(rng.standard_normal((N, 6, 4))), mask)
    weights = module.attention_weights
    distance = (torch.arange(T_enc) - module.positions.unsqueeze(-1)).abs()
    assert (weights[distance > 1] == 0).all() and (weights[~mask.unsqueeze(1).expand_as(weights)] == 0).all()
    assert (weights[1, 3:, 2] > 0).all(), "past the end of a 3-token source the window stays on its last token"


def test_shapes_are_checked():
    module = th_local.LocalAttention("general", 4, 3, kind="local-p")
    with pytest.raises(ShapeError, match=r"decoder_states: expected shape \(N, T_dec, H_dec\)"):
        module(torch.zeros(2, 5, 4), torch.zeros(2, 3))
    with pytest.raises(ShapeError, match="mask"):
        module(torch.zeros(2, 5, 4), torch.zeros(2, 1, 3), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="kind must be 'local-m' or 'local-p'"):
        th_local.LocalAttention("general", 4, 3, kind="hard")


# --- the model -------------------------------------------------------------------------------


def model_config(**overrides):
    options = dict(source_vocab_size=6, target_vocab_size=7, embed_dim=3, hidden_size=2, dtype="float64")
    return np_seq2seq.Seq2seqConfig(**(options | overrides))


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("options", [dict(attention="local-m", window=1),
                                     dict(attention="local-p", score="additive", cell="lstm"),
                                     dict(attention="local-p", reset_after=True, bidirectional=False, score="dot")],
                         ids=["local_m", "local_p_lstm_additive", "local_p_gru_torch_form_dot"])
def test_model_parity(parity, rng, options, training):
    cfg = model_config(**options)
    numpy_model, module = np_seq2seq.build_model("attention", cfg, rng=3), th_seq2seq.build_model("attention", cfg,
                                                                                                  rng=3)
    parity.assert_same_parameters(numpy_model, module)
    module = parity.copied(numpy_model, module.train(training), rng)
    batch = dict(source=rng.integers(0, 6, (N, 6)), source_mask=parity.lengths_mask([6, 3, 0], 6),
                 decoder_input=rng.integers(0, 7, (N, 5)), decoder_target=rng.integers(0, 7, (N, 5)),
                 target_mask=parity.lengths_mask([5, 2, 4], 5))
    parity.model_parity(numpy_model, module, batch)
    ids, weights = numpy_model.generate(batch["source"], batch["source_mask"], 1, 6)
    ids_t, weights_t = module.generate(parity.as_torch(batch["source"]), parity.as_torch(batch["source_mask"]), 1, 6)
    np.testing.assert_array_equal(parity.to_numpy(ids_t), ids)
    parity.assert_close("generated attention weights", weights_t, weights)


def test_float32_model_stays_float32(rng):
    module = th_seq2seq.AttentionSeq2seq(dataclasses.replace(model_config(attention="local-p"), dtype="float32"))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        loss = module(torch.from_numpy(rng.integers(0, 6, (2, 5))), torch.ones(2, 5, dtype=torch.bool),
                      torch.from_numpy(rng.integers(0, 7, (2, 4))), torch.from_numpy(rng.integers(0, 7, (2, 4))))
        loss.backward()
    finally:
        torch.set_default_dtype(previous)
    assert loss.dtype == torch.float32
    assert module.decoder.attention.attention_weights.dtype == torch.float32
    assert {p.grad.dtype for p in module.parameters() if p.grad is not None} == {torch.float32}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", KINDS)
def test_parity_on_cuda(parity, rng, kind):
    numpy_layer, module = both("general", kind)
    module = parity.copied(numpy_layer, module, rng, device="cuda")
    encoder_states, decoder_states = rng.standard_normal((N, T_enc, 4)), rng.standard_normal((N, T_dec, 3))
    mask = parity.lengths_mask([9, 0, 3], T_enc)
    context = numpy_layer.forward(encoder_states, decoder_states, mask)
    context_t = module(parity.as_torch(encoder_states, "cuda"), parity.as_torch(decoder_states, "cuda"),
                       parity.as_torch(mask, "cuda"))
    assert context_t.device.type == "cuda"
    parity.assert_close("context", context_t, context)
    parity.assert_close("attention_weights", module.attention_weights, numpy_layer.attention_weights)
