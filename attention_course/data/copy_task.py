"""The Neural Turing Machine's copy task: read a sequence of bit vectors, then write it back.

Graves et al. (2014) first test their Neural Turing Machine on copying: the network reads
a random sequence of 8-bit vectors, then a delimiter, and must then output the sequence
again with no further input. An LSTM learns this for the lengths it was trained on and
fails beyond them; an NTM that learned to write each vector to memory and read the memory
back in order copies much longer sequences. Training on lengths 1 to 20 and testing on a
fixed length of 40 (``min_length=max_length=40``) measures exactly that.

The layout is one timeline per sequence, so rows of different lengths share a batch::

    step:     0 .. L-1        L            L+1 .. 2L       2L+1 .. T-1
    input:    the L vectors   delimiter    zeros           zeros (padding)
    target:   -               -            the L vectors   -

Input channels ``0 .. width-1`` hold the bits and channel ``width`` the delimiter flag
(1 only at step L). A model runs over all T = 2 * max_length + 1 steps and is scored only
where ``target_mask`` is True: a row's output phase starts right after its own delimiter,
and the zeros it reads there are the same zeros a shorter row reads as padding, so no
state has to be frozen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike


@dataclass
class CopyTaskData:
    """Bit sequences for the copy task, laid out on one timeline (see the module docstring).

    Fields:
        inputs: the bits, then the delimiter flag in the last channel, then zeros.
        targets: the bits again, during the output phase; zeros elsewhere.
        input_mask: True on the steps that carry input (the bits and the delimiter).
        target_mask: True on the steps of the output phase: where the loss counts.
        lengths: L, the number of vectors of each sequence.

    Shapes:
        inputs: (N, T, width + 1); targets: (N, T, width); T = 2 * max_length + 1.
        input_mask, target_mask: (N, T) bool.
        lengths: (N,) int64.
    """

    inputs: np.ndarray
    targets: np.ndarray
    input_mask: np.ndarray
    target_mask: np.ndarray
    lengths: np.ndarray

    def __post_init__(self) -> None:
        N, T, channels = self.inputs.shape
        expected_shapes = {
            "targets": (N, T, channels - 1),
            "input_mask": (N, T),
            "target_mask": (N, T),
            "lengths": (N,),
        }
        for name, expected_shape in expected_shapes.items():
            got_shape = getattr(self, name).shape
            if got_shape != expected_shape:
                raise ValueError(f"{name}: expected shape {expected_shape}, got {got_shape}")

    def __len__(self) -> int:
        return self.inputs.shape[0]

    @property
    def width(self) -> int:
        """The number of bits per vector."""
        return self.targets.shape[2]

    def sequences(self) -> list[np.ndarray]:
        """Each row's L input vectors, without delimiter or padding.

        Shapes:
            returns: N arrays of shape (L_n, width).
        """
        return [
            self.inputs[row, :length, : self.width]
            for row, length in enumerate(self.lengths.tolist())
        ]


def generate_copy_task(
    n: int,
    seed: int | np.random.Generator = 0,
    width: int = 8,
    min_length: int = 1,
    max_length: int = 20,
    dtype: DTypeLike = np.float32,
) -> CopyTaskData:
    """n random bit sequences to copy, with lengths uniform in ``min_length .. max_length``.

    Every bit is 0 or 1 with probability 1/2. For the generalisation test of the NTM
    paper use one fixed length longer than any trained on, e.g.
    ``generate_copy_task(n, seed=1, min_length=40, max_length=40)``.

    Args:
        n: the number of sequences.
        seed: an integer seed, or a ``numpy.random.Generator`` to draw from.
        width: the number of bits per vector (8 in the paper).
        min_length, max_length: the range of sequence lengths L, both included.
        dtype: a floating-point dtype for ``inputs`` and ``targets``.

    Returns:
        A :class:`CopyTaskData`.

    Shapes:
        inputs: (n, 2 * max_length + 1, width + 1); targets: (n, 2 * max_length + 1, width).

    Raises:
        ValueError: naming the bad argument.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    if min_length < 1:
        raise ValueError(f"min_length must be >= 1, got {min_length}")
    if min_length > max_length:
        raise ValueError(
            "min_length must be <= max_length, "
            f"got min_length={min_length}, max_length={max_length}"
        )
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype must be a floating-point type, got {dtype}")
    rng = np.random.default_rng(seed)
    N, L_max = n, max_length
    T = 2 * L_max + 1

    lengths = rng.integers(min_length, max_length + 1, size=N).astype(np.int64)
    bits = rng.integers(0, 2, size=(N, L_max, width)).astype(dtype)
    steps = np.arange(T)
    lengths_column = lengths[:, None]
    in_sequence = steps[:L_max] < lengths_column  # (N, L_max)
    bits *= in_sequence[:, :, None]

    inputs = np.zeros((N, T, width + 1), dtype=dtype)
    inputs[:, :L_max, :width] = bits
    inputs[np.arange(N), lengths, width] = 1.0  # the delimiter, right after the sequence
    input_mask = steps <= lengths_column  # (N, T)

    # Row n's output phase is steps L_n + 1 .. 2 L_n: copy its bits there.
    target_mask = (steps > lengths_column) & (steps <= 2 * lengths_column)  # (N, T)
    targets = np.zeros((N, T, width), dtype=dtype)
    targets[target_mask] = bits[in_sequence]
    return CopyTaskData(
        inputs=inputs,
        targets=targets,
        input_mask=input_mask,
        target_mask=target_mask,
        lengths=lengths,
    )
