"""Tests for attention_course/core/shapes.py: shape errors name the argument, the expected and the got."""

import numpy as np
import pytest

from attention_course.core.shapes import ShapeError, assert_shape, check_array


def test_assert_shape_returns_the_named_sizes_it_binds():
    sizes = assert_shape("encoder_states", np.zeros((4, 7, 8)), ("N", "T_enc", "H"))
    assert sizes == {"N": 4, "T_enc": 7, "H": 8}


def test_named_sizes_bind_across_calls():
    sizes = assert_shape("encoder_states", np.zeros((4, 7, 8)), ("N", "T_enc", "H"))
    sizes = assert_shape("decoder_states", np.zeros((4, 3, 8)), ("N", "T_dec", "H"), sizes)
    assert sizes == {"N": 4, "T_enc": 7, "H": 8, "T_dec": 3}
    with pytest.raises(ShapeError) as error:
        assert_shape("decoder_states", np.zeros((4, 3, 6)), ("N", "T_dec", "H"), {"N": 4, "H": 8})
    assert str(error.value) == "decoder_states: expected shape (N=4, T_dec, H=8), got (4, 3, 6)"


def test_a_named_size_must_agree_within_one_call():
    assert_shape("W_h", np.zeros((3, 3)), ("H", "H"))
    with pytest.raises(ShapeError, match=r"W_h: expected shape \(H, H\), got \(3, 4\)"):
        assert_shape("W_h", np.zeros((3, 4)), ("H", "H"))


def test_exact_sizes_wildcards_and_rank():
    assert_shape("x", np.zeros((2, 5)), (None, 5))
    with pytest.raises(ShapeError, match=r"x: expected shape \(\?, 5\), got \(2, 4\)"):
        assert_shape("x", np.zeros((2, 4)), (None, 5))
    with pytest.raises(ShapeError, match=r"x: expected shape \(\?, 5\), got \(2, 5, 1\)"):
        assert_shape("x", np.zeros((2, 5, 1)), (None, 5))
    with pytest.raises(ShapeError, match=r"b: expected shape \(3,\), got \(4,\)"):
        assert_shape("b", np.zeros(4), (3,))


def test_the_failed_check_does_not_bind_anything():
    sizes = {"N": 2}
    with pytest.raises(ShapeError):
        assert_shape("x", np.zeros((3, 4)), ("N", "D"), sizes)
    assert sizes == {"N": 2}, "the caller's dict must not be modified"


def test_check_array_checks_type_and_dtype_kind():
    check_array("ids", np.zeros((2, 3), dtype=np.int64), ("N", "T"), kind="int")
    check_array("mask", np.zeros((2, 3), dtype=bool), ("N", "T"), kind="bool")
    with pytest.raises(ShapeError, match="ids: expected an? int array, got dtype float64"):
        check_array("ids", np.zeros((2, 3)), ("N", "T"), kind="int")
    with pytest.raises(ShapeError, match="mask: expected a bool array, got dtype int64"):
        check_array("mask", np.zeros((2, 3), dtype=np.int64), ("N", "T"), kind="bool")
    with pytest.raises(ShapeError, match="xs: expected a numpy array, got list"):
        check_array("xs", [[1.0]], ("N", "T"))


def test_shape_error_is_a_value_error():
    assert issubclass(ShapeError, ValueError)
    with pytest.raises(ValueError, match="decoder_states"):
        assert_shape("decoder_states", np.zeros(3), ("N", "H"))
