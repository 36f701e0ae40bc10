"""Tests for attention_course/numpy_track/local_attention.py: local-m and local-p, their window, the
Gaussian, the gradient through p_i, padding, and the attention model built with them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track.attention import make_score
from attention_course.numpy_track.layers import masked_softmax
from attention_course.numpy_track.local_attention import LocalAttention, monotonic_positions
from attention_course.numpy_track.optim import Adam, clip_grad_norm
from attention_course.numpy_track.seq2seq import AttentionSeq2seq, Seq2seqConfig
from attention_course.testing import ShapeError, check_layer_gradients

N, T_enc, T_dec, H = 3, 9, 4, 4
SCORES = ["additive", "dot", "general", "scaled_dot"]
KINDS = ["local-m", "local-p"]


def sizes_for(score):
    """(H_enc, H_dec): unequal where the score allows it."""
    return (H, H) if score in ("dot", "scaled_dot") else (H, 3)


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def layer_and_states(rng, kind, score="general", window=2, t_enc=T_enc, t_dec=T_dec, seed=1):
    H_enc, H_dec = sizes_for(score)
    layer = LocalAttention(score, H_enc, H_dec, attention_size=3, kind=kind, window=window, rng=seed)
    return layer, rng.standard_normal((N, t_enc, H_enc)), rng.standard_normal((N, t_dec, H_dec))


def reference_weights(layer, encoder_states, decoder_states, mask):
    """Luong's equations written out for one (n, i) at a time, over the whole source: the scores of
    every position, a softmax over the window's real tokens, times the Gaussian for local-p
    (local-m is the plain softmax over the window, Luong et al. section 3.2)."""
    N_, T_enc_, _ = encoder_states.shape
    lengths = mask.sum(axis=1)
    D, sigma = layer.window, layer.window / 2
    score = make_score(layer.score.name, layer.encoder_size, layer.decoder_size, attention_size=3)
    for name, value in layer.score.params.items():
        score.params[name][...] = value
    expected = np.zeros((N_, decoder_states.shape[1], T_enc_))
    for n in range(N_):
        for i in range(decoder_states.shape[1]):
            p = layer.positions[n, i]
            scores = score.forward(encoder_states[n:n + 1], decoder_states[n:n + 1, i:i + 1])[0, 0]
            j = np.arange(T_enc_)
            in_window = (np.abs(j - np.floor(p + 0.5)) <= D) & (j < lengths[n])
            aligned = masked_softmax(scores, in_window)
            gaussian = np.exp(-(j - p) ** 2 / (2 * sigma ** 2)) if layer.kind == "local-p" else 1.0
            expected[n, i] = aligned * gaussian
    return expected


# --- positions -----------------------------------------------------------------------------


def test_monotonic_positions_are_the_step_clipped_to_the_last_real_token():
    positions = monotonic_positions(np.array([6, 2, 0]), T_dec=4)
    np.testing.assert_array_equal(positions, [[0, 1, 2, 3], [0, 1, 1, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(monotonic_positions(np.array([6]), T_dec=2, first_step=4), [[4, 5]])


def test_local_p_positions_follow_the_formula_and_stay_in_the_sequence(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, "local-p")
    mask = lengths_mask([9, 5, 1], T_enc)
    layer.forward(encoder_states, decoder_states, mask)
    gate = 1 / (1 + np.exp(-np.tanh(decoder_states @ layer.params["W_p"]) @ layer.params["v_p"]))
    np.testing.assert_allclose(layer.positions, np.array([9, 5, 1])[:, None] * gate, rtol=1e-12)
    assert (layer.positions >= 0).all() and (layer.positions <= np.array([9, 5, 1])[:, None]).all()


# --- the weights ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("score", SCORES)
def test_weights_are_luongs_equations(rng, kind, score):
    layer, encoder_states, decoder_states = layer_and_states(rng, kind, score)
    mask = lengths_mask([9, 5, 2], T_enc)
    context = layer.forward(encoder_states, decoder_states, mask)
    expected = reference_weights(layer, encoder_states, decoder_states, mask)
    np.testing.assert_allclose(layer.attention_weights, expected, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(context, expected @ encoder_states, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kind", KINDS)
def test_weights_are_zero_outside_the_window_and_on_padding(rng, kind):
    layer, encoder_states, decoder_states = layer_and_states(rng, kind, window=1, t_dec=6)
    mask = lengths_mask([9, 4, 2], T_enc)
    layer.forward(encoder_states, decoder_states, mask)
    weights = layer.attention_weights  # (N, T_dec, T_enc)
    distance = np.abs(np.arange(T_enc) - np.floor(layer.positions + 0.5)[..., None])
    assert np.all(weights[distance > 1] == 0), "outside the window"
    assert np.all(weights[np.broadcast_to(~mask[:, None, :], weights.shape)] == 0), "on padding"
    assert (weights > 0).sum(axis=-1).max() <= 3 and (weights.sum(axis=-1) > 0).all()
    assert (weights.sum(axis=-1) <= 1 + 1e-12).all(), "a softmax, for local-p times a Gaussian of at most 1"


def test_local_m_window_is_clipped_at_the_sequences_ends(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, "local-m", window=2, t_dec=7)
    mask = lengths_mask([9, 4, 1], T_enc)
    layer.forward(encoder_states, decoder_states, mask)
    weights = layer.attention_weights
    # Step 0 centres on position 0: the window's left half falls before the start.
    assert np.all(weights[:, 0, 3:] == 0) and np.all(weights[:, 0, 0] > 0)
    # Past the end of a 4-token source the window stays on its last token (p_i = 3).
    np.testing.assert_array_equal(layer.positions[1], [0, 1, 2, 3, 3, 3, 3])
    assert np.all(weights[1, 4:, 4:] == 0) and np.all(weights[1, 4:, 3] > 0)
    # A one-token source: all the weight on that token, exactly the softmax's 1.
    np.testing.assert_allclose(weights[2, :, 0], 1.0)
    assert np.all(weights[2, :, 1:] == 0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_fully_padded_row_gives_zeros_without_nan(rng, kind):
    layer, encoder_states, decoder_states = layer_and_states(rng, kind)
    mask = lengths_mask([9, 0, 3], T_enc)
    context = layer.forward(encoder_states, decoder_states, mask)
    assert np.isfinite(context).all() and np.isfinite(layer.attention_weights).all()
    assert np.all(context[1] == 0) and np.all(layer.attention_weights[1] == 0)
    d_encoder, d_decoder = layer.backward(rng.standard_normal(context.shape))
    assert np.isfinite(d_encoder).all() and np.isfinite(d_decoder).all()
    assert np.all(d_encoder[1] == 0) and np.all(d_decoder[1] == 0)
    assert np.all(d_encoder[~mask] == 0), "padding gets no gradient"


@settings(max_examples=20, deadline=None)
@given(kind=st.sampled_from(KINDS), score=st.sampled_from(SCORES), window=st.integers(1, 3),
       lengths=st.lists(st.integers(1, 6), min_size=1, max_size=3), extra=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16))
def test_appended_padding_changes_nothing(kind, score, window, lengths, extra, seed):
    """Garbage in padded positions gets no weight, and each row equals that row alone, unpadded."""
    rng = np.random.default_rng(seed)
    H_enc, H_dec = sizes_for(score)
    layer = LocalAttention(score, H_enc, H_dec, attention_size=3, kind=kind, window=window, rng=seed)
    n, t = len(lengths), max(lengths)
    encoder_states = rng.standard_normal((n, t + extra, H_enc))
    decoder_states = rng.standard_normal((n, 5, H_dec))
    mask = lengths_mask(lengths, t + extra)
    encoder_states[~mask] = rng.uniform(-1e3, 1e3, ((~mask).sum(), H_enc))
    context = layer.forward(encoder_states, decoder_states, mask)
    weights = layer.attention_weights
    for row, length in enumerate(lengths):
        alone = layer.forward(encoder_states[row:row + 1, :length], decoder_states[row:row + 1])
        np.testing.assert_allclose(context[row:row + 1], alone, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weights[row:row + 1, :, :length], layer.attention_weights, rtol=1e-10,
                                   atol=1e-14)


def test_states_outside_every_window_change_nothing(rng):
    """Local, truly: far source positions are never read (their scores are never computed)."""
    layer, encoder_states, decoder_states = layer_and_states(rng, "local-m", t_enc=40, window=2)
    context = layer.forward(encoder_states, decoder_states)
    far = encoder_states.copy()
    far[:, T_dec + 2:] = np.nan  # steps 0..3 with D = 2 read positions 0..5 only
    np.testing.assert_array_equal(layer.forward(far, decoder_states), context)


def test_one_step_at_a_time_equals_all_steps_at_once(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, "local-m")
    mask = lengths_mask([9, 3, 5], T_enc)
    all_steps = layer.forward(encoder_states, decoder_states, mask)
    for i in range(T_dec):
        one = layer.forward(encoder_states, decoder_states[:, i:i + 1], mask, first_step=i)
        np.testing.assert_allclose(one[:, 0], all_steps[:, i], rtol=1e-12)


# --- gradients -----------------------------------------------------------------------------


@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("score", SCORES)
def test_gradients(rng, score, kind, masked):
    """Central differences for the encoder and decoder states and every parameter: the score's,
    and local-p's W_p and v_p, whose gradient reaches them only through p_i and the Gaussian."""
    layer, encoder_states, decoder_states = layer_and_states(rng, kind, score)
    mask = lengths_mask([9, 5, 0], T_enc) if masked else None
    check_layer_gradients(layer, {"encoder_states": encoder_states, "decoder_states": decoder_states},
                          forward_kwargs={"mask": mask})


