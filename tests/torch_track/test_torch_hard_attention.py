"""Tests for attention_course/torch_track/hard_attention.py: parity with the NumPy track (REINFORCE with
every baseline, straight-through Gumbel-softmax), the estimator's term, modes, and the model with it."""

import functools

import numpy as np
import pytest
import torch

from attention_course.numpy_track import hard_attention as np_hard
from attention_course.numpy_track import seq2seq as np_seq2seq
from attention_course.torch_track import hard_attention as th_hard
from attention_course.torch_track import seq2seq as th_seq2seq

N, T_enc, T_dec, H_enc, H_dec = 3, 6, 4, 4, 3
ESTIMATORS = [("reinforce", "none"), ("reinforce", "moving_average"), ("reinforce", "learned"), ("gumbel", "none")]


def both(estimator, baseline, seed=1, **options):
    return (np_hard.HardAttention("general", H_enc, H_dec, estimator=estimator, baseline=baseline, rng=seed,
                                  **options),
            th_hard.HardAttention("general", H_enc, H_dec, estimator=estimator, baseline=baseline, rng=seed,
                                  dtype=torch.float64, **options))


@pytest.mark.parametrize("estimator, baseline", ESTIMATORS)
def test_same_seed_same_initial_weights_and_noise_seed(parity, estimator, baseline):
    numpy_layer, module = both(estimator, baseline, seed=7)
    parity.assert_same_parameters(numpy_layer, module)
    assert ("v_b" in dict(module.named_parameters())) == (baseline == "learned")
    assert module.noise_seed == numpy_layer.noise_seed, "drawn at the same point of the same generator"


@pytest.mark.parametrize("estimator, baseline", ESTIMATORS)
def test_parity_over_two_steps(parity, rng, estimator, baseline):
    """Same noise, same samples; the same gradients, the estimator's included, and the same baseline."""
    numpy_layer, module = both(estimator, baseline, temperature=0.8)
    module = parity.copied(numpy_layer, module.train(), rng)
    encoder_states, decoder_states = rng.standard_normal((N, T_enc, H_enc)), rng.standard_normal((N, T_dec, H_dec))
    mask = parity.lengths_mask([6, 3, 0], T_enc)
    for _ in range(2):
        noise = rng.random((N, T_dec, T_enc))
        context = numpy_layer.forward(encoder_states, decoder_states, mask, noise=noise)
        d_context = rng.standard_normal(context.shape)
        losses, weights = rng.random((N, T_dec)), rng.random((N, T_dec))
        d_encoder, d_decoder = numpy_layer.backward(d_context, step_losses=losses, step_weights=weights)
        module.zero_grad(set_to_none=True)
        enc_t = parity.as_torch(encoder_states, requires_grad=True)
        dec_t = parity.as_torch(decoder_states, requires_grad=True)
        context_t = module(enc_t, dec_t, parity.as_torch(mask), noise=parity.as_torch(noise))
        term = module.estimator_loss(parity.as_torch(losses), parity.as_torch(weights))
        assert float(term.detach()) == 0.0, "the estimator's term adds a gradient, not a value"
        ((context_t * torch.from_numpy(d_context)).sum() + term).backward()
        np.testing.assert_array_equal(parity.to_numpy(module.sampled_positions), numpy_layer.sampled_positions)
        parity.assert_close("context", context_t, context)
        parity.assert_close("attention_weights", module.attention_weights, numpy_layer.attention_weights)
        parity.assert_close("d_encoder_states", enc_t.grad, d_encoder)
        parity.assert_close("d_decoder_states", dec_t.grad, d_decoder)
        parity.assert_parameter_grads(numpy_layer, module)
        parity.assert_close("baseline", module.baseline_value, np.float64(numpy_layer.baseline_value))


def test_eval_mode_takes_the_likeliest_position_and_adds_no_term(rng):
    module = th_hard.HardAttention("dot", 4, 4, dtype=torch.float64).eval()
    encoder_states = torch.tensor(rng.standard_normal((N, T_enc, 4)))
    module(encoder_states, torch.tensor(rng.standard_normal((N, T_dec, 4))))
    assert torch.equal(module.sampled_positions, module.attention_weights.argmax(dim=-1))
    assert float(module.estimator_loss(torch.ones(N, T_dec), torch.ones(N, T_dec))) == 0.0
    assert module.baseline_updates == 0


def test_the_noise_is_reproducible_per_seed(rng):
    encoder_states = torch.tensor(rng.standard_normal((N, T_enc, 4)))
    decoder_states = torch.tensor(rng.standard_normal((N, T_dec, 4)))
    runs = []
    for seed in (5, 5, 6):
        module = th_hard.HardAttention("dot", 4, 4, rng=seed, dtype=torch.float64).train()
        runs.append(torch.stack([module(encoder_states, decoder_states) for _ in range(3)]))
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])


