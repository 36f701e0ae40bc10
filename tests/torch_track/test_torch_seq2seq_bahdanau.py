"""Tests for ``BahdanauDecoder`` in attention_course/torch_track/seq2seq.py: the same initial weights as
the NumPy track for a seed, parity of the loss, every gradient and greedy decoding, and training."""

import numpy as np
import pytest
import torch

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track import seq2seq as np_seq2seq
from attention_course.torch_track import seq2seq as th_seq2seq
from attention_course.torch_track.decoding import greedy_translate
from attention_course.torch_track.trainer import Trainer
from attention_course.training import TrainConfig, exact_match

N, T_enc, T_dec = 3, 5, 4


def config(**overrides):
    options = dict(source_vocab_size=6, target_vocab_size=7, embed_dim=3, hidden_size=2, dtype="float64",
                   decoder="bahdanau")
    return np_seq2seq.Seq2seqConfig(**(options | overrides))


CONFIGS = {
    "gru_lecture_general": config(),
    "gru_torch_form_additive": config(reset_after=True, score="additive", attention_size=3),
    "lstm_unidirectional_dot": config(cell="lstm", bidirectional=False, score="dot"),
    "rnn_scaled_dot": config(cell="rnn", score="scaled_dot"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_same_seed_same_initial_weights(parity, name):
    numpy_model = np_seq2seq.build_model("attention", CONFIGS[name], rng=3)
    module = th_seq2seq.build_model("attention", CONFIGS[name], rng=3)
    assert isinstance(module.decoder, th_seq2seq.BahdanauDecoder)
    parity.assert_same_parameters(numpy_model, module)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_model_parity(parity, rng, name, fused):
    cfg = CONFIGS[name]
    numpy_model = np_seq2seq.build_model("attention", cfg, rng=3)
    module = parity.copied(numpy_model, th_seq2seq.build_model("attention", cfg, rng=3, fused=fused), rng)
    batch = dict(source=rng.integers(0, 6, (N, T_enc)), source_mask=parity.lengths_mask([5, 2, 0], T_enc),
                 decoder_input=rng.integers(0, 7, (N, T_dec)), decoder_target=rng.integers(0, 7, (N, T_dec)),
                 target_mask=parity.lengths_mask([4, 2, 3], T_dec))
    parity.model_parity(numpy_model, module, batch)
    parity.assert_close("attention_weights", module.attention_weights, numpy_model.attention_weights)
    ids, weights = numpy_model.generate(batch["source"], batch["source_mask"], 1, 6, 2)
    ids_t, weights_t = module.generate(parity.as_torch(batch["source"]), parity.as_torch(batch["source_mask"]), 1, 6, 2)
    np.testing.assert_array_equal(parity.to_numpy(ids_t), ids)
    parity.assert_close("generated attention weights", weights_t, weights)


def test_the_bahdanau_model_trains_on_dates():
    pairs, test_pairs = generate_dates(3000, 200, seed=0)
    source_vocab, target_vocab = build_vocabularies(pairs + test_pairs)
    train, test = encode_pairs(pairs, source_vocab, target_vocab), encode_pairs(test_pairs, source_vocab, target_vocab)
    torch.manual_seed(0)
    model = th_seq2seq.AttentionSeq2seq(np_seq2seq.Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=16,
                                                                 hidden_size=24, reset_after=True,
                                                                 decoder="bahdanau"), rng=0)

    def accuracy():
        return exact_match(greedy_translate(model, test, target_vocab)[0], [target for _, target in test_pairs])

    result = Trainer(model, TrainConfig(batch_size=64, lr=0.02, max_steps=100, eval_every=50, seed=0)).fit(
        train, accuracy, progress=False)
    assert result.losses[-1] < result.losses[0] / 5
    assert result.test_exact_match > 0.4, result.evaluations  # 0.70 at step 100, seed 0
