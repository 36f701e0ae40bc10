"""The Neural Turing Machine (Graves et al. 2014): an LSTM controller with a memory it reads and writes
through attention.

The memory ``M_t`` holds ``R`` locations of width ``C``. Each head finds a weighting ``w_t`` over
the locations (an attention distribution: non-negative, summing to 1) in four steps, each a layer
here with its own backward pass:

1. ``ContentAddressing``: ``w^c_t(i) = softmax_i(beta_t K(k_t, M_{t-1}(i)))``, ``K`` the cosine
   similarity, ``beta_t >= 0`` the key strength: attention over memory rows, scored by content.
2. ``Interpolation``: ``w^g_t = g_t w^c_t + (1 - g_t) w_{t-1}``, a gate between content and the
   previous location.
3. ``ConvolutionalShift``: ``w~_t(i) = sum_k s_t(k) w^g_t(i - k)`` (indices modulo ``R``), a move by
   a shift distribution ``s_t`` over the offsets ``-shift_range .. shift_range``.
4. ``Sharpening``: ``w_t(i) = w~_t(i)^gamma_t / sum_j w~_t(j)^gamma_t``, ``gamma_t >= 1``, which undoes
   the blur of the shift.

A ``ReadHead`` reads ``r_t = sum_i w_t(i) M_{t-1}(i)``; a ``WriteHead`` erases and adds,
``M_t(i) = M_{t-1}(i) * (1 - w_t(i) e_t) + w_t(i) a_t``. The ``NTM`` runs the controller, the
heads and the memory over a whole sequence and back. Every addressing layer takes a heads axis
``h``: all heads of the machine are addressed in one call.

Shapes (the glossary's N batch, T steps, plus): ``R`` memory locations, ``C`` memory width,
``h`` heads, ``S = 2 * shift_range + 1`` shift offsets.
"""

from __future__ import annotations

import numpy as np

from ..core.configs import NTMConfig
from ..core.initializers import init_rng
from ..core.shapes import check_array
from ..functional import sigmoid
from .base import Layer, as_dtype, float_dtype
from .layers import Affine, softmax, softmax_backward
from .recurrent import LSTM, LSTMCell

