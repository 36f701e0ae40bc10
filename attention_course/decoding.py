"""What greedy decoding returns, and the part of it that is the same on both tracks.

A track's ``greedy_decode`` (``numpy_track.decoding``, ``torch_track.decoding``) runs its model's
``generate`` on chunks of a batch; this module turns the ids into strings, lines the chunks up
into one result, and is all the trainer, the command line and the explorer need to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .data import ParallelBatch, Vocabulary

__all__ = ["Decoded", "decode_in_chunks"]


@dataclass
class Decoded:
    """Greedy outputs for a batch.

    Shapes:
        ids: (N, max_length) int64, the generated target ids; after a chunk stopped early (every
            sequence had written ``<eos>``), the remaining steps hold ``<pad>``.
        attention_weights: (N, max_length, T_enc), zero after a chunk stopped; ``None`` for a
            model without attention.
    """

    ids: np.ndarray
    texts: list[str]
    attention_weights: np.ndarray | None


def _pad_steps(array: np.ndarray, steps: int, value) -> np.ndarray:
    missing = steps - array.shape[1]
    if not missing:
        return array
    widths = [(0, 0), (0, missing)] + [(0, 0)] * (array.ndim - 2)
    return np.pad(array, widths, constant_values=value)


def decode_in_chunks(generate: Callable[[ParallelBatch, int], tuple], batch: ParallelBatch,
                     target_vocab: Vocabulary, max_length: int | None = None, chunk: int = 1024) -> Decoded:
    """Run ``generate(part, max_length) -> (ids, attention_weights or None)`` (NumPy arrays) on
    chunks of ``batch`` and gather the results; ``max_length`` defaults to the batch's target length."""
    if max_length is None:
        max_length = batch.decoder_target.shape[1]
    if max_length < 1:
        raise ValueError(f"max_length: expected >= 1, got {max_length}")
    ids, texts, weights = [], [], []
    for start in range(0, len(batch), chunk):
        part = batch.subset(np.arange(start, min(start + chunk, len(batch))))
        part_ids, part_weights = generate(part, max_length)
        texts.extend(target_vocab.decode(row) for row in part_ids)
        ids.append(_pad_steps(np.asarray(part_ids, dtype=np.int64), max_length, target_vocab.pad_id))
        if part_weights is not None:
            weights.append(_pad_steps(part_weights, max_length, 0.0))
    return Decoded(ids=np.concatenate(ids) if ids else np.zeros((0, max_length), dtype=np.int64), texts=texts,
                   attention_weights=np.concatenate(weights) if weights else None)
