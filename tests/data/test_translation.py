"""Tests for attention_course/data/translation.py."""

import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data.translation import (
    ADJECTIVES,
    INTRANSITIVE_VERBS,
    LEXICON,
    MAX_SENTENCE_LENGTH,
    MIN_SENTENCE_LENGTH,
    NOUNS,
    SOURCE_VOCABULARY,
    TARGET_VOCABULARY,
    TRANSITIVE_VERBS,
    alignment_matrix,
    count_crossings,
    generate_translation,
    translate,
    word_alignment,
)
from attention_course.data.vocab import build_vocabularies, encode_pairs

TARGET_VERBS = {LEXICON[verb] for verb in (*TRANSITIVE_VERBS, *INTRANSITIVE_VERBS)}
TARGET_ADJECTIVES = {LEXICON[adjective] for adjective in ADJECTIVES}
TARGET_NOUNS = {LEXICON[noun] for noun in NOUNS}


@pytest.fixture(scope="module")
def splits():
    return generate_translation(3000, 500, seed=0)


def test_lexicon_is_one_to_one_and_the_languages_share_no_word():
    assert len(set(LEXICON.values())) == len(LEXICON)
    assert not set(LEXICON) & set(LEXICON.values())
    assert SOURCE_VOCABULARY.tokens == sorted(LEXICON)
    assert TARGET_VOCABULARY.tokens == sorted(LEXICON.values())


def test_word_orders_differ_as_described():
    # Adjectives follow the noun in mirror order, the verb ends its clause, the
    # preposition follows its noun phrase, and relative clauses are verb-final too.
    assert translate("the big red dog chased a cat") == "lo hundo ruza granda un miko chasu"
    assert translate("a fox near the river slept") == "un vulpo lo rivo nari dormu"
    assert translate("the king that saw a wolf laughed and the queen ran") == (
        "lo rego ke un lupo vidu ridu et lo regina kuru"
    )
    assert word_alignment("the dog chased a cat") == [(0, 0), (1, 1), (3, 2), (4, 3), (2, 4)]


def test_every_pair_is_a_translation_with_a_word_alignment(splits):
    train, test = splits
    for source, target in train + test:
        assert translate(source) == target
        source_words, target_words = source.split(" "), target.split(" ")
        alignment = word_alignment(source, target)
        assert len(alignment) == len(source_words) == len(target_words)
        # A permutation: every word on each side is aligned exactly once...
        assert sorted(i for i, _ in alignment) == list(range(len(source_words)))
        assert sorted(j for _, j in alignment) == list(range(len(target_words)))
        # ...to its translation.
        for i, j in alignment:
            assert target_words[j] == LEXICON[source_words[i]], (source, target, i, j)


def test_target_grammar_verb_final_and_adjectives_after_nouns(splits):
    train, _ = splits
    for _, target in train:
        for clause in target.split(" et "):
            words = clause.split(" ")
            assert words[-1] in TARGET_VERBS, f"clause not verb-final: {clause!r}"
        words = target.split(" ")
        for before, word in zip(words, words[1:]):
            if word in TARGET_ADJECTIVES:
                assert before in TARGET_NOUNS | TARGET_ADJECTIVES, target


def test_most_alignments_cross_and_the_diagonal_does_not(splits):
    train, _ = splits
    crossings = [count_crossings(word_alignment(source)) for source, _ in train]
    assert np.mean(np.array(crossings) > 0) > 0.8
    assert max(crossings) > 50, "long sentences should reorder a lot"
    assert count_crossings(word_alignment("the dog slept")) == 0


@given(st.integers(0, 30))
def test_count_crossings_of_the_identity_and_the_reversal(n):
    assert count_crossings([(i, i) for i in range(n)]) == 0
    assert count_crossings([(i, n - 1 - i) for i in range(n)]) == n * (n - 1) // 2


def test_alignment_matrix_is_laid_out_like_attention_weights():
    source = "the red dog slept"
    matrix = alignment_matrix(source, translate(source))
    assert matrix.shape == (4, 4)  # (T_dec, T_enc)
    np.testing.assert_array_equal(matrix.sum(axis=0), 1)
    np.testing.assert_array_equal(matrix.sum(axis=1), 1)
    # Target word 1 ("hundo") translates source word 2 ("dog").
    assert matrix[1, 2] == 1 and matrix[2, 1] == 1


