"""Tests for attention_course/core/schedules.py: the Transformer's warm-up and 1/sqrt decay."""

import math

import pytest

from attention_course.core.schedules import warmup_inverse_sqrt


def test_rises_linearly_peaks_at_the_warmup_and_then_falls_as_one_over_sqrt():
    factors = [warmup_inverse_sqrt(step, 100) for step in range(1, 1001)]
    assert factors[0] == pytest.approx(0.01) and factors[49] == pytest.approx(0.5)
    assert max(factors) == factors[99] == 1.0
    assert factors[399] == pytest.approx(0.5) and factors[999] == pytest.approx(math.sqrt(0.1))
    assert all(a < b for a, b in zip(factors[:99], factors[1:100]))
    assert all(a > b for a, b in zip(factors[99:], factors[100:]))


def test_no_warmup_is_a_constant_rate_and_bad_steps_are_named():
    assert warmup_inverse_sqrt(7, None) == warmup_inverse_sqrt(7, 0) == 1.0
    with pytest.raises(ValueError, match="step"):
        warmup_inverse_sqrt(0, 10)


@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_both_trainers_follow_the_schedule(track):
    """After each step the optimizer's rate is TrainConfig.lr times the schedule's factor."""
    import numpy as np

    from attention_course.core.configs import TransformerConfig
    from attention_course.data import build_vocabularies, encode_pairs, generate_dates
    from attention_course.tracks import get_track
    from attention_course.training import TrainConfig

    pairs, _ = generate_dates(64, 0, seed=0)
    source_vocab, target_vocab = build_vocabularies(pairs)
    train = encode_pairs(pairs, source_vocab, target_vocab)
    chosen = get_track(track)
    config = TransformerConfig(len(source_vocab), len(target_vocab), d_model=8, num_heads=2, num_layers=1)
    model = chosen.build_model("transformer", config, seed=0)
    trainer = chosen.make_trainer(model, TrainConfig(batch_size=16, lr=0.01, max_steps=6, warmup_steps=4))
    rates = []
    for step in range(1, 7):
        trainer.train_step(train.subset(np.arange(16)) if track == "numpy" else
                           {name: value[:16] for name, value in _tensors(train).items()})
        optimizer = trainer.optimizer
        rates.append(optimizer.lr if track == "numpy" else optimizer.param_groups[0]["lr"])
    assert rates == pytest.approx([0.01 * warmup_inverse_sqrt(step, 4) for step in range(1, 7)])


def _tensors(batch):
    from attention_course.torch_track.base import batch_to_tensors

    return batch_to_tensors(batch, "cpu")
