"""The Neural Turing Machine in torch: the same layers, parameters and equations as
``attention_course.numpy_track.ntm`` (read its docstring); autograd does the backward pass.

Each layer's ``forward`` checks its arguments' shapes and calls a function of the same job
(``content_addressing``, ``interpolate``, ``shift``, ``sharpen``, ``read``, ``write``); the
``NTM``'s loop over the steps calls those functions directly, so that the checks are not paid
at every step of every sequence.

Shapes: N batch, T steps, R memory locations, C memory width, h heads, S shift offsets.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core.configs import NTMConfig
from ..core.initializers import init_rng
from .base import check_tensor, resolve_dtype
from .layers import Affine
from .recurrent import LSTM, LSTMCell

__all__ = [
    "MEMORY_INIT",
    "COSINE_EPS",
    "SHARPEN_EPS",
    "content_addressing",
    "interpolate",
    "shift",
    "sharpen",
    "read",
    "write",
    "ContentAddressing",
    "Interpolation",
    "ConvolutionalShift",
    "Sharpening",
    "Addressing",
    "HeadParameters",
    "ReadHead",
    "WriteHead",
    "NTM",
    "LSTMBaseline",
    "SigmoidCrossEntropy",
    "NTMConfig",
]

MEMORY_INIT = 1e-6
COSINE_EPS = 1e-8
SHARPEN_EPS = 1e-20


# --- the operations, unchecked ---------------------------------------------------------------


def content_addressing(memory: torch.Tensor, key: torch.Tensor,
                       strength: torch.Tensor) -> torch.Tensor:
    """``w^c(i) = softmax_i(beta K(k, M(i)))``, ``K(k, m) = k.m / (|k| |m| + eps)``.

    Shapes: memory (N, R, C), key (N, h, C), strength (N, h) -> (N, h, R).
    """
    dots = key @ memory.transpose(1, 2)  # (N, h, R)
    key_norm = key.norm(dim=-1).unsqueeze(-1)  # (N, h, 1)
    row_norm = memory.norm(dim=-1).unsqueeze(1)  # (N, 1, R)
    similarity = dots / (key_norm * row_norm + COSINE_EPS)
    return torch.softmax(strength.unsqueeze(-1) * similarity, dim=-1)


def interpolate(content_weights: torch.Tensor, previous_weights: torch.Tensor,
                gate: torch.Tensor) -> torch.Tensor:
    """``w^g = g w^c + (1 - g) w_prev``.

    Shapes: content_weights, previous_weights (N, h, R), gate (N, h) -> (N, h, R).
    """
    g = gate.unsqueeze(-1)
    return g * content_weights + (1 - g) * previous_weights


def shift(weights: torch.Tensor, shift_distribution: torch.Tensor) -> torch.Tensor:
    """``w~(i) = sum_k s(k) w(i - k)``, indices modulo R, offsets ``k = -r .. r``.

    Shapes: weights (N, h, R), shift_distribution (N, h, S = 2r + 1) -> (N, h, R).
    """
    r = shift_distribution.shape[-1] // 2
    # Wrap r locations round each end, then slide a window of 2r + 1: window i holds
    # w(i - r) .. w(i + r), which the reversed distribution s(r) .. s(-r) weighs.
    if r:
        weights = torch.cat([weights[..., -r:], weights, weights[..., :r]], dim=-1)
    windows = weights.unfold(-1, 2 * r + 1, 1)  # (N, h, R, S)
    return (windows * shift_distribution.flip(-1).unsqueeze(-2)).sum(-1)


def sharpen(weights: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """``w(i) = w~(i)^gamma / sum_j w~(j)^gamma``, computed as
    ``softmax_i(gamma log(w~(i) + eps))``.

    Shapes: weights (N, h, R), gamma (N, h) -> (N, h, R).
    """
    log_weights = torch.log(weights + SHARPEN_EPS)
    return torch.softmax(gamma.unsqueeze(-1) * log_weights, dim=-1)


def read(memory: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``r = sum_i w(i) M(i)``.

    Shapes: memory (N, R, C), weights (N, h, R) -> (N, h, C).
    """
    return weights @ memory


