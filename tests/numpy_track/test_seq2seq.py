"""Tests for attention_course/numpy_track/seq2seq.py: encoders, decoders, the two models, end to end."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track.optim import Adam, clip_grad_norm
from attention_course.numpy_track.seq2seq import (AttentionDecoder, AttentionEncoder, AttentionSeq2seq, Decoder,
                                                  Encoder, Seq2seq, Seq2seqConfig, build_model, make_recurrent)
from attention_course.testing import check_layer_gradients

V_src, V_tgt, E, H = 6, 7, 3, 3
N, T_enc, T_dec = 2, 4, 3


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def random_like(state, rng):
    if isinstance(state, np.ndarray):
        return rng.standard_normal(state.shape)
    return type(state)(random_like(part, rng) for part in state)


def randomize_biases(layer, rng):
    for name, value, _ in layer.named_parameters():
        if name.split(".")[-1] in ("b", "b_h", "b_c"):
            value[...] = rng.standard_normal(value.shape) * 0.3
    return layer


def toy_batch(rng, source_lengths=(4, 2), target_lengths=(3, 2)):
    source = rng.integers(0, V_src, (N, T_enc))
    decoder_input = rng.integers(0, V_tgt, (N, T_dec))
    decoder_target = rng.integers(0, V_tgt, (N, T_dec))
    return dict(source=source, source_mask=lengths_mask(source_lengths, T_enc), decoder_input=decoder_input,
                decoder_target=decoder_target, target_mask=lengths_mask(target_lengths, T_dec))


def config(**overrides):
    options = dict(source_vocab_size=V_src, target_vocab_size=V_tgt, embed_dim=E, hidden_size=H, dtype="float64")
    return Seq2seqConfig(**(options | overrides))


# --- gradient-check adapters: nested states in and out as flat arrays -----------------------


class EncoderFinalState:
    """``Encoder`` as ``(source, mask) -> *final_state``."""

    def __init__(self, encoder, states):
        self.encoder, self.states = encoder, states

    def named_parameters(self):
        return self.encoder.named_parameters()

    def forward(self, source, mask):
        return tuple(self.states.flatten(self.encoder.forward(source, mask)))

    def backward(self, douts):
        self.encoder.backward(self.states.unflatten(self.encoder.final_state, iter(douts)))


class AttentionEncoderWithState(EncoderFinalState):
    """``AttentionEncoder`` as ``(source, mask) -> (encoder_states, *final_state)``."""

    def forward(self, source, mask):
        encoder_states = self.encoder.forward(source, mask)
        return (encoder_states, *self.states.flatten(self.encoder.final_state))

    def backward(self, douts):
        d_encoder_states, *d_final = douts
        self.encoder.backward(d_encoder_states, self.states.unflatten(self.encoder.final_state, iter(d_final)))


class DecoderFromState:
    """``Decoder``/``AttentionDecoder`` with the initial state given as separate arrays ``s0, s1, ...``."""

    def __init__(self, decoder, template, states):
        self.decoder, self.template, self.states = decoder, template, states

    def named_parameters(self):
        return self.decoder.named_parameters()

    def forward(self, decoder_input, encoder_states=None, source_mask=None, **initial):
        state = self.states.unflatten(self.template, iter(initial.values()))
        if encoder_states is None:
            return self.decoder.forward(decoder_input, state)
        return self.decoder.forward(decoder_input, encoder_states, state, source_mask)

    def backward(self, d_logits):
        grads = self.decoder.backward(d_logits)
        if isinstance(self.decoder, AttentionDecoder):
            d_encoder_states, d_initial = grads
            return (d_encoder_states, *self.states.flatten(d_initial))
        return tuple(self.states.flatten(grads))


# --- the parts ------------------------------------------------------------------------------

PART_VARIANTS = [
    pytest.param(dict(cell="lstm"), id="lstm"),
    pytest.param(dict(cell="gru", num_layers=2, residual=True), id="gru_2_layers_residual"),
    pytest.param(dict(cell="gru", reset_after=True, bidirectional=True), id="gru_reset_after_bidirectional"),
]


@pytest.mark.parametrize("options", PART_VARIANTS)
def test_encoder_gradients(rng, states, options):
    batch = toy_batch(rng)
    encoder = randomize_biases(Encoder(config(**{"bidirectional": False} | options), rng=rng), rng)
    final = encoder.forward(batch["source"], batch["source_mask"])
    assert isinstance(final, list) and len(final) == options.get("num_layers", 1)
    check_layer_gradients(EncoderFinalState(encoder, states),
                          {"source": batch["source"], "mask": batch["source_mask"]})


@pytest.mark.parametrize("options", PART_VARIANTS)
def test_attention_encoder_gradients(rng, states, options):
    batch = toy_batch(rng)
    encoder = randomize_biases(AttentionEncoder(config(**{"bidirectional": False} | options), rng=rng), rng)
    encoder_states = encoder.forward(batch["source"], batch["source_mask"])
    width = 2 * H if options.get("bidirectional") else H
    assert encoder_states.shape == (N, T_enc, width) and encoder.output_size == width
    assert np.all(encoder_states[~batch["source_mask"]] == 0)
    check_layer_gradients(AttentionEncoderWithState(encoder, states),
                          {"source": batch["source"], "mask": batch["source_mask"]})


@pytest.mark.parametrize("options", [dict(cell="lstm"), dict(cell="rnn", num_layers=2, residual=True)],
                         ids=["lstm", "rnn_2_layers_residual"])
def test_decoder_gradients(rng, states, options):
    decoder = randomize_biases(Decoder(config(bidirectional=False, **options), rng=rng), rng)
    template = make_recurrent(options["cell"], E, H, num_layers=options.get("num_layers", 1))
    template.forward(np.zeros((N, 1, E)))
    initial = random_like(template.final_state, rng)
    logits = decoder.forward(toy_batch(rng)["decoder_input"], initial)
    assert logits.shape == (N, T_dec, V_tgt)
    inputs = {"decoder_input": toy_batch(rng)["decoder_input"]}
    inputs |= {f"s{i}": s for i, s in enumerate(states.flatten(initial))}
    check_layer_gradients(DecoderFromState(decoder, initial, states), inputs)


@pytest.mark.parametrize("score", ["dot", "general", "additive", "scaled_dot"])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_attention_decoder_gradients(rng, states, cell, score):
    # A bidirectional encoder of width 2 per direction: H_enc = H_dec = 4.
    decoder = randomize_biases(AttentionDecoder(config(cell=cell, score=score, hidden_size=2), rng=rng), rng)
    H_enc = H_dec = 4
    initial = [(rng.standard_normal((N, H_dec)), rng.standard_normal((N, H_dec))) if cell == "lstm"
               else rng.standard_normal((N, H_dec))]
    batch = toy_batch(rng)
    encoder_states = rng.standard_normal((N, T_enc, H_enc)) * batch["source_mask"][..., None]
    logits = decoder.forward(batch["decoder_input"], encoder_states, initial, batch["source_mask"])
    assert logits.shape == (N, T_dec, V_tgt)
    assert decoder.attention_weights.shape == (N, T_dec, T_enc)
    inputs = {"decoder_input": batch["decoder_input"], "encoder_states": encoder_states,
              "source_mask": batch["source_mask"]}
    inputs |= {f"s{i}": s for i, s in enumerate(states.flatten(initial))}
    check_layer_gradients(DecoderFromState(decoder, initial, states), inputs)


# --- the whole models -----------------------------------------------------------------------

MODEL_VARIANTS = [
    pytest.param(Seq2seq, dict(cell="lstm", bidirectional=False), id="seq2seq_lstm"),
    pytest.param(Seq2seq, dict(cell="gru", bidirectional=False, num_layers=2, residual=True),
                 id="seq2seq_gru_2_layers_residual"),
    pytest.param(AttentionSeq2seq, dict(cell="gru", bidirectional=True, score="general"), id="attention_bigru"),
    pytest.param(AttentionSeq2seq, dict(cell="lstm", bidirectional=True, score="additive", attention_size=2),
                 id="attention_bilstm_additive"),
    pytest.param(AttentionSeq2seq, dict(cell="gru", reset_after=True, bidirectional=True, num_layers=2,
                                        residual=True, score="dot"), id="attention_bigru_2_layers_residual"),
    pytest.param(AttentionSeq2seq, dict(cell="rnn", bidirectional=False, score="scaled_dot"),
                 id="attention_rnn_unidirectional"),
]


@pytest.mark.parametrize("model_class, options", MODEL_VARIANTS)
def test_model_loss_gradients(rng, model_class, options):
    model = randomize_biases(model_class(config(**options), rng=rng), rng)
    batch = toy_batch(rng)
    loss = model.forward(**batch)
    assert isinstance(loss, float) and np.isfinite(loss)
    check_layer_gradients(model, batch)


@settings(max_examples=15, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru"]), bidirectional=st.booleans(), score=st.sampled_from(["general", "dot"]),
       extra_source=st.integers(1, 3), extra_target=st.integers(1, 2), seed=st.integers(0, 2 ** 16))
def test_appending_padding_changes_neither_the_encoder_nor_the_loss(cell, bidirectional, score, extra_source,
                                                                    extra_target, seed):
    rng = np.random.default_rng(seed)
    model = AttentionSeq2seq(config(cell=cell, bidirectional=bidirectional, score=score), rng=seed)
    batch = toy_batch(rng)
    encoder_states = model.encoder.forward(batch["source"], batch["source_mask"])
    loss = model.forward(**batch)

    padded = {}
    for key, extra, vocab in [("source", extra_source, V_src), ("decoder_input", extra_target, V_tgt),
                              ("decoder_target", extra_target, V_tgt)]:
        padded[key] = np.concatenate([batch[key], rng.integers(0, vocab, (N, extra))], axis=1)  # garbage ids
    for key, extra in [("source_mask", extra_source), ("target_mask", extra_target)]:
        padded[key] = np.concatenate([batch[key], np.zeros((N, extra), dtype=bool)], axis=1)
    padded_states = model.encoder.forward(padded["source"], padded["source_mask"])
    np.testing.assert_allclose(padded_states[:, :T_enc], encoder_states, rtol=1e-12, atol=1e-14)
    assert np.all(padded_states[:, T_enc:] == 0)
    assert model.forward(**padded) == pytest.approx(loss, rel=1e-12)


def test_the_bridge_starts_the_decoder_from_the_backward_state_at_the_first_token(rng):
    model = AttentionSeq2seq(config(cell="lstm", bidirectional=True), rng=rng)
    batch = toy_batch(rng)
    encoder_states = model.encoder.forward(batch["source"], batch["source_mask"])
    (s0, c0), = model._initial_state()
    affine = model.bridge.layers[0]
    expected = np.tanh(encoder_states[:, 0, H:] @ affine.params["W"] + affine.params["b"])
    np.testing.assert_allclose(s0, expected, rtol=1e-12)
    assert np.all(c0 == 0)


@pytest.mark.parametrize("model_class", [Seq2seq, AttentionSeq2seq])
def test_generate_shapes(rng, model_class):
    model = model_class(config(cell="gru", bidirectional=model_class is AttentionSeq2seq), rng=rng)
    batch = toy_batch(rng)
    ids, weights = model.generate(batch["source"], batch["source_mask"], start_id=1, max_length=5)
    assert ids.shape == (N, 5) and ids.dtype.kind == "i"
    if model_class is AttentionSeq2seq:
        assert weights.shape == (N, 5, T_enc)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
        assert np.all(weights[np.broadcast_to(~batch["source_mask"][:, None, :], weights.shape)] == 0)
    else:
        assert weights is None


# --- errors ---------------------------------------------------------------------------------


def test_bad_batches_name_the_argument(rng):
    model = AttentionSeq2seq(config(cell="gru"), rng=rng)
    batch = toy_batch(rng)
    cases = [
        ("source", batch["source"].astype(np.float64), "source: expected an? int array"),
        ("source", np.full((N, T_enc), V_src), r"token id 6 is outside the vocabulary \[0, 6\)"),
        ("source_mask", np.ones((N, T_enc + 1), dtype=bool),
         rf"source_mask: expected shape \({N}, {T_enc}\), got \({N}, {T_enc + 1}\)"),
        ("decoder_input", batch["decoder_input"][:1], rf"decoder_input: expected shape \(N={N}, \?\), got \(1, {T_dec}\)"),
        ("decoder_target", batch["decoder_target"][:, :2],
         rf"decoder_target: expected shape \({N}, {T_dec}\), got \({N}, 2\)"),
        ("target_mask", batch["target_mask"].astype(np.int64), "target_mask: expected a bool array"),
    ]
    for key, value, message in cases:
        with pytest.raises(ValueError, match=message):
            model.forward(**(batch | {key: value}))


@pytest.mark.parametrize("options, message", [
    (dict(cell="transformer"), r"cell: unknown recurrent cell 'transformer'; choose one of \['gru', 'lstm', 'rnn'\]"),
    (dict(score="cosine"), "score: unknown score function 'cosine'"),
    (dict(hidden_size=0), "hidden_size must be >= 1, got 0"),
    (dict(dtype="float16"), "dtype must be 'float32' or 'float64'"),
])
def test_bad_configs_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        config(**options)


def test_model_and_layer_choices_are_checked():
    with pytest.raises(ValueError, match="bidirectional=False"):
        Seq2seq(config(bidirectional=True))
    with pytest.raises(ValueError, match=r"model: unknown kind 'transformer'"):
        build_model("transformer", config())
    with pytest.raises(ValueError, match="cell: unknown recurrent cell 'cnn'"):
        make_recurrent("cnn", 3, 3)
    with pytest.raises(ValueError, match="num_layers must be >= 1, got 0"):
        make_recurrent("gru", 3, 3, num_layers=0)
    assert isinstance(build_model("seq2seq", config(bidirectional=False)), Seq2seq)


# --- end to end -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def eight_dates():
    pairs, _ = generate_dates(8, 0, seed=0)
    source_vocab, target_vocab = build_vocabularies(pairs)
    return pairs, source_vocab, target_vocab, encode_pairs(pairs, source_vocab, target_vocab)


@pytest.mark.parametrize("model_class, options, steps, threshold", [
    pytest.param(AttentionSeq2seq, dict(cell="gru", bidirectional=True), 80, 0.02, id="attention"),
    pytest.param(Seq2seq, dict(cell="lstm", bidirectional=False), 150, 0.05, id="seq2seq"),
])
def test_models_overfit_eight_dates(eight_dates, model_class, options, steps, threshold):
    pairs, source_vocab, target_vocab, batch = eight_dates
    model = model_class(Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=16, hidden_size=32,
                                      dtype="float32", **options), rng=0)
    optimizer = Adam(model, lr=0.02)
    grads = [grad for _, _, grad in model.named_parameters()]
    first = None
    for _ in range(steps):
        loss = model.forward(batch.source, batch.source_mask, batch.decoder_input, batch.decoder_target,
                             batch.target_mask)
        first = loss if first is None else first
        model.backward()
        clip_grad_norm(grads, 5.0)
        optimizer.step()
    assert first > 1.0 and loss < threshold, f"loss went from {first:.3f} to {loss:.4f} in {steps} steps"
    ids, _ = model.generate(batch.source, batch.source_mask, target_vocab.bos_id, batch.decoder_target.shape[1],
                            target_vocab.eos_id)
    assert [target_vocab.decode(row) for row in ids] == [target for _, target in pairs]
