"""Tests for attention_course/numpy_track/wrappers.py: Bidirectional, Stacked, Residual."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.numpy_track.layers import Affine
from attention_course.numpy_track.recurrent import GRU, LSTM, RNN
from attention_course.numpy_track.wrappers import Bidirectional, Residual, Stacked
from attention_course.testing import ShapeError, check_layer_gradients

HYPOTHESIS = settings(max_examples=25, deadline=None)

N, T, D, H = 3, 4, 3, 2
CELLS = {"rnn": (RNN, {}), "lstm": (LSTM, {}), "gru": (GRU, {}), "gru_reset_after": (GRU, {"reset_after": True})}


def make(kind, input_size, hidden_size, seed, **extra):
    layer_class, options = CELLS[kind]
    layer = layer_class(input_size, hidden_size, rng=seed, **options, **extra)
    bias_rng = np.random.default_rng(seed + 100)
    for name, value, _ in layer.named_parameters():
        if name.split(".")[-1] in ("b", "b_h"):
            value[...] = bias_rng.standard_normal(value.shape) * 0.5
    return layer


def bidirectional(kind, input_size=D, hidden_size=H, seed=0):
    return Bidirectional(make(kind, input_size, hidden_size, seed), make(kind, input_size, hidden_size, seed + 1))


def lengths_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def random_state_like(state, rng):
    """A random state with the nested structure of ``state``."""
    if isinstance(state, np.ndarray):
        return rng.standard_normal(state.shape)
    return type(state)(random_state_like(part, rng) for part in state)


def check_with_states(layer, xs, mask, rng, states):
    """Gradient check of xs, every parameter, a random initial state and the final state."""
    layer.forward(xs, mask)
    init = random_state_like(layer.final_state, rng)
    inputs = {"xs": xs} | {f"s{i}": s for i, s in enumerate(states.flatten(init))}
    check_layer_gradients(states.SequenceWithState(layer, init), inputs, forward_kwargs={"mask": mask})


# --- Bidirectional --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CELLS)
def test_bidirectional_concatenates_a_forward_and_a_reversed_pass(rng, kind):
    layer = bidirectional(kind)
    xs = rng.standard_normal((N, T, D))
    out = layer.forward(xs)
    assert out.shape == (N, T, 2 * H) and layer.output_size == 2 * H
    np.testing.assert_allclose(out[..., :H], make(kind, D, H, 0).forward(xs), rtol=1e-12)
    np.testing.assert_allclose(out[..., H:], make(kind, D, H, 1).forward(xs[:, ::-1])[:, ::-1], rtol=1e-12)
    fwd_state, bwd_state = layer.final_state
    h_first = bwd_state[0] if isinstance(bwd_state, tuple) else bwd_state
    np.testing.assert_array_equal(h_first, out[:, 0, H:], err_msg="the backward state ends at the first token")


@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("kind", CELLS)
def test_bidirectional_gradients(rng, states, kind, masked):
    mask = lengths_mask([4, 2, 1], T) if masked else None
    check_with_states(bidirectional(kind), rng.standard_normal((N, T, D)), mask, rng, states)


@HYPOTHESIS
@given(kind=st.sampled_from(sorted(CELLS)), lengths=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       extra=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_bidirectional_ignores_padding(states, kind, lengths, extra, seed):
    """The backward direction starts at each sequence's true last token: compare with each sequence alone."""
    rng = np.random.default_rng(seed)
    layer = bidirectional(kind, seed=seed % 1000)
    T_padded = max(lengths) + extra
    xs = rng.standard_normal((len(lengths), T_padded, D))
    mask = lengths_mask(lengths, T_padded)
    xs[~mask] = rng.uniform(-1e3, 1e3, ((~mask).sum(), D))
    out = layer.forward(xs, mask)
    final = states.flatten(layer.final_state)
    assert np.all(out[~mask] == 0)
    for n, length in enumerate(lengths):
        np.testing.assert_allclose(out[n:n + 1, :length], layer.forward(xs[n:n + 1, :length]), rtol=1e-12, atol=1e-14)
        for ours, reference in zip(final, states.flatten(layer.final_state), strict=True):
            np.testing.assert_allclose(ours[n:n + 1], reference, rtol=1e-12, atol=1e-14)


