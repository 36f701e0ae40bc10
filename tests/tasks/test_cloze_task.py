"""Tests for attention_course/tasks/cloze.py: the attentive reader answers, and where its attention lands."""

import numpy as np
import pytest

from attention_course.tasks import cloze

QUICK = dict(n_train=3000, n_validation=200, n_test=400, epochs=10)


@pytest.fixture(scope="module")
def numpy_run():
    return cloze.train(track="numpy", seed=0, **QUICK)


def test_the_reader_answers_and_looks_into_the_supporting_sentence(numpy_run):
    summary = numpy_run.summary
    assert summary["test_accuracy"] >= 0.8  # five or so entities a story: chance is about 0.2
    # nothing in the loss says where to look, yet the weight lands in the sentence the question restates
    assert summary["supporting_sentence_weight"] >= 0.7
    assert summary["near_mention_hit_rate"] >= 0.6
    assert summary["mention_weight"] > 5 * summary["uniform_mention_weight"]
    assert set(summary["mention_hit_rate_by_blank"]) == {"subject", "object"}


def test_measure_finds_the_largest_weight_by_hand(numpy_run):
    examples, batch = numpy_run.test
    measured = numpy_run.extra["measured"]
    weights = measured["weights"]
    assert weights.shape == batch.stories.shape
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)
    looked_at = weights.argmax(axis=1)
    subject = np.array([example.question.startswith("@placeholder") for example in examples])
    on_mention = looked_at == np.array([example.answer_position for example in examples])
    assert measured["mention_hit_rate"] == pytest.approx(on_mention.mean())
    assert measured["mention_hit_rate_by_blank"]["object"] == pytest.approx(on_mention[~subject].mean())
    words = [example.story.split(" ") for example in examples]
    near = [abs(int(looked) - example.answer_position) <= 1 for looked, example in zip(looked_at, examples)]
    assert measured["near_mention_hit_rate"] == pytest.approx(np.mean(near))
    on_answer = [words[n][looked_at[n]] == examples[n].answer for n in range(len(examples))]
    assert np.mean(on_answer) >= measured["mention_hit_rate"] - 1e-12  # the mention is one of the answer's


def test_splits_are_disjoint_and_padded_alike():
    (train_examples, train), (validation_examples, validation), (test_examples, test) = cloze.make_data(
        300, 50, 80, seed=2)
    keys = [{(e.story, e.question) for e in split} for split in (train_examples, validation_examples, test_examples)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    assert train.stories.shape[1] == validation.stories.shape[1] == test.stories.shape[1]


def test_the_torch_track_trains_the_same_model():
    pytest.importorskip("torch")
    run = cloze.train(track="torch", seed=1, n_train=300, n_validation=50, n_test=60, max_steps=4, eval_every=2)
    assert run.summary["track"] == "torch" and run.summary["steps"] == 4
    numpy_run = cloze.train(track="numpy", seed=1, n_train=300, n_validation=50, n_test=60, max_steps=1)
    assert run.summary["n_parameters"] == numpy_run.summary["n_parameters"]