def test_the_position_parameters_do_get_a_gradient(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, "local-p")
    context = layer.forward(encoder_states, decoder_states)
    layer.backward(rng.standard_normal(context.shape))
    assert np.abs(layer.grads["W_p"]).max() > 1e-3 and np.abs(layer.grads["v_p"]).max() > 1e-3


def test_follows_the_input_dtype(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, "local-p")
    context = layer.forward(encoder_states.astype(np.float32), decoder_states.astype(np.float32))
    assert context.dtype == np.float32 and layer.attention_weights.dtype == np.float32
    d_encoder, d_decoder = layer.backward(np.ones_like(context))
    assert d_encoder.dtype == np.float32 and d_decoder.dtype == np.float32
    np.testing.assert_allclose(context, layer.forward(encoder_states, decoder_states), atol=1e-5)


# --- errors --------------------------------------------------------------------------------


def test_bad_arguments_are_named(rng):
    with pytest.raises(ValueError, match="kind must be 'local-m' or 'local-p', got 'global'"):
        LocalAttention("general", 4, 3, kind="global")
    with pytest.raises(ValueError, match="unknown attention 'local-x'"):
        LocalAttention("general", 4, 3, kind="local-x")
    with pytest.raises(ValueError, match=r"window must be >= 1 \(the half-width D\), got 0"):
        LocalAttention("general", 4, 3, window=0)
    layer, encoder_states, decoder_states = layer_and_states(rng, "local-p")
    with pytest.raises(ShapeError, match=r"decoder_states: expected shape \(N, T_dec, H_dec\), got \(3, 3\)"):
        layer.forward(encoder_states, decoder_states[:, 0])
    with pytest.raises(ShapeError, match=r"encoder_states: expected shape \(N, T_enc, 4\), got \(3, 9, 5\)"):
        layer.forward(rng.standard_normal((N, T_enc, 5)), decoder_states)
    with pytest.raises(ShapeError, match=r"mask: expected shape \(N=3, T_enc=9\), got \(3, 4\)"):
        layer.forward(encoder_states, decoder_states, np.ones((N, 4), dtype=bool))


