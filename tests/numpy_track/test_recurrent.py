"""Tests for attention_course/numpy_track/recurrent.py: the cells' equations, their gradients, masks and states.

Parity with ``torch.nn.RNN/LSTM/GRU`` is in ``test_interop.py``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.numpy_track.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from attention_course.testing import ShapeError, check_layer_gradients

HYPOTHESIS = settings(max_examples=25, deadline=None)

N, T, D, H = 3, 4, 3, 2

# (id, time layer, cell, options)
KINDS = [
    ("rnn", RNN, RNNCell, {}),
    ("lstm", LSTM, LSTMCell, {}),
    ("gru", GRU, GRUCell, {"reset_after": False}),
    ("gru_reset_after", GRU, GRUCell, {"reset_after": True}),
]
TIME_KINDS = [pytest.param(layer, options, id=name) for name, layer, _, options in KINDS]
CELL_KINDS = [pytest.param(cell, options, id=name) for name, _, cell, options in KINDS]


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def randomize_biases(layer, rng):
    """Non-zero biases, so that a gradient or a formula that ignores them is caught."""
    for name, value, _ in layer.named_parameters():
        if name.split(".")[-1] in ("b", "b_h"):
            value[...] = rng.standard_normal(value.shape) * 0.5
    return layer


def parts(state):
    """``(h,)`` or ``(h, c)``: the arrays of one layer's state."""
    return state if isinstance(state, tuple) else (state,)


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def initial_state(layer_class, rng, n=N, h=H):
    if layer_class in (LSTM, LSTMCell):
        return (rng.standard_normal((n, h)), rng.standard_normal((n, h)))
    return rng.standard_normal((n, h))


# --- the step equations ---------------------------------------------------------------------


def test_rnn_cell_equation(rng):
    cell = randomize_biases(RNNCell(D, H, rng=rng), rng)
    x, h = rng.standard_normal((N, D)), rng.standard_normal((N, H))
    p = cell.params
    np.testing.assert_allclose(cell.forward(x, h), np.tanh(x @ p["W_x"] + h @ p["W_h"] + p["b"]), rtol=1e-12)


def test_lstm_cell_equation_gate_order_i_f_g_o(rng):
    cell = randomize_biases(LSTMCell(D, H, rng=rng), rng)
    x, h, c = rng.standard_normal((N, D)), rng.standard_normal((N, H)), rng.standard_normal((N, H))
    pre = x @ cell.params["W_x"] + h @ cell.params["W_h"] + cell.params["b"]
    i, f, g, o = (pre[:, k * H:(k + 1) * H] for k in range(4))
    c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h_new, c_out = cell.forward(x, (h, c))
    np.testing.assert_allclose(c_out, c_new, rtol=1e-12)
    np.testing.assert_allclose(h_new, sigmoid(o) * np.tanh(c_new), rtol=1e-12)


@pytest.mark.parametrize("reset_after", [False, True])
def test_gru_cell_equation_z_weighs_the_new_candidate(rng, reset_after):
    cell = randomize_biases(GRUCell(D, H, rng=rng, reset_after=reset_after), rng)
    x, h = rng.standard_normal((N, D)), rng.standard_normal((N, H))
    W_x, W_h, b, b_h = (cell.params[k] for k in ("W_x", "W_h", "b", "b_h"))
    xw = x @ W_x + b
    r = sigmoid(xw[:, :H] + h @ W_h[:, :H] + b_h[:H])
    z = sigmoid(xw[:, H:2 * H] + h @ W_h[:, H:2 * H] + b_h[H:2 * H])
    if reset_after:  # torch's form
        n = np.tanh(xw[:, 2 * H:] + r * (h @ W_h[:, 2 * H:] + b_h[2 * H:]))
    else:  # the lectures' form
        n = np.tanh(xw[:, 2 * H:] + (r * h) @ W_h[:, 2 * H:] + b_h[2 * H:])
    np.testing.assert_allclose(cell.forward(x, h), (1 - z) * h + z * n, rtol=1e-12)


def test_the_two_gru_forms_differ(rng):
    x, h = rng.standard_normal((N, D)), rng.standard_normal((N, H))
    before = randomize_biases(GRUCell(D, H, rng=1), np.random.default_rng(2))
    after = randomize_biases(GRUCell(D, H, rng=1, reset_after=True), np.random.default_rng(2))
    assert not np.allclose(before.forward(x, h), after.forward(x, h))


