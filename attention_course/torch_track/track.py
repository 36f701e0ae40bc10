"""The torch track as the command line, checkpoints and the explorer see it (``attention_course.tracks``).

Every track's ``track`` module has these names; the callers never ask which track they hold.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.configs import TransformerConfig
from ..data import ParallelBatch, Vocabulary
from ..decoding import Decoded
from ..training import TrainConfig
from . import decoding
from .base import batch_to_tensors
from .seq2seq import build_model as _build_model
from .transformer import TransformerSeq2seq
from .trainer import Trainer, check_amp, resolve_device

__all__ = ["NAME", "DEFAULTS", "check_options", "default_batch_size", "is_model", "build_model",
           "make_trainer", "weights", "load_weights", "to_device", "greedy_decode", "encode"]

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
    ``"seq2seq"`` from a ``Seq2seqConfig``, ``"transformer"`` from a ``TransformerConfig``."""
    torch.manual_seed(seed)
    if kind == "transformer":
        if not isinstance(config, TransformerConfig):
            raise ValueError(f"model 'transformer': expected a TransformerConfig, got a {type(config).__name__}")
        return TransformerSeq2seq(config, rng=np.random.default_rng(seed))
    return _build_model(kind, config, rng=np.random.default_rng(seed))


def make_trainer(model, config: TrainConfig, device=None, amp: bool = False) -> Trainer:
    return Trainer(model, config, device=device or "cpu", amp=amp)


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
