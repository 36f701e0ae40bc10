"""Tests for attention_course/decoding.py: chunks of greedy output lined up into one result."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.data import build_vocabularies, encode_pairs
from attention_course.decoding import decode_in_chunks

PAIRS = [("ab", "ba"), ("abc", "cba"), ("a", "a"), ("cab", "bac"), ("bb", "bb")]
SOURCE_VOCAB, TARGET_VOCAB = build_vocabularies(PAIRS)
BATCH = encode_pairs(PAIRS, SOURCE_VOCAB, TARGET_VOCAB)


def scripted(part, steps):
    """Writes each example's target and stops once every example in the chunk has written <eos>."""
    rows = [TARGET_VOCAB.encode(target, add_eos=True) for target in
            (TARGET_VOCAB.decode(row) for row in part.decoder_target)]
    T = min(steps, max(len(row) for row in rows))
    ids = np.array([(row + [TARGET_VOCAB.pad_id] * T)[:T] for row in rows])
    weights = np.full((len(rows), T, part.source.shape[1]), 1.0 / part.source.shape[1])
    return ids, weights


@pytest.mark.parametrize("chunk", [1, 2, 5, 100])
def test_chunks_give_the_same_result_as_one_batch_up_to_each_end(chunk):
    # After a row's <eos> a bigger chunk may still be running (for its other rows): only what
    # comes before the end is the model's answer, and it does not depend on the chunking.
    whole = decode_in_chunks(scripted, BATCH, TARGET_VOCAB, max_length=6, chunk=100)
    parts = decode_in_chunks(scripted, BATCH, TARGET_VOCAB, max_length=6, chunk=chunk)
    assert parts.texts == whole.texts == [target for _, target in PAIRS]
    assert parts.ids.shape == (len(PAIRS), 6) and parts.attention_weights.shape == (len(PAIRS), 6, 3)
    for row, (_, target) in enumerate(PAIRS):
        end = len(target) + 1  # the target and <eos>
        np.testing.assert_array_equal(parts.ids[row, :end], whole.ids[row, :end])
        np.testing.assert_array_equal(parts.attention_weights[row, :end], whole.attention_weights[row, :end])


def test_steps_after_an_early_stop_are_padding_and_zero_weight():
    decoded = decode_in_chunks(scripted, BATCH, TARGET_VOCAB, max_length=8, chunk=1)
    third = decoded.ids[2]  # "a" then <eos>, then padding
    assert list(third[:2]) == [TARGET_VOCAB.encode("a")[0], TARGET_VOCAB.eos_id]
    assert (third[2:] == TARGET_VOCAB.pad_id).all() and (decoded.attention_weights[2, 2:] == 0).all()


def test_a_model_without_attention_gives_no_weights_and_max_length_is_checked():
    decoded = decode_in_chunks(lambda part, steps: (scripted(part, steps)[0], None), BATCH, TARGET_VOCAB, 6)
    assert decoded.attention_weights is None and len(decoded.texts) == len(PAIRS)
    with pytest.raises(ValueError, match="max_length: expected >= 1, got 0"):
        decode_in_chunks(scripted, BATCH, TARGET_VOCAB, max_length=0)
