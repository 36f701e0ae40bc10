"""Tests for attention_course/numpy_track/hard_attention.py: sampling, the REINFORCE estimator (unbiased,
with and without a baseline), the straight-through Gumbel-softmax, padding, and the model with it."""

import numpy as np
import pytest

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track.attention import TimeAttention
from attention_course.numpy_track.hard_attention import HardAttention, gumbel_noise, step_losses
from attention_course.numpy_track.layers import SoftmaxCrossEntropy, masked_softmax
from attention_course.numpy_track.optim import Adam, clip_grad_norm
from attention_course.numpy_track.seq2seq import AttentionSeq2seq, Seq2seqConfig
from attention_course.testing import ShapeError, check_layer_gradients
from attention_course.testing.gradcheck import assert_grads_close, numerical_vjp

N, T_enc, T_dec, H_enc, H_dec = 3, 5, 4, 4, 3


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def layer_and_states(rng, **options):
    layer = HardAttention("general", H_enc, H_dec, rng=1, **options)
    return layer, rng.standard_normal((N, T_enc, H_enc)), rng.standard_normal((N, T_dec, H_dec))


# --- sampling ------------------------------------------------------------------------------


def test_the_context_is_the_encoder_state_at_the_sampled_position(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng)
    mask = lengths_mask([5, 2, 4], T_enc)
    noise = rng.random((N, T_dec, T_enc))
    context = layer.forward(encoder_states, decoder_states, mask, noise=noise)
    scores = decoder_states @ layer.score.params["W_a"] @ encoder_states.transpose(0, 2, 1)
    expected = np.where(mask[:, None, :], scores + gumbel_noise(noise), -np.inf).argmax(axis=-1)
    np.testing.assert_array_equal(layer.sampled_positions, expected)
    for n in range(N):
        for i in range(T_dec):
            np.testing.assert_array_equal(context[n, i], encoder_states[n, expected[n, i]])
    np.testing.assert_allclose(layer.attention_weights, masked_softmax(scores, mask[:, None, :]), rtol=1e-12)
    assert (layer.sampled_positions[1] < 2).all(), "padding is never sampled"


def test_samples_follow_the_weights(rng):
    """Gumbel-max: the frequencies of 60,000 draws match alpha to within 4 standard errors."""
    layer = HardAttention("dot", 2, 2, rng=0)
    encoder_states = rng.standard_normal((1, 4, 2))
    decoder_states = rng.standard_normal((1, 1, 2)) * 2
    draws = 60_000
    layer.forward(np.repeat(encoder_states, draws, 0), np.repeat(decoder_states, draws, 0))
    alpha = layer.attention_weights[0, 0]
    frequency = np.bincount(layer.sampled_positions[:, 0], minlength=4) / draws
    assert np.all(np.abs(frequency - alpha) <= 4 * np.sqrt(alpha * (1 - alpha) / draws) + 1e-9)


def test_evaluation_takes_the_likeliest_position(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng)
    context = layer.forward(encoder_states, decoder_states, sample=False)
    np.testing.assert_array_equal(layer.sampled_positions, layer.attention_weights.argmax(axis=-1))
    np.testing.assert_array_equal(context, layer.forward(encoder_states, decoder_states, sample=False))


def test_a_fully_padded_row_gives_zeros_without_nan(rng):
    for estimator in ("reinforce", "gumbel"):
        layer, encoder_states, decoder_states = layer_and_states(rng, estimator=estimator)
        mask = lengths_mask([5, 0, 2], T_enc)
        context = layer.forward(encoder_states, decoder_states, mask)
        assert np.isfinite(context).all() and np.all(context[1] == 0)
        assert np.all(layer.attention_weights[1] == 0) and np.all(layer.sampled_positions[1] == -1)
        d_encoder, d_decoder = layer.backward(rng.standard_normal(context.shape),
                                              step_losses=rng.random((N, T_dec)))
        assert np.isfinite(d_encoder).all() and np.isfinite(d_decoder).all()
        assert np.all(d_encoder[1] == 0) and np.all(d_decoder[1] == 0)
        assert np.all(d_encoder[~mask] == 0), "padding gets no gradient"


