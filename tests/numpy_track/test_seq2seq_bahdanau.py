"""Tests for ``BahdanauDecoder`` in attention_course/numpy_track/seq2seq.py: it scores with s_{i-1},
feeds the context into the recurrence, has exact gradients, decodes as it trains, and learns."""

import numpy as np
import pytest

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track.attention import TimeAttention
from attention_course.numpy_track.optim import Adam, clip_grad_norm
from attention_course.numpy_track.seq2seq import (AttentionDecoder, AttentionSeq2seq, BahdanauDecoder, Seq2seqConfig,
                                                  build_model)
from attention_course.testing import check_layer_gradients

V_src, V_tgt, E, H = 6, 7, 3, 2  # H per encoder direction: H_enc = H_dec = 4
N, T_enc, T_dec = 2, 4, 3


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def config(**overrides):
    options = dict(source_vocab_size=V_src, target_vocab_size=V_tgt, embed_dim=E, hidden_size=H, dtype="float64",
                   decoder="bahdanau")
    return Seq2seqConfig(**(options | overrides))


def toy_batch(rng):
    return dict(source=rng.integers(0, V_src, (N, T_enc)), source_mask=lengths_mask([4, 2], T_enc),
                decoder_input=rng.integers(0, V_tgt, (N, T_dec)), decoder_target=rng.integers(0, V_tgt, (N, T_dec)),
                target_mask=lengths_mask([3, 2], T_dec))


def randomized(layer, rng, scale=0.6):
    for _, value, _ in layer.named_parameters():
        value[...] = rng.uniform(-scale, scale, value.shape)
    return layer


class DecoderFromState:
    """``BahdanauDecoder`` with its initial state given as arrays ``s0`` (and ``c0`` for an LSTM)."""

    def __init__(self, decoder, lstm):
        self.decoder, self.lstm = decoder, lstm

    def named_parameters(self):
        return self.decoder.named_parameters()

    def forward(self, decoder_input, encoder_states, source_mask, s0, c0=None):
        return self.decoder.forward(decoder_input, encoder_states, [(s0, c0) if self.lstm else s0], source_mask)

    def backward(self, d_logits):
        d_encoder_states, (d_initial,) = self.decoder.backward(d_logits)
        return (d_encoder_states, *(d_initial if self.lstm else (d_initial,)))


@pytest.mark.parametrize("cell, reset_after, score", [
    ("gru", False, "additive"), ("gru", True, "general"), ("lstm", False, "dot"), ("rnn", False, "scaled_dot"),
])
def test_decoder_gradients(rng, cell, reset_after, score):
    decoder = randomized(BahdanauDecoder(config(cell=cell, reset_after=reset_after, score=score), rng=1), rng)
    H_dec = 2 * H
    inputs = {"decoder_input": rng.integers(0, V_tgt, (N, T_dec)),
              "encoder_states": rng.standard_normal((N, T_enc, H_dec)) * lengths_mask([4, 2], T_enc)[..., None],
              "source_mask": lengths_mask([4, 2], T_enc), "s0": rng.standard_normal((N, H_dec))}
    if cell == "lstm":
        inputs["c0"] = rng.standard_normal((N, H_dec))
    check_layer_gradients(DecoderFromState(decoder, cell == "lstm"), inputs)


@pytest.mark.parametrize("options", [dict(cell="gru"), dict(cell="lstm", bidirectional=False, score="additive")],
                         ids=["bigru", "lstm_unidirectional"])
def test_model_loss_gradients(rng, options):
    model = randomized(AttentionSeq2seq(config(**options), rng=1), rng)
    assert isinstance(model.decoder, BahdanauDecoder)
    check_layer_gradients(model, toy_batch(rng))


