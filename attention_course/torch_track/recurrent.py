"""Recurrent layers in torch: RNN, LSTM and GRU cells and time-unrolled layers.

The same equations, parameter names and layouts as the NumPy track's ``recurrent``:

* RNN:  ``h_t = tanh(x_t W_x + h_{t-1} W_h + b)``.
* LSTM: gates (i, f, g, o) as in ``torch.nn.LSTM``: ``c_t = f * c_{t-1} + i * g``,
  ``h_t = o * tanh(c_t)``.
* GRU in the lectures' form, gates (r, z, n): ``h_t = (1 - z) * h_{t-1} + z * n`` with
  ``n = tanh(x W_xn + b_n + (r * h_{t-1}) W_hn + b_hn)``; with ``reset_after=True`` torch's form,
  ``n = tanh(x W_xn + b_n + r * (h_{t-1} W_hn + b_hn))``.
* Masks are True on real tokens, padding at the end; a padded step keeps the state and outputs zeros.

Two ways to run a time-unrolled layer, same results:

* ``fused=True`` (default, where it exists): one call to the fused kernel that ``torch.nn.RNN``,
  ``nn.LSTM`` and ``nn.GRU`` use (cuDNN on a GPU), with padded batches packed so that each
  sequence stops at its true last token (and, reversed, starts there). It exists for the RNN, the
  LSTM and the GRU with ``reset_after=True``; our GRU's update gate is torch's ``1 - z``, so its
  z block enters the kernel negated (``core.registries`` documents the convention).
* ``fused=False``, and always for the lectures' GRU: a Python loop over the steps, written like
  the equations (the version to read).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import cell_spec
from .base import check_tensor, register_params, resolve_dtype

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU", "Recurrent", "reverse_padded"]


class RNNCell(nn.Module):
    """One step of a plain RNN: ``h_t = tanh(x_t W_x + h_{t-1} W_h + b)``.

    Shapes:
        x: (N, D).  state h: (N, H).  W_x: (D, H).  W_h: (H, H).  b: (H,).
    """

    spec = cell_spec("rnn")  # the registry's entry: gates and state
    fused_kernel = "rnn_tanh"

    def __init__(self, input_size: int, hidden_size: int, *, rng=None, dtype=torch.float32) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.gates, self.state_size = self.spec.num_gates, len(self.spec.state)
        register_params(self, initializers.recurrent_cell(init_rng(rng), self.spec.name, input_size, hidden_size),
                        dtype)

    @property
    def can_fuse(self) -> bool:
        return True

    # -- states: a tensor for RNN/GRU, (h, c) for LSTM; internally tuples
    def to_tuple(self, state) -> tuple:
        return state if isinstance(state, tuple) else (state,)

    def from_tuple(self, state: tuple):
        return state if self.state_size > 1 else state[0]

    def zeros(self, like: torch.Tensor, N: int) -> tuple:
        return tuple(like.new_zeros(N, self.hidden_size) for _ in range(self.state_size))

    def check_state(self, state, N: int, name: str) -> tuple:
        state = self.to_tuple(state)
        if len(state) != self.state_size:
            what = "(h, c)" if self.state_size == 2 else "h"
            raise ValueError(f"{name}: expected {what} for a {type(self).__name__}, got a tuple of {len(state)}")
        for part in state:
            check_tensor(name, part, (N, self.hidden_size))
        return state

    def input_projection(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.b, x.reshape(-1, self.input_size), self.W_x).reshape(*x.shape[:-1], -1)

    def step(self, xw: torch.Tensor, state: tuple) -> tuple:
        (h_prev,) = state
        return (torch.tanh(xw + h_prev @ self.W_h),)

    def forward(self, x: torch.Tensor, state=None):
        """One step: returns the new state (``h``, or ``(h, c)`` for the LSTM)."""
        check_tensor("x", x, (None, self.input_size))
        N = x.shape[0]
        state = self.zeros(x, N) if state is None else self.check_state(state, N, "state")
        return self.from_tuple(self.step(self.input_projection(x), state))

    def fused_weights(self) -> list[torch.Tensor]:
        """The weights in the layout of torch's fused kernels: ``[w_ih, w_hh, b_ih, b_hh]``."""
        return [self.W_x.t().contiguous(), self.W_h.t().contiguous(), self.b, torch.zeros_like(self.b)]