# --- gradients -----------------------------------------------------------------------------


def test_the_pathwise_gradient_matches_central_differences(rng):
    """With the noise fixed, a small change of the states moves no sample: the context is
    differentiable, and without losses ``backward`` is exactly its gradient."""
    layer, encoder_states, decoder_states = layer_and_states(rng)
    check_layer_gradients(layer, {"encoder_states": encoder_states, "decoder_states": decoder_states},
                          forward_kwargs={"mask": lengths_mask([5, 3, 1], T_enc),
                                          "noise": rng.random((N, T_dec, T_enc))})


def test_straight_through_gumbel_is_the_relaxed_gradient_for_the_scores(rng):
    """Straight through: what reaches the score (W_a, the decoder states) is the gradient of the
    relaxed context ``softmax((e + g) / tau) @ h``; the encoder states also get the chosen one's."""
    tau = 0.7
    layer, encoder_states, decoder_states = layer_and_states(rng, estimator="gumbel", temperature=tau)
    mask = lengths_mask([5, 3, 2], T_enc)
    noise = rng.random((N, T_dec, T_enc))
    context = layer.forward(encoder_states, decoder_states, mask, noise=noise)
    d_context = rng.standard_normal(context.shape)
    d_encoder, d_decoder = layer.backward(d_context)
    W_a = layer.score.params["W_a"]

    def relaxed_context():
        scores = decoder_states @ W_a @ encoder_states.transpose(0, 2, 1)
        return masked_softmax((scores + gumbel_noise(noise)) / tau, mask[:, None, :]) @ encoder_states

    assert_grads_close("W_a", layer.score.grads["W_a"], numerical_vjp(relaxed_context, W_a, d_context))
    assert_grads_close("decoder_states", d_decoder, numerical_vjp(relaxed_context, decoder_states, d_context))
    choice = layer.sampled_positions[..., None] == np.arange(T_enc)
    relaxed_keys = numerical_vjp(relaxed_context, encoder_states, d_context) \
        - masked_softmax((decoder_states @ W_a @ encoder_states.transpose(0, 2, 1) + gumbel_noise(noise)) / tau,
                         mask[:, None, :]).transpose(0, 2, 1) @ d_context
    assert_grads_close("encoder_states", d_encoder, relaxed_keys + choice.transpose(0, 2, 1) @ d_context)


def test_the_reinforce_term_is_advantage_times_the_score_of_the_sample(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, baseline="none")
    noise = rng.random((N, T_dec, T_enc))
    context = layer.forward(encoder_states, decoder_states, noise=noise)
    losses, weights = rng.random((N, T_dec)), rng.random((N, T_dec))
    layer.backward(np.zeros_like(context), step_losses=losses, step_weights=weights)
    # sum_{n,i} w l grad_W log alpha_{z}, by central differences of the log-probability of the samples
    W_a = layer.score.params["W_a"]
    chosen = layer.sampled_positions

    def log_probability():
        scores = decoder_states @ W_a @ encoder_states.transpose(0, 2, 1)
        log_alpha = scores - np.log(np.exp(scores).sum(axis=-1, keepdims=True))
        return np.take_along_axis(log_alpha, chosen[..., None], axis=-1)[..., 0]

    assert_grads_close("W_a", layer.score.grads["W_a"], numerical_vjp(log_probability, W_a, weights * losses))


