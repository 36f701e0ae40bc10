"""Checks for the tests and the exercises: numerical gradients and shape assertions.

Nothing in the library imports this package (the tracks take their shape checks from
``attention_course.core.shapes``, re-exported here for the tests' convenience).
"""

from ..core.shapes import ShapeError, assert_shape, check_array
from .gradcheck import assert_grads_close, check_layer_gradients, numerical_vjp, relative_error

__all__ = [
    "ShapeError",
    "assert_grads_close",
    "assert_shape",
    "check_array",
    "check_layer_gradients",
    "numerical_vjp",
    "relative_error",
]
