"""A small trainer: batches, Adam, gradient clipping, periodic evaluation, a progress bar.

It stops at whichever comes first: ``epochs`` or ``max_steps`` done, ``max_seconds`` spent,
or test exact match >= ``target_accuracy`` at an evaluation. ``train_seconds`` is the wall
time from the first step until it stopped, the periodic evaluations included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..data import ParallelBatch, Vocabulary, iterate_batches
from .optim import Adam, clip_grad_norm

__all__ = ["TrainConfig", "TrainResult", "Trainer", "greedy_translate", "exact_match"]


@dataclass
class TrainConfig:
    batch_size: int = 128
    lr: float = 0.01
    max_grad_norm: float | None = 5.0
    epochs: int | None = None
    max_steps: int | None = None
    max_seconds: float | None = None
    target_accuracy: float | None = None
    eval_every: int = 50
    seed: int = 0
    # The model's matrices are small: one BLAS thread is as fast, and extra threads that
    # spin-wait collapse (10x slower) as soon as anything else wants the CPU. None: leave as is.
    blas_threads: int | None = 1

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.epochs is None and self.max_steps is None and self.max_seconds is None and self.target_accuracy is None:
            raise ValueError("give at least one of epochs, max_steps, max_seconds, target_accuracy")


@dataclass
class TrainResult:
    steps: int = 0
    train_seconds: float = 0.0
    stopped_because: str = ""
    losses: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)  # (step, test exact match)
    grad_norms: list = field(default_factory=list)

    @property
    def test_exact_match(self) -> float | None:
        return self.evaluations[-1][1] if self.evaluations else None


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


def exact_match(predictions: list[str], targets: list[str]) -> float:
    """The fraction of predictions equal to their target string."""
    if len(predictions) != len(targets):
        raise ValueError(f"exact_match: {len(predictions)} predictions for {len(targets)} targets")
    if not targets:
        raise ValueError("exact_match: no examples")
    return sum(p == t for p, t in zip(predictions, targets)) / len(targets)


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
        from contextlib import nullcontext

        from threadpoolctl import threadpool_limits

        c = self.config
        with nullcontext() if c.blas_threads is None else threadpool_limits(c.blas_threads, user_api="blas"):
            return self._fit(train, evaluate, progress, log)

    def _fit(self, train, evaluate, progress, log) -> TrainResult:
        from tqdm.auto import tqdm

        c = self.config
        rng = np.random.default_rng(c.seed)
        steps_per_epoch = -(-len(train) // c.batch_size)
        total = c.max_steps if c.max_steps is not None else (c.epochs * steps_per_epoch if c.epochs else None)
        result = TrainResult()
        bar = tqdm(total=total, disable=not progress, unit="step", dynamic_ncols=True, mininterval=0.5)
        start = time.perf_counter()
        epoch = 0
        try:
            while True:
                for indices in iterate_batches(len(train), c.batch_size, rng):
                    loss, norm = self.train_step(train.subset(indices))
                    result.steps += 1
                    result.losses.append(loss)
                    result.grad_norms.append(norm)
                    bar.update(1)
                    if not np.isfinite(loss):
                        result.stopped_because = "loss is not finite"
                        return result
                    if evaluate is not None and result.steps % c.eval_every == 0:
                        accuracy = evaluate()
                        result.evaluations.append((result.steps, accuracy))
                        bar.set_postfix(loss=f"{loss:.3f}", test_exact_match=f"{accuracy:.3f}")
                        if log is not None:
                            log(f"step {result.steps}: loss {loss:.4f}, test exact match {accuracy:.4f}")
                        if c.target_accuracy is not None and accuracy >= c.target_accuracy:
                            result.stopped_because = "target accuracy reached"
                            return result
                    elif result.steps % 10 == 0:
                        bar.set_postfix(loss=f"{loss:.3f}")
                    if c.max_steps is not None and result.steps >= c.max_steps:
                        result.stopped_because = "max_steps reached"
                        return result
                    if c.max_seconds is not None and time.perf_counter() - start >= c.max_seconds:
                        result.stopped_because = "max_seconds reached"
                        return result
                epoch += 1
                if c.epochs is not None and epoch >= c.epochs:
                    result.stopped_because = "epochs done"
                    return result
        finally:
            result.train_seconds = time.perf_counter() - start
            if evaluate is not None and (not result.evaluations or result.evaluations[-1][0] != result.steps) \
                    and result.stopped_because != "loss is not finite":
                result.evaluations.append((result.steps, evaluate()))
                result.train_seconds = time.perf_counter() - start
            bar.close()
