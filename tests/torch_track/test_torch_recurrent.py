"""Tests for attention_course/torch_track/recurrent.py and wrappers.py: parity with the NumPy track.

Every cell and time-unrolled layer, on the fused path (torch's RNN kernels, padding by packing
or by reading the state at the last real step) and on the loop path, forwards and backwards,
with and without masks (rows of different lengths, a fully padded row), reversed, from a given
initial state; the final state and its gradient; the stateful carry; and the Bidirectional,
Stacked and Residual wrappers around them.
"""

import pytest
import torch

from attention_course.numpy_track import recurrent as np_recurrent
from attention_course.numpy_track import wrappers as np_wrappers
from attention_course.numpy_track.seq2seq import make_recurrent as np_make_recurrent
from attention_course.torch_track import recurrent as th_recurrent
from attention_course.torch_track import wrappers as th_wrappers
from attention_course.torch_track.base import ShapeError
from attention_course.torch_track.recurrent import reverse_padded
from attention_course.torch_track.seq2seq import make_recurrent as th_make_recurrent

N, T, D, H = 3, 4, 3, 2

# name -> (layer class name, cell class name, options, runs the fused kernel when fused=True)
KINDS = {
    "rnn": ("RNN", "RNNCell", {}, True),
    "lstm": ("LSTM", "LSTMCell", {}, True),
    "gru": ("GRU", "GRUCell", {"reset_after": False}, False),
    "gru_reset_after": ("GRU", "GRUCell", {"reset_after": True}, True),
}
LENGTHS = {"no_mask": None, "full": [T, T, T], "ragged": [3, 1, T], "fully_padded_row": [T, 0, 2]}


def mask_for(lengths_name, parity, n=N):
    lengths = LENGTHS[lengths_name]
    return None if lengths is None else parity.lengths_mask(lengths[:n], T)


def time_layers(kind, fused, **options):
    layer_name, _, cell_options, _ = KINDS[kind]
    numpy_layer = getattr(np_recurrent, layer_name)(D, H, rng=1, **cell_options, **options)
    module = getattr(th_recurrent, layer_name)(D, H, rng=1, dtype=torch.float64, fused=fused, **cell_options,
                                               **options)
    return numpy_layer, module


def random_state(kind, rng, n=N):
    return (rng.standard_normal((n, H)), rng.standard_normal((n, H))) if kind == "lstm" else rng.standard_normal((n, H))


@pytest.mark.parametrize("kind", list(KINDS))
def test_same_seed_same_initial_weights(parity, kind):
    numpy_layer, module = time_layers(kind, fused=True)
    parity.assert_same_parameters(numpy_layer, module)
    other = time_layers(kind, fused=True)[1]
    assert all(torch.equal(a, b) for a, b in zip(module.parameters(), other.parameters())), "deterministic"


@pytest.mark.parametrize("kind", list(KINDS))
def test_fused_kernel_is_used_where_it_exists(kind):
    _, module = time_layers(kind, fused=True)
    assert module.cell.can_fuse is KINDS[kind][3]


# --- cells -----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_state", [True, False])
@pytest.mark.parametrize("kind", list(KINDS))
def test_cell_parity(parity, rng, kind, with_state):
    _, cell_name, options, _ = KINDS[kind]
    cell = getattr(np_recurrent, cell_name)(D, H, rng=2, **options)
    module = parity.copied(cell, getattr(th_recurrent, cell_name)(D, H, rng=5, **options), rng)
    x = rng.standard_normal((N, D))
    state = random_state(kind, rng) if with_state else None
    new_state = cell.forward(x, state)
    d_new = parity.random_like(new_state, rng)
    dx, d_prev = cell.backward(d_new)

    x_t = parity.as_torch(x, requires_grad=True)
    state_t = parity.as_torch(state, requires_grad=True)
    new_t = module(x_t, state_t)
    sum((a * torch.from_numpy(b)).sum() for a, b in zip(parity.flatten(new_t), parity.flatten(d_new))).backward()
    parity.assert_nested_close("new state", new_t, new_state)
    parity.assert_close("dx", x_t.grad, dx)
    if with_state:
        parity.assert_nested_close("state gradient", [s.grad for s in parity.flatten(state_t)], d_prev)
    parity.assert_parameter_grads(cell, module)


