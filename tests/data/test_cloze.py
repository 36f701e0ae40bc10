"""Tests for attention_course/data/cloze.py: generated stories with cloze questions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data.cloze import (CLOZE_VOCABULARY, ENTITIES, PLACEHOLDER, VERBS, encode_cloze,
                                         generate_cloze)


def events(story: str) -> list[list[str]]:
    """The story's sentences as lists of words, without their full stops."""
    return [sentence.split(" ") for sentence in story.rstrip(" .").split(" . ")]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), entities=st.integers(2, 10))
def test_every_question_restates_one_event_and_has_exactly_one_answer(seed, entities):
    for example in generate_cloze(20, seed=seed, n_entities=entities):
        sentences = events(example.story)
        words = example.story.split(" ")
        question = example.question.split(" ")
        role = question.index(PLACEHOLDER)
        supporting = sentences[example.supporting]
        assert supporting[1] == question[1] and supporting[2 - role] == question[2 - role]
        assert supporting[role] == example.answer == words[example.answer_position]
        # every event with the question's verb and its other entity names the answer
        fits = [sentence[role] for sentence in sentences
                if sentence[1] == question[1] and sentence[2 - role] == question[2 - role]]
        assert fits == [example.answer]
        assert len({word for word in words if word in ENTITIES}) <= entities


def test_the_same_seed_gives_the_same_stories_and_no_example_twice():
    first, again = generate_cloze(300, seed=4), generate_cloze(300, seed=4)
    assert [(e.story, e.question) for e in first] == [(e.story, e.question) for e in again]
    assert len({(e.story, e.question) for e in first}) == 300
    assert [e.story for e in generate_cloze(5, seed=5)] != [e.story for e in first[:5]]


def test_the_markers_are_renumbered_for_every_story_so_a_number_says_nothing():
    answers = [example.answer for example in generate_cloze(2000, seed=0)]
    counts = np.array([answers.count(name) for name in ENTITIES])
    assert counts.min() > 0.6 * counts.mean()  # every marker answers about as often


def test_encoding_marks_the_answer_and_its_mentions():
    examples = generate_cloze(50, seed=1)
    batch = encode_cloze(examples)
    N, T = batch.stories.shape
    assert len(batch) == N == 50 and batch.questions.shape == (N, 3)
    rows = np.arange(N)
    answer_ids = [CLOZE_VOCABULARY.encode(example.answer)[0] for example in examples]
    np.testing.assert_array_equal(batch.stories[rows, batch.answer_position], answer_ids)
    assert batch.answer_mentions[rows, batch.answer_position].all()
    assert (batch.answer_mentions.sum(axis=1) >= 1).all() and not batch.answer_mentions[~batch.story_mask].any()
    assert [ENTITIES[index] for index in batch.answers] == [example.answer for example in examples]
    assert batch.supporting_sentence[rows, batch.answer_position].all()
    lengths = [len(events(example.story)[example.supporting]) + 1 for example in examples]
    np.testing.assert_array_equal(batch.supporting_sentence.sum(axis=1), lengths)
    assert set(VERBS) <= set(CLOZE_VOCABULARY.tokens)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="n_entities"):
        generate_cloze(3, n_entities=1)
    with pytest.raises(ValueError, match="min_sentences"):
        generate_cloze(3, min_sentences=5, max_sentences=4)
    with pytest.raises(ValueError, match="story_length"):
        encode_cloze(generate_cloze(3, seed=0), story_length=4)
