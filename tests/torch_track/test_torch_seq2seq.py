"""Tests for attention_course/torch_track/seq2seq.py: encoders, decoders and the two models vs NumPy.

For several configurations (GRU in both forms, LSTM, RNN; bidirectional or not; two residual
layers; every score; fused kernels and the loop; training mode, where ``scaled_dot`` runs
``F.scaled_dot_product_attention``, and eval mode) the same seed gives the same weights, and
with copied random weights the loss, every parameter gradient and greedy decoding agree with
the NumPy track.
"""

import dataclasses

import numpy as np
import pytest
import torch

from attention_course.numpy_track import seq2seq as np_seq2seq
from attention_course.torch_track import seq2seq as th_seq2seq
from attention_course.torch_track.base import ShapeError

V_src, V_tgt, E, H = 6, 7, 3, 3
N, T_enc, T_dec = 3, 5, 4


def config(**overrides):
    options = dict(source_vocab_size=V_src, target_vocab_size=V_tgt, embed_dim=E, hidden_size=H, dtype="float64")
    return np_seq2seq.Seq2seqConfig(**(options | overrides))


ATTENTION_CONFIGS = {
    "gru_bidirectional_general": config(),
    "gru_reset_after_bidirectional_2_residual_dot": config(reset_after=True, num_layers=2, residual=True, score="dot"),
    "lstm_bidirectional_2_residual_additive": config(cell="lstm", num_layers=2, residual=True, score="additive",
                                                     attention_size=4),
    "lstm_scaled_dot": config(cell="lstm", bidirectional=False, score="scaled_dot"),
    "rnn_dot": config(cell="rnn", bidirectional=False, score="dot"),
    "rnn_bidirectional_scaled_dot": config(cell="rnn", score="scaled_dot"),
    "gru_reset_after_2_residual_general": config(reset_after=True, bidirectional=False, num_layers=2,
                                                 residual=True),
    "gru_2_residual_additive": config(bidirectional=False, num_layers=2, residual=True, score="additive"),
}
SEQ2SEQ_CONFIGS = {
    "gru": config(bidirectional=False),
    "gru_reset_after": config(bidirectional=False, reset_after=True),
    "lstm": config(cell="lstm", bidirectional=False),
    "rnn_2_residual": config(cell="rnn", bidirectional=False, num_layers=2, residual=True),
    "lstm_2_residual": config(cell="lstm", bidirectional=False, num_layers=2, residual=True),
}


def toy_batch(rng, parity, source_lengths=(5, 2, 0), target_lengths=(4, 2, 3)):
    return dict(source=rng.integers(0, V_src, (N, T_enc)),
                source_mask=parity.lengths_mask(source_lengths, T_enc),
                decoder_input=rng.integers(0, V_tgt, (N, T_dec)),
                decoder_target=rng.integers(0, V_tgt, (N, T_dec)),
                target_mask=parity.lengths_mask(target_lengths, T_dec))


def both_models(kind, cfg, seed=3, fused=True):
    return np_seq2seq.build_model(kind, cfg, rng=seed), th_seq2seq.build_model(kind, cfg, rng=seed, fused=fused)


def layer_state(cell, rng, width=H, layers=1):
    def one():
        return (rng.standard_normal((N, width)), rng.standard_normal((N, width))) if cell == "lstm" \
            else rng.standard_normal((N, width))
    return [one() for _ in range(layers)]


# --- the models ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, name", [("attention", name) for name in ATTENTION_CONFIGS]
                         + [("seq2seq", name) for name in SEQ2SEQ_CONFIGS])
def test_same_seed_same_initial_weights(parity, kind, name):
    cfg = (ATTENTION_CONFIGS if kind == "attention" else SEQ2SEQ_CONFIGS)[name]
    numpy_model, module = both_models(kind, cfg)
    parity.assert_same_parameters(numpy_model, module)
    assert all(p.dtype == torch.float64 for p in module.parameters())
    # float32: the same values, rounded once. (Not bit for bit: the NumPy AdditiveScore divides
    # after casting, and its float32 parameters come out float64.)
    float32 = dataclasses.replace(cfg, dtype="float32")
    ours = {name: value for name, value, _ in np_seq2seq.build_model(kind, float32, rng=3).named_parameters()}
    for name, value in th_seq2seq.build_model(kind, float32, rng=3).named_parameters():
        assert value.dtype == torch.float32, name
        np.testing.assert_allclose(value.detach().numpy(), ours[name], rtol=1e-6, atol=0, err_msg=name)