def exact_and_estimated(layer, baseline_value=None, draws=150_000, seed=1):
    """A small enumerable case: one example, three source positions, loss ``|c - t|^2 / 2``.

    Returns the exact gradient of the expected loss ``sum_j alpha_j f(h_j)`` (central differences)
    for W_a and the encoder states, and the mean of ``draws`` estimates (one batch of ``draws``
    copies, each with its own sample; the parameter gradients sum over the batch).
    """
    rng = np.random.default_rng(seed)
    encoder_states, decoder_states = rng.standard_normal((1, 3, 2)) * 1.5, rng.standard_normal((1, 1, 2)) * 1.5
    target = rng.standard_normal(2) + 1.0
    W_a = layer.score.params["W_a"]

    def expected_loss():
        scores = decoder_states @ W_a @ encoder_states.transpose(0, 2, 1)
        alpha = masked_softmax(scores, None)[0, 0]
        return np.sum(alpha * 0.5 * ((encoder_states[0] - target) ** 2).sum(axis=-1))

    exact = {"W_a": numerical_vjp(expected_loss, W_a, 1.0),
             "encoder_states": numerical_vjp(expected_loss, encoder_states, 1.0)}
    if baseline_value is not None:
        layer.baseline_value, layer.baseline_updates = baseline_value, 10
    context = layer.forward(np.repeat(encoder_states, draws, 0), np.repeat(decoder_states, draws, 0))
    losses = 0.5 * ((context - target) ** 2).sum(axis=-1)  # (draws, 1)
    d_encoder, _ = layer.backward((context - target) / draws, step_losses=losses,
                                  step_weights=np.full((draws, 1), 1 / draws))
    estimated = {"W_a": layer.score.grads["W_a"].copy(), "encoder_states": d_encoder.sum(axis=0, keepdims=True)}
    return exact, estimated


@pytest.mark.parametrize("baseline, value", [("none", None), ("moving_average", 1.3), ("moving_average", -2.0)])
def test_reinforce_is_unbiased_with_or_without_a_baseline(baseline, value):
    layer = HardAttention("general", 2, 2, rng=4, baseline=baseline)
    exact, estimated = exact_and_estimated(layer, value)
    assert np.abs(exact["W_a"]).max() > 1, "the case must have a gradient worth estimating"
    for name in exact:  # 150,000 draws: the Monte Carlo error is well under 2% of the gradient
        np.testing.assert_allclose(estimated[name], exact[name], atol=0.02 * np.abs(exact[name]).max(),
                                   err_msg=name)


def test_without_the_score_term_the_estimate_is_biased():
    """The pathwise part alone misses the gradient that moves the weights: the test above can fail."""
    layer = HardAttention("general", 2, 2, rng=4, baseline="none")
    exact, _ = exact_and_estimated(layer)
    rng = np.random.default_rng(1)
    encoder_states, decoder_states = rng.standard_normal((1, 3, 2)) * 1.5, rng.standard_normal((1, 1, 2)) * 1.5
    target = rng.standard_normal(2) + 1.0
    context = layer.forward(np.repeat(encoder_states, 1000, 0), np.repeat(decoder_states, 1000, 0))
    layer.backward((context - target) / 1000)
    assert np.abs(layer.score.grads["W_a"]).max() == 0
    assert np.abs(exact["W_a"]).max() > 1


def test_a_baseline_near_the_expected_loss_reduces_the_variance(rng):
    """The same samples, scored with and without a baseline: the estimates' spread falls."""
    encoder_states, decoder_states = rng.standard_normal((1, 4, 3)), rng.standard_normal((1, 1, 3))
    target = rng.standard_normal(3)
    spreads = {}
    for baseline in ("none", "moving_average"):
        layer = HardAttention("general", 3, 3, rng=2, baseline=baseline)
        estimates = []
        for draw in range(200):
            noise = np.random.default_rng(draw).random((1, 1, 4))
            context = layer.forward(encoder_states, decoder_states, noise=noise)
            loss = 0.5 * ((context - target) ** 2).sum(axis=-1) + 20.0  # a loss far from zero
            layer.backward(context - target, step_losses=loss)
            estimates.append(layer.score.grads["W_a"].copy())
        spreads[baseline] = np.var(np.stack(estimates), axis=0).sum()
    assert spreads["moving_average"] < spreads["none"] / 10, spreads


def test_the_moving_average_starts_at_the_first_batch_then_decays(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, baseline_decay=0.5)
    weights = np.full((N, T_dec), 1 / (N * T_dec))
    for losses, expected in ((np.full((N, T_dec), 2.0), 2.0), (np.full((N, T_dec), 4.0), 3.0)):
        context = layer.forward(encoder_states, decoder_states)
        layer.backward(np.zeros_like(context), step_losses=losses, step_weights=weights)
        assert layer.baseline_value == pytest.approx(expected)