def test_sources_are_unique_and_the_splits_disjoint(splits):
    train, test = splits
    assert len(train) == 3000 and len(test) == 500
    train_sources = {source for source, _ in train}
    test_sources = {source for source, _ in test}
    assert len(train_sources) == 3000 and len(test_sources) == 500
    assert not train_sources & test_sources


def test_lengths_cover_the_range_evenly():
    train, test = generate_translation(8000, 0, seed=1, min_length=3, max_length=40)
    lengths = Counter(len(source.split(" ")) for source, _ in train + test)
    assert set(lengths) == set(range(3, 41))
    # Uniform draws: 8000 / 38 = 210 a length; length 3 has only 288 distinct sentences.
    assert min(count for length, count in lengths.items() if length > 3) > 150, lengths
    assert sum(count for length, count in lengths.items() if length >= 30) > 2000


@given(st.integers(MIN_SENTENCE_LENGTH, MAX_SENTENCE_LENGTH), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_every_length_can_be_asked_for(length, seed):
    pairs, _ = generate_translation(3, 0, seed=seed, min_length=length, max_length=length)
    for source, target in pairs:
        assert len(source.split(" ")) == len(target.split(" ")) == length
        assert translate(source) == target


def test_same_seed_same_pairs():
    first = generate_translation(200, 50, seed=3)
    assert first == generate_translation(200, 50, seed=3)
    assert first == generate_translation(200, 50, seed=np.random.default_rng(3))
    assert first != generate_translation(200, 50, seed=4)
    assert generate_translation(0, 0) == ([], [])


def test_pairs_encode_with_word_vocabularies(splits):
    train, test = splits
    source_vocab, target_vocab = build_vocabularies(train, level="word")
    batch = encode_pairs(test[:20], SOURCE_VOCABULARY, TARGET_VOCABULARY)
    assert batch.source.shape[1] == max(len(source.split(" ")) for source, _ in test[:20])
    assert SOURCE_VOCABULARY.decode(batch.source[0]) == test[0][0]
    assert TARGET_VOCABULARY.decode(batch.decoder_target[0]) == test[0][1]
    assert set(source_vocab.tokens) <= set(SOURCE_VOCABULARY.tokens)
    assert set(target_vocab.tokens) <= set(TARGET_VOCABULARY.tokens)


def test_twenty_thousand_pairs_take_well_under_two_seconds():
    start = time.perf_counter()
    train, test = generate_translation(18_000, 2_000, seed=0)
    elapsed = time.perf_counter() - start
    assert len(train) + len(test) == 20_000
    assert elapsed < 2.0, f"generating 20,000 pairs took {elapsed:.2f} s"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("dog the slept", "expected a determiner at word 0, got 'dog'"),
        ("the dog", "expected a verb at word 2, got the end of the sentence"),
        ("the red slept", "expected an adjective or a noun at word 2, got 'slept'"),
        ("the dog slept the cat", "expected 'and' or the end of the sentence at word 3"),
        ("", "expected a determiner at word 0"),
    ],
)
def test_sentences_outside_the_grammar_are_refused_with_the_word(source, message):
    with pytest.raises(ValueError, match=message):
        translate(source)


def test_word_alignment_checks_the_target():
    with pytest.raises(ValueError, match="target: expected the translation"):
        word_alignment("the dog slept", "lo hundo kuru")


@pytest.mark.parametrize(
    ("arguments", "bad_argument"),
    [
        ({"n_train": -1}, "n_train and n_test must be >= 0"),
        ({"n_test": -2}, "n_train and n_test must be >= 0"),
        ({"min_length": 2}, "min_length must be >= 3"),
        ({"max_length": MAX_SENTENCE_LENGTH + 1}, f"max_length must be <= {MAX_SENTENCE_LENGTH}"),
        ({"min_length": 10, "max_length": 9}, "min_length must be <= max_length"),
    ],
)
def test_bad_arguments_are_named(arguments, bad_argument):
    call = {"n_train": 5, "n_test": 5, **arguments}
    with pytest.raises(ValueError, match=bad_argument):
        generate_translation(**call)


def test_asking_for_more_sentences_than_exist_is_refused():
    # 2 determiners x 18 animate nouns x 8 verbs = 288 sentences of three words.
    train, test = generate_translation(200, 88, seed=0, min_length=3, max_length=3)
    assert len({source for source, _ in train + test}) == 288
    with pytest.raises(ValueError, match="unique pairs"):
        generate_translation(200, 89, seed=0, min_length=3, max_length=3)
