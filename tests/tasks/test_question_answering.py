"""Tests for attention_course/tasks/question_answering.py: each hop looks at a supporting sentence."""

import numpy as np
import pytest

from attention_course.tasks import question_answering as babi

QUICK = dict(n_train=4000, n_validation=200, n_test=400, epochs=15)


@pytest.fixture(scope="module")
def numpy_run():
    return babi.train(track="numpy", seed=0, **QUICK)


def test_accuracy_per_kind_and_the_hops_look_at_supporting_sentences(numpy_run):
    summary = numpy_run.summary
    by_kind, hits = summary["test_accuracy_by_kind"], summary["supporting_hit_rate_by_hop"]
    assert by_kind["single_supporting_fact"] >= 0.95
    assert by_kind["two_supporting_facts"] >= 0.75
    assert len(hits["single_supporting_fact"]) == 3
    assert max(hits["single_supporting_fact"]) >= 0.9
    assert max(hits["two_supporting_facts"]) >= 0.75
    # a story has 2 to 10 sentences: chance is far below
    examples, batch = numpy_run.test
    chance = (batch.supporting.sum(axis=1) / batch.story_mask.sum(axis=1)).mean()
    assert chance < 0.4


def test_measure_counts_a_hit_where_the_largest_weight_is(numpy_run):
    examples, batch = numpy_run.test
    measured = numpy_run.extra["measured"]
    weights = measured["weights"]
    assert weights.shape == (len(examples), 3, babi.MAX_SENTENCES)
    np.testing.assert_allclose(weights.sum(axis=2), 1.0, rtol=1e-5)
    kinds = np.array([e.kind for e in examples])
    rows = kinds == "single_supporting_fact"
    by_hand = np.mean([batch.supporting[n, weights[n, 0].argmax()] for n in np.flatnonzero(rows)])
    assert measured["supporting_hit_rate"]["single_supporting_fact"][0] == pytest.approx(by_hand)


def test_splits_are_disjoint_and_encoded_alike():
    (train_examples, train), (validation_examples, _), (test_examples, test) = babi.make_data(300, 50, 80, seed=2)
    keys = [{(tuple(e.story), e.question) for e in split} for split in (train_examples, validation_examples,
                                                                          test_examples)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    assert train.stories.shape[1:] == test.stories.shape[1:] == (babi.MAX_SENTENCES, train.stories.shape[2])
