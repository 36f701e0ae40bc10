"""Tests for attention_course/data/babi.py."""

import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data.babi import (
    BABI_KINDS,
    BABI_VOCABULARY,
    OBJECTS,
    PLACES,
    BabiBatch,
    BabiExample,
    encode_babi,
    generate_babi,
)
from attention_course.data.vocab import UnknownWordError

# A rule-based solver, written from the task's description and independent of the module.
MOVE = re.compile(r"(\w+) (?:went to|journeyed to|travelled to|moved to) the (\w+)")
TAKE = re.compile(r"(\w+) (?:picked up|got|grabbed) the (\w+)")
DROP = re.compile(r"(\w+) (?:dropped|put down|discarded) the (\w+)")


def solve(sentences, question):
    """The answer the sentences give to the question, or None if they do not say."""
    location, holder, lies_at = {}, {}, {}
    for sentence in sentences:
        if match := MOVE.fullmatch(sentence):
            location[match[1]] = match[2]
        elif match := TAKE.fullmatch(sentence):
            holder[match[2]] = match[1]
            lies_at.pop(match[2], None)
        elif match := DROP.fullmatch(sentence):
            person, thing = match[1], match[2]
            holder.pop(thing, None)
            lies_at[thing] = location.get(person)
        else:
            raise AssertionError(f"not a story sentence: {sentence!r}")
    if match := re.fullmatch(r"where is the (\w+)", question):
        thing = match[1]
        if thing in holder:
            return location.get(holder[thing])
        return lies_at.get(thing)
    person = re.fullmatch(r"where is (\w+)", question)[1]
    return location.get(person)


@pytest.fixture(scope="module")
def splits():
    return generate_babi(1500, 300, seed=0)


def test_examples_are_well_formed(splits):
    train, test = splits
    for example in train + test:
        assert isinstance(example, BabiExample)
        assert 2 <= len(example.story) <= 10
        assert example.kind in BABI_KINDS
        assert example.answer in PLACES
        assert example.supporting == sorted(set(example.supporting))
        assert all(0 <= index < len(example.story) for index in example.supporting)
        expected_facts = 1 if example.kind == "single_supporting_fact" else 2
        assert len(example.supporting) == expected_facts
        if example.kind == "two_supporting_facts":
            assert re.fullmatch(r"where is the (\w+)", example.question)[1] in OBJECTS
    kinds = Counter(example.kind for example in train)
    assert min(kinds.values()) > 600, kinds


def test_the_answer_follows_from_the_story_and_from_the_supporting_sentences(splits):
    train, test = splits
    for example in train + test:
        assert solve(example.story, example.question) == example.answer, example
        facts = [example.story[index] for index in example.supporting]
        assert solve(facts, example.question) == example.answer, example


def test_no_supporting_sentence_can_be_left_out(splits):
    train, _ = splits
    for example in train:
        for left_out in example.supporting:
            facts = [example.story[i] for i in example.supporting if i != left_out]
            assert solve(facts, example.question) is None, (example, left_out)


def test_two_fact_questions_need_a_sentence_that_does_not_name_the_object(splits):
    train, _ = splits
    for example in train:
        if example.kind == "two_supporting_facts":
            thing = example.question.split(" ")[-1]
            named = [thing in example.story[index].split(" ") for index in example.supporting]
            assert sorted(named) == [False, True], example


def test_the_splits_are_disjoint_and_unique(splits):
    train, test = splits
    keys = [(tuple(example.story), example.question) for example in train + test]
    assert len(set(keys)) == len(keys) == 1800


def test_same_seed_same_examples():
    first = generate_babi(100, 20, seed=1)
    assert first == generate_babi(100, 20, seed=np.random.default_rng(1))
    assert first != generate_babi(100, 20, seed=2)


@given(
    kind=st.sampled_from(BABI_KINDS),
    length=st.integers(2, 20),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=30, deadline=None)
def test_kinds_and_lengths_are_as_asked(kind, length, seed):
    train, test = generate_babi(
        5, 2, seed=seed, kinds=[kind], min_sentences=length, max_sentences=length
    )
    for example in train + test:
        assert example.kind == kind and len(example.story) == length
        assert solve(example.story, example.question) == example.answer


def test_story_lengths_cover_the_range():
    train, _ = generate_babi(2000, 0, seed=3, min_sentences=5, max_sentences=15)
    lengths = Counter(len(example.story) for example in train)
    assert set(lengths) == set(range(5, 16)) and min(lengths.values()) > 100


def test_encode_babi_shapes_and_contents(splits):
    train, _ = splits
    examples = train[:50]
    batch = encode_babi(examples)
    assert isinstance(batch, BabiBatch) and len(batch) == 50
    S = max(len(example.story) for example in examples)
    N, S_got, W = batch.stories.shape
    assert (N, S_got) == (50, S) and W == 5  # "sandra journeyed to the kitchen"
    assert batch.questions.shape == (50, W) and batch.answers.shape == (50,)
    assert batch.story_mask.shape == batch.supporting.shape == (50, S)
    assert batch.stories.dtype == batch.questions.dtype == batch.answers.dtype == np.int64
    vocab = BABI_VOCABULARY
    for n, example in enumerate(examples):
        for i, sentence in enumerate(example.story):
            assert vocab.decode(batch.stories[n, i]) == sentence
        assert not batch.stories[n, len(example.story) :].any()
        np.testing.assert_array_equal(batch.story_mask[n], np.arange(S) < len(example.story))
        assert np.flatnonzero(batch.supporting[n]).tolist() == example.supporting
        assert vocab.decode(batch.questions[n]) == example.question
        assert vocab.symbols[batch.answers[n]] == example.answer
    assert not (batch.supporting & ~batch.story_mask).any()


def test_encode_babi_fixed_sizes_and_errors(splits):
    train, _ = splits
    batch = encode_babi(train[:5], max_sentences=20, max_words=7)
    assert batch.stories.shape == (5, 20, 7) and batch.questions.shape == (5, 7)
    with pytest.raises(ValueError, match="max_sentences=1"):
        encode_babi(train[:5], max_sentences=1)
    with pytest.raises(ValueError, match="max_words=2"):
        encode_babi(train[:5], max_words=2)
    with pytest.raises(ValueError, match="at least one example"):
        encode_babi([])
    stranger = BabiExample(
        ["bob went to the moon"], "where is bob", "moon", [0], "single_supporting_fact"
    )
    with pytest.raises(UnknownWordError, match="'bob'"):
        encode_babi([stranger])


@pytest.mark.parametrize(
    ("arguments", "bad_argument"),
    [
        ({"n_train": -1}, "n_train and n_test must be >= 0"),
        ({"kinds": []}, "kinds is empty"),
        ({"kinds": ["three_supporting_facts"]}, "unknown kinds"),
        ({"min_sentences": 1}, "min_sentences must be >= 2"),
        ({"kinds": ["single_supporting_fact"], "min_sentences": 0}, "min_sentences must be >= 1"),
        ({"min_sentences": 5, "max_sentences": 4}, "min_sentences must be <= max_sentences"),
    ],
)
def test_bad_arguments_are_named(arguments, bad_argument):
    with pytest.raises(ValueError, match=bad_argument):
        generate_babi(**{"n_train": 5, "n_test": 5, **arguments})


def test_single_fact_stories_of_one_sentence():
    train, _ = generate_babi(
        20, 0, seed=4, kinds=["single_supporting_fact"], min_sentences=1, max_sentences=1
    )
    assert all(example.supporting == [0] and len(example.story) == 1 for example in train)
