"""Tests for attention_course/numpy_track/reader.py: the attentive reader's gradients and its attention."""

import numpy as np
import pytest

from attention_course.core.configs import ReaderConfig
from attention_course.numpy_track.reader import AttentiveReader
from attention_course.testing import ShapeError, check_layer_gradients


def small(**options) -> ReaderConfig:
    return ReaderConfig(**{**dict(vocab_size=9, num_entities=4, embed_dim=3, hidden_size=2, dtype="float64"),
                           **options})


def batch(rng):
    stories = rng.integers(1, 9, (3, 6))
    story_mask = np.arange(6)[None, :] < np.array([[6], [4], [1]])
    stories[~story_mask] = 0
    questions = rng.integers(1, 9, (3, 3))
    question_mask = np.arange(3)[None, :] < np.array([[3], [2], [3]])
    questions[~question_mask] = 0
    return {"stories": stories, "story_mask": story_mask, "questions": questions, "question_mask": question_mask,
            "answers": np.array([0, 3, 1])}


@pytest.mark.parametrize("reset_after", [False, True])
def test_every_gradient(rng, reset_after):
    model = AttentiveReader(small(reset_after=reset_after), rng=0)
    check_layer_gradients(model, batch(rng), wrt=[], rtol=1e-5)
    names = {name for name, _, _ in model.named_parameters()}
    assert {"embed.W", "attention.attention_weight.score.W_a", "out.W"} <= names
    assert any(name.startswith("question_rnn.") for name in names) and any(name.startswith("story_rnn.") for name in names)


def test_the_attention_weighs_real_words_only_and_padding_changes_nothing(rng):
    model = AttentiveReader(small(), rng=0)
    data = batch(rng)
    inputs = [data[name] for name in ("stories", "story_mask", "questions", "question_mask")]
    weights = model.attend(*inputs)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert (weights[~data["story_mask"]] == 0).all()
    probabilities = model.predict(*inputs)
    wider = [np.pad(inputs[0], [(0, 0), (0, 3)]), np.pad(inputs[1], [(0, 0), (0, 3)]), *inputs[2:]]
    np.testing.assert_allclose(model.predict(*wider), probabilities, rtol=1e-12)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)


def test_the_question_decides_where_the_reader_looks(rng):
    """Two questions about the same story give two different distributions over its words."""
    model = AttentiveReader(small(), rng=0)
    for _, value, _ in model.named_parameters():  # weights large enough for the scores to differ
        value[...] = rng.uniform(-1.5, 1.5, value.shape)
    data = batch(rng)
    stories = np.repeat(data["stories"][:1], 2, axis=0)
    mask = np.repeat(data["story_mask"][:1], 2, axis=0)
    questions = np.array([[1, 2, 3], [4, 5, 6]])
    weights = model.attend(stories, mask, questions, np.ones((2, 3), dtype=bool))
    assert np.abs(weights[0] - weights[1]).max() > 0.05


def test_bad_shapes_are_named(rng):
    model = AttentiveReader(small(), rng=0)
    data = batch(rng)
    with pytest.raises(ShapeError, match="story_mask"):
        model.forward(data["stories"], data["story_mask"][:, :4], data["questions"], data["question_mask"],
                      data["answers"])
