"""Tests for attention_course/data/classification.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data.classification import (
    CLASSIFICATION_TASKS,
    CLASSIFICATION_VOCABULARY,
    DISTRACTOR_WORDS,
    NEGATIVE_WORDS,
    ORDER_WORDS,
    POSITIVE_WORDS,
    ClassificationData,
    generate_classification,
    rule_label,
)

PLANTED_WORDS = {*POSITIVE_WORDS, *NEGATIVE_WORDS, *ORDER_WORDS}


def label_by_hand(words, task):
    """The rule, written again here so the test does not trust the module's own."""
    planted = [word for word in words if word in PLANTED_WORDS]
    if task == "keyword":
        assert planted and (
            all(word in POSITIVE_WORDS for word in planted)
            or all(word in NEGATIVE_WORDS for word in planted)
        ), planted
        return 1 if planted[0] in POSITIVE_WORDS else 0
    if task == "majority":
        n_positive = sum(word in POSITIVE_WORDS for word in planted)
        n_negative = sum(word in NEGATIVE_WORDS for word in planted)
        assert n_positive + n_negative == len(planted) and n_positive != n_negative, planted
        return 1 if n_positive > n_negative else 0
    assert sorted(planted) == ["ping", "pong"], planted
    return 1 if planted == ["ping", "pong"] else 0


def words_of(data, row):
    return [data.vocab.symbols[i] for i in data.ids[row][data.mask[row]]]


@pytest.mark.parametrize("task", CLASSIFICATION_TASKS)
def test_shapes_dtypes_and_padding(task):
    data = generate_classification(300, seed=0, task=task, min_length=5, max_length=25)
    assert isinstance(data, ClassificationData) and len(data) == 300 and data.task == task
    assert data.ids.shape == data.mask.shape == data.planted.shape == (300, 25)
    assert data.labels.shape == (300,)
    assert data.ids.dtype == np.int64 and data.labels.dtype == np.int64
    assert data.mask.dtype == bool and data.planted.dtype == bool
    lengths = data.mask.sum(axis=1)
    assert lengths.min() == 5 and lengths.max() == 25
    # The mask is a prefix, and padding is <pad> exactly where the mask is False.
    np.testing.assert_array_equal(data.mask, np.arange(25) < lengths[:, None])
    np.testing.assert_array_equal(data.ids == data.vocab.pad_id, ~data.mask)
    assert data.vocab is CLASSIFICATION_VOCABULARY and data.vocab.level == "word"


@pytest.mark.parametrize("task", CLASSIFICATION_TASKS)
def test_labels_are_balanced(task):
    for n in (0, 1, 200, 201):
        labels = generate_classification(n, seed=n, task=task).labels
        assert set(labels.tolist()) <= {0, 1}
        assert abs(int((labels == 1).sum()) - int((labels == 0).sum())) <= 1


@pytest.mark.parametrize(("task", "n_planted"), [("keyword", 1), ("keyword", 3), ("order", 2), ("majority", 5)])
def test_planted_marks_exactly_the_planted_words(task, n_planted):
    data = generate_classification(400, seed=1, task=task, n_planted=n_planted)
    np.testing.assert_array_equal(data.planted.sum(axis=1), n_planted)
    assert not (data.planted & ~data.mask).any(), "a planted word in the padding"
    planted_ids = {data.vocab.encode(word)[0] for word in PLANTED_WORDS}
    is_planted_word = np.isin(data.ids, list(planted_ids))
    np.testing.assert_array_equal(is_planted_word, data.planted)
    distractor_ids = {data.vocab.encode(word)[0] for word in DISTRACTOR_WORDS}
    assert set(data.ids[data.mask & ~data.planted].tolist()) <= distractor_ids


@pytest.mark.parametrize("task", CLASSIFICATION_TASKS)
def test_the_label_is_a_function_of_the_planted_words(task):
    data = generate_classification(400, seed=2, task=task)
    for row in range(len(data)):
        only_planted = [data.vocab.symbols[i] for i in data.ids[row][data.planted[row]]]
        assert label_by_hand(only_planted, task) == data.labels[row]
        assert rule_label(words_of(data, row), task) == data.labels[row]


@pytest.mark.parametrize("task", CLASSIFICATION_TASKS)
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_moving_or_removing_distractors_keeps_the_label(task, seed):
    data = generate_classification(8, seed=seed, task=task)
    rng = np.random.default_rng(seed)
    for row in range(len(data)):
        words = words_of(data, row)
        planted = [word for word in words if word in PLANTED_WORDS]
        distractors = [word for word in words if word not in PLANTED_WORDS]
        kept = [word for word in distractors if rng.random() < 0.5]
        # Scatter the kept distractors among the planted words, which keep their order.
        slots = rng.integers(0, len(planted) + 1, size=len(kept))
        shuffled = []
        for slot, word in enumerate(planted):
            shuffled += [kept[k] for k in np.flatnonzero(slots == slot)]
            shuffled.append(word)
        shuffled += [kept[k] for k in np.flatnonzero(slots == len(planted))]
        assert label_by_hand(shuffled, task) == data.labels[row]
        assert rule_label(shuffled, task) == data.labels[row]


