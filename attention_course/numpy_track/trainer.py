"""Training the NumPy models: one step (loss, backward, clip, Adam), on sequence pairs or on named arrays.

The loop itself (batches, stopping rules, evaluation, progress) is ``attention_course.training``,
the one every task on either track trains with; greedy evaluation is ``decoding.greedy_translate``.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Mapping

import numpy as np

from ..core.schedules import warmup_inverse_sqrt
from ..data import ParallelBatch
from ..training import TrainConfig, TrainResult, run_training
from .base import Layer
from .optim import Adam, clip_grad_norm

__all__ = ["Trainer", "WithLoss", "model_dtype", "float_as", "as_model_dtype"]


def model_dtype(model: Layer) -> np.dtype:
    """The dtype of the model's parameters (its first one's)."""
    return next(value for _, value, _ in model.named_parameters()).dtype


def float_as(value, dtype):
    """``value`` in ``dtype`` (the model's) if it is a floating-point array; otherwise as it is."""
    return value.astype(dtype, copy=False) if isinstance(value, np.ndarray) and value.dtype.kind == "f" else value


def as_model_dtype(arrays: Mapping[str, np.ndarray], dtype) -> dict[str, np.ndarray]:
    """``arrays`` with every floating-point array in ``dtype``; the other values as they are."""
    return {name: float_as(value, dtype) for name, value in arrays.items()}


class WithLoss(Layer):
    """A model that maps inputs to outputs, and a loss layer on those outputs, as one model whose
    ``forward(inputs, **targets)`` is the loss (``loss_layer.forward(model.forward(inputs), **targets)``).

    What the copy task trains: the NTM's logits scored by ``SigmoidCrossEntropy``. Its parameters
    are the model's (named ``model.<name>``).
    """

    def __init__(self, model: Layer, loss_layer: Layer) -> None:
        super().__init__()
        self.model = self.add_child("model", model)
        self.loss_layer = loss_layer

    def forward(self, inputs: np.ndarray, **targets) -> float:
        return self.loss_layer.forward(self.model.forward(inputs), **targets)

    def backward(self, dloss: float = 1.0):
        return self.model.backward(self.loss_layer.backward(dloss))


class Trainer:
    """Trains a model with Adam: a ``Seq2seq``/``AttentionSeq2seq``/``TransformerSeq2seq`` on a
    ``ParallelBatch`` (``fit``), or any model whose ``forward(**arrays)`` is the loss on named
    arrays (``fit_arrays``: the classifier, the captioner, the memory network, ``WithLoss``)."""

    device = "cpu"

    def __init__(self, model, config: TrainConfig, optimizer=None) -> None:
        self.model = model
        self.config = config
        self.optimizer = optimizer or Adam(model, lr=config.lr)
        self.grads = [grad for _, _, grad in model.named_parameters()]

    def update(self, loss: float) -> tuple[float, float]:
        """After a forward pass that gave ``loss``: backward, clip, Adam. Returns (loss, gradient norm
        before clipping)."""
        self.model.backward()
        norm = clip_grad_norm(self.grads, self.config.max_grad_norm)
        if self.config.warmup_steps is not None:
            self.optimizer.lr = self.config.lr * warmup_inverse_sqrt(self.optimizer.t + 1, self.config.warmup_steps)
        self.optimizer.step()
        return loss, norm

    def train_step(self, batch: ParallelBatch) -> tuple[float, float]:
        """One step: loss, backward, clip, update. Returns (loss, gradient norm before clipping)."""
        return self.update(self.model.forward(batch.source, batch.source_mask, batch.decoder_input,
                                              batch.decoder_target, batch.target_mask))

    def fit(self, train: ParallelBatch, evaluate: Callable[[], float] | None = None, progress: bool = True,
            log: Callable[[str], None] | None = None) -> TrainResult:
        """Train until a stopping rule fires; ``evaluate()`` returns test exact match."""
        return self._run(lambda indices: self.train_step(train.subset(indices)), len(train), evaluate, progress, log)

    def fit_arrays(self, data: Mapping[str, np.ndarray] | Callable[[], Mapping[str, np.ndarray]],
                   evaluate: Callable[[], float] | None = None, progress: bool = False,
                   log: Callable[[str], None] | None = None) -> TrainResult:
        """Train on batches of rows of ``data`` (the keyword arrays of the model's ``forward``), or,
        with ``data`` a function, on the fresh batch it draws at every step; floating-point arrays
        take the model's dtype."""
        dtype = model_dtype(self.model)
        if callable(data):
            return self._run(lambda _: self.update(self.model.forward(**as_model_dtype(data(), dtype))), None,
                             evaluate, progress, log)
        arrays = as_model_dtype(data, dtype)
        n_examples = len(next(iter(arrays.values())))
        return self._run(lambda indices: self.update(self.model.forward(**{name: value[indices] for name, value
                                                                           in arrays.items()})),
                         n_examples, evaluate, progress, log)

    def _run(self, step, n_examples: int | None, evaluate, progress: bool, log) -> TrainResult:
        from threadpoolctl import threadpool_limits

        c = self.config
        with nullcontext() if c.blas_threads is None else threadpool_limits(c.blas_threads, user_api="blas"):
            return run_training(step, n_examples, c, evaluate, progress, log, snapshot=self.model.state_dict,
                                restore=self.model.load_state_dict)