def test_the_learned_baseline_regresses_on_the_losses(rng):
    layer, encoder_states, decoder_states = layer_and_states(rng, baseline="learned")
    layer.params["v_b"][...] = rng.standard_normal(H_dec)
    layer.params["b_b"][...] = 0.3
    context = layer.forward(encoder_states, decoder_states)
    losses, weights = rng.random((N, T_dec)), rng.random((N, T_dec))
    layer.backward(np.zeros_like(context), step_losses=losses, step_weights=weights)

    def regression():
        baseline = decoder_states @ layer.params["v_b"] + layer.params["b_b"]
        return 0.5 * np.sum(weights * (baseline - losses) ** 2)

    for name in ("v_b", "b_b"):
        assert_grads_close(name, layer.grads[name], numerical_vjp(regression, layer.params[name], 1.0))


def test_step_losses_add_up_to_the_mean_cross_entropy(rng):
    logits, targets = rng.standard_normal((2, 4, 6)), rng.integers(0, 6, (2, 4))
    mask = lengths_mask([4, 2], 4)
    losses, weights = step_losses(logits, targets, mask)
    assert (weights * losses).sum() == pytest.approx(SoftmaxCrossEntropy().forward(logits, targets, mask), rel=1e-12)
    assert np.all(weights[~mask] == 0)


def test_bad_arguments_are_named(rng):
    with pytest.raises(ValueError, match=r"estimator must be one of \['reinforce', 'gumbel'\], got 'exact'"):
        HardAttention("dot", 2, 2, estimator="exact")
    with pytest.raises(ValueError, match="baseline must be one of"):
        HardAttention("dot", 2, 2, baseline="mean")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        HardAttention("dot", 2, 2, temperature=0)
    layer, encoder_states, decoder_states = layer_and_states(rng)
    with pytest.raises(ShapeError, match=r"noise: expected shape \(3, 4, 5\), got \(3, 4, 4\)"):
        layer.forward(encoder_states, decoder_states, noise=rng.random((N, T_dec, 4)))
    context = layer.forward(encoder_states, decoder_states)
    with pytest.raises(ShapeError, match=r"step_losses: expected shape \(3, 4\)"):
        layer.backward(context, step_losses=np.zeros((N, 3)))


# --- in the model --------------------------------------------------------------------------


def test_global_attention_is_unchanged_by_the_new_options():
    config = Seq2seqConfig(6, 7, embed_dim=3, hidden_size=2)
    assert config.attention == "global" and config.decoder == "luong"
    assert isinstance(AttentionSeq2seq(config, rng=0).decoder.attention, TimeAttention)


@pytest.mark.parametrize("options", [dict(hard_baseline="moving_average"), dict(hard_baseline="learned"),
                                     dict(hard_estimator="gumbel")], ids=["reinforce", "learned", "gumbel"])
def test_the_attention_model_learns_eight_dates_with_hard_attention(options):
    pairs, _ = generate_dates(8, 0, seed=0)
    source_vocab, target_vocab = build_vocabularies(pairs)
    batch = encode_pairs(pairs, source_vocab, target_vocab)
    model = AttentionSeq2seq(Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=16, hidden_size=32,
                                           attention="hard", **options), rng=0)
    attention = model.decoder.attention

    def mean_entropy():
        model.forward(batch.source, batch.source_mask, batch.decoder_input, batch.decoder_target, batch.target_mask)
        alpha = attention.attention_weights
        return -np.sum(alpha * np.log(np.where(alpha > 0, alpha, 1)), axis=-1).mean()

    before = mean_entropy()
    optimizer, grads = Adam(model, lr=0.02), [grad for _, _, grad in model.named_parameters()]
    for _ in range(120):
        loss = model.forward(batch.source, batch.source_mask, batch.decoder_input, batch.decoder_target,
                             batch.target_mask)
        model.backward()
        clip_grad_norm(grads, 5.0)
        optimizer.step()
    assert loss < 0.05
    assert mean_entropy() < 0.7 * before, "the estimator trains the scores: the weights grow sharper"
    ids, _ = model.generate(batch.source, batch.source_mask, target_vocab.bos_id, batch.decoder_target.shape[1],
                            target_vocab.eos_id)
    assert [target_vocab.decode(row) for row in ids] == [target for _, target in pairs]
