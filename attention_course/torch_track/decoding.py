"""Greedy decoding with a torch model: the one path the trainer, the command line and the explorer use.

The step-by-step loop (feed back the most likely token until ``<eos>``) is the model's
``generate``; here it runs in eval mode without autograd, on the model's device, over a whole
batch in chunks (see ``attention_course.decoding``), and comes back as NumPy arrays.
"""

from __future__ import annotations

import numpy as np
import torch

from ..data import ParallelBatch, Vocabulary
from ..decoding import Decoded, decode_in_chunks
from .base import batch_to_tensors

__all__ = ["greedy_decode", "greedy_translate"]


@torch.no_grad()
def greedy_decode(model, batch: ParallelBatch, target_vocab: Vocabulary, max_length: int | None = None,
                  chunk: int = 1024) -> Decoded:
    """Greedy outputs of ``model`` for every example of ``batch``: ids, strings, attention weights."""
    device = next(model.parameters()).device

    def generate(part: ParallelBatch, steps: int):
        tensors = batch_to_tensors(part, device)
        ids, weights = model.generate(tensors["source"], tensors["source_mask"], target_vocab.bos_id, steps,
                                      target_vocab.eos_id)
        return ids.cpu().numpy(), (None if weights is None else weights.float().cpu().numpy())

    was_training = model.training
    model.eval()
    try:
        return decode_in_chunks(generate, batch, target_vocab, max_length, chunk)
    finally:
        model.train(was_training)


def greedy_translate(model, batch: ParallelBatch, target_vocab: Vocabulary, max_length: int | None = None,
                     chunk: int = 1024) -> tuple[list[str], np.ndarray | None]:
    """The greedy outputs as strings, and the attention weights (N, max_length, T_enc) or ``None``."""
    decoded = greedy_decode(model, batch, target_vocab, max_length, chunk)
    return decoded.texts, decoded.attention_weights
