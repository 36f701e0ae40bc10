"""Checks used by the tests and the exercises: numerical gradients and shape assertions."""

from .gradcheck import assert_grads_close, check_layer_gradients, numerical_vjp, relative_error
from .shapes import ShapeError, assert_shape, check_array
from .exercise import TamperingError, load_checks

__all__ = [
    "ShapeError",
    "assert_grads_close",
    "assert_shape",
    "check_array",
    "check_layer_gradients",
    "numerical_vjp",
    "relative_error",
    "TamperingError",
    "load_checks",
]