@pytest.mark.parametrize("training", [True, False], ids=["train_mode", "eval_mode"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("name", list(ATTENTION_CONFIGS))
def test_attention_seq2seq_parity(parity, rng, name, fused, training):
    numpy_model, module = both_models("attention", ATTENTION_CONFIGS[name], fused=fused)
    module = parity.copied(numpy_model, module, rng).train(training)
    batch = toy_batch(rng, parity)
    parity.model_parity(numpy_model, module, batch)
    if training and ATTENTION_CONFIGS[name].score == "scaled_dot":
        assert module.attention_weights is None, "training with scaled_dot runs the fused attention"
    else:
        parity.assert_close("attention_weights", module.attention_weights, numpy_model.attention_weights)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("name", list(SEQ2SEQ_CONFIGS))
def test_seq2seq_parity(parity, rng, name, fused):
    numpy_model, module = both_models("seq2seq", SEQ2SEQ_CONFIGS[name], fused=fused)
    module = parity.copied(numpy_model, module, rng)
    parity.model_parity(numpy_model, module, toy_batch(rng, parity, source_lengths=(5, 2, 1)))


@pytest.mark.parametrize("kind, name", [("attention", name) for name in ATTENTION_CONFIGS]
                         + [("seq2seq", name) for name in SEQ2SEQ_CONFIGS])
def test_greedy_generate_matches(parity, rng, kind, name):
    cfg = (ATTENTION_CONFIGS if kind == "attention" else SEQ2SEQ_CONFIGS)[name]
    numpy_model, module = both_models(kind, cfg)
    module = parity.copied(numpy_model, module, rng)
    batch = toy_batch(rng, parity, source_lengths=(5, 2, 3))
    ids, weights = numpy_model.generate(batch["source"], batch["source_mask"], 0, 6)
    ids_t, weights_t = module.generate(torch.from_numpy(batch["source"]), torch.from_numpy(batch["source_mask"]), 0, 6)
    assert ids_t.dtype == torch.long and ids_t.shape == (N, 6)
    np.testing.assert_array_equal(ids_t.numpy(), ids)
    if kind == "attention":
        assert weights_t.shape == (N, 6, T_enc)
        parity.assert_close("attention weights", weights_t, weights)
    else:
        assert weights is None and weights_t is None


def test_generate_stops_when_every_row_has_stopped(parity, rng):
    numpy_model, module = both_models("attention", ATTENTION_CONFIGS["gru_bidirectional_general"])
    module = parity.copied(numpy_model, module, rng)
    batch = toy_batch(rng, parity, source_lengths=(5, 2, 3))
    source, mask = torch.from_numpy(batch["source"]), torch.from_numpy(batch["source_mask"])
    ids, _ = module.generate(source, mask, 0, 8)
    stop_id = int(ids[0, 0])
    if not all(stop_id in row for row in ids.tolist()):
        pytest.skip("the random model never emits a common token")  # not expected with this seed
    stopped, weights = module.generate(source, mask, 0, 8, stop_id=stop_id)
    first_stop = max(row.index(stop_id) for row in ids.tolist())
    assert stopped.shape[1] == first_stop + 1 and weights.shape[1] == first_stop + 1
    np_ids, _ = numpy_model.generate(batch["source"], batch["source_mask"], 0, 8, stop_id=stop_id)
    np.testing.assert_array_equal(stopped.numpy(), np_ids)


def test_generate_does_not_build_a_graph_and_leaves_the_mode(parity, rng):
    _, module = both_models("attention", ATTENTION_CONFIGS["lstm_scaled_dot"])
    module.train()
    batch = toy_batch(rng, parity, source_lengths=(5, 2, 3))
    ids, weights = module.generate(torch.from_numpy(batch["source"]), torch.from_numpy(batch["source_mask"]), 0, 3)
    assert not weights.requires_grad and weights is not None
    assert module.training


def test_models_check_their_arguments(parity, rng):
    with pytest.raises(ValueError, match="unidirectional"):
        th_seq2seq.Seq2seq(config(bidirectional=True))
    with pytest.raises(ValueError, match="unknown kind"):
        th_seq2seq.build_model("transformer", config())
    with pytest.raises(ValueError, match="unknown recurrent cell"):
        th_seq2seq.make_recurrent("elman", 2, 2)
    _, module = both_models("attention", config())
    batch = {name: torch.from_numpy(value) for name, value in toy_batch(rng, parity).items()}
    with pytest.raises(ShapeError, match="decoder_target"):
        module(**(batch | {"decoder_target": batch["decoder_target"][:, :2]}))
    with pytest.raises(ShapeError, match="source_mask"):
        module(**(batch | {"source_mask": batch["source_mask"][:, :2]}))
    with pytest.raises(ShapeError, match="source"):
        module(**(batch | {"source": batch["source"].double()}))


# --- the parts -------------------------------------------------------------------------------

PARTS = [pytest.param("gru", False, 1, False, id="gru"), pytest.param("gru", True, 1, False, id="gru_reset_after"),
         pytest.param("lstm", False, 2, True, id="lstm_2_residual"), pytest.param("rnn", False, 1, False, id="rnn")]


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("cell, reset_after, layers, residual", PARTS)
def test_encoders_parity(parity, rng, cell, reset_after, layers, residual, fused, bidirectional):
    cfg = config(cell=cell, num_layers=layers, bidirectional=bidirectional, residual=residual, reset_after=reset_after)
    for numpy_class, torch_class in ((np_seq2seq.Encoder, th_seq2seq.Encoder),
                                     (np_seq2seq.AttentionEncoder, th_seq2seq.AttentionEncoder)):
        numpy_encoder = numpy_class(cfg, rng=4)
        module = torch_class(cfg, rng=4, fused=fused)
        parity.assert_same_parameters(numpy_encoder, module)
        module = parity.copied(numpy_encoder, module, rng)
        source, mask = rng.integers(0, V_src, (N, T_enc)), parity.lengths_mask([5, 0, 3], T_enc)
        out = numpy_encoder.forward(source, mask)
        final = numpy_encoder.final_state
        d_final = parity.random_like(final, rng)
        attention = numpy_class is np_seq2seq.AttentionEncoder
        if attention:
            d_out = rng.standard_normal(out.shape)
            numpy_encoder.backward(d_out, d_final)
        else:
            numpy_encoder.backward(d_final)
        out_t = module(torch.from_numpy(source), torch.from_numpy(mask))
        loss = sum((f * torch.from_numpy(d)).sum() for f, d in
                   zip(parity.flatten(module.final_state), parity.flatten(d_final), strict=True))
        if attention:
            parity.assert_close("encoder_states", out_t, out)
            assert out_t.shape == (N, T_enc, module.output_size) and (out_t[1] == 0).all()
            loss = loss + (out_t * torch.from_numpy(d_out)).sum()
        else:
            parity.assert_nested_close("final state returned", out_t, final)
        parity.assert_nested_close("final_state", module.final_state, final)
        loss.backward()
        parity.assert_parameter_grads(numpy_encoder, module)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("cell, reset_after, layers, residual", PARTS)
def test_decoder_parity(parity, rng, cell, reset_after, layers, residual, fused):
    cfg = config(cell=cell, num_layers=layers, bidirectional=False, residual=residual, reset_after=reset_after)
    numpy_decoder = np_seq2seq.Decoder(cfg, rng=4)
    module = th_seq2seq.Decoder(cfg, rng=4, fused=fused)
    parity.assert_same_parameters(numpy_decoder, module)
    module = parity.copied(numpy_decoder, module, rng)
    decoder_input = rng.integers(0, V_tgt, (N, T_dec))
    initial = layer_state(cell, rng, layers=layers)
    logits = numpy_decoder.forward(decoder_input, initial)
    d_logits = rng.standard_normal(logits.shape)
    d_initial = numpy_decoder.backward(d_logits)
    initial_t = parity.as_torch(initial, requires_grad=True)
    logits_t = module(torch.from_numpy(decoder_input), initial_t)
    (logits_t * torch.from_numpy(d_logits)).sum().backward()
    parity.assert_close("logits", logits_t, logits)
    parity.assert_nested_close("initial state gradient", [t.grad for t in parity.flatten(initial_t)], d_initial)
    parity.assert_parameter_grads(numpy_decoder, module)
    np.testing.assert_array_equal(module.generate(parity.as_torch(initial), 1, 5).numpy(),
                                  numpy_decoder.generate(initial, 1, 5))


@pytest.mark.parametrize("training", [True, False], ids=["train_mode", "eval_mode"])
@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general", "additive"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("cell, reset_after, layers, residual", PARTS)
def test_attention_decoder_parity(parity, rng, cell, reset_after, layers, residual, fused, score, training):
    cfg = config(cell=cell, num_layers=layers, residual=residual, reset_after=reset_after, score=score,
                 attention_size=4)
    H_enc = cfg.encoder_output_size
    numpy_decoder = np_seq2seq.AttentionDecoder(cfg, rng=4)
    module = th_seq2seq.AttentionDecoder(cfg, rng=4, fused=fused)
    parity.assert_same_parameters(numpy_decoder, module)
    module = parity.copied(numpy_decoder, module, rng).train(training)
    decoder_input = rng.integers(0, V_tgt, (N, T_dec))
    encoder_states = rng.standard_normal((N, T_enc, H_enc))
    source_mask = parity.lengths_mask([5, 0, 2], T_enc)
    initial = layer_state(cell, rng, width=cfg.decoder_hidden_size, layers=layers)
    logits = numpy_decoder.forward(decoder_input, encoder_states, initial, source_mask)
    d_logits = rng.standard_normal(logits.shape)
    d_encoder_states, d_initial = numpy_decoder.backward(d_logits)

    initial_t = parity.as_torch(initial, requires_grad=True)
    encoder_t = parity.as_torch(encoder_states, requires_grad=True)
    logits_t = module(torch.from_numpy(decoder_input), encoder_t, initial_t, torch.from_numpy(source_mask))
    (logits_t * torch.from_numpy(d_logits)).sum().backward()
    parity.assert_close("logits", logits_t, logits)
    parity.assert_close("d_encoder_states", encoder_t.grad, d_encoder_states)
    parity.assert_nested_close("initial state gradient", [t.grad for t in parity.flatten(initial_t)], d_initial)
    parity.assert_parameter_grads(numpy_decoder, module)

    ids, weights = numpy_decoder.generate(encoder_states, initial, source_mask, 1, 4)
    ids_t, weights_t = module.generate(parity.as_torch(encoder_states), parity.as_torch(initial),
                                       torch.from_numpy(source_mask), 1, 4)
    np.testing.assert_array_equal(ids_t.numpy(), ids)
    parity.assert_close("generated attention weights", weights_t, weights)
    assert module.training is training


@pytest.mark.parametrize("lstm", [True, False])
def test_bridge_parity(parity, rng, lstm):
    cfg = config(cell="lstm" if lstm else "gru", num_layers=2)  # bidirectional: H per direction, 2H decoder
    numpy_bridge = np_seq2seq.Bridge(cfg, rng=5)
    module = parity.copied(numpy_bridge, th_seq2seq.Bridge(cfg, rng=5), rng)

    def direction():
        return (rng.standard_normal((N, H)), rng.standard_normal((N, H))) if lstm else rng.standard_normal((N, H))

    final = [(direction(), direction()) for _ in range(2)]
    initial = numpy_bridge.forward(final)
    d_initial = parity.random_like(initial, rng)
    d_final = numpy_bridge.backward(d_initial)
    final_t = parity.as_torch(final, requires_grad=True)
    initial_t = module(final_t)
    sum((a * torch.from_numpy(b)).sum() for a, b in zip(parity.flatten(initial_t), parity.flatten(d_initial))).backward()
    parity.assert_nested_close("s_0", initial_t, initial)
    for layer in range(2):
        backward_h = final_t[layer][1][0] if lstm else final_t[layer][1]
        expected = d_final[layer][1][0] if lstm else d_final[layer][1]
        parity.assert_close(f"layer {layer} d h_1<-", backward_h.grad, expected)
        forward_h = final_t[layer][0][0] if lstm else final_t[layer][0]
        assert forward_h.grad is None, "the forward direction does not feed the bridge"
    parity.assert_parameter_grads(numpy_bridge, module)
