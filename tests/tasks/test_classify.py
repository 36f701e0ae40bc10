"""Tests for attention_course/tasks/classify.py: attention pooling lands on the planted words."""

import numpy as np
import pytest

from attention_course.tasks import classify

QUICK = dict(n_train=2000, n_validation=200, n_test=300, epochs=5)


@pytest.fixture(scope="module")
def attention_run():
    return classify.train(track="numpy", task="majority", pooling="attention", seed=0, **QUICK)


def test_attention_lands_on_the_planted_words(attention_run):
    summary = attention_run.summary
    assert summary["test_accuracy"] >= 0.97
    # the measure: at least 80% of the attention on the planted words, on the test set
    assert summary["planted_attention_share"] >= 0.8
    measured = attention_run.extra["measured"]
    test = attention_run.test
    # chance, for comparison: weights spread evenly over the real words
    chance = (test.planted.sum(axis=1) / test.mask.sum(axis=1)).mean()
    assert chance < 0.25
    assert set(measured["planted_share_by_label"]) == {0, 1}
    np.testing.assert_allclose(measured["weights"].sum(axis=1), 1.0, rtol=1e-5)
    assert (measured["weights"][~test.mask] == 0).all()


def test_summary_is_like_the_dates_tasks(attention_run):
    summary = attention_run.summary
    for key in ("test_accuracy", "train_seconds", "steps", "stopped_because", "final_loss", "n_parameters",
                "track", "model", "task", "seed", "peak_rss_mb"):
        assert key in summary, key
    assert summary["task"] == "classify" and summary["model"] == "attention" and summary["steps"] > 0


def test_mean_pooling_spreads_its_weights_evenly():
    run = classify.train(track="numpy", task="majority", pooling="mean", seed=0, n_train=300, n_validation=50,
                         n_test=100, max_steps=5)
    test = run.test
    chance = (test.planted.sum(axis=1) / test.mask.sum(axis=1)).mean()
    assert run.extra["measured"]["planted_share"] == pytest.approx(chance, rel=1e-5)
    assert run.summary["planted_attention_share"] is None


def test_both_tracks_start_from_the_same_weights_and_measure_alike():
    runs = {track: classify.train(track=track, task="order", pooling="attention", seed=3, n_train=200,
                                  n_validation=50, n_test=100, max_steps=1) for track in ("numpy", "torch")}
    assert runs["numpy"].summary["n_parameters"] == runs["torch"].summary["n_parameters"]
    # one step from identical weights on identical data: nearly identical weights afterwards
    assert runs["numpy"].result.losses[0] == pytest.approx(runs["torch"].result.losses[0], rel=1e-4)


def test_make_data_draws_three_disjoint_splits():
    train, validation, test = classify.make_data("majority", 100, 20, 30, seed=1)
    assert (len(train), len(validation), len(test)) == (100, 20, 30)
    assert (train.planted.sum(axis=1) == 5).all() and train.task == "majority"
    assert not np.array_equal(train.ids[:20], validation.ids)
