"""The NumPy track as the command line, checkpoints and the explorer see it (``attention_course.tracks``).

Every track's ``track`` module has these names; the callers never ask which track they hold.
"""

from __future__ import annotations

import numpy as np

from ..core.configs import OptionError, TransformerConfig
from ..data import ParallelBatch, Vocabulary
from ..decoding import Decoded
from ..training import TrainConfig
from . import decoding
from .base import Layer
from .seq2seq import build_model as _build_model
from .transformer import TransformerSeq2seq
from .trainer import Trainer

__all__ = ["NAME", "DEFAULTS", "check_options", "default_batch_size", "is_model", "build_model",
           "make_trainer", "weights", "load_weights", "to_device", "greedy_decode", "encode"]

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
    """A fresh model, its weights drawn from ``seed``: ``"attention"`` or ``"seq2seq"`` from a
    ``Seq2seqConfig``, ``"transformer"`` (``TransformerSeq2seq``) from a ``TransformerConfig``."""
    if kind == "transformer":
        if not isinstance(config, TransformerConfig):
            raise ValueError(f"model 'transformer': expected a TransformerConfig, got a {type(config).__name__}")
        return TransformerSeq2seq(config, rng=np.random.default_rng(seed))
    return _build_model(kind, config, rng=np.random.default_rng(seed))


def make_trainer(model, config: TrainConfig, device=None, amp: bool = False) -> Trainer:
    check_options(device, amp)
    return Trainer(model, config)


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
