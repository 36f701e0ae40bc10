"""Training the NumPy models: one step (loss, backward, clip, Adam).

The loop itself (batches, stopping rules, evaluation, progress) is ``attention_course.training``,
shared with the torch track; greedy evaluation is ``decoding.greedy_translate``.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

from ..core.schedules import warmup_inverse_sqrt
from ..data import ParallelBatch
from ..training import TrainConfig, TrainResult, run_training
from .optim import Adam, clip_grad_norm

__all__ = ["Trainer"]


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
        if self.config.warmup_steps is not None:
            self.optimizer.lr = self.config.lr * warmup_inverse_sqrt(self.optimizer.t + 1, self.config.warmup_steps)
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
