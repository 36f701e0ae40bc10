"""The NumPy track as the tasks, the command line, checkpoints and the explorer see it (``attention_course.tracks``).

Every track's ``track`` module has these names; the callers never ask which track they hold.
"""

from __future__ import annotations

import numpy as np

from ..core.batches import in_chunks
from ..core.configs import (CaptionerConfig, ClassifierConfig, MemoryConfig, NTMConfig, OptionError, ReaderConfig,
                            TransformerConfig)
from ..data import ParallelBatch, Vocabulary
from ..decoding import Decoded
from ..training import TrainConfig, TrainResult
from . import decoding
from .base import Layer
from .captioning import CaptionDecoder
from .classifier import SequenceClassifier
from .memory import MemN2N
from .reader import AttentiveReader
from .ntm import NTM, LSTMBaseline, SigmoidCrossEntropy
from .seq2seq import build_model as _build_model
from .transformer import TransformerSeq2seq
from .trainer import Trainer, WithLoss, as_model_dtype, float_as, model_dtype

__all__ = ["NAME", "DEFAULTS", "MODEL_DEFAULTS", "TASK_DEFAULTS", "LOSSES", "MODELS", "check_options",
           "default_batch_size", "is_model", "build_model", "make_trainer", "fit", "call", "num_parameters", "weights",
           "load_weights", "to_device", "greedy_decode", "encode"]

NAME = "numpy"
# Chosen by benchmarks/dates_time_to_accuracy.py: the lectures' GRU, wider than the torch track's.
DEFAULTS = {"hidden_size": 64, "lr": 0.01, "gru_form": "lecture"}
# What a model kind needs instead: the Transformer wants a lower rate than the recurrent models
# (on dates, torch track, seed 0, 300 steps: 88%, 97%, 98% and 91% exact match at a constant
# 0.001, 0.002, 0.004 and 0.008), and its recipe: the rate rises to that peak over 100 steps and
# then falls as 1/sqrt(step) (core.schedules; label smoothing is in TransformerConfig). On
# translation, seed 0: 99% after 650 steps, with the peak 0.004 after 100 steps of warm-up and
# with 0.006 after 200; at a constant 0.004, 1 of 3 seeds within 2,000 steps.
MODEL_DEFAULTS = {"transformer": {"lr": 0.004, "warmup_steps": 100}}
# What a task does differently on this track. Captioning: the decoder attends over a given grid of
# features (the task's ``patch_features``: each cell's pixels pooled, and its place).
TASK_DEFAULTS = {"caption": {"inputs": "features"}}
# Losses on a model's outputs, by name, for ``fit(..., loss=...)``.
LOSSES = {"bit_cross_entropy": SigmoidCrossEntropy}
# The models a task builds, by kind: the class and the config it is built from ("attention" and
# "seq2seq" are seq2seq.build_model's; "lstm", the copy task's baseline, is built from a mapping).
MODELS = {"transformer": (TransformerSeq2seq, TransformerConfig), "classifier": (SequenceClassifier, ClassifierConfig),
          "captioner": (CaptionDecoder, CaptionerConfig), "memory": (MemN2N, MemoryConfig),
          "reader": (AttentiveReader, ReaderConfig), "ntm": (NTM, NTMConfig)}


def check_options(device=None, amp: bool = False) -> None:
    """The NumPy track runs on the CPU, in the parameters' dtype: a device or mixed precision is an error."""
    if device not in (None, "cpu"):
        raise OptionError(f"device {device!r}: the NumPy track runs on the CPU; for a GPU use --track torch")
    if amp:
        raise OptionError("amp: mixed precision is an option of the torch track on CUDA; use --track torch")


def default_batch_size(device=None) -> int:
    check_options(device)
    return 128


def is_model(obj) -> bool:
    return isinstance(obj, Layer)


def build_model(kind: str, config, seed: int = 0):
    """A fresh model, its weights drawn from ``seed`` (the same on both tracks): ``"attention"`` or
    ``"seq2seq"`` from a ``Seq2seqConfig``; ``"transformer"``, ``"classifier"``, ``"captioner"`` (the
    decoder over given features), ``"memory"``, ``"reader"`` or ``"ntm"`` from their configs (``MODELS``);
    ``"lstm"`` (the copy task's baseline) from a mapping of ``input_size``, ``output_size``,
    ``hidden_size`` and ``dtype``."""
    rng = np.random.default_rng(seed)
    if kind == "lstm":
        return LSTMBaseline(config["input_size"], config["output_size"], config["hidden_size"], rng=rng,
                            dtype=config["dtype"])
    if kind in MODELS:
        model, config_type = MODELS[kind]
        if not isinstance(config, config_type):
            raise ValueError(f"model {kind!r}: expected a {config_type.__name__}, got a {type(config).__name__}")
        return model(config, rng=rng)
    return _build_model(kind, config, rng=rng)


def make_trainer(model, config: TrainConfig, device=None, amp: bool = False) -> Trainer:
    check_options(device, amp)
    return Trainer(model, config)


def fit(model, data, config: TrainConfig, evaluate=None, *, loss: str | None = None, progress: bool = False,
        log=None, device=None) -> TrainResult:
    """Train ``model`` with the one loop (``training.run_training``) until a stopping rule of ``config`` fires.

    ``data``: named arrays, the keyword arguments of the model's ``forward``, whose rows are drawn
    in batches; or a function that draws a fresh batch of them at every step. Without ``loss``,
    ``model.forward(**batch)`` is the loss; with it (a name in ``LOSSES``), the loss is that
    layer's on ``model.forward(batch["inputs"])`` and the batch's other arrays. ``evaluate()``
    returns the accuracy that the stopping rule and the kept weights go by.
    """
    trainable = model if loss is None else WithLoss(model, LOSSES[loss]())
    return make_trainer(trainable, config, device).fit_arrays(data, evaluate, progress, log)


def call(model, method: str, *args, batch_size: int = 512, **kwargs):
    """``model.<method>(*args, **kwargs)`` on NumPy arrays, in chunks of ``batch_size`` rows, floating-point
    arrays in the model's dtype; results (arrays, or tuples of arrays) joined along the first axis."""
    dtype = model_dtype(model)

    def once(*chunk_args, **chunk_kwargs):
        return getattr(model, method)(*(float_as(value, dtype) for value in chunk_args),
                                      **as_model_dtype(chunk_kwargs, dtype))

    return in_chunks(once, args, kwargs, batch_size)


def num_parameters(model) -> int:
    """The number of trained parameters."""
    return model.num_parameters()


def weights(model) -> dict[str, np.ndarray]:
    """Copies of every parameter by dotted name: the checkpoint format."""
    return model.state_dict()


def load_weights(model, weights: dict[str, np.ndarray]):
    """Copy ``weights`` (by dotted name) into ``model``; a ValueError names a missing, extra or misshapen one."""
    model.load_state_dict(weights)
    return model


def to_device(model, device=None):
    check_options(device)
    return model


def greedy_decode(model, batch: ParallelBatch, target_vocab: Vocabulary, max_length: int | None = None) -> Decoded:
    return decoding.greedy_decode(model, batch, target_vocab, max_length)


def encode(model, batch: ParallelBatch) -> np.ndarray:
    """The encoder states ``h_j`` of every example, (N, T_enc, H_enc)."""
    return model.encoder.forward(batch.source, batch.source_mask)