__all__ = [
    "MEMORY_INIT",
    "COSINE_EPS",
    "SHARPEN_EPS",
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

MEMORY_INIT = (
    1e-6  # every memory cell at the start: small and constant (Collier & Beel 2018)
)
COSINE_EPS = 1e-8  # K(u, v) = u.v / (|u| |v| + eps)
SHARPEN_EPS = 1e-20  # sharpening works on log(w~ + eps): a weight of exactly 0 keeps gamma's gradient finite


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


class ContentAddressing(Layer):
    """Attention over the memory's rows by content: ``w^c(i) = softmax_i(beta K(k, M(i)))``.

    ``K(k, m) = k.m / (|k| |m| + eps)`` is the cosine similarity; ``beta >= 0`` (the key strength)
    sharpens (large) or flattens (0: uniform) the weighting.

    Shapes:
        memory: (N, R, C).  key: (N, h, C).  strength: (N, h).  returns: (N, h, R).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    def forward(
        self, memory: np.ndarray, key: np.ndarray, strength: np.ndarray
    ) -> np.ndarray:
        float_dtype(memory, "memory")
        sizes = check_array("memory", memory, ("N", "R", "C"))
        sizes = check_array("key", key, ("N", "h", "C"), sizes)
        check_array("strength", strength, ("N", "h"), sizes)
        key_norm = np.sqrt((key * key).sum(axis=-1))  # (N, h)
        row_norm = np.sqrt((memory * memory).sum(axis=-1))  # (N, R)
        dots = key @ memory.swapaxes(1, 2)  # (N, h, R)
        denominator = (
            key_norm[:, :, None] * row_norm[:, None, :] + COSINE_EPS
        )  # (N, h, R)
        similarity = dots / denominator
        weights = softmax(strength[:, :, None] * similarity)
        self._cache = (
            memory,
            key,
            strength,
            key_norm,
            row_norm,
            dots,
            denominator,
            similarity,
            weights,
        )
        return weights

    def backward(
        self, d_weights: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns ``(d_memory, d_key, d_strength)``."""
        (
            memory,
            key,
            strength,
            key_norm,
            row_norm,
            dots,
            denominator,
            similarity,
            weights,
        ) = self._cache
        d_scores = softmax_backward(weights, d_weights)  # (N, h, R)
        d_strength = (d_scores * similarity).sum(axis=-1)
        d_similarity = d_scores * strength[:, :, None]
        d_dots = d_similarity / denominator
        d_denominator = -d_similarity * dots / (denominator * denominator)
        d_key_norm = (d_denominator * row_norm[:, None, :]).sum(axis=-1)  # (N, h)
        d_row_norm = (d_denominator * key_norm[:, :, None]).sum(axis=1)  # (N, R)
        tiny = np.finfo(memory.dtype).tiny  # the norm's gradient u/|u| at u = 0: 0
        d_key = (
            d_dots @ memory
            + key * (d_key_norm / np.maximum(key_norm, tiny))[:, :, None]
        )
        d_memory = (
            d_dots.swapaxes(1, 2) @ key
            + memory * (d_row_norm / np.maximum(row_norm, tiny))[:, :, None]
        )
        return d_memory, d_key, d_strength


class Interpolation(Layer):
    """The gate between content and location: ``w^g = g w^c + (1 - g) w_prev``, ``g`` in [0, 1].

    Shapes:
        content_weights, previous_weights: (N, h, R).  gate: (N, h).  returns: (N, h, R).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    def forward(
        self,
        content_weights: np.ndarray,
        previous_weights: np.ndarray,
        gate: np.ndarray,
    ) -> np.ndarray:
        sizes = check_array("content_weights", content_weights, ("N", "h", "R"))
        check_array("previous_weights", previous_weights, ("N", "h", "R"), sizes)
        check_array("gate", gate, ("N", "h"), sizes)
        self._cache = (content_weights, previous_weights, gate)
        g = gate[:, :, None]
        return g * content_weights + (1 - g) * previous_weights

    def backward(
        self, d_weights: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns ``(d_content_weights, d_previous_weights, d_gate)``."""
        content_weights, previous_weights, gate = self._cache
        g = gate[:, :, None]
        d_gate = (d_weights * (content_weights - previous_weights)).sum(axis=-1)
        return d_weights * g, d_weights * (1 - g), d_gate


class ConvolutionalShift(Layer):
    """Move a weighting by a distribution over offsets: ``w~(i) = sum_k s(k) w(i - k)``, modulo ``R``.

    ``shift[..., k + shift_range]`` is the probability of moving by ``k``, for
    ``k = -shift_range .. shift_range``: a one-hot shift on ``+1`` moves every weight one location
    on (the last wraps round to the first).

    Shapes:
        weights: (N, h, R).  shift: (N, h, S), S = 2 * shift_range + 1 <= R.  returns: (N, h, R).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    @staticmethod
    def offsets(num_shifts: int) -> range:
        """The offsets ``k`` of the shift distribution's entries, in order: ``-r .. r``."""
        radius = num_shifts // 2
        return range(-radius, radius + 1)

    def forward(self, weights: np.ndarray, shift: np.ndarray) -> np.ndarray:
        sizes = check_array("weights", weights, ("N", "h", "R"))
        check_array("shift", shift, ("N", "h", None), sizes)
        S, R = shift.shape[-1], weights.shape[-1]
        if S % 2 == 0 or S > R:
            raise ValueError(
                f"shift: expected an odd number of offsets, at most R={R}, got {S}"
            )
        shifted = np.stack(
            [np.roll(weights, k, axis=-1) for k in self.offsets(S)], axis=2
        )  # (N, h, S, R)
        self._cache = (shift, shifted)
        return (shift[:, :, :, None] * shifted).sum(axis=2)

    def backward(self, d_shifted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Returns ``(d_weights, d_shift)``."""
        shift, shifted = self._cache
        d_shift = (shifted * d_shifted[:, :, None, :]).sum(axis=-1)  # (N, h, S)
        d_weights = sum(
            np.roll(shift[:, :, index, None] * d_shifted, -k, axis=-1)
            for index, k in enumerate(self.offsets(shift.shape[-1]))
        )
        return d_weights, d_shift


class Sharpening(Layer):
    """Undo the shift's blur: ``w(i) = w~(i)^gamma / sum_j w~(j)^gamma``, ``gamma >= 1``.

    Computed as ``softmax_i(gamma log(w~(i) + eps))``, the same weighting, which cannot underflow
    to 0/0 when ``gamma`` is large.

    Shapes:
        weights: (N, h, R).  gamma: (N, h).  returns: (N, h, R).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    def forward(self, weights: np.ndarray, gamma: np.ndarray) -> np.ndarray:
        sizes = check_array("weights", weights, ("N", "h", "R"))
        check_array("gamma", gamma, ("N", "h"), sizes)
        log_weights = np.log(weights + SHARPEN_EPS)
        sharpened = softmax(gamma[:, :, None] * log_weights)
        self._cache = (weights, gamma, log_weights, sharpened)
        return sharpened

    def backward(self, d_sharpened: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Returns ``(d_weights, d_gamma)``."""
        weights, gamma, log_weights, sharpened = self._cache
        d_scores = softmax_backward(sharpened, d_sharpened)
        d_gamma = (d_scores * log_weights).sum(axis=-1)
        return d_scores * gamma[:, :, None] / (weights + SHARPEN_EPS), d_gamma


class Addressing(Layer):
    """A head's weighting from its parameters: content, interpolation, shift, sharpening in turn.

    Shapes:
        memory: (N, R, C).  previous_weights: (N, h, R).  key: (N, h, C).
        strength, gate, gamma: (N, h).  shift: (N, h, S).  returns: (N, h, R).
    """

    def __init__(self) -> None:
        super().__init__()
        self.content = self.add_child("content", ContentAddressing())
        self.interpolation = self.add_child("interpolation", Interpolation())
        self.shift = self.add_child("shift", ConvolutionalShift())
        self.sharpening = self.add_child("sharpening", Sharpening())

    def forward(
        self, memory, previous_weights, key, strength, gate, shift, gamma
    ) -> np.ndarray:
        content_weights = self.content.forward(memory, key, strength)
        gated = self.interpolation.forward(content_weights, previous_weights, gate)
        return self.sharpening.forward(self.shift.forward(gated, shift), gamma)

    def backward(self, d_weights: np.ndarray) -> tuple:
        """Returns the gradients of ``(memory, previous_weights, key, strength, gate, shift, gamma)``."""
        d_shifted, d_gamma = self.sharpening.backward(d_weights)
        d_gated, d_shift = self.shift.backward(d_shifted)
        d_content, d_previous, d_gate = self.interpolation.backward(d_gated)
        d_memory, d_key, d_strength = self.content.backward(d_content)
        return d_memory, d_previous, d_key, d_strength, d_gate, d_shift, d_gamma

    # The layer's state between steps of a sequence (the NTM reuses one Addressing for every step).
    def caches(self) -> tuple:
        return tuple(
            part._cache
            for part in (self.content, self.interpolation, self.shift, self.sharpening)
        )

    def restore(self, caches: tuple) -> None:
        for part, cache in zip(
            (self.content, self.interpolation, self.shift, self.sharpening), caches
        ):
            part._cache = cache


class HeadParameters(Layer):
    """What each head emits, constrained to its range: from ``C + 3 + S`` raw numbers per head, the
    key ``k`` (as is), the strength ``beta = softplus``, the gate ``g = sigmoid``, the shift
    ``s = softmax`` over ``S`` offsets and the sharpening ``gamma = 1 + softplus``.

    Shapes:
        raw: (N, h, C + 3 + S).  returns key (N, h, C), strength (N, h), gate (N, h),
        shift (N, h, S), gamma (N, h).
    """

    def __init__(self, memory_width: int, num_shifts: int) -> None:
        super().__init__()
        self.memory_width, self.num_shifts = memory_width, num_shifts
        self._cache = None

    @property
    def size(self) -> int:
        return self.memory_width + 3 + self.num_shifts

    def forward(self, raw: np.ndarray) -> tuple:
        check_array("raw", raw, ("N", "h", self.size))
        C, S = self.memory_width, self.num_shifts
        key = raw[..., :C].copy()  # not a view: the caller may change raw
        strength = _softplus(raw[..., C])
        gate = sigmoid(raw[..., C + 1])
        shift = softmax(raw[..., C + 2 : C + 2 + S])
        gamma = 1 + _softplus(raw[..., C + 2 + S])
        self._cache = (raw, gate, shift)
        return key, strength, gate, shift, gamma

    def backward(self, d_outputs: tuple) -> np.ndarray:
        """``d_outputs``: the gradients of ``(key, strength, gate, shift, gamma)``; returns ``d_raw``."""
        d_key, d_strength, d_gate, d_shift, d_gamma = d_outputs
        raw, gate, shift = self._cache
        C, S = self.memory_width, self.num_shifts
        d_raw = np.empty_like(raw)
        d_raw[..., :C] = d_key
        d_raw[..., C] = d_strength * sigmoid(raw[..., C])
        d_raw[..., C + 1] = d_gate * gate * (1 - gate)
        d_raw[..., C + 2 : C + 2 + S] = softmax_backward(shift, d_shift)
        d_raw[..., C + 2 + S] = d_gamma * sigmoid(raw[..., C + 2 + S])
        return d_raw


class ReadHead(Layer):
    """Read the memory through a weighting: ``r = sum_i w(i) M(i)``, one vector per read head.

    Shapes:
        memory: (N, R, C).  weights: (N, h, R).  returns: (N, h, C).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    def forward(self, memory: np.ndarray, weights: np.ndarray) -> np.ndarray:
        sizes = check_array("memory", memory, ("N", "R", "C"))
        check_array("weights", weights, ("N", "h", "R"), sizes)
        self._cache = (memory, weights)
        return weights @ memory

    def backward(self, d_read: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Returns ``(d_memory, d_weights)``."""
        memory, weights = self._cache
        return weights.swapaxes(1, 2) @ d_read, d_read @ memory.swapaxes(1, 2)


class WriteHead(Layer):
    """Erase, then add: ``M_t(i) = M_{t-1}(i) * prod_h (1 - w_h(i) e_h) + sum_h w_h(i) a_h``.

    With one write head, ``M_t(i) = M_{t-1}(i) (1 - w(i) e) + w(i) a``: a location the head does
    not weight stays as it was; a fully weighted one has the erased components (``e`` in [0, 1])
    replaced by ``a``.

    Shapes:
        memory: (N, R, C).  weights: (N, h, R).  erase, add: (N, h, C).  returns: (N, R, C).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    def forward(
        self,
        memory: np.ndarray,
        weights: np.ndarray,
        erase: np.ndarray,
        add: np.ndarray,
    ) -> np.ndarray:
        sizes = check_array("memory", memory, ("N", "R", "C"))
        sizes = check_array("weights", weights, ("N", "h", "R"), sizes)
        check_array("erase", erase, ("N", "h", "C"), sizes)
        check_array("add", add, ("N", "h", "C"), sizes)
        keep = 1 - weights[:, :, :, None] * erase[:, :, None, :]  # (N, h, R, C)
        kept = np.prod(keep, axis=1)  # (N, R, C)
        self._cache = (memory, weights, erase, add, keep, kept)
        return memory * kept + weights.swapaxes(1, 2) @ add

    def backward(self, d_memory_out: np.ndarray) -> tuple:
        """Returns ``(d_memory, d_weights, d_erase, d_add)``."""
        memory, weights, erase, add, keep, kept = self._cache
        d_kept = d_memory_out * memory  # (N, R, C)
        h = weights.shape[1]
        # d kept / d keep_h: the product of the other heads' factors (no division by
        # keep_h: a factor may be 0).
        others = np.empty_like(keep)
        for head in range(h):
            others[:, head] = (
                np.prod(np.delete(keep, head, axis=1), axis=1) if h > 1 else 1
            )
        d_keep = -d_kept[:, None] * others  # (N, h, R, C)
        d_weights = (d_keep * erase[:, :, None, :]).sum(
            axis=-1
        ) + add @ d_memory_out.swapaxes(1, 2)
        d_erase = (d_keep * weights[:, :, :, None]).sum(axis=2)
        d_add = weights @ d_memory_out
        return d_memory_out * kept, d_weights, d_erase, d_add


class NTM(Layer):
    """The Neural Turing Machine: an LSTM controller, read heads and write heads, a memory.

    At every step ``t``, in this order:

    1. the controller reads ``[x_t ; r_{t-1}]`` (the input and the previous step's reads):
       ``(h_t, c_t) = LSTM([x_t ; r_{t-1}], (h_{t-1}, c_{t-1}))``;
    2. every head emits its parameters from ``h_t`` (``address``: key, strength, gate, shift,
       sharpening for each head, read heads first; ``write``: erase and add for each write head)
       and finds its weighting over ``M_{t-1}`` from its previous one (``Addressing``);
    3. the read heads read ``r_t`` from ``M_{t-1}``; the write heads write ``M_t``;
    4. the output is ``y_t = W_y [h_t ; r_t] + b_y`` (logits of the bits; see ``SigmoidCrossEntropy``).

    The start: ``M_0`` = ``MEMORY_INIT`` everywhere, every head's ``w_0`` on location 0,
    ``r_0 = 0``, the controller's state zero. After ``forward``, ``read_weights`` and
    ``write_weights`` hold every step's weightings (the pictures of the machine at work).

    Built from ``config`` (``NTMConfig``): ``input_size``, ``output_size``, ``controller_size``,
    ``memory_size`` (R), ``memory_width`` (C), ``num_read_heads``, ``num_write_heads``,
    ``shift_range``, ``dtype``.

    Shapes:
        inputs: (N, T, input_size).  returns logits: (N, T, output_size).
        read_weights: (N, T, num_read_heads, R).  write_weights: (N, T, num_write_heads, R).
    """

    def __init__(self, config: NTMConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = np.dtype(c.dtype)
        C, S = c.memory_width, c.num_shifts
        self.controller = self.add_child(
            "controller",
            LSTMCell(
                c.input_size + c.num_read_heads * C,
                c.controller_size,
                rng=rng,
                dtype=dtype,
            ),
        )
        self.head_parameters = HeadParameters(C, S)
        self.address = self.add_child(
            "address",
            Affine(
                c.controller_size,
                c.num_heads * self.head_parameters.size,
                rng=rng,
                dtype=dtype,
            ),
        )
        self.write = self.add_child(
            "write",
            Affine(c.controller_size, c.num_write_heads * 2 * C, rng=rng, dtype=dtype),
        )
        self.out = self.add_child(
            "out",
            Affine(
                c.controller_size + c.num_read_heads * C,
                c.output_size,
                rng=rng,
                dtype=dtype,
            ),
        )
        self.addressing = Addressing()
        self.read_head = ReadHead()
        self.write_head = WriteHead()
        self.read_weights = self.write_weights = None
        self._cache = None

    def initial_state(self, N: int, dtype) -> dict:
        """``M_0``, every head's ``w_0`` (one-hot on location 0) and ``r_0 = 0``."""
        c = self.config
        weights = np.zeros((N, c.num_heads, c.memory_size), dtype=dtype)
        weights[:, :, 0] = 1
        return {
            "memory": np.full(
                (N, c.memory_size, c.memory_width), MEMORY_INIT, dtype=dtype
            ),
            "weights": weights,
            "reads": np.zeros((N, c.num_read_heads * c.memory_width), dtype=dtype),
        }

    def forward(self, inputs: np.ndarray) -> np.ndarray:
        dtype = float_dtype(inputs, "inputs")
        c = self.config
        check_array("inputs", inputs, ("N", "T", c.input_size))
        N, T, _ = inputs.shape
        C, n_read = c.memory_width, c.num_read_heads
        start = self.initial_state(N, dtype)
        memory, previous, reads = start["memory"], start["weights"], start["reads"]
        state = self.controller._zeros(N, dtype)
        p = self.controller._recurrent_params(dtype)
        W_x, b = (
            as_dtype(self.controller.params["W_x"], dtype),
            as_dtype(self.controller.params["b"], dtype),
        )
        parts = [self.address, self.write, self.out]
        W_address, W_write, W_out = (
            as_dtype(part.params["W"], dtype) for part in parts
        )
        b_address, b_write, b_out = (
            as_dtype(part.params["b"], dtype) for part in parts
        )
        logits = np.empty((N, T, c.output_size), dtype=dtype)
        all_weights = np.empty((N, T, c.num_heads, c.memory_size), dtype=dtype)
        steps = []
        for t in range(inputs.shape[1]):
            controller_input = np.concatenate([inputs[:, t], reads], axis=1)
            state, lstm_cache = self.controller._step(
                controller_input @ W_x + b, state, p
            )
            h = state[0]
            key, strength, gate, shift, gamma = self.head_parameters.forward(
                (h @ W_address + b_address).reshape(N, c.num_heads, -1)
            )
            head_cache = self.head_parameters._cache
            weights = self.addressing.forward(
                memory, previous, key, strength, gate, shift, gamma
            )
            read = self.read_head.forward(memory, weights[:, :n_read])  # (N, n_read, C)
            write_raw = (h @ W_write + b_write).reshape(N, c.num_write_heads, 2 * C)
            erase, add = sigmoid(write_raw[..., :C]), np.tanh(write_raw[..., C:])
            new_memory = self.write_head.forward(
                memory, weights[:, n_read:], erase, add
            )
            reads_out = read.reshape(N, n_read * C)
            logits[:, t] = np.concatenate([h, reads_out], axis=1) @ W_out + b_out
            all_weights[:, t] = weights
            steps.append(
                (
                    controller_input,
                    lstm_cache,
                    head_cache,
                    self.addressing.caches(),
                    self.read_head._cache,
                    self.write_head._cache,
                    erase,
                    add,
                    h,
                    reads_out,
                )
            )
            memory, previous, reads = new_memory, weights, reads_out
        self.read_weights, self.write_weights = (
            all_weights[:, :, :n_read],
            all_weights[:, :, n_read:],
        )
        self._cache = (inputs, steps, p)
        return logits

    def backward(self, d_logits: np.ndarray) -> np.ndarray:
        """Backpropagation through time; returns ``d_inputs`` (N, T, input_size)."""
        inputs, steps, p = self._cache
        c = self.config
        N, T, D = inputs.shape
        dtype = inputs.dtype
        C, n_read = c.memory_width, c.num_read_heads
        check_array("d_logits", d_logits, (N, T, c.output_size))
        W_x = as_dtype(self.controller.params["W_x"], dtype)
        parts = [self.address, self.write, self.out]
        W_address, W_write, W_out = (
            as_dtype(part.params["W"], dtype) for part in parts
        )
        grads = {
            name: np.zeros_like(grad, dtype=dtype)
            for name, _, grad in self.named_parameters()
        }
        dW_h = np.zeros_like(p["W_h"])
        d_inputs = np.empty_like(inputs)
        d_memory = np.zeros(
            (N, c.memory_size, C), dtype=dtype
        )  # dL/dM_t, from the steps after t
        d_previous = np.zeros(
            (N, c.num_heads, c.memory_size), dtype=dtype
        )  # dL/dw_t, from step t+1
        d_reads = np.zeros(
            (N, n_read * C), dtype=dtype
        )  # dL/dr_t, through the controller's next input
        d_state = self.controller._zeros(N, dtype)
        for t in reversed(range(T)):
            (
                controller_input,
                lstm_cache,
                head_cache,
                addressing_caches,
                read_cache,
                write_cache,
                erase,
                add,
                h,
                reads_out,
            ) = steps[t]
            d_out = d_logits[:, t]
            joined = np.concatenate([h, reads_out], axis=1)
            grads["out.W"] += joined.T @ d_out
            grads["out.b"] += d_out.sum(axis=0)
            d_joined = d_out @ W_out.T
            d_h = d_joined[:, : c.controller_size].copy()
            d_reads = d_reads + d_joined[:, c.controller_size :]
            # the write heads: M_t from M_{t-1}
            self.write_head._cache = write_cache
            d_memory, d_write_weights, d_erase, d_add = self.write_head.backward(
                d_memory
            )
            d_write_raw = np.concatenate(
                [d_erase * erase * (1 - erase), d_add * (1 - add * add)], axis=-1
            )
            d_write_raw = d_write_raw.reshape(N, -1)
            grads["write.W"] += h.T @ d_write_raw
            grads["write.b"] += d_write_raw.sum(axis=0)
            d_h += d_write_raw @ W_write.T
            # the read heads: r_t from M_{t-1}
            self.read_head._cache = read_cache
            d_memory_read, d_read_weights = self.read_head.backward(
                d_reads.reshape(N, n_read, C)
            )
            d_memory += d_memory_read
            d_weights = d_previous + np.concatenate(
                [d_read_weights, d_write_weights], axis=1
            )
            # addressing: w_t from M_{t-1}, w_{t-1} and the head parameters
            self.addressing.restore(addressing_caches)
            d_memory_address, d_previous, *d_head = self.addressing.backward(d_weights)
            d_memory += d_memory_address
            self.head_parameters._cache = head_cache
            d_address_raw = self.head_parameters.backward(tuple(d_head)).reshape(N, -1)
            grads["address.W"] += h.T @ d_address_raw
            grads["address.b"] += d_address_raw.sum(axis=0)
            d_h += d_address_raw @ W_address.T
            # the controller
            d_xw, d_state, _ = self.controller._step_backward(
                lstm_cache, (d_state[0] + d_h, d_state[1]), p, dW_h
            )
            grads["controller.W_x"] += controller_input.T @ d_xw
            grads["controller.b"] += d_xw.sum(axis=0)
            d_controller_input = d_xw @ W_x.T
            d_inputs[:, t] = d_controller_input[:, :D]
            d_reads = d_controller_input[:, D:]  # becomes dL/dr_{t-1}
        grads["controller.W_h"] += dW_h
        for name, _, grad in self.named_parameters():
            grad[...] = grads[name]
        return d_inputs


class LSTMBaseline(Layer):
    """The baseline without memory: an LSTM over the sequence and an affine read-out per step.

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
        dtype=np.float32,
    ) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.lstm = self.add_child(
            "lstm", LSTM(input_size, hidden_size, rng=rng, dtype=dtype)
        )
        self.out = self.add_child(
            "out", Affine(hidden_size, output_size, rng=rng, dtype=dtype)
        )

    def forward(self, inputs: np.ndarray) -> np.ndarray:
        return self.out.forward(self.lstm.forward(inputs))

    def backward(self, d_logits: np.ndarray) -> np.ndarray:
        return self.lstm.backward(self.out.backward(d_logits))


class SigmoidCrossEntropy(Layer):
    """Binary cross-entropy of independent bits, from logits, over the steps where ``mask`` is True.

    ``loss = -(1 / (#steps C_out)) sum_{n,t in mask} sum_b [y log sigma(z) + (1 - y) log(1 - sigma(z))]``:
    the mean over every scored bit. Computed as ``softplus(z) - y z``, which cannot overflow.

    Shapes:
        logits: (N, T, B).  targets: (N, T, B), 0 or 1.  mask: (N, T) bool or None.  returns: a float.
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache = None

    def forward(
        self, logits: np.ndarray, targets: np.ndarray, mask: np.ndarray | None = None
    ) -> float:
        float_dtype(logits, "logits")
        sizes = check_array("logits", logits, ("N", "T", "B"))
        check_array("targets", targets, ("N", "T", "B"), sizes)
        if mask is not None:
            check_array("mask", mask, ("N", "T"), sizes, kind="bool")
        weight = (
            np.ones(logits.shape[:2], dtype=logits.dtype)
            if mask is None
            else mask.astype(logits.dtype)
        )
        count = max(float(weight.sum()) * logits.shape[-1], 1.0)
        losses = _softplus(logits) - targets * logits
        self._cache = (logits, targets, weight, count)
        return float((losses * weight[:, :, None]).sum() / count)

    def backward(self, dout: float = 1.0) -> np.ndarray:
        logits, targets, weight, count = self._cache
        return (sigmoid(logits) - targets) * weight[:, :, None] * (dout / count)
