"""The layer protocol shared by every NumPy layer.

A layer has ``params`` and ``grads``: dicts keyed by name, holding arrays of the same shape.
``forward(...)`` computes and caches what ``backward`` needs; ``backward(dout)`` returns the
gradients with respect to the inputs and writes the parameter gradients *in place*
(``self.grads["W"][...] = dW``), so an optimizer that holds references to the arrays in
``grads`` always sees the current values. Composite layers register their parts with
``add_child``; ``named_parameters()`` walks the tree and yields dotted names
(``"encoder.rnn.W_h"``) without duplicates.

Layers follow the dtype of their inputs: parameters are cast on use
(``as_dtype(W, x.dtype)``, free when the dtypes already agree), so a float64 gradient check and
float32 training run on the same layer. Initial values come from ``attention_course.core.initializers``,
the same for the torch track.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

__all__ = ["Layer", "as_dtype", "float_dtype"]


def as_dtype(array: np.ndarray, dtype) -> np.ndarray:
    """``array`` in ``dtype``, without a copy when it already is."""
    return array if array.dtype == dtype else array.astype(dtype)


def float_dtype(array: np.ndarray, name: str) -> np.dtype:
    """The floating dtype of an input, or a ValueError naming the input."""
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{name}: expected a numpy array, got {type(array).__name__}")
    if array.dtype.kind != "f":
        raise ValueError(f"{name}: expected a floating-point array, got dtype {array.dtype}")
    return array.dtype


class Layer:
    """Base class: parameters, their gradients, and child layers, with dotted names."""

    def __init__(self) -> None:
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        self._children: dict[str, Layer] = {}

    def add_param(self, name: str, value: np.ndarray) -> np.ndarray:
        self.params[name] = value
        self.grads[name] = np.zeros_like(value)
        return value

    def add_params(self, initial: dict[str, np.ndarray], dtype) -> None:
        """Register initial values (from ``core.initializers``) as parameters of ``dtype``."""
        for name, value in initial.items():
            self.add_param(name, value.astype(dtype))

    def add_child(self, name: str, layer: "Layer") -> "Layer":
        self._children[name] = layer
        return layer

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
        """Yield ``(dotted_name, param, grad)`` for this layer and every child, each array once."""
        seen: set[int] = set()
        yield from self._named_parameters(prefix, seen)

    def _named_parameters(self, prefix: str, seen: set[int]):
        for name, value in self.params.items():
            if id(value) not in seen:
                seen.add(id(value))
                yield prefix + name, value, self.grads[name]
        for child_name, child in self._children.items():
            yield from child._named_parameters(f"{prefix}{child_name}.", seen)

    def zero_grads(self) -> None:
        for _, _, grad in self.named_parameters():
            grad[...] = 0

    def num_parameters(self) -> int:
        return sum(value.size for _, value, _ in self.named_parameters())

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of every parameter, by dotted name."""
        return {name: value.copy() for name, value, _ in self.named_parameters()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Copy values in place (references held by optimizers stay valid).

        Raises:
            ValueError naming a missing, unexpected or wrongly shaped parameter.
        """
        own = {name: value for name, value, _ in self.named_parameters()}
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if missing or unexpected:
            raise ValueError(f"load_state_dict: missing parameters {missing}, unexpected parameters {unexpected}")
        for name, value in own.items():
            new = np.asarray(state[name])
            if new.shape != value.shape:
                raise ValueError(f"load_state_dict: parameter {name!r} has shape {value.shape}, got {new.shape}")
            value[...] = new
