"""The torch track as the tasks, the command line, checkpoints and the explorer see it (``attention_course.tracks``).

Every track's ``track`` module has these names; the callers never ask which track they hold.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.batches import in_chunks
from ..core.configs import (CaptionerConfig, ClassifierConfig, MemoryConfig, NTMConfig, ReaderConfig,
                            TransformerConfig)
from ..data import ParallelBatch, Vocabulary
from ..decoding import Decoded
from ..training import TrainConfig, TrainResult
from . import decoding
from .base import batch_to_tensors, resolve_dtype
from .captioning import CNNCaptioner
from .classifier import SequenceClassifier
from .memory import MemN2N
from .reader import AttentiveReader
from .ntm import NTM, LSTMBaseline, SigmoidCrossEntropy
from .seq2seq import build_model as _build_model
from .transformer import TransformerSeq2seq
from .trainer import Trainer, WithLoss, as_tensor, check_amp, resolve_device

__all__ = ["NAME", "DEFAULTS", "MODEL_DEFAULTS", "TASK_DEFAULTS", "LOSSES", "MODELS", "check_options",
           "default_batch_size", "is_model", "build_model", "make_trainer", "fit", "call", "num_parameters", "weights",
           "load_weights", "to_device", "greedy_decode", "encode"]

NAME = "torch"
# Chosen by benchmarks/dates_time_to_accuracy.py: torch's GRU form (the fused kernels), narrower,
# a higher rate.
DEFAULTS = {"hidden_size": 48, "lr": 0.015, "gru_form": "torch"}
# What a model kind needs instead: the Transformer wants a lower rate than the recurrent models
# (on dates, torch track, seed 0, 300 steps: 88%, 97%, 98% and 91% exact match at a constant
# 0.001, 0.002, 0.004 and 0.008), and its recipe: the rate rises to that peak over 100 steps and
# then falls as 1/sqrt(step) (core.schedules; label smoothing is in TransformerConfig). On
# translation, seed 0: 99% after 650 steps, with the peak 0.004 after 100 steps of warm-up and
# with 0.006 after 200; at a constant 0.004, 1 of 3 seeds within 2,000 steps.
MODEL_DEFAULTS = {"transformer": {"lr": 0.004, "warmup_steps": 100}}
# What a task does differently on this track. Captioning: a small CNN (``CNNCaptioner``: four 2x2
# convolutions of stride 2, 64 -> 4, the last 16 wide) trained with the decoder end to end from the
# pixels. In trial runs a 64-wide last layer left the decoder's attention nearly uniform (the mean
# feature that starts the decoder can hold the whole scene); a 16-wide one made it sharper. The
# CNN trains at lr 0.003 for 30 epochs: at the decoder's 0.01 for 20, the shape words of one seed
# in three looked at their objects in only 64% of the cases (at another object or an empty cell).
TASK_DEFAULTS = {"caption": {"inputs": "images", "lr": 0.003, "epochs": 30, "cnn_channels": (16, 32, 32),
                             "feature_size": 16}}
# Losses on a model's outputs, by name, for ``fit(..., loss=...)``.
LOSSES = {"bit_cross_entropy": SigmoidCrossEntropy}
# The models a task builds, by kind: the class and the config it is built from ("attention" and
# "seq2seq" are seq2seq.build_model's; "lstm", the copy task's baseline, is built from a mapping).
MODELS = {"transformer": (TransformerSeq2seq, TransformerConfig), "classifier": (SequenceClassifier, ClassifierConfig),
          "captioner": (CNNCaptioner, CaptionerConfig), "memory": (MemN2N, MemoryConfig),
          "reader": (AttentiveReader, ReaderConfig), "ntm": (NTM, NTMConfig)}


def check_options(device=None, amp: bool = False) -> None:
    """A DeviceError says why ``device`` cannot be used here, or why ``amp`` does not apply to it."""
    check_amp(resolve_device(device or "cpu"), amp)


def default_batch_size(device=None) -> int:
    """128; 256 on CUDA, where a step of 256 costs what a step of 128 does."""
    return 256 if resolve_device(device or "cpu").type == "cuda" else 128


def is_model(obj) -> bool:
    return isinstance(obj, torch.nn.Module)


def build_model(kind: str, config, seed: int = 0):
    """A fresh model, its weights drawn from ``seed`` (as on the NumPy track): ``"attention"`` or
    ``"seq2seq"`` from a ``Seq2seqConfig``; ``"transformer"``, ``"classifier"``, ``"captioner"`` (a
    CNN and the decoder, from pixels), ``"memory"``, ``"reader"`` or ``"ntm"`` from their configs (``MODELS``);
    ``"lstm"`` (the copy task's baseline) from a mapping of ``input_size``, ``output_size``,
    ``hidden_size`` and ``dtype``."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    if kind == "lstm":
        return LSTMBaseline(config["input_size"], config["output_size"], config["hidden_size"], rng=rng,
                            dtype=resolve_dtype(config["dtype"]))
    if kind in MODELS:
        model, config_type = MODELS[kind]
        if not isinstance(config, config_type):
            raise ValueError(f"model {kind!r}: expected a {config_type.__name__}, got a {type(config).__name__}")
        return model(config, rng=rng)
    return _build_model(kind, config, rng=rng)


def make_trainer(model, config: TrainConfig, device=None, amp: bool = False) -> Trainer:
    return Trainer(model, config, device=device or "cpu", amp=amp)


def fit(model, data, config: TrainConfig, evaluate=None, *, loss: str | None = None, progress: bool = False,
        log=None, device=None) -> TrainResult:
    """Train ``model`` with the one loop (``training.run_training``) until a stopping rule of ``config``
    fires, on ``device`` (default the CPU).

    ``data``: named arrays, the keyword arguments of the model's ``forward``, whose rows are drawn
    in batches; or a function that draws a fresh batch of them at every step. Without ``loss``,
    ``model(**batch)`` is the loss; with it (a name in ``LOSSES``), the loss is that module's on
    ``model(batch["inputs"])`` and the batch's other arrays. ``evaluate()`` returns the accuracy
    that the stopping rule and the kept weights go by.
    """
    trainable = model if loss is None else WithLoss(model, LOSSES[loss]())
    return make_trainer(trainable, config, device).fit_arrays(data, evaluate, progress, log)


@torch.no_grad()
def call(model, method: str, *args, batch_size: int = 512, **kwargs):
    """``model.<method>(*args, **kwargs)`` on NumPy arrays, in chunks of ``batch_size`` rows, in eval mode
    without autograd: the arrays become tensors on the model's device (floating-point ones in its
    dtype); the results come back as NumPy arrays (float32 for half precision), joined along the
    first axis."""
    parameter = next(model.parameters())

    def once(*chunk_args, **chunk_kwargs):
        out = getattr(model, method)(*(as_tensor(value, parameter) for value in chunk_args),
                                     **{name: as_tensor(value, parameter) for name, value in chunk_kwargs.items()})
        return tuple(_to_numpy(part) for part in out) if isinstance(out, tuple) else _to_numpy(out)

    was_training = model.training
    model.eval()
    try:
        return in_chunks(once, args, kwargs, batch_size)
    finally:
        model.train(was_training)


def _to_numpy(value):
    if not isinstance(value, torch.Tensor):
        return value
    value = value.detach().cpu()
    return value.float().numpy() if value.dtype in (torch.bfloat16, torch.float16) else value.numpy()


def num_parameters(model) -> int:
    """The number of trained parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def weights(model) -> dict[str, np.ndarray]:
    """Every parameter as a NumPy array (float32 or float64) by dotted name: the checkpoint format."""
    out = {}
    for name, value in model.named_parameters():
        value = value.detach().cpu()
        out[name] = value.numpy() if value.dtype in (torch.float32, torch.float64) else value.float().numpy()
    return out


@torch.no_grad()
def load_weights(model, weights: dict[str, np.ndarray]):
    """Copy ``weights`` (by dotted name) into ``model``; a ValueError names a missing, extra or misshapen one."""
    own = dict(model.named_parameters())
    missing, unexpected = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing or unexpected:
        raise ValueError(f"load_weights: missing parameters {missing}, unexpected parameters {unexpected}")
    for name, param in own.items():
        value = np.asarray(weights[name])
        if value.shape != tuple(param.shape):
            raise ValueError(f"load_weights: parameter {name!r} has shape {tuple(param.shape)}, got {value.shape}")
    for name, param in own.items():
        param.copy_(torch.from_numpy(np.ascontiguousarray(weights[name])).to(param.device, param.dtype))
    return model


def to_device(model, device=None):
    """``model`` on ``device`` (a DeviceError says why a device cannot be used), in eval mode."""
    return model.to(resolve_device(device or "cpu")).eval()


def greedy_decode(model, batch: ParallelBatch, target_vocab: Vocabulary, max_length: int | None = None) -> Decoded:
    return decoding.greedy_decode(model, batch, target_vocab, max_length)


@torch.no_grad()
def encode(model, batch: ParallelBatch) -> np.ndarray:
    """The encoder states ``h_j`` of every example, (N, T_enc, H_enc), as a float NumPy array."""
    tensors = batch_to_tensors(batch, next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        return model.encoder(tensors["source"], tensors["source_mask"]).float().cpu().numpy()
    finally:
        model.train(was_training)
