"""Tests for attention_course/data/copy_task.py."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data.copy_task import CopyTaskData, generate_copy_task


def test_shapes_dtypes_and_lengths():
    data = generate_copy_task(500, seed=0, width=8, min_length=1, max_length=20)
    assert isinstance(data, CopyTaskData) and len(data) == 500 and data.width == 8
    T = 2 * 20 + 1
    assert data.inputs.shape == (500, T, 9) and data.targets.shape == (500, T, 8)
    assert data.inputs.dtype == data.targets.dtype == np.float32
    assert data.input_mask.shape == data.target_mask.shape == (500, T)
    assert data.input_mask.dtype == data.target_mask.dtype == bool
    assert data.lengths.shape == (500,) and data.lengths.dtype == np.int64
    counts = Counter(data.lengths.tolist())
    assert set(counts) == set(range(1, 21)) and min(counts.values()) > 10


@given(
    n=st.integers(0, 12),
    width=st.integers(1, 10),
    min_length=st.integers(1, 6),
    extra=st.integers(0, 6),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=60, deadline=None)
def test_layout_delimiter_then_the_copy(n, width, min_length, extra, seed):
    max_length = min_length + extra
    data = generate_copy_task(n, seed, width, min_length, max_length)
    T = 2 * max_length + 1
    assert data.inputs.shape == (n, T, width + 1)
    for row in range(n):
        L = int(data.lengths[row])
        assert min_length <= L <= max_length
        bits = data.inputs[row, :L, :width]
        assert set(np.unique(bits).tolist()) <= {0.0, 1.0}
        # The delimiter channel is 1 only at step L, where the bits are 0.
        np.testing.assert_array_equal(data.inputs[row, :, width], np.arange(T) == L)
        assert not data.inputs[row, L:, :width].any()
        # The target is the sequence again, right after the delimiter.
        np.testing.assert_array_equal(data.targets[row, L + 1 : 2 * L + 1], bits)
        assert not data.targets[row, : L + 1].any() and not data.targets[row, 2 * L + 1 :].any()
        np.testing.assert_array_equal(data.input_mask[row], np.arange(T) <= L)
        np.testing.assert_array_equal(
            data.target_mask[row], (np.arange(T) > L) & (np.arange(T) <= 2 * L)
        )
        np.testing.assert_array_equal(data.sequences()[row], bits)


def test_fixed_length_for_generalisation():
    data = generate_copy_task(64, seed=1, min_length=40, max_length=40)
    assert (data.lengths == 40).all()
    assert data.inputs.shape == (64, 81, 9)
    assert data.target_mask.sum(axis=1).tolist() == [40] * 64
    np.testing.assert_array_equal(data.targets[:, 41:], data.inputs[:, :40, :8])


def test_bits_are_fair_coins():
    data = generate_copy_task(400, seed=2, min_length=10, max_length=10)
    assert abs(data.inputs[:, :10, :8].mean() - 0.5) < 0.02


def test_same_seed_same_sequences_and_other_dtypes():
    first = generate_copy_task(50, seed=3)
    again = generate_copy_task(50, seed=np.random.default_rng(3))
    other = generate_copy_task(50, seed=4)
    np.testing.assert_array_equal(first.inputs, again.inputs)
    np.testing.assert_array_equal(first.targets, again.targets)
    assert not np.array_equal(first.inputs, other.inputs)
    double = generate_copy_task(50, seed=3, dtype=np.float64)
    assert double.inputs.dtype == double.targets.dtype == np.float64
    np.testing.assert_array_equal(double.inputs, first.inputs)


def test_mismatched_fields_are_refused():
    data = generate_copy_task(4, seed=0)
    with pytest.raises(ValueError, match="target_mask"):
        CopyTaskData(
            data.inputs, data.targets, data.input_mask, data.target_mask[:2], data.lengths
        )


@pytest.mark.parametrize(
    ("arguments", "bad_argument"),
    [
        ({"n": -1}, "n must be >= 0"),
        ({"width": 0}, "width must be >= 1"),
        ({"min_length": 0}, "min_length must be >= 1"),
        ({"min_length": 5, "max_length": 4}, "min_length must be <= max_length"),
        ({"dtype": np.int64}, "dtype must be a floating-point type"),
    ],
)
def test_bad_arguments_are_named(arguments, bad_argument):
    with pytest.raises(ValueError, match=bad_argument):
        generate_copy_task(**{"n": 4, **arguments})
