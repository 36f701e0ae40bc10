"""Tests for attention_course/applications/common.py: calls in chunks, training either track, options."""

import argparse

import numpy as np
import pytest

from attention_course.applications import common
from attention_course.core.configs import ClassifierConfig, OptionError
from attention_course.numpy_track.classifier import SequenceClassifier
from attention_course.training import TrainConfig


def test_call_in_chunks_gives_what_one_call_gives(rng):
    model = SequenceClassifier(ClassifierConfig(11, embed_dim=3, hidden_size=2, attention_size=3), rng=0)
    ids = rng.integers(3, 11, (7, 5))
    mask = np.arange(5)[None, :] < rng.integers(1, 6, 7)[:, None]
    whole = common.call(model, "numpy", "predict", ids, mask)
    np.testing.assert_allclose(common.call(model, "numpy", "predict", ids, mask, batch_size=3), whole, rtol=1e-6)


def test_fit_trains_and_keeps_the_best_evaluation(rng):
    model = SequenceClassifier(ClassifierConfig(11, embed_dim=3, hidden_size=4, attention_size=3), rng=0)
    ids = rng.integers(3, 11, (64, 5))
    labels = (ids[:, 0] > 6).astype(np.int64)  # the first word decides
    data = {"ids": ids, "mask": np.ones((64, 5), dtype=bool), "labels": labels}
    result = common.fit(model, "numpy", data, TrainConfig(batch_size=16, lr=0.05, epochs=15, eval_every=4),
                        evaluate=lambda: float((model.predict(ids, data["mask"]).argmax(1) == labels).mean()))
    assert result.steps == 60 and result.losses[-1] < result.losses[0] / 3
    assert max(accuracy for _, accuracy in result.evaluations) >= 0.9


def test_options_that_do_not_apply_are_named():
    from attention_course.cli import build_parser

    args = build_parser().parse_args(["train", "--task", "babi", "--score", "dot", "--cell", "lstm"])
    assert common.given_options(args) == {"task", "score", "cell"}
    with pytest.raises(OptionError, match="--cell, --score: not an option of the 'babi' task"):
        common.check_options(args, {"task"})
    assert common.check_options(args, {"task", "score", "cell"}) == {"task", "score", "cell"}


def test_stopping_rules_fall_back_to_the_tasks_own():
    args = argparse.Namespace(epochs=None, max_steps=None, max_seconds=None, max_cpu_seconds=None,
                              target_accuracy=None)
    assert common.stopping_rules(args, {"epochs": 6}) == {"epochs": 6, "max_steps": None, "max_seconds": None,
                                                          "max_cpu_seconds": None, "target_accuracy": None}
    args.max_steps = 3
    assert common.stopping_rules(args, {"epochs": 6})["epochs"] is None
