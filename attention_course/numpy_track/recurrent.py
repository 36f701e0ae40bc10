"""Recurrent layers: RNN, LSTM and GRU, each as a one-step cell and as a time-unrolled layer.

The cell and the time-unrolled layer share one implementation of a step (``_step``) and its
backward (``_step_backward``). The time-unrolled layer adds what makes it fast and correct:

* the input projection ``x_t W_x + b`` of every step is one matrix product over all steps,
  and so are its gradients; only ``h_{t-1} W_h`` stays inside the loop;
* padding: with a ``mask`` (True on real tokens) a padded step leaves the state unchanged and
  outputs zeros, so appending padding changes nothing, and with ``reverse=True`` the state stays
  at its initial value through the padding, so the reversed pass starts at each sequence's true
  last token;
* the initial state, its gradient (``initial_state_grad``, for the encoder to receive), and a
  ``stateful`` option that carries the final state into the next call.

Conventions (``sigma`` the logistic function, ``*`` elementwise):

* RNN:  ``h_t = tanh(x_t W_x + h_{t-1} W_h + b)``.
* LSTM: gates in the order of ``torch.nn.LSTM`` (i, f, g, o): ``i, f, o = sigma(.)``,
  ``g = tanh(.)``, ``c_t = f * c_{t-1} + i * g``, ``h_t = o * tanh(c_t)``.
* GRU, as in the lectures (Cho et al.; Bahdanau et al.), gates in the order (r, z, n):
  ``r = sigma(x W_xr + b_r + h W_hr + b_hr)``, ``z = sigma(x W_xz + b_z + h W_hz + b_hz)``,
  ``n = tanh(x W_xn + b_n + (r * h) W_hn + b_hn)``, ``h_t = (1 - z) * h_{t-1} + z * n``.
  With ``reset_after=True`` the reset gate acts after the recurrent product, as in
  ``torch.nn.GRU``: ``n = tanh(x W_xn + b_n + r * (h W_hn + b_hn))``. (torch's update gate is our
  ``1 - z``: see ``attention_course.core.registries`` for how the weights convert.)

States: a GRU or RNN state is an array ``h`` (N, H); an LSTM state is a tuple ``(h, c)``.
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import cell_spec
from ..core.shapes import check_array
from ..functional import sigmoid
from .base import Layer, as_dtype, float_dtype

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU", "Recurrent"]


class _CellMath(Layer):
    """Parameters and the step equations of one kind of recurrent cell."""

    spec = cell_spec("rnn")  # the registry's entry: gates and state

    def __init__(self, input_size: int, hidden_size: int, *, rng=None, dtype=np.float64) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.gates, self.state_size = self.spec.num_gates, len(self.spec.state)  # H-wide blocks; 1: h, 2: (h, c)
        self.add_params(initializers.recurrent_cell(init_rng(rng), self.spec.name, input_size, hidden_size), dtype)

    # -- states: arrays for RNN/GRU, (h, c) for LSTM; internally always tuples
    def _to_tuple(self, state) -> tuple:
        return state if isinstance(state, tuple) else (state,)

    def _from_tuple(self, state: tuple):
        return state if self.state_size > 1 else state[0]

    def _check_state(self, state, N: int, dtype, name: str) -> tuple:
        state = self._to_tuple(state)
        if len(state) != self.state_size:
            what = "(h, c)" if self.state_size == 2 else "h"
            raise ValueError(f"{name}: expected {what} for a {type(self).__name__}, got a tuple of {len(state)}")
        checked = []
        for part in state:
            check_array(name, part, (N, self.hidden_size))
            checked.append(as_dtype(part, dtype))
        return tuple(checked)

    def _zeros(self, N: int, dtype) -> tuple:
        return tuple(np.zeros((N, self.hidden_size), dtype=dtype) for _ in range(self.state_size))

    def _recurrent_params(self, dtype) -> dict:
        return {"W_h": as_dtype(self.params["W_h"], dtype)}

    def _input_bias(self, dtype) -> np.ndarray:
        return as_dtype(self.params["b"], dtype)


class RNNCell(_CellMath):
    """One step of a plain (Elman) RNN: ``h_t = tanh(x_t W_x + h_{t-1} W_h + b)``.

    Shapes:
        x: (N, D).  state h: (N, H).  W_x: (D, H).  W_h: (H, H).  b: (H,).
    """

    def _step(self, xw, state, p):
        (h_prev,) = state
        h = np.tanh(xw + h_prev @ p["W_h"])
        return (h,), (h_prev, h)

    def _step_backward(self, cache, dstate, p, dW_h):
        h_prev, h = cache
        (dh,) = dstate
        dpre = dh * (1 - h * h)
        dW_h += h_prev.T @ dpre
        return dpre, (dpre @ p["W_h"].T,), None

    # one-step API (the time-unrolled layers below share _step and _step_backward)
    def forward(self, x: np.ndarray, state=None):
        """One step: returns the new state (``h``, or ``(h, c)`` for the LSTM)."""
        dtype = float_dtype(x, "x")
        check_array("x", x, (None, self.input_size))
        N = x.shape[0]
        state = self._zeros(N, dtype) if state is None else self._check_state(state, N, dtype, "state")
        p = self._recurrent_params(dtype)
        xw = x @ as_dtype(self.params["W_x"], dtype) + self._input_bias(dtype)
        new_state, cache = self._step(xw, state, p)
        self._cache = (x, cache, p)
        return self._from_tuple(new_state)

    def backward(self, dstate):
        """Given the gradient of the new state, return ``(dx, dstate_prev)``."""
        x, cache, p = self._cache
        dstate = self._to_tuple(dstate)
        for g in self.grads.values():
            g[...] = 0
        dW_h = np.zeros_like(p["W_h"])
        dxw, dprev, d_rec = self._step_backward(cache, dstate, p, dW_h)
        self.grads["W_h"][...] = dW_h
        self.grads["W_x"][...] = x.T @ dxw
        self.grads["b"][...] = dxw.sum(axis=0)
        if d_rec is not None:
            self.grads["b_h"][...] = d_rec.sum(axis=0)
        return dxw @ as_dtype(self.params["W_x"], dxw.dtype).T, self._from_tuple(dprev)


class LSTMCell(RNNCell):
    """One LSTM step, gates (i, f, g, o) as in ``torch.nn.LSTM``.

    ``c_t = f * c_{t-1} + i * g``, ``h_t = o * tanh(c_t)``; ``b`` plays the role of torch's
    ``b_ih + b_hh``.

    Shapes:
        x: (N, D).  state (h, c): (N, H) each.  W_x: (D, 4H).  W_h: (H, 4H).  b: (4H,).
    """

    spec = cell_spec("lstm")

    def _step(self, xw, state, p):
        h_prev, c_prev = state
        H = self.hidden_size
        pre = xw + h_prev @ p["W_h"]  # (N, 4H)
        i = sigmoid(pre[:, :H])
        f = sigmoid(pre[:, H:2 * H])
        g = np.tanh(pre[:, 2 * H:3 * H])
        o = sigmoid(pre[:, 3 * H:])
        c = f * c_prev + i * g
        tanh_c = np.tanh(c)
        h = o * tanh_c
        return (h, c), (h_prev, c_prev, i, f, g, o, tanh_c)

    def _step_backward(self, cache, dstate, p, dW_h):
        h_prev, c_prev, i, f, g, o, tanh_c = cache
        dh, dc = dstate
        dc = dc + dh * o * (1 - tanh_c * tanh_c)
        dpre = np.concatenate([
            dc * g * i * (1 - i),
            dc * c_prev * f * (1 - f),
            dc * i * (1 - g * g),
            dh * tanh_c * o * (1 - o),
        ], axis=1)  # (N, 4H)
        dW_h += h_prev.T @ dpre
        return dpre, (dpre @ p["W_h"].T, dc * f), None


class GRUCell(RNNCell):
    """One GRU step in the lectures' form, gates (r, z, n).

    ``h_t = (1 - z) * h_{t-1} + z * n`` with ``n = tanh(x W_xn + b_n + (r * h_{t-1}) W_hn + b_hn)``;
    with ``reset_after=True``, ``n = tanh(x W_xn + b_n + r * (h_{t-1} W_hn + b_hn))`` (torch's form).

    Shapes:
        x: (N, D).  state h: (N, H).  W_x: (D, 3H).  W_h: (H, 3H).  b, b_h: (3H,).
    """

    spec = cell_spec("gru")

    def __init__(self, input_size: int, hidden_size: int, *, reset_after: bool = False, rng=None,
                 dtype=np.float64) -> None:
        super().__init__(input_size, hidden_size, rng=rng, dtype=dtype)
        self.reset_after = reset_after

    def _recurrent_params(self, dtype) -> dict:
        return {"W_h": as_dtype(self.params["W_h"], dtype), "b_h": as_dtype(self.params["b_h"], dtype)}

    def _step(self, xw, state, p):
        step = self._torch_step if self.reset_after else self._lecture_step
        return step(xw, state, p)

    def _step_backward(self, cache, dstate, p, dW_h):
        step_backward = self._torch_step_backward if self.reset_after else self._lecture_step_backward
        return step_backward(cache, dstate, p, dW_h)

    def _lecture_step(self, xw, state, p):
        """The lectures' form: the reset gate scales ``h_{t-1}`` before the recurrent product."""
        (h_prev,) = state
        H = self.hidden_size
        W_h, b_h = p["W_h"], p["b_h"]
        rz = sigmoid(xw[:, :2 * H] + h_prev @ W_h[:, :2 * H] + b_h[:2 * H])
        r, z = rz[:, :H], rz[:, H:]
        rh = r * h_prev
        n = np.tanh(xw[:, 2 * H:] + rh @ W_h[:, 2 * H:] + b_h[2 * H:])
        h = h_prev + z * (n - h_prev)
        return (h,), (h_prev, r, z, n, rh)

    def _torch_step(self, xw, state, p):
        """torch's form (``reset_after=True``): the reset gate scales ``h_{t-1} W_hn + b_hn``."""
        (h_prev,) = state
        H = self.hidden_size
        hw = h_prev @ p["W_h"] + p["b_h"]  # (N, 3H)
        rz = sigmoid(xw[:, :2 * H] + hw[:, :2 * H])
        r, z = rz[:, :H], rz[:, H:]
        n = np.tanh(xw[:, 2 * H:] + r * hw[:, 2 * H:])
        h = h_prev + z * (n - h_prev)
        return (h,), (h_prev, r, z, n, hw[:, 2 * H:])

    def _lecture_step_backward(self, cache, dstate, p, dW_h):
        h_prev, r, z, n, rh = cache
        (dh,) = dstate
        H = self.hidden_size
        W_h = p["W_h"]
        dz = dh * (n - h_prev)
        dn_pre = dh * z * (1 - n * n)
        dh_prev = dh * (1 - z)
        d_rh = dn_pre @ W_h[:, 2 * H:].T
        dr = d_rh * h_prev
        dh_prev += d_rh * r
        drz_pre = np.concatenate([dr * r * (1 - r), dz * z * (1 - z)], axis=1)
        dh_prev += drz_pre @ W_h[:, :2 * H].T
        dW_h[:, :2 * H] += h_prev.T @ drz_pre
        dW_h[:, 2 * H:] += rh.T @ dn_pre
        dxw = np.concatenate([drz_pre, dn_pre], axis=1)
        return dxw, (dh_prev,), dxw

    def _torch_step_backward(self, cache, dstate, p, dW_h):
        h_prev, r, z, n, hw_n = cache
        (dh,) = dstate
        dz = dh * (n - h_prev)
        dn_pre = dh * z * (1 - n * n)
        dr = dn_pre * hw_n
        drz_pre = np.concatenate([dr * r * (1 - r), dz * z * (1 - z)], axis=1)
        d_hw = np.concatenate([drz_pre, dn_pre * r], axis=1)  # (N, 3H): gradient of h W_h + b_h
        dW_h += h_prev.T @ d_hw
        dh_prev = dh * (1 - z) + d_hw @ p["W_h"].T
        dxw = np.concatenate([drz_pre, dn_pre], axis=1)
        return dxw, (dh_prev,), d_hw


class Recurrent(Layer):
    """A recurrent cell unrolled over time, with masks, reversal, initial and final states.

    ``forward(xs, mask=None, initial_state=None)`` returns every hidden state; afterwards
    ``final_state`` is the state after the last real token (``h``, or ``(h, c)`` for the LSTM).
    ``backward(dhs, d_final_state=None)`` returns ``dxs`` and sets ``initial_state_grad``.

    Shapes:
        xs: (N, T, D).  mask: (N, T) bool, True on real tokens, padding at the end.
        returns hs: (N, T, H), zero where ``mask`` is False.
    """

    cell_class = RNNCell

    def __init__(self, input_size: int, hidden_size: int, *, stateful: bool = False, reverse: bool = False,
                 rng=None, dtype=np.float64, **cell_options) -> None:
        super().__init__()
        self.cell = self.add_child("cell", self.cell_class(input_size, hidden_size, rng=rng, dtype=dtype, **cell_options))
        self.input_size, self.hidden_size = input_size, hidden_size
        self.stateful, self.reverse = stateful, reverse
        self.final_state = None
        self.initial_state_grad = None
        self._cache = None

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def reset_state(self) -> None:
        """Forget the carried state (``stateful=True``): the next call starts from zeros."""
        self.final_state = None

    def _initial_state(self, xs: np.ndarray, mask: np.ndarray | None, initial_state):
        """Check ``xs`` and ``mask``; the state to start from (zeros, the given one, or the
        carried one of a stateful layer)."""
        dtype = float_dtype(xs, "xs")
        sizes = check_array("xs", xs, ("N", "T", self.input_size))
        if mask is not None:
            check_array("mask", mask, ("N", "T"), sizes, kind="bool")
        if initial_state is None and self.stateful and self.final_state is not None:
            initial_state = self.final_state
        if initial_state is None:
            return self.cell._zeros(len(xs), dtype)
        return self.cell._check_state(initial_state, len(xs), dtype, "initial_state")

    def _input_projection(self, xs: np.ndarray) -> np.ndarray:
        """``x_t W_x + b`` for every step at once, one (N*T, D) @ (D, G*H) product: (N, T, G*H)."""
        N, T, D = xs.shape
        xw = xs.reshape(N * T, D) @ as_dtype(self.cell.params["W_x"], xs.dtype)
        xw += self.cell._input_bias(xs.dtype)
        return xw.reshape(N, T, -1)

    def forward(self, xs: np.ndarray, mask: np.ndarray | None = None,
                initial_state=None) -> np.ndarray:
        state = self._initial_state(xs, mask, initial_state)
        N, T = xs.shape[:2]
        xw = self._input_projection(xs)  # (N, T, G*H)
        p = self.cell._recurrent_params(xs.dtype)
        hs = np.empty((N, T, self.hidden_size), dtype=xs.dtype)
        steps = range(T - 1, -1, -1) if self.reverse else range(T)
        caches = [None] * T
        keep = None if mask is None else mask[:, :, None]  # (N, T, 1)
        for t in steps:
            new_state, caches[t] = self.cell._step(xw[:, t], state, p)
            if keep is None:
                state = new_state
                hs[:, t] = new_state[0]
            else:
                k = keep[:, t]  # (N, 1): a padded step keeps the state and outputs 0
                state = tuple(np.where(k, new, old) for new, old in zip(new_state, state))
                hs[:, t] = np.where(k, state[0], 0)
        self.final_state = self.cell._from_tuple(state)
        self._cache = (xs, keep, caches, p, steps)
        return hs

    def _final_state_grad(self, dhs: np.ndarray, d_final_state) -> tuple:
        """Check ``dhs``; the gradient of the final state as a tuple (zeros when none is given)."""
        xs = self._cache[0]
        N, T = xs.shape[:2]
        check_array("dhs", dhs, (N, T, self.hidden_size))
        if d_final_state is None:
            return self.cell._zeros(N, xs.dtype)
        return self.cell._check_state(d_final_state, N, xs.dtype, "d_final_state")

    def _parameter_grads(self, xs: np.ndarray, dxw: np.ndarray, dW_h: np.ndarray, db_h: np.ndarray) -> np.ndarray:
        """Write the cell's gradients (``W_h`` and the GRU's ``b_h``, summed over the steps; ``W_x``
        and ``b``, back through ``_input_projection``); return ``dxs``."""
        N, T, D = xs.shape
        grads = self.cell.grads
        grads["W_h"][...] = dW_h
        if "b_h" in grads:
            grads["b_h"][...] = db_h
        dxw2 = dxw.reshape(N * T, -1)
        grads["W_x"][...] = xs.reshape(N * T, D).T @ dxw2
        grads["b"][...] = dxw2.sum(axis=0)
        return (dxw2 @ as_dtype(self.cell.params["W_x"], xs.dtype).T).reshape(N, T, D)

    def backward(self, dhs: np.ndarray, d_final_state=None) -> np.ndarray:
        xs, keep, caches, p, steps = self._cache
        cell = self.cell
        dstate = self._final_state_grad(dhs, d_final_state)
        dxw = np.empty(xs.shape[:2] + (cell.gates * self.hidden_size,), dtype=xs.dtype)
        dW_h = np.zeros_like(p["W_h"])
        db_h = np.zeros(dxw.shape[-1], dtype=xs.dtype)  # the GRU's recurrent bias
        for t in reversed(steps):
            if keep is None:
                dnew = (dstate[0] + dhs[:, t],) + dstate[1:]
                dxw[:, t], dstate, d_rec = cell._step_backward(caches[t], dnew, p, dW_h)
            else:
                k = keep[:, t]  # a padded step passes its state's gradient straight through
                dtotal = (dstate[0] + np.where(k, dhs[:, t], 0),) + dstate[1:]
                dnew = tuple(np.where(k, d, 0) for d in dtotal)
                dxw[:, t], dprev, d_rec = cell._step_backward(caches[t], dnew, p, dW_h)
                dstate = tuple(dp + np.where(k, 0, d) for dp, d in zip(dprev, dtotal))
            if d_rec is not None:
                db_h += d_rec.sum(axis=0)
        self.initial_state_grad = cell._from_tuple(dstate)
        return self._parameter_grads(xs, dxw, dW_h, db_h)


class RNN(Recurrent):
    """A plain RNN over time (see ``Recurrent`` for masks, states and shapes)."""

    cell_class = RNNCell


class LSTM(Recurrent):
    """An LSTM over time, gates as in ``torch.nn.LSTM`` (see ``Recurrent``)."""

    cell_class = LSTMCell


class GRU(Recurrent):
    """A GRU over time in the lectures' form; ``reset_after=True`` gives torch's (see ``Recurrent``)."""

    cell_class = GRUCell

    def __init__(self, input_size: int, hidden_size: int, *, stateful: bool = False, reverse: bool = False,
                 reset_after: bool = False, rng=None, dtype=np.float64) -> None:
        super().__init__(input_size, hidden_size, stateful=stateful, reverse=reverse, rng=rng, dtype=dtype,
                         reset_after=reset_after)