def test_bidirectional_rejects_a_reversed_forward_layer_and_a_shared_layer():
    with pytest.raises(ValueError, match="forward_layer must have reverse=False"):
        Bidirectional(GRU(D, H, reverse=True), GRU(D, H))
    layer = GRU(D, H)
    with pytest.raises(ValueError, match="two separate layers"):
        Bidirectional(layer, layer)


# --- Stacked --------------------------------------------------------------------------------


def test_stacked_applies_the_layers_in_turn(rng):
    first, second = make("lstm", D, H, 0), make("gru", H, 4, 1)
    stacked = Stacked([first, second])
    xs = rng.standard_normal((N, T, D))
    out = stacked.forward(xs)
    assert out.shape == (N, T, 4) and stacked.output_size == 4
    np.testing.assert_allclose(out, make("gru", H, 4, 1).forward(make("lstm", D, H, 0).forward(xs)), rtol=1e-12)
    assert isinstance(stacked.final_state, list) and len(stacked.final_state) == 2
    assert isinstance(stacked.final_state[0], tuple), "an LSTM layer's state is (h, c)"
    assert [name for name, _, _ in stacked.named_parameters()][:3] == ["0.cell.W_x", "0.cell.W_h", "0.cell.b"]


@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_stacked_gradients_with_a_list_of_states(rng, states, kind, masked):
    stacked = Stacked([make(kind, D, H, 0), bidirectional(kind, H, H, seed=1), make(kind, 2 * H, H, 3)])
    mask = lengths_mask([4, 3, 1], T) if masked else None
    check_with_states(stacked, rng.standard_normal((N, T, D)), mask, rng, states)


def test_stacked_checks_its_arguments():
    with pytest.raises(ValueError, match="at least one layer"):
        Stacked([])
    stacked = Stacked([GRU(D, H), GRU(H, H)])
    with pytest.raises(ValueError, match="initial_state: expected a list of 2 states, got 1"):
        stacked.forward(np.zeros((N, T, D)), initial_state=[np.zeros((N, H))])


# --- Residual -------------------------------------------------------------------------------


def test_residual_adds_the_input_and_zeroes_padding(rng):
    residual = Residual(make("gru", H, H, 0))
    xs = rng.standard_normal((N, T, H))
    mask = lengths_mask([4, 2, 3], T)
    out = residual.forward(xs, mask)
    expected = (xs + make("gru", H, H, 0).forward(xs, mask)) * mask[..., None]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert np.all(out[~mask] == 0)
    assert residual.output_size == H
    np.testing.assert_array_equal(residual.final_state, residual.layer.final_state)


@pytest.mark.parametrize("masked", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_residual_gradients(rng, states, kind, masked):
    mask = lengths_mask([4, 2, 1], T) if masked else None
    layer = Residual(bidirectional(kind, 2 * H, H))
    check_with_states(layer, rng.standard_normal((N, T, 2 * H)), mask, rng, states)
    layer.forward(rng.standard_normal((N, T, 2 * H)), mask)
    dxs = layer.backward(rng.standard_normal((N, T, 2 * H)))
    if masked:
        assert np.all(dxs[~mask] == 0), "padding gets no gradient through the skip path either"


def test_residual_in_a_stack_gradients(rng, states):
    stacked = Stacked([make("lstm", D, H, 0), Residual(make("lstm", H, H, 1))])
    check_with_states(stacked, rng.standard_normal((N, T, D)), lengths_mask([4, 3, 2], T), rng, states)


def test_residual_rejects_a_layer_that_changes_the_width():
    with pytest.raises(ShapeError, match=r"Residual: the wrapped layer maps \(3, 4, 3\) to \(3, 4, 2\)"):
        Residual(GRU(D, H)).forward(np.zeros((N, T, D)))


def test_residual_around_an_affine(rng):
    """Residual works for any layer with forward(xs, mask, state); here without a mask."""

    class Projection(Affine):
        output_size = 3

        def forward(self, xs, mask=None, initial_state=None):
            return super().forward(xs)

        def backward(self, dys, d_final_state=None):
            return super().backward(dys)

    check_layer_gradients(Residual(Projection(3, 3, rng=rng)), {"xs": rng.standard_normal((2, 3, 3))})
