"""Tests for attention_course/core/configs.py: the model config checks its fields and derives the widths."""

from __future__ import annotations

import pytest

from attention_course.core.configs import Seq2seqConfig


def test_widths_follow_the_encoder():
    assert Seq2seqConfig(5, 6, hidden_size=8).encoder_output_size == 16
    unidirectional = Seq2seqConfig(5, 6, hidden_size=8, bidirectional=False)
    assert unidirectional.encoder_output_size == unidirectional.decoder_hidden_size == 8


@pytest.mark.parametrize("field, value, message", [
    ("cell", "elman", "unknown recurrent cell 'elman'"),
    ("score", "cosine", "unknown score function 'cosine'"),
    ("hidden_size", 0, "hidden_size must be >= 1, got 0"),
    ("attention_size", 0, "attention_size must be >= 1 or None, got 0"),
    ("dtype", "float16", "dtype must be 'float32' or 'float64'"),
])
def test_bad_fields_are_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        Seq2seqConfig(5, 6, **{field: value})


def test_to_dict_round_trips():
    config = Seq2seqConfig(5, 6, cell="lstm", score="additive", attention_size=3)
    assert Seq2seqConfig(**config.to_dict()) == config
