"""Training the torch models, on sequence pairs or on named arrays: the whole training set on the
device once, fused optimizer steps, optional bfloat16 autocast on CUDA.

The loop (batches, stopping rules, evaluation, progress) is ``attention_course.training``, the one
every task on either track trains with; losses stay on the device until the loop reads them.
Greedy evaluation is ``decoding.greedy_translate``.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Mapping

import numpy as np
import torch
from torch import nn

from ..core.configs import OptionError
from ..core.schedules import warmup_inverse_sqrt
from ..data import ParallelBatch
from ..training import TrainConfig, TrainResult, run_training
from .base import BATCH_FIELDS, batch_to_tensors

__all__ = ["Trainer", "WithLoss", "DeviceError", "resolve_device", "check_amp", "as_tensor", "to_tensors"]


class DeviceError(OptionError):
    """A device that cannot be used here (e.g. "cuda" without a GPU)."""


def resolve_device(device: str | torch.device) -> torch.device:
    """A usable torch device, or a DeviceError that says why not."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise DeviceError(f"device: {error}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError("device 'cuda' was asked for, but torch sees no usable CUDA GPU here "
                              f"(torch {torch.__version__}, built {'with' if torch.version.cuda else 'without'} CUDA); "
                              "use --device cpu, or run 'attention-course doctor'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif device.type != "cpu":
        raise DeviceError(f"device: expected 'cpu' or 'cuda', got {str(device)!r}")
    return device


def check_amp(device: torch.device, amp: bool) -> None:
    """Mixed precision (bfloat16 autocast) is for CUDA devices: a DeviceError elsewhere."""
    if amp and device.type != "cuda":
        raise DeviceError("amp: automatic mixed precision is for CUDA devices; drop --amp on the CPU")


def as_tensor(value, like: torch.Tensor):
    """A NumPy array as a tensor on the device of ``like`` (a parameter), in its dtype if floating-point;
    any other value as it is."""
    if not isinstance(value, np.ndarray):
        return value
    tensor = torch.from_numpy(np.ascontiguousarray(value)).to(like.device)
    return tensor.to(like.dtype) if tensor.is_floating_point() else tensor


def to_tensors(arrays: Mapping[str, np.ndarray], like: torch.Tensor) -> dict[str, torch.Tensor]:
    """``arrays`` as tensors on the device of ``like``, floating-point ones in its dtype."""
    return {name: as_tensor(value, like) for name, value in arrays.items()}


class WithLoss(nn.Module):
    """A model that maps inputs to outputs, and a loss on those outputs, as one module whose
    ``forward(inputs, **targets)`` is the loss (``loss(model(inputs), **targets)``).

    What the copy task trains: the NTM's logits scored by ``SigmoidCrossEntropy``. Its parameters
    are the model's (named ``model.<name>``).
    """

    def __init__(self, model: nn.Module, loss: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, inputs: torch.Tensor, **targets) -> torch.Tensor:
        return self.loss(self.model(inputs), **targets)


class Trainer:
    """Trains a model with Adam on ``device``: a ``Seq2seq``/``AttentionSeq2seq``/``TransformerSeq2seq``
    on a ``ParallelBatch`` (``fit``), or any model whose ``forward(**arrays)`` is the loss on named
    arrays (``fit_arrays``: the classifier, the captioner, the memory network, ``WithLoss``)."""

    def __init__(self, model, config: TrainConfig, device="cpu", amp: bool = False) -> None:
        self.device = resolve_device(device)
        check_amp(self.device, amp)
        self.model = model.to(self.device)
        self.config = config
        self.amp = amp
        self.params = [p for p in model.parameters() if p.requires_grad]
        fused = self.device.type == "cuda"
        self.optimizer = torch.optim.Adam(self.params, lr=config.lr, **({"fused": True} if fused else {"foreach": True}))
        self.updates = 0

    def train_step(self, tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """One step on a batch of sequence pairs; returns (loss, gradient norm before clipping) as 0-d
        tensors on the device."""
        return self.step(*(tensors[name] for name in BATCH_FIELDS))

    def step(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step on the loss ``model(*args, **kwargs)``: (loss, gradient norm before clipping)."""
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16) if self.amp else nullcontext()
        with autocast:
            loss = self.model(*args, **kwargs)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        max_norm = self.config.max_grad_norm
        norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm if max_norm is not None else float("inf"),
                                              foreach=True)
        self.updates += 1
        if self.config.warmup_steps is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = self.config.lr * warmup_inverse_sqrt(self.updates, self.config.warmup_steps)
        self.optimizer.step()
        return loss.detach(), norm.detach()

    def _snapshot(self) -> dict[str, torch.Tensor]:
        return {name: value.detach().clone() for name, value in self.model.state_dict().items()}

    def _warm_up(self, data: dict[str, torch.Tensor]) -> None:
        """Start CUDA's libraries (cuBLAS, cuDNN's RNN plans, the allocator) before the clock runs.

        One forward and backward pass of a throwaway copy of the model on the first batch: the
        model, its gradients and the optimizer are untouched, so training is as without it.
        """
        import copy

        shadow = copy.deepcopy(self.model)
        batch = {name: tensor[: self.config.batch_size] for name, tensor in data.items()}
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16) if self.amp else nullcontext()
        with autocast:
            loss = shadow(*(batch[name] for name in BATCH_FIELDS))
        loss.backward()
        with torch.no_grad():
            shadow.eval()
            shadow.generate(batch["source"], batch["source_mask"], 1, 2)
        del shadow, loss
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def fit(self, train: ParallelBatch, evaluate: Callable[[], float] | None = None, progress: bool = True,
            log: Callable[[str], None] | None = None) -> TrainResult:
        """Train until a stopping rule fires; ``evaluate()`` returns test exact match."""
        data = batch_to_tensors(train, self.device)  # once: batches are gathered on the device
        self.model.train()
        if self.device.type == "cuda":
            self._warm_up(data)
        return self._run(lambda indices: self.train_step(self._gather(data, indices)), len(train), evaluate,
                         progress, log)

    def fit_arrays(self, data: Mapping[str, np.ndarray] | Callable[[], Mapping[str, np.ndarray]],
                   evaluate: Callable[[], float] | None = None, progress: bool = False,
                   log: Callable[[str], None] | None = None) -> TrainResult:
        """Train on batches of rows of ``data`` (the keyword arrays of the model's ``forward``), or,
        with ``data`` a function, on the fresh batch it draws at every step; floating-point arrays
        take the model's dtype."""
        parameter = next(self.model.parameters())
        self.model.train()
        if callable(data):
            return self._run(lambda _: self.step(**to_tensors(data(), parameter)), None, evaluate, progress, log)
        tensors = to_tensors(data, parameter)  # once: batches are gathered on the device
        n_examples = len(next(iter(tensors.values())))
        return self._run(lambda indices: self.step(**self._gather(tensors, indices)), n_examples, evaluate,
                         progress, log)

    def _gather(self, tensors: dict[str, torch.Tensor], indices: np.ndarray) -> dict[str, torch.Tensor]:
        index = torch.from_numpy(indices).to(self.device, non_blocking=True)
        return {name: tensor.index_select(0, index) for name, tensor in tensors.items()}

    def _run(self, step, n_examples: int | None, evaluate, progress: bool, log) -> TrainResult:
        # On the CPU, as in the NumPy track: the ops are small, and intra-op threads only add
        # overhead, and collapse when another process wants the cores (TrainConfig.blas_threads).
        threads = self.config.blas_threads if self.device.type == "cpu" else None
        previous = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            return run_training(step, n_examples, self.config, evaluate, progress, log, snapshot=self._snapshot,
                                restore=self.model.load_state_dict)
        finally:
            torch.set_num_threads(previous)