@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_time_layer_equals_its_cell_step_by_step(rng, layer_class, options):
    layer = randomize_biases(layer_class(D, H, rng=rng, **options), rng)
    xs = rng.standard_normal((N, T, D))
    hs = layer.forward(xs)
    assert hs.shape == (N, T, H)
    cell = layer.cell
    state = None
    for t in range(T):
        state = cell.forward(xs[:, t], state)
        h = state[0] if isinstance(state, tuple) else state
        np.testing.assert_allclose(hs[:, t], h, rtol=1e-12)
    for ours, step_by_step in zip(parts(layer.final_state), parts(state)):
        np.testing.assert_allclose(ours, step_by_step, rtol=1e-12)


@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_reverse_runs_the_reversed_sequence(rng, layer_class, options):
    forward = layer_class(D, H, rng=1, **options)
    backward = layer_class(D, H, rng=1, reverse=True, **options)
    xs = rng.standard_normal((N, T, D))
    np.testing.assert_allclose(backward.forward(xs), forward.forward(xs[:, ::-1])[:, ::-1], rtol=1e-12)


# --- gradients ------------------------------------------------------------------------------


class CellWithState:
    """A cell seen as ``(x, *state) -> new state``, the state given and returned as separate arrays."""

    def __init__(self, cell):
        self.cell = cell

    def named_parameters(self):
        return self.cell.named_parameters()

    def forward(self, x, **state):
        parts = tuple(state.values())
        out = self.cell.forward(x, parts if len(parts) > 1 else parts[0])
        return out if isinstance(out, tuple) else (out,)

    def backward(self, douts):
        dx, dstate = self.cell.backward(douts if len(douts) > 1 else douts[0])
        return (dx, *(dstate if isinstance(dstate, tuple) else (dstate,)))


@pytest.mark.parametrize("cell_class, options", CELL_KINDS)
def test_cell_gradients(rng, cell_class, options):
    cell = randomize_biases(cell_class(D, H, rng=rng, **options), rng)
    state = initial_state(cell_class, rng)
    state = state if isinstance(state, tuple) else (state,)
    inputs = {"x": rng.standard_normal((N, D))} | {f"s{i}": s for i, s in enumerate(state)}
    check_layer_gradients(CellWithState(cell), inputs)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_time_layer_gradients(rng, states, layer_class, options, masked, reverse):
    """xs, every parameter, the initial state (``initial_state_grad``) and ``d_final_state``."""
    layer = randomize_biases(layer_class(D, H, rng=rng, reverse=reverse, **options), rng)
    mask = lengths_mask([4, 2, 1], T) if masked else None
    init = initial_state(layer_class, rng)
    inputs = {"xs": rng.standard_normal((N, T, D))}
    inputs |= {f"s{i}": s for i, s in enumerate(states.flatten(init))}
    check_layer_gradients(states.SequenceWithState(layer, init), inputs, forward_kwargs={"mask": mask})


@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_time_layer_gradients_without_initial_state(rng, layer_class, options):
    layer = randomize_biases(layer_class(D, H, rng=rng, **options), rng)
    check_layer_gradients(layer, {"xs": rng.standard_normal((2, 3, D))})


@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_padding_gets_no_gradient(rng, layer_class, options):
    layer = layer_class(D, H, rng=rng, **options)
    mask = lengths_mask([4, 2, 1], T)
    layer.forward(rng.standard_normal((N, T, D)), mask)
    dxs = layer.backward(rng.standard_normal((N, T, H)))
    assert np.all(dxs[~mask] == 0)


# --- padding, states, dtypes ----------------------------------------------------------------


@HYPOTHESIS
@given(kind=st.sampled_from(range(len(KINDS))), reverse=st.booleans(),
       lengths=st.lists(st.integers(1, 4), min_size=1, max_size=3), extra=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16))
