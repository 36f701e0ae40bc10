"""Tests for attention_course/numpy_track/memory.py: end-to-end memory networks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core.configs import MemoryConfig
from attention_course.numpy_track.memory import MemN2N, position_encoding, sentence_ages
from attention_course.testing import ShapeError, check_layer_gradients


def small(**options):
    values = dict(vocab_size=9, max_sentences=4, embed_dim=3, hops=2, dtype="float64")
    return MemoryConfig(**{**values, **options})


def stories_batch(rng):
    stories = rng.integers(1, 9, (3, 4, 3))
    stories[0, 1, 2] = 0  # a two-word sentence
    stories[1, 3] = 0
    stories[2, 2:] = 0
    story_mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]], dtype=bool)
    questions = rng.integers(1, 9, (3, 3))
    questions[1, 2] = 0
    return {"stories": stories, "story_mask": story_mask, "questions": questions,
            "answers": rng.integers(0, 9, 3)}


def test_position_encoding_is_the_papers_formula():
    mask = np.array([[True, True, True, False]])
    weights = position_encoding(mask, 4)  # (1, 4, 4)
    J, d = 3, 4
    for j in range(1, J + 1):
        for k in range(1, d + 1):
            assert weights[0, j - 1, k - 1] == pytest.approx((1 - j / J) - (k / d) * (1 - 2 * j / J))
    assert (weights[0, 3] == 0).all()


def test_sentence_ages_count_back_from_the_last_sentence():
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=bool)
    np.testing.assert_array_equal(sentence_ages(mask), [[2, 1, 0, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize("position", [True, False])
@pytest.mark.parametrize("temporal", [True, False])
def test_every_gradient(rng, position, temporal):
    model = MemN2N(small(position_encoding=position, temporal_encoding=temporal), rng=0)
    check_layer_gradients(model, stories_batch(rng), wrt=[], rtol=1e-5)
    names = {name for name, _, _ in model.named_parameters()}
    assert {"embedding_0", "embedding_1", "embedding_2"} <= names
    assert ("temporal_2" in names) == temporal


def test_adjacent_tying_the_question_is_read_with_the_first_embedding_the_answer_with_the_last(rng):
    model = MemN2N(small(hops=1, temporal_encoding=False), rng=0)
    inputs = stories_batch(rng)
    inputs["story_mask"][:] = False  # no memory: the answer depends on the question alone
    probabilities = model.predict(inputs["stories"], inputs["story_mask"], inputs["questions"])
    q = inputs["questions"]
    u = (position_encoding(q != 0, 3) * model.params["embedding_0"][q]).sum(axis=1)
    logits = u @ model.params["embedding_1"].T
    np.testing.assert_allclose(probabilities, np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_hop_weights_sum_to_one_over_the_real_sentences_and_padding_changes_nothing(seed):
    rng = np.random.default_rng(seed)
    model = MemN2N(small(max_sentences=6, hops=3), rng=seed)
    inputs = stories_batch(rng)
    stories = np.concatenate([inputs["stories"], np.zeros((3, 2, 3), dtype=np.int64)], axis=1)
    mask = np.concatenate([inputs["story_mask"], np.zeros((3, 2), dtype=bool)], axis=1)
    weights = model.attend(stories, mask, inputs["questions"])  # (N, K, S)
    assert weights.shape == (3, 3, 6)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
    assert (weights.transpose(0, 2, 1)[~mask] == 0).all()
    before = model.predict(stories, mask, inputs["questions"])
    # junk words in padded sentences, and an extra padded word column, change nothing
    junk = np.where(mask[..., None], stories, rng.integers(1, 9, stories.shape))
    wider = np.concatenate([junk, np.zeros((3, 6, 1), dtype=np.int64)], axis=2)
    np.testing.assert_allclose(model.predict(wider, mask, inputs["questions"]), before, rtol=1e-12)


def test_shapes_are_checked(rng):
    model = MemN2N(small(), rng=0)
    inputs = stories_batch(rng)
    with pytest.raises(ShapeError, match=r"stories: expected shape \(N, 4, W\)"):
        model.forward(inputs["stories"][:, :3], inputs["story_mask"], inputs["questions"], inputs["answers"])
    with pytest.raises(ShapeError, match="story_mask"):
        model.forward(inputs["stories"], inputs["story_mask"][:2], inputs["questions"], inputs["answers"])


def test_initial_values_are_normal_with_sd_0_1_and_the_config_is_checked():
    model = MemN2N(MemoryConfig(50, max_sentences=10, embed_dim=20, hops=3), rng=0)
    values = np.concatenate([value.ravel() for _, value, _ in model.named_parameters()])
    assert len(model.params) == 8 and abs(values.std() - 0.1) < 0.005
    with pytest.raises(ValueError, match="hops must be >= 1"):
        MemoryConfig(50, max_sentences=10, hops=0)