def test_cell_rejects_a_wrong_state():
    with pytest.raises(ValueError, match=r"state: expected \(h, c\)"):
        th_recurrent.LSTMCell(D, H)(torch.zeros(N, D), torch.zeros(N, H))
    with pytest.raises(ShapeError, match="state"):
        th_recurrent.GRUCell(D, H)(torch.zeros(N, D), torch.zeros(N, H + 1))


# --- time-unrolled layers --------------------------------------------------------------------


@pytest.mark.parametrize("with_initial_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("lengths", list(LENGTHS))
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_time_layer_parity(parity, rng, kind, fused, reverse, lengths, with_initial_state):
    numpy_layer, module = time_layers(kind, fused, reverse=reverse)
    module = parity.copied(numpy_layer, module, rng)
    xs = rng.standard_normal((N, T, D))
    initial_state = random_state(kind, rng) if with_initial_state else None
    parity.sequence_parity(numpy_layer, module, xs, mask_for(lengths, parity), initial_state, rng)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_padding_changes_nothing_and_a_fully_padded_row_keeps_its_state(parity, rng, kind, fused):
    _, module = time_layers(kind, fused)
    for reverse in (False, True):
        module.reverse = reverse
        xs = torch.tensor(rng.standard_normal((N, T, D)))
        mask = torch.from_numpy(parity.lengths_mask([T, 0, 2], T))
        initial = parity.as_torch(random_state(kind, rng))
        hs = module(xs, mask, initial)
        final = module.final_state
        for row, length in enumerate([T, 0, 2]):
            alone = module(xs[row:row + 1, :length], None, parity.nested_map(lambda s: s[row:row + 1], initial)) \
                if length else None
            if alone is not None:
                parity.assert_close(f"row {row} outputs", hs[row:row + 1, :length], alone, 1e-12)
                parity.assert_nested_close(f"row {row} final state",
                                           parity.nested_map(lambda s: s[row:row + 1], final), module.final_state,
                                           1e-12)
            assert (hs[row, length:] == 0).all(), "padded steps output zeros"
        parity.assert_nested_close("fully padded row keeps its initial state",
                                   parity.nested_map(lambda s: s[1], final), parity.nested_map(lambda s: s[1], initial),
                                   0.0)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_stateful_carry_and_reset_state(parity, rng, kind, fused):
    numpy_layer, module = time_layers(kind, fused, stateful=True)
    module = parity.copied(numpy_layer, module, rng)
    first, second = rng.standard_normal((N, T, D)), rng.standard_normal((N, T, D))
    mask = parity.lengths_mask([T, 2, 3], T)
    numpy_layer.forward(first, mask)
    module(parity.as_torch(first), parity.as_torch(mask))
    parity.assert_nested_close("carried state", module.final_state, numpy_layer.final_state)
    # The second call starts from the carried state, and backpropagates through this call only.
    parity.sequence_parity(numpy_layer, module, second, mask, None, rng)

    numpy_layer.reset_state()
    module.reset_state()
    assert module.final_state is None
    parity.assert_close("after reset_state", module(parity.as_torch(first)), numpy_layer.forward(first))


def test_stateful_second_call_differs_from_a_fresh_start(parity, rng):
    _, module = time_layers("lstm", True, stateful=True)
    xs = torch.tensor(rng.standard_normal((N, T, D)))
    first = module(xs)
    second = module(xs)
    assert not torch.allclose(first, second), "the carried state must change the outputs"
    module.reset_state()
    assert torch.equal(module(xs), first)


@pytest.mark.parametrize("kind", list(KINDS))
def test_time_layer_checks_its_arguments(kind):
    _, module = time_layers(kind, True)
    with pytest.raises(ShapeError, match="xs"):
        module(torch.zeros(N, T, D + 1, dtype=torch.float64))
    with pytest.raises(ShapeError, match="mask"):
        module(torch.zeros(N, T, D, dtype=torch.float64), torch.ones(N, T + 1, dtype=torch.bool))
    with pytest.raises((ShapeError, ValueError), match="initial_state"):
        module(torch.zeros(N, T, D, dtype=torch.float64), None, torch.zeros(N + 1, H, dtype=torch.float64))


def test_reverse_padded_reverses_within_each_length():
    xs = torch.arange(12).reshape(3, 4)
    out = reverse_padded(xs, torch.tensor([4, 2, 0]))
    assert out.tolist() == [[3, 2, 1, 0], [5, 4, 6, 7], [8, 9, 10, 11]]
    assert torch.equal(reverse_padded(out, torch.tensor([4, 2, 0])), xs), "its own inverse"


# --- wrappers --------------------------------------------------------------------------------


@pytest.mark.parametrize("with_initial_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("lengths", ["no_mask", "fully_padded_row"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_bidirectional_parity(parity, rng, kind, fused, lengths, with_initial_state):
    (np_fwd, th_fwd), (np_bwd, th_bwd) = time_layers(kind, fused), time_layers(kind, fused)
    numpy_layer = np_wrappers.Bidirectional(np_fwd, np_bwd)
    module = parity.copied(numpy_layer, th_wrappers.Bidirectional(th_fwd, th_bwd), rng)
    assert module.backward_layer.reverse and module.output_size == 2 * H
    initial = (random_state(kind, rng), random_state(kind, rng)) if with_initial_state else None
    parity.sequence_parity(numpy_layer, module, rng.standard_normal((N, T, D)), mask_for(lengths, parity), initial,
                           rng)


@pytest.mark.parametrize("lengths", ["no_mask", "ragged", "fully_padded_row"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_residual_parity(parity, rng, kind, lengths):
    layer_name, _, options, _ = KINDS[kind]
    numpy_inner = getattr(np_recurrent, layer_name)(H, H, rng=1, **options)
    torch_inner = getattr(th_recurrent, layer_name)(H, H, **options)
    numpy_layer = np_wrappers.Residual(numpy_inner)
    module = parity.copied(numpy_layer, th_wrappers.Residual(torch_inner), rng)
    initial = random_state(kind, rng)
    parity.sequence_parity(numpy_layer, module, rng.standard_normal((N, T, H)), mask_for(lengths, parity), initial,
                           rng)


def test_residual_needs_equal_widths():
    with pytest.raises(ShapeError, match="skip connection"):
        th_wrappers.Residual(th_recurrent.RNN(D, H))(torch.zeros(N, T, D))


@pytest.mark.parametrize("with_initial_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("bidirectional, residual", [(False, False), (True, True), (False, True)],
                         ids=["stacked", "bidirectional_residual", "residual"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_stacked_parity(parity, rng, kind, fused, bidirectional, residual, with_initial_state):
    cell = "gru" if kind.startswith("gru") else kind
    reset_after = kind == "gru_reset_after"
    numpy_layer = np_make_recurrent(cell, D, H, num_layers=2, bidirectional=bidirectional, residual=residual, rng=3,
                                    reset_after=reset_after)
    module = th_make_recurrent(cell, D, H, num_layers=2, bidirectional=bidirectional, residual=residual, rng=3,
                               dtype=torch.float64, reset_after=reset_after, fused=fused)
    parity.assert_same_parameters(numpy_layer, module)
    module = parity.copied(numpy_layer, module, rng)
    xs = rng.standard_normal((N, T, D))
    mask = parity.lengths_mask([T, 0, 2], T)
    initial = None
    if with_initial_state:
        numpy_layer.forward(xs, mask)
        initial = parity.random_like(numpy_layer.final_state, rng)
    parity.sequence_parity(numpy_layer, module, xs, mask, initial, rng)
    assert isinstance(module.final_state, list) and len(module.final_state) == 2


def test_wrappers_refuse_bad_arguments():
    layer = th_recurrent.GRU(D, H)
    with pytest.raises(ValueError, match="separate layers"):
        th_wrappers.Bidirectional(layer, layer)
    with pytest.raises(ValueError, match="reverse=False"):
        th_wrappers.Bidirectional(th_recurrent.GRU(D, H, reverse=True), layer)
    with pytest.raises(ValueError, match="at least one"):
        th_wrappers.Stacked([])
    with pytest.raises(ValueError, match="initial_state"):
        th_wrappers.Stacked([layer])(torch.zeros(N, T, D), None, [None, None])
