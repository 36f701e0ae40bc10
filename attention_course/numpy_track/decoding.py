"""Greedy decoding with a NumPy model: the one path the trainer, the command line and the explorer use.

The step-by-step loop (feed back the most likely token until ``<eos>``) is the model's
``generate``; here it runs over a whole batch in chunks (see ``attention_course.decoding``).
"""

from __future__ import annotations

import numpy as np

from ..data import ParallelBatch, Vocabulary
from ..decoding import Decoded, decode_in_chunks

__all__ = ["greedy_decode", "greedy_translate"]


def greedy_decode(model, batch: ParallelBatch, target_vocab: Vocabulary, max_length: int | None = None,
                  chunk: int = 1024) -> Decoded:
    """Greedy outputs of ``model`` for every example of ``batch``: ids, strings, attention weights."""

    def generate(part: ParallelBatch, steps: int):
        return model.generate(part.source, part.source_mask, target_vocab.bos_id, steps, target_vocab.eos_id)

    return decode_in_chunks(generate, batch, target_vocab, max_length, chunk)


def greedy_translate(model, batch: ParallelBatch, target_vocab: Vocabulary, max_length: int | None = None,
                     chunk: int = 1024) -> tuple[list[str], np.ndarray | None]:
    """The greedy outputs as strings, and the attention weights (N, max_length, T_enc) or ``None``."""
    decoded = greedy_decode(model, batch, target_vocab, max_length, chunk)
    return decoded.texts, decoded.attention_weights