def test_appending_padding_changes_nothing(kind, reverse, lengths, extra, seed):
    """Real positions and final states are the same as for each sequence run alone, whatever the padding holds."""
    _, layer_class, _, options = KINDS[kind]
    rng = np.random.default_rng(seed)
    layer = randomize_biases(layer_class(D, H, rng=seed, reverse=reverse, **options), rng)
    T_padded = max(lengths) + extra
    xs = rng.standard_normal((len(lengths), T_padded, D))
    mask = lengths_mask(lengths, T_padded)
    xs[~mask] = rng.uniform(-1e3, 1e3, ((~mask).sum(), D))  # garbage
    hs = layer.forward(xs, mask)
    final = layer.final_state
    assert np.all(hs[~mask] == 0)
    for n, length in enumerate(lengths):
        alone = layer.forward(xs[n:n + 1, :length])
        np.testing.assert_allclose(hs[n:n + 1, :length], alone, rtol=1e-12, atol=1e-14)
        for ours, reference in zip(parts(final), parts(layer.final_state)):
            np.testing.assert_allclose(ours[n:n + 1], reference, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_stateful_carries_the_state_and_reset_state_clears_it(rng, layer_class, options):
    xs = rng.standard_normal((N, 2 * T, D))
    whole = layer_class(D, H, rng=1, **options).forward(xs)
    stateful = layer_class(D, H, rng=1, stateful=True, **options)
    first, second = stateful.forward(xs[:, :T]), stateful.forward(xs[:, T:])
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), whole, rtol=1e-12)
    stateful.reset_state()
    np.testing.assert_allclose(stateful.forward(xs[:, T:]), layer_class(D, H, rng=1, **options).forward(xs[:, T:]),
                               rtol=1e-12)
    stateless = layer_class(D, H, rng=1, **options)
    stateless.forward(xs[:, :T])
    np.testing.assert_allclose(stateless.forward(xs[:, T:]), layer_class(D, H, rng=1, **options).forward(xs[:, T:]),
                               rtol=1e-12)
    assert not np.allclose(second, stateless.forward(xs[:, T:])), "the carried state must make a difference"


@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_an_initial_state_is_used(rng, layer_class, options):
    layer = layer_class(D, H, rng=rng, **options)
    xs = rng.standard_normal((N, T, D))
    from_zeros = layer.forward(xs)
    from_state = layer.forward(xs, initial_state=initial_state(layer_class, rng))
    assert not np.allclose(from_zeros[:, 0], from_state[:, 0])


@pytest.mark.parametrize("layer_class, options", TIME_KINDS)
def test_the_dtype_follows_the_input(rng, layer_class, options):
    layer = layer_class(D, H, rng=rng, **options)  # float64 parameters
    xs = rng.standard_normal((N, T, D)).astype(np.float32)
    hs = layer.forward(xs, lengths_mask([4, 3, 1], T))
    assert hs.dtype == np.float32
    assert all(s.dtype == np.float32 for s in parts(layer.final_state))
    assert layer.backward(np.ones_like(hs)).dtype == np.float32
    np.testing.assert_allclose(hs, layer.forward(xs.astype(np.float64), lengths_mask([4, 3, 1], T)), atol=1e-5)


# --- errors ---------------------------------------------------------------------------------


def test_bad_inputs_raise_errors_that_name_the_argument(rng):
    layer = LSTM(D, H, rng=rng)
    xs = rng.standard_normal((N, T, D))
    with pytest.raises(ShapeError, match=rf"xs: expected shape \(N, T, {D}\), got \({N}, {T}, 5\)"):
        layer.forward(rng.standard_normal((N, T, 5)))
    with pytest.raises(ShapeError, match=rf"mask: expected shape \(N={N}, T={T}\), got \({N}, {T + 1}\)"):
        layer.forward(xs, np.ones((N, T + 1), dtype=bool))
    with pytest.raises(ShapeError, match="mask: expected a bool array"):
        layer.forward(xs, np.ones((N, T)))
    with pytest.raises(ValueError, match="xs: expected a floating-point array"):
        layer.forward(xs.astype(np.int64))
    with pytest.raises(ShapeError, match=rf"initial_state: expected shape \({N}, {H}\), got \(2, {H}\)"):
        layer.forward(xs, initial_state=(np.zeros((2, H)), np.zeros((2, H))))
    with pytest.raises(ValueError, match=r"initial_state: expected \(h, c\) for a LSTMCell"):
        layer.forward(xs, initial_state=np.zeros((N, H)))
    with pytest.raises(ValueError, match="hidden_size must be >= 1"):
        GRU(D, 0)