def write(memory: torch.Tensor, weights: torch.Tensor, erase: torch.Tensor,
          add: torch.Tensor) -> torch.Tensor:
    """``M_t(i) = M_{t-1}(i) prod_h (1 - w_h(i) e_h) + sum_h w_h(i) a_h``.

    Shapes: memory (N, R, C), weights (N, h, R), erase and add (N, h, C) -> (N, R, C).
    """
    if weights.shape[1] == 1:  # one write head: M (1 - w e) + w a
        w = weights.transpose(1, 2)  # (N, R, 1)
        return memory * (1 - w * erase) + w * add
    keep = (1 - weights.unsqueeze(-1) * erase.unsqueeze(2)).prod(dim=1)  # (N, R, C)
    return memory * keep + weights.transpose(1, 2) @ add


# --- the layers, checked -----------------------------------------------------------------------


class ContentAddressing(nn.Module):
    """``w^c(i) = softmax_i(beta K(k, M(i)))``, ``K`` the cosine similarity.

    Shapes:
        memory: (N, R, C).  key: (N, h, C).  strength: (N, h).  returns: (N, h, R).
    """

    def forward(
        self, memory: torch.Tensor, key: torch.Tensor, strength: torch.Tensor
    ) -> torch.Tensor:
        sizes = check_tensor("memory", memory, ("N", "R", "C"))
        sizes = check_tensor("key", key, ("N", "h", "C"), sizes)
        check_tensor("strength", strength, ("N", "h"), sizes)
        return content_addressing(memory, key, strength)


class Interpolation(nn.Module):
    """``w^g = g w^c + (1 - g) w_prev``.

    Shapes:
        content_weights, previous_weights: (N, h, R).  gate: (N, h).  returns: (N, h, R).
    """

    def forward(
        self,
        content_weights: torch.Tensor,
        previous_weights: torch.Tensor,
        gate: torch.Tensor,
    ) -> torch.Tensor:
        sizes = check_tensor("content_weights", content_weights, ("N", "h", "R"))
        check_tensor("previous_weights", previous_weights, ("N", "h", "R"), sizes)
        check_tensor("gate", gate, ("N", "h"), sizes)
        return interpolate(content_weights, previous_weights, gate)


class ConvolutionalShift(nn.Module):
    """``w~(i) = sum_k s(k) w(i - k)`` modulo R; ``shift[..., k + r]`` is the probability of offset ``k``.

    Shapes:
        weights: (N, h, R).  shift: (N, h, S), S = 2 r + 1 <= R.  returns: (N, h, R).
    """

    def forward(
        self, weights: torch.Tensor, shift_distribution: torch.Tensor
    ) -> torch.Tensor:
        sizes = check_tensor("weights", weights, ("N", "h", "R"))
        check_tensor("shift", shift_distribution, ("N", "h", None), sizes)
        S, R = shift_distribution.shape[-1], weights.shape[-1]
        if S % 2 == 0 or S > R:
            raise ValueError(
                f"shift: expected an odd number of offsets, at most R={R}, got {S}"
            )
        return shift(weights, shift_distribution)