def test_it_attends_with_the_previous_state_and_reads_the_context_in_its_recurrence(rng):
    decoder = randomized(BahdanauDecoder(config(score="general"), rng=1), rng)
    encoder_states = rng.standard_normal((N, T_enc, 2 * H))
    mask = lengths_mask([4, 3], T_enc)
    s0 = rng.standard_normal((N, 2 * H))
    decoder_input = rng.integers(0, V_tgt, (N, T_dec))
    decoder.forward(decoder_input, encoder_states, [s0], mask)
    # step 1's weights come from s_0, the state before the step's recurrence
    attention = TimeAttention("general", 2 * H, 2 * H)
    attention.attention_weight.score.params["W_a"][...] = decoder.attention.attention_weight.score.params["W_a"]
    context = attention.forward(encoder_states, s0[:, None], mask)[:, 0]
    np.testing.assert_allclose(decoder.attention_weights[:, 0], attention.attention_weights[:, 0], rtol=1e-12)
    # s_1 = GRU(s_0, [E y_0 ; c_1]): the context is part of the recurrent input
    cell = decoder.rnn.layers[0].cell
    embedded = decoder.embed.params["W"][decoder_input[:, 0]]
    s1 = cell.forward(np.concatenate([embedded, context], axis=-1), s0)
    decoder.forward(decoder_input[:, :1], encoder_states, [s0], mask)
    np.testing.assert_allclose(decoder.final_state[0], s1, rtol=1e-12)


def test_greedy_decoding_is_the_teacher_forced_pass_on_its_own_outputs(rng):
    model = randomized(AttentionSeq2seq(config(), rng=1), rng, scale=1.0)
    batch = toy_batch(rng)
    ids, weights = model.generate(batch["source"], batch["source_mask"], start_id=1, max_length=5)
    assert ids.shape == (N, 5) and weights.shape == (N, 5, T_enc)
    decoder_input = np.concatenate([np.ones((N, 1), dtype=np.int64), ids[:, :-1]], axis=1)
    encoder_states = model.encoder.forward(batch["source"], batch["source_mask"])
    logits = model.decoder.forward(decoder_input, encoder_states, model._initial_state(), batch["source_mask"])
    np.testing.assert_array_equal(logits.argmax(axis=-1), ids)
    np.testing.assert_allclose(model.attention_weights, weights, rtol=1e-12)
    assert np.all(weights[~np.broadcast_to(batch["source_mask"][:, None, :], weights.shape)] == 0)


def test_appending_padding_changes_nothing(rng):
    model = randomized(AttentionSeq2seq(config(), rng=1), rng)
    batch = toy_batch(rng)
    loss = model.forward(**batch)
    padded = dict(batch)
    padded["source"] = np.concatenate([batch["source"], rng.integers(0, V_src, (N, 2))], axis=1)
    padded["source_mask"] = np.concatenate([batch["source_mask"], np.zeros((N, 2), dtype=bool)], axis=1)
    for name in ("decoder_input", "decoder_target"):
        padded[name] = np.concatenate([batch[name], rng.integers(0, V_tgt, (N, 1))], axis=1)
    padded["target_mask"] = np.concatenate([batch["target_mask"], np.zeros((N, 1), dtype=bool)], axis=1)
    assert model.forward(**padded) == pytest.approx(loss, rel=1e-12)


def test_the_config_picks_the_decoder_and_refuses_what_it_cannot_do():
    assert isinstance(build_model("attention", config(decoder="luong")).decoder, AttentionDecoder)
    assert isinstance(build_model("attention", config()).decoder, BahdanauDecoder)
    with pytest.raises(ValueError, match="decoder 'bahdanau' has one recurrent layer and global attention"):
        config(attention="local-m")
    with pytest.raises(ValueError, match="num_layers=2"):
        config(num_layers=2)
    with pytest.raises(ValueError, match=r"unknown decoder 'graves'; choose one of \['bahdanau', 'luong'\]"):
        config(decoder="graves")


def test_the_bahdanau_model_learns_eight_dates():
    pairs, _ = generate_dates(8, 0, seed=0)
    source_vocab, target_vocab = build_vocabularies(pairs)
    batch = encode_pairs(pairs, source_vocab, target_vocab)
    model = AttentionSeq2seq(Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=16, hidden_size=32,
                                           decoder="bahdanau"), rng=0)
    optimizer, grads = Adam(model, lr=0.02), [grad for _, _, grad in model.named_parameters()]
    first = None
    for _ in range(100):
        loss = model.forward(batch.source, batch.source_mask, batch.decoder_input, batch.decoder_target,
                             batch.target_mask)
        first = loss if first is None else first
        model.backward()
        clip_grad_norm(grads, 5.0)
        optimizer.step()
    assert first > 1.0 and loss < 0.02, f"loss went from {first:.3f} to {loss:.4f}"
    ids, _ = model.generate(batch.source, batch.source_mask, target_vocab.bos_id, batch.decoder_target.shape[1],
                            target_vocab.eos_id)
    assert [target_vocab.decode(row) for row in ids] == [target for _, target in pairs]
