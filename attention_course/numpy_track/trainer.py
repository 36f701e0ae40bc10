"""Training the NumPy models: one step (loss, backward, clip, Adam) and greedy evaluation.

The loop itself (batches, stopping rules, evaluation, progress) is ``attention_course.training``,
shared with the torch track.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import numpy as np

from ..data import ParallelBatch, Vocabulary
from ..training import TrainConfig, TrainResult, exact_match, run_training
from .optim import Adam, clip_grad_norm

__all__ = ["TrainConfig", "TrainResult", "Trainer", "greedy_translate", "exact_match"]


def greedy_translate(model, batch: ParallelBatch, target_vocab: Vocabulary, max_length: int | None = None,
                     chunk: int = 1024) -> tuple[list[str], np.ndarray]:
    """Greedy outputs for every example of ``batch`` as strings, and the attention weights.

    Returns the strings and weights (N, T_out, T_enc) (``None`` for a model without attention).
    """
    if max_length is None:
        max_length = batch.decoder_target.shape[1]
    texts, weights = [], []
    for start in range(0, len(batch), chunk):
        part = batch.subset(np.arange(start, min(start + chunk, len(batch))))
        ids, w = model.generate(part.source, part.source_mask, target_vocab.bos_id, max_length, target_vocab.eos_id)
        texts.extend(target_vocab.decode(row) for row in ids)
        if w is not None:
            pad = max_length - w.shape[1]
            weights.append(np.pad(w, ((0, 0), (0, pad), (0, 0))) if pad else w)
    return texts, (np.concatenate(weights) if weights else None)


class Trainer:
    """Trains a ``Seq2seq``/``AttentionSeq2seq`` with Adam on a ``ParallelBatch``."""

    def __init__(self, model, config: TrainConfig, optimizer=None) -> None:
        self.model = model
        self.config = config
        self.optimizer = optimizer or Adam(model, lr=config.lr)
        self.grads = [grad for _, _, grad in model.named_parameters()]

    def train_step(self, batch: ParallelBatch) -> tuple[float, float]:
        """One step: loss, backward, clip, update. Returns (loss, gradient norm before clipping)."""
        loss = self.model.forward(batch.source, batch.source_mask, batch.decoder_input, batch.decoder_target,
                                  batch.target_mask)
        self.model.backward()
        norm = clip_grad_norm(self.grads, self.config.max_grad_norm)
        self.optimizer.step()
        return loss, norm

    def fit(self, train: ParallelBatch, evaluate: Callable[[], float] | None = None, progress: bool = True,
            log: Callable[[str], None] | None = None) -> TrainResult:
        """Train until a stopping rule fires; ``evaluate()`` returns test exact match."""
        from threadpoolctl import threadpool_limits

        c = self.config
        with nullcontext() if c.blas_threads is None else threadpool_limits(c.blas_threads, user_api="blas"):
            return run_training(lambda indices: self.train_step(train.subset(indices)), len(train), c, evaluate,
                                progress, log, snapshot=self.model.state_dict, restore=self.model.load_state_dict)