class Sharpening(nn.Module):
    """``w(i) = w~(i)^gamma / sum_j w~(j)^gamma``, ``gamma >= 1``.

    Shapes:
        weights: (N, h, R).  gamma: (N, h).  returns: (N, h, R).
    """

    def forward(self, weights: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
        sizes = check_tensor("weights", weights, ("N", "h", "R"))
        check_tensor("gamma", gamma, ("N", "h"), sizes)
        return sharpen(weights, gamma)


class Addressing(nn.Module):
    """Content, interpolation, shift, sharpening in turn.

    Shapes:
        memory: (N, R, C).  previous_weights: (N, h, R).  key: (N, h, C).
        strength, gate, gamma: (N, h).  shift: (N, h, S).  returns: (N, h, R).
    """

    def __init__(self) -> None:
        super().__init__()
        self.content = ContentAddressing()
        self.interpolation = Interpolation()
        self.shift = ConvolutionalShift()
        self.sharpening = Sharpening()

    def forward(
        self, memory, previous_weights, key, strength, gate, shift_distribution, gamma
    ) -> torch.Tensor:
        content_weights = self.content(memory, key, strength)
        gated = self.interpolation(content_weights, previous_weights, gate)
        return self.sharpening(self.shift(gated, shift_distribution), gamma)


class HeadParameters(nn.Module):
    """Split and constrain what each head emits: key as is, ``beta = softplus``, ``g = sigmoid``,
    ``s = softmax``, ``gamma = 1 + softplus``.

    Shapes:
        raw: (N, h, C + 3 + S).  returns key (N, h, C), strength, gate (N, h), shift (N, h, S), gamma (N, h).
    """

    def __init__(self, memory_width: int, num_shifts: int) -> None:
        super().__init__()
        self.memory_width, self.num_shifts = memory_width, num_shifts

    @property
    def size(self) -> int:
        return self.memory_width + 3 + self.num_shifts

    def forward(self, raw: torch.Tensor) -> tuple:
        key, strength, gate, shift_raw, gamma = raw.split(
            [self.memory_width, 1, 1, self.num_shifts, 1], dim=-1
        )
        return (
            key,
            F.softplus(strength.squeeze(-1)),
            torch.sigmoid(gate.squeeze(-1)),
            torch.softmax(shift_raw, dim=-1),
            1 + F.softplus(gamma.squeeze(-1)),
        )


class ReadHead(nn.Module):
    """``r = sum_i w(i) M(i)``.

    Shapes:
        memory: (N, R, C).  weights: (N, h, R).  returns: (N, h, C).
    """

    def forward(self, memory: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        sizes = check_tensor("memory", memory, ("N", "R", "C"))
        check_tensor("weights", weights, ("N", "h", "R"), sizes)
        return read(memory, weights)


class WriteHead(nn.Module):
    """``M_t(i) = M_{t-1}(i) * prod_h (1 - w_h(i) e_h) + sum_h w_h(i) a_h``.

    Shapes:
        memory: (N, R, C).  weights: (N, h, R).  erase, add: (N, h, C).  returns: (N, R, C).
    """

    def forward(
        self,
        memory: torch.Tensor,
        weights: torch.Tensor,
        erase: torch.Tensor,
        add: torch.Tensor,
    ) -> torch.Tensor:
        sizes = check_tensor("memory", memory, ("N", "R", "C"))
        sizes = check_tensor("weights", weights, ("N", "h", "R"), sizes)
        check_tensor("erase", erase, ("N", "h", "C"), sizes)
        check_tensor("add", add, ("N", "h", "C"), sizes)
        return write(memory, weights, erase, add)


class NTM(nn.Module):
    """The Neural Turing Machine: an LSTM controller, read heads and write heads, a memory.

    The same steps, parameters (``controller``, ``address``, ``write``, ``out``) and start as the
    NumPy track's ``NTM`` (read its docstring). ``record=True`` (the default outside training)
    keeps every step's weightings, detached, in ``read_weights`` and ``write_weights``.

    Shapes:
        inputs: (N, T, input_size).  returns logits: (N, T, output_size).
        read_weights: (N, T, num_read_heads, R).  write_weights: (N, T, num_write_heads, R).
    """

    def __init__(self, config: NTMConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        C, S = c.memory_width, c.num_shifts
        self.controller = LSTMCell(
            c.input_size + c.num_read_heads * C, c.controller_size, rng=rng, dtype=dtype
        )
        self.head_parameters = HeadParameters(C, S)
        self.address = Affine(
            c.controller_size,
            c.num_heads * self.head_parameters.size,
            rng=rng,
            dtype=dtype,
        )
        self.write = Affine(
            c.controller_size, c.num_write_heads * 2 * C, rng=rng, dtype=dtype
        )
        self.out = Affine(
            c.controller_size + c.num_read_heads * C,
            c.output_size,
            rng=rng,
            dtype=dtype,
        )
        self.read_weights = self.write_weights = None

    def initial_state(self, like: torch.Tensor, N: int) -> dict:
        """``M_0``, every head's ``w_0`` (one-hot on location 0) and ``r_0 = 0``, on ``like``'s device and dtype."""
        c = self.config
        weights = like.new_zeros(N, c.num_heads, c.memory_size)
        weights[:, :, 0] = 1
        return {
            "memory": like.new_full((N, c.memory_size, c.memory_width), MEMORY_INIT),
            "weights": weights,
            "reads": like.new_zeros(N, c.num_read_heads * c.memory_width),
        }

    def forward(self, inputs: torch.Tensor, record: bool | None = None) -> torch.Tensor:
        c = self.config
        check_tensor("inputs", inputs, ("N", "T", c.input_size))
        N, T, D = inputs.shape
        C, n_read, n_write = c.memory_width, c.num_read_heads, c.num_write_heads
        record = not self.training if record is None else record
        start = self.initial_state(inputs, N)
        memory, previous, reads = start["memory"], start["weights"], start["reads"]
        h, cell = self.controller.zeros(inputs, N)
        W_x, b = self.controller.W_x, self.controller.b
        # The inputs' part of the controller's product, for every step at once (the
        # reads' part stays in the loop). Unbound into steps: one backward node for them
        # all, where indexing [:, t] would add a zeroed (N, T, 4H) gradient every step.
        x_steps = (inputs.reshape(N * T, D) @ W_x[:D] + b).reshape(N, T, -1).unbind(1)
        W_reads = W_x[D:]
        # The address and write heads read the same h_t: one product for both.
        W_heads = torch.cat([self.address.W, self.write.W], dim=1)
        b_heads = torch.cat([self.address.b, self.write.b])
        sizes = [self.address.out_features, self.write.out_features]
        hidden, all_reads, recorded = [], [], []
        for x_t in x_steps:  # step t
            # 1. the controller reads the input and the previous step's reads
            h, cell = self.controller.step(x_t + reads @ W_reads, (h, cell))
            # 2. every head emits its parameters and finds its weighting over M_{t-1}
            emitted = torch.addmm(b_heads, h, W_heads)
            address_raw, write_raw = emitted.split(sizes, dim=1)
            key, strength, gate, shift_distribution, gamma = self.head_parameters(
                address_raw.reshape(N, c.num_heads, -1))
            content_weights = content_addressing(memory, key, strength)
            gated = interpolate(content_weights, previous, gate)
            weights = sharpen(shift(gated, shift_distribution), gamma)  # (N, h, R)
            # 3. the read heads read M_{t-1}; the write heads erase and add
            read_weights, write_weights = weights.split([n_read, n_write], dim=1)
            reads = read(memory, read_weights).reshape(N, n_read * C)
            erase, add = write_raw.reshape(N, n_write, 2 * C).split(C, dim=-1)
            memory = write(memory, write_weights, torch.sigmoid(erase), torch.tanh(add))
            hidden.append(h)
            all_reads.append(reads)
            if record:
                recorded.append(weights.detach())
            previous = weights
        # 4. the output, from [h_t ; r_t] at every step
        joined = torch.cat([torch.stack(hidden, 1), torch.stack(all_reads, 1)], -1)
        if record:
            weights = torch.stack(recorded, dim=1)  # (N, T, h, R)
            self.read_weights = weights[:, :, :n_read]
            self.write_weights = weights[:, :, n_read:]
        return self.out(joined)  # (N, T, output_size)


class LSTMBaseline(nn.Module):
    """The baseline without memory: an LSTM over the sequence, an affine read-out per step.

    Shapes:
        inputs: (N, T, input_size).  returns logits: (N, T, output_size).
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        hidden_size: int = 256,
        *,
        rng=None,
        dtype=torch.float32,
    ) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.lstm = LSTM(input_size, hidden_size, rng=rng, dtype=dtype)
        self.out = Affine(hidden_size, output_size, rng=rng, dtype=dtype)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.out(self.lstm(inputs))


class SigmoidCrossEntropy(nn.Module):
    """Mean binary cross-entropy of the bits over the steps where ``mask`` is True.

    Shapes:
        logits, targets: (N, T, B).  mask: (N, T) bool or None.  returns: a 0-d tensor.
    """

    def forward(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sizes = check_tensor("logits", logits, ("N", "T", "B"))
        check_tensor("targets", targets, ("N", "T", "B"), sizes)
        losses = F.binary_cross_entropy_with_logits(
            logits, targets.to(logits.dtype), reduction="none"
        )
        if mask is None:
            return losses.mean()
        check_tensor("mask", mask, ("N", "T"), sizes, kind="bool")
        weight = mask.to(losses.dtype).unsqueeze(-1)
        return (losses * weight).sum() / (weight.sum() * logits.shape[-1]).clamp_min(
            1.0
        )