def test_reinforce_expectation_matches_the_exact_gradient():
    """An enumerable case in torch: the mean of 100,000 estimates against autograd's exact gradient
    of ``sum_j alpha_j f(h_j)``."""
    rng = np.random.default_rng(1)
    module = th_hard.HardAttention("general", 2, 2, rng=4, baseline="moving_average", dtype=torch.float64).train()
    module.baseline_value.fill_(0.7)
    module.baseline_updates = 3
    encoder_states = torch.tensor(rng.standard_normal((1, 3, 2)) * 1.5)
    decoder_states = torch.tensor(rng.standard_normal((1, 1, 2)) * 1.5)
    target = torch.tensor(rng.standard_normal(2) + 1.0)
    alpha = torch.softmax(decoder_states @ module.score.W_a @ encoder_states.transpose(1, 2), dim=-1)[0, 0]
    exact, = torch.autograd.grad((alpha * 0.5 * ((encoder_states[0] - target) ** 2).sum(-1)).sum(), module.score.W_a)
    draws = 100_000
    context = module(encoder_states.expand(draws, 3, 2), decoder_states.expand(draws, 1, 2))
    losses = 0.5 * ((context - target) ** 2).sum(-1)  # (draws, 1)
    weights = torch.full((draws, 1), 1 / draws, dtype=torch.float64)
    objective = (weights * losses).sum() + module.estimator_loss(losses, weights)
    estimate, = torch.autograd.grad(objective, module.score.W_a)
    assert exact.abs().max() > 1
    torch.testing.assert_close(estimate, exact, atol=0.03 * float(exact.abs().max()), rtol=0)


# --- the model -------------------------------------------------------------------------------


def model_config(**overrides):
    options = dict(source_vocab_size=6, target_vocab_size=7, embed_dim=3, hidden_size=2, dtype="float64",
                   attention="hard")
    return np_seq2seq.Seq2seqConfig(**(options | overrides))


@pytest.mark.parametrize("options", [dict(), dict(hard_baseline="learned", cell="lstm"),
                                     dict(hard_estimator="gumbel", score="additive")],
                         ids=["reinforce", "reinforce_learned_lstm", "gumbel_additive"])
def test_model_parity(parity, rng, options):
    """The whole model in training mode, with the noise fixed on both tracks: the loss and every
    parameter gradient, REINFORCE's included, over two steps; then greedy decoding."""
    cfg = model_config(**options)
    numpy_model, module = np_seq2seq.build_model("attention", cfg, rng=3), th_seq2seq.build_model("attention", cfg,
                                                                                                  rng=3)
    parity.assert_same_parameters(numpy_model, module)
    module = parity.copied(numpy_model, module.train(), rng)
    batch = dict(source=rng.integers(0, 6, (N, 5)), source_mask=parity.lengths_mask([5, 3, 1], 5),
                 decoder_input=rng.integers(0, 7, (N, T_dec)), decoder_target=rng.integers(0, 7, (N, T_dec)),
                 target_mask=parity.lengths_mask([4, 2, 3], T_dec))
    for _ in range(2):
        noise = rng.random((N, T_dec, 5))
        numpy_attention, torch_attention = numpy_model.decoder.attention, module.decoder.attention
        numpy_attention.forward = functools.partial(type(numpy_attention).forward, numpy_attention, noise=noise)
        torch_attention.forward = functools.partial(type(torch_attention).forward, torch_attention,
                                                    noise=parity.as_torch(noise))
        parity.model_parity(numpy_model, module, batch)
    module.eval()
    ids, weights = numpy_model.generate(batch["source"], batch["source_mask"], 1, 5)
    ids_t, weights_t = module.generate(parity.as_torch(batch["source"]), parity.as_torch(batch["source_mask"]), 1, 5)
    np.testing.assert_array_equal(parity.to_numpy(ids_t), ids)
    parity.assert_close("generated attention weights", weights_t, weights)


def test_the_estimator_term_leaves_the_reported_loss_unchanged(rng):
    cfg = model_config(dtype="float32")
    module = th_seq2seq.build_model("attention", cfg, rng=0).train()
    batch = {"source": torch.from_numpy(rng.integers(0, 6, (4, 5))), "source_mask": torch.ones(4, 5, dtype=torch.bool),
             "decoder_input": torch.from_numpy(rng.integers(0, 7, (4, 3))),
             "decoder_target": torch.from_numpy(rng.integers(0, 7, (4, 3)))}
    loss = module(**batch)
    positions = module.decoder.attention.sampled_positions
    with torch.no_grad():
        module.eval()
        module.decoder.attention.train()  # sampling again, but no estimator term: the model is in eval mode
        module.decoder.attention._generators.clear()  # the same noise: the generator starts again from its seed
        plain = module(**batch)
    assert torch.equal(module.decoder.attention.sampled_positions, positions)
    assert float(loss.detach()) == pytest.approx(float(plain), rel=1e-6)