class LSTMCell(RNNCell):
    """One LSTM step, gates (i, f, g, o): ``c_t = f * c_{t-1} + i * g``, ``h_t = o * tanh(c_t)``.

    Shapes:
        x: (N, D).  state (h, c): (N, H) each.  W_x: (D, 4H).  W_h: (H, 4H).  b: (4H,).
    """

    spec = cell_spec("lstm")
    fused_kernel = "lstm"

    def step(self, xw, state):
        h_prev, c_prev = state
        i, f, g, o = (xw + h_prev @ self.W_h).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class GRUCell(RNNCell):
    """One GRU step, gates (r, z, n), in the lectures' form (or torch's, ``reset_after=True``).

    Shapes:
        x: (N, D).  state h: (N, H).  W_x: (D, 3H).  W_h: (H, 3H).  b, b_h: (3H,).
    """

    spec = cell_spec("gru")
    fused_kernel = "gru"

    def __init__(self, input_size: int, hidden_size: int, *, reset_after: bool = False, rng=None,
                 dtype=torch.float32) -> None:
        super().__init__(input_size, hidden_size, rng=rng, dtype=dtype)
        self.reset_after = reset_after
        # For the fused kernels (torch's update gate is our 1 - z); a buffer, so it moves with .to(device).
        signs = torch.from_numpy(self.spec.torch_gate_signs(hidden_size)).to(resolve_dtype(dtype))
        self.register_buffer("torch_gate_signs", signs, persistent=False)

    @property
    def can_fuse(self) -> bool:
        return self.reset_after

    def step(self, xw, state):
        return self._torch_step(xw, state) if self.reset_after else self._lecture_step(xw, state)

    def _lecture_step(self, xw, state):
        """The lectures' form: the reset gate scales ``h_{t-1}`` before the recurrent product."""
        (h_prev,) = state
        H = self.hidden_size
        x_r, x_z, x_n = xw.split(H, dim=-1)
        W_rz, W_n = self.W_h[:, :2 * H], self.W_h[:, 2 * H:]
        b_rz, b_n = self.b_h[:2 * H], self.b_h[2 * H:]
        h_r, h_z = (h_prev @ W_rz + b_rz).split(H, dim=-1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + (r * h_prev) @ W_n + b_n)
        return (h_prev + z * (n - h_prev),)

    def _torch_step(self, xw, state):
        """torch's form (``reset_after=True``): the reset gate scales ``h_{t-1} W_hn + b_hn``."""
        (h_prev,) = state
        x_r, x_z, x_n = xw.split(self.hidden_size, dim=-1)
        h_r, h_z, h_n = (h_prev @ self.W_h + self.b_h).split(self.hidden_size, dim=-1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        return (h_prev + z * (n - h_prev),)

    def fused_weights(self) -> list[torch.Tensor]:
        # torch's update gate is our 1 - z = sigmoid(-a): the z block enters negated.
        sign = self.torch_gate_signs
        return [(self.W_x * sign).t().contiguous(), (self.W_h * sign).t().contiguous(), self.b * sign, self.b_h * sign]


def reverse_padded(xs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence within its length, leaving the padding where it is.

    Shapes:
        xs: (N, T, ...).  lengths: (N,) integer.  returns: xs.shape.
    """
    N, T = xs.shape[:2]
    steps = torch.arange(T, device=xs.device).expand(N, T)
    lengths = lengths.to(xs.device).unsqueeze(1)
    index = torch.where(steps < lengths, lengths - 1 - steps, steps)  # (N, T)
    index = index.reshape(N, T, *([1] * (xs.dim() - 2))).expand_as(xs)
    return xs.gather(1, index)


def _quiet(kernel):
    """The fused kernel, without cuDNN's warning that the weights are not one contiguous chunk.

    They are not, by design: they are made from our parameters at every call (transposed, the
    GRU's z block negated), and cuDNN packs the few kilobytes itself.
    """
    def run(*args):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous chunk")
            return kernel(*args)
    return run


class Recurrent(nn.Module):
    """A recurrent cell unrolled over time, with masks, reversal, initial and final states.

    ``forward(xs, mask=None, initial_state=None)`` returns every hidden state; afterwards
    ``final_state`` is the state after the last real token (``h``, or ``(h, c)`` for the LSTM).

    Shapes:
        xs: (N, T, D).  mask: (N, T) bool, True on real tokens, padding at the end.
        returns hs: (N, T, H), zero where ``mask`` is False.
    """

    cell_class = RNNCell

    def __init__(self, input_size: int, hidden_size: int, *, stateful: bool = False, reverse: bool = False,
                 fused: bool = True, rng=None, dtype=torch.float32, **cell_options) -> None:
        super().__init__()
        self.cell = self.cell_class(input_size, hidden_size, rng=rng, dtype=dtype, **cell_options)
        self.input_size, self.hidden_size = input_size, hidden_size
        self.stateful, self.reverse, self.fused = stateful, reverse, fused
        self.final_state = None

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def reset_state(self) -> None:
        """Forget the carried state (``stateful=True``): the next call starts from zeros."""
        self.final_state = None

    def forward(self, xs: torch.Tensor, mask: torch.Tensor | None = None, initial_state=None) -> torch.Tensor:
        sizes = check_tensor("xs", xs, ("N", "T", self.input_size))
        N = xs.shape[0]
        if mask is not None:
            check_tensor("mask", mask, ("N", "T"), sizes, kind="bool")
        if initial_state is None and self.stateful and self.final_state is not None:
            # Truncated backpropagation through time: carry the values, not the graph.
            initial_state = tuple(s.detach() for s in self.cell.to_tuple(self.final_state))
        cell = self.cell
        state = cell.zeros(xs, N) if initial_state is None else cell.check_state(initial_state, N, "initial_state")
        if self.fused and cell.can_fuse:
            hs, final = self._forward_fused(xs, mask, state)
        else:
            hs, final = self._forward_loop(xs, mask, state)
        self.final_state = cell.from_tuple(final)
        return hs

    def _forward_loop(self, xs, mask, state):
        cell = self.cell
        T = xs.shape[1]
        xw = cell.input_projection(xs)  # (N, T, G*H): every step's input projection at once
        outputs = [None] * T
        for t in (range(T - 1, -1, -1) if self.reverse else range(T)):
            new_state = cell.step(xw[:, t], state)
            if mask is None:
                state = new_state
                outputs[t] = new_state[0]
            else:
                keep = mask[:, t, None]  # (N, 1)
                state = tuple(torch.where(keep, new, old) for new, old in zip(new_state, state))
                outputs[t] = state[0].masked_fill(~keep, 0.0)
        return torch.stack(outputs, dim=1), state

    def _forward_fused(self, xs, mask, state):
        cell = self.cell
        kernel = _quiet(getattr(torch._VF, cell.fused_kernel))
        weights = cell.fused_weights()
        # The kernels' "train" flag only switches dropout (0 here) and, on cuDNN, keeps what the
        # backward pass needs: ask for that whenever autograd records, in eval mode too.
        train = torch.is_grad_enabled()
        hx = tuple(s.unsqueeze(0).contiguous() for s in state)  # (1, N, H) each: layers x directions first
        hx = hx if cell.state_size == 2 else hx[0]
        if mask is None:
            x = xs.flip(1) if self.reverse else xs
            out, *final = kernel(x, hx, weights, True, 1, 0.0, train, False, True)
            out = out.flip(1) if self.reverse else out
            return out, tuple(f.squeeze(0) for f in final)
        lengths = mask.sum(dim=1)
        if cell.state_size == 1:
            return self._forward_fused_unpacked(kernel, weights, xs, mask, lengths, state, hx, train)
        # pack_padded_sequence refuses empty sequences: run them over one (padded) step, then
        # give them back their initial state and zero outputs below.
        empty = lengths == 0
        x = reverse_padded(xs, lengths) if self.reverse else xs
        packed = pack_padded_sequence(x, lengths.clamp_min(1).cpu(), batch_first=True, enforce_sorted=False)
        order, unorder = packed.sorted_indices, packed.unsorted_indices
        hx_sorted = tuple(h[:, order] for h in hx) if cell.state_size == 2 else hx[:, order]
        out_data, *final = kernel(packed.data, packed.batch_sizes, hx_sorted, weights, True, 1, 0.0, train, False)
        out, _ = pad_packed_sequence(PackedSequence(out_data, packed.batch_sizes, order, unorder), batch_first=True,
                                     total_length=xs.shape[1])
        out = out.masked_fill(~mask.unsqueeze(-1), 0.0)
        if self.reverse:
            out = reverse_padded(out, lengths)
        final = tuple(torch.where(empty[:, None], s, f.squeeze(0)[unorder]) for s, f in zip(state, final))
        return out, final

    def _forward_fused_unpacked(self, kernel, weights, xs, mask, lengths, state, hx,
                                train):
        """Padding without packing, where the state is the output (RNN, GRU):
        cheaper than packing.

        Run over the padded batch (reversed within each length for the backward
        direction, so the padding stays at the end), then read each sequence's final
        state at its last real step and zero the outputs at padded steps, which
        therefore receive no gradient.
        """
        x = reverse_padded(xs, lengths) if self.reverse else xs
        out, _ = kernel(x, hx, weights, True, 1, 0.0, train, False, True)  # (N, T, H)
        last = (lengths - 1).clamp_min(0)
        rows = torch.arange(out.shape[0], device=out.device)
        final = out[rows, last]  # (N, H)
        final = torch.where((lengths == 0)[:, None], state[0], final)
        out = out.masked_fill(~mask.unsqueeze(-1), 0.0)
        if self.reverse:
            out = reverse_padded(out, lengths)
        return out, (final,)


class RNN(Recurrent):
    """A plain RNN over time (see ``Recurrent``)."""

    cell_class = RNNCell


class LSTM(Recurrent):
    """An LSTM over time, gates as in ``torch.nn.LSTM`` (see ``Recurrent``)."""

    cell_class = LSTMCell


class GRU(Recurrent):
    """A GRU over time in the lectures' form; ``reset_after=True`` gives torch's, and the fused kernel."""

    cell_class = GRUCell

    def __init__(self, input_size: int, hidden_size: int, *, stateful: bool = False, reverse: bool = False,
                 reset_after: bool = False, fused: bool = True, rng=None, dtype=torch.float32) -> None:
        super().__init__(input_size, hidden_size, stateful=stateful, reverse=reverse, fused=fused, rng=rng,
                         dtype=dtype, reset_after=reset_after)