def test_order_task_holds_the_same_bag_of_words_in_both_classes():
    data = generate_classification(500, seed=3, task="order")
    for row in range(len(data)):
        planted = [data.vocab.symbols[i] for i in data.ids[row][data.planted[row]]]
        assert sorted(planted) == ["ping", "pong"]
        assert (planted == ["ping", "pong"]) == bool(data.labels[row])


@pytest.mark.parametrize("n_planted", [1, 2, 4, 5])
def test_majority_task_mixes_both_kinds_with_every_majority_count(n_planted):
    data = generate_classification(3000, seed=8, task="majority", n_planted=n_planted)
    counts = {0: set(), 1: set()}
    for row in range(len(data)):
        planted = [data.vocab.symbols[i] for i in data.ids[row][data.planted[row]]]
        n_own = sum(word in (POSITIVE_WORDS if data.labels[row] else NEGATIVE_WORDS) for word in planted)
        counts[int(data.labels[row])].add(n_own)
    majorities = set(range(n_planted // 2 + 1, n_planted + 1))
    assert counts[0] == counts[1] == majorities, counts
    if n_planted >= 3:  # both kinds in one sequence: the minority must be read too
        mixed = [row for row in range(len(data))
                 if len({word in POSITIVE_WORDS for word in words_of(data, row) if word in PLANTED_WORDS}) == 2]
        assert len(mixed) > len(data) / 3


def test_majority_keeps_the_keyword_tasks_data():
    """The majority task was added later: the keyword task's sequences for a seed did not change."""
    keyword = generate_classification(50, seed=9, task="keyword", n_planted=3)
    majority = generate_classification(50, seed=9, task="majority", n_planted=3)
    np.testing.assert_array_equal(keyword.planted, majority.planted)
    np.testing.assert_array_equal(keyword.labels, majority.labels)
    np.testing.assert_array_equal(keyword.ids[~keyword.planted], majority.ids[~majority.planted])


def test_planted_positions_spread_over_the_sequence():
    data = generate_classification(2000, seed=4, min_length=30, max_length=30, n_planted=1)
    positions = np.argmax(data.planted, axis=1)
    counts = np.bincount(positions, minlength=30)
    assert counts.min() > 30, f"positions not uniform: {counts}"


def test_same_seed_same_data_and_texts():
    first = generate_classification(100, seed=5, task="order")
    again = generate_classification(100, seed=np.random.default_rng(5), task="order")
    other = generate_classification(100, seed=6, task="order")
    for name in ("ids", "mask", "labels", "planted"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert not np.array_equal(first.ids, other.ids)
    texts = first.texts()
    assert len(texts) == 100 and texts[0] == " ".join(words_of(first, 0))


def test_subset_keeps_rows_aligned():
    data = generate_classification(50, seed=7)
    subset = data.subset([4, 2])
    assert len(subset) == 2 and subset.ids.shape == (2, data.ids.shape[1])
    for name in ("ids", "mask", "labels", "planted"):
        np.testing.assert_array_equal(getattr(subset, name), getattr(data, name)[[4, 2]])


def test_rule_label_refuses_sequences_no_task_makes():
    assert rule_label(["the", "great", "film"], "keyword") == 1
    assert rule_label(["pong", "a", "ping"], "order") == 0
    with pytest.raises(ValueError, match="no keyword"):
        rule_label(["the", "film"], "keyword")
    assert rule_label(["great", "awful", "superb"], "majority") == 1
    with pytest.raises(ValueError, match="1 of each"):
        rule_label(["great", "the", "awful"], "majority")
    with pytest.raises(ValueError, match="both kinds"):
        rule_label(["great", "awful"], "keyword")
    with pytest.raises(ValueError, match="exactly one 'ping' and one 'pong'"):
        rule_label(["ping", "ping", "pong"], "order")
    with pytest.raises(ValueError, match="task must be one of"):
        rule_label(["ping"], "sentiment")


@pytest.mark.parametrize(
    ("arguments", "bad_argument"),
    [
        ({"task": "sentiment"}, "task must be one of"),
        ({"n": -1}, "n must be >= 0"),
        ({"n_planted": 0}, "n_planted must be >= 1"),
        ({"task": "order", "n_planted": 3}, "n_planted must be 2 for the 'order' task"),
        ({"min_length": 1, "n_planted": 2}, "min_length must be >= n_planted=2"),
        ({"min_length": 20, "max_length": 10}, "min_length must be <= max_length"),
    ],
)
def test_bad_arguments_are_named(arguments, bad_argument):
    with pytest.raises(ValueError, match=bad_argument):
        generate_classification(**{"n": 10, **arguments})