# --- in the model --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_the_attention_model_with_local_attention_has_exact_gradients(rng, kind):
    config = Seq2seqConfig(6, 7, embed_dim=3, hidden_size=2, dtype="float64", attention=kind, window=1)
    model = AttentionSeq2seq(config, rng=1)
    assert isinstance(model.decoder.attention, LocalAttention) and model.decoder.attention.window == 1
    for _, value, _ in model.named_parameters():
        value[...] = rng.uniform(-0.6, 0.6, value.shape)
    batch = dict(source=rng.integers(0, 6, (2, 5)), source_mask=lengths_mask([5, 3], 5),
                 decoder_input=rng.integers(0, 7, (2, 4)), decoder_target=rng.integers(0, 7, (2, 4)),
                 target_mask=lengths_mask([4, 2], 4))
    check_layer_gradients(model, batch)


@pytest.mark.parametrize("kind", KINDS)
def test_the_attention_model_learns_eight_dates_with_local_attention(kind):
    pairs, _ = generate_dates(8, 0, seed=0)
    source_vocab, target_vocab = build_vocabularies(pairs)
    batch = encode_pairs(pairs, source_vocab, target_vocab)
    model = AttentionSeq2seq(Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=16, hidden_size=32,
                                           attention=kind), rng=0)
    optimizer, grads = Adam(model, lr=0.02), [grad for _, _, grad in model.named_parameters()]
    for _ in range(100):
        loss = model.forward(batch.source, batch.source_mask, batch.decoder_input, batch.decoder_target,
                             batch.target_mask)
        model.backward()
        clip_grad_norm(grads, 5.0)
        optimizer.step()
    assert loss < 0.02
    ids, weights = model.generate(batch.source, batch.source_mask, target_vocab.bos_id,
                                  batch.decoder_target.shape[1], target_vocab.eos_id)
    assert [target_vocab.decode(row) for row in ids] == [target for _, target in pairs]
    assert weights.shape[:2] == ids.shape and (np.count_nonzero(weights, axis=-1) <= 5).all(), "2D + 1 = 5"


def test_local_m_is_the_plain_softmax_over_its_window_and_local_p_is_not(rng):
    """Luong et al. 3.2: only local-p multiplies by the Gaussian, so only local-m's weights sum to 1."""
    mask = lengths_mask([9, 5, 2], T_enc)
    sums = {}
    for kind in KINDS:
        layer, encoder_states, decoder_states = layer_and_states(rng, kind)
        layer.forward(encoder_states, decoder_states, mask)
        sums[kind] = layer.attention_weights.sum(axis=-1)
    np.testing.assert_allclose(sums["local-m"], 1.0, rtol=1e-12)
    assert (sums["local-p"] < 1 - 1e-3).any()
