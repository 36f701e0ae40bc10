"""Tests for attention_course/convert.py: weights between the tracks, and with torch.nn's modules.

Between the tracks, weights copy name for name in both directions, exactly; a model of another
configuration is refused with a ValueError naming the parameter. With ``torch.nn``: given the
same weights, ``RNN``/``LSTM``/``GRU(reset_after=True)`` (alone, ``Bidirectional``, ``Stacked``)
must compute what ``torch.nn.RNN/LSTM/GRU`` compute, gradients included.
"""

import copy
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from attention_course.convert import (affine_from_torch, affine_to_torch, embedding_from_torch,  # noqa: E402
                                      embedding_to_torch, from_torch, numpy_to_torch, state_dict_to_numpy,
                                      to_torch, torch_to_numpy)
from attention_course.numpy_track import seq2seq as np_seq2seq  # noqa: E402
from attention_course.numpy_track.layers import Affine, Embedding  # noqa: E402
from attention_course.numpy_track.recurrent import GRU, LSTM, RNN  # noqa: E402
from attention_course.numpy_track.wrappers import Bidirectional, Residual, Stacked  # noqa: E402
from attention_course.torch_track import seq2seq as th_seq2seq  # noqa: E402

N, T, D, H = 3, 5, 3, 4
KINDS = {
    "rnn": (RNN, {}, lambda **kw: torch.nn.RNN(nonlinearity="tanh", **kw)),
    "lstm": (LSTM, {}, lambda **kw: torch.nn.LSTM(**kw)),
    "gru": (GRU, {"reset_after": True}, lambda **kw: torch.nn.GRU(**kw)),
}
# (num_layers, bidirectional)
ARCHITECTURES = [pytest.param(1, False, id="single"), pytest.param(1, True, id="bidirectional"),
                 pytest.param(2, False, id="stacked"), pytest.param(2, True, id="stacked_bidirectional")]


def numpy_layer(kind, num_layers, bidirectional, seed=0, stacked=None):
    """The NumPy counterpart of ``torch.nn.<kind>(D, H, num_layers, bidirectional=...)``.

    One layer is a plain layer (or Bidirectional) unless ``stacked``; more layers are a Stacked.
    """
    layer_class, options, _ = KINDS[kind]
    rng = np.random.default_rng(seed)
    layers, size_in = [], D
    for _ in range(num_layers):
        one = (Bidirectional(layer_class(size_in, H, rng=rng, **options), layer_class(size_in, H, rng=rng, **options))
               if bidirectional else layer_class(size_in, H, rng=rng, **options))
        layers.append(one)
        size_in = one.output_size
    if num_layers == 1 and not stacked:
        return layers[0]
    return Stacked(layers)


def torch_module(kind, num_layers, bidirectional, seed=1):
    torch.manual_seed(seed)
    return KINDS[kind][2](input_size=D, hidden_size=H, num_layers=num_layers, bidirectional=bidirectional,
                          batch_first=True).double()


def ours_to_torch_state(state, kind, num_layers, bidirectional):
    """Our nested final state as torch's ``h_n`` (and ``c_n``): (num_layers * directions, N, H)."""
    per_layer = state if isinstance(state, list) else [state]
    per_direction = [part for layer_state in per_layer
                     for part in (layer_state if bidirectional else (layer_state,))]
    if kind == "lstm":
        return (np.stack([h for h, _ in per_direction]), np.stack([c for _, c in per_direction]))
    return (np.stack(per_direction),)


def torch_to_ours_state(parts, kind, num_layers, bidirectional):
    """torch's ``h_n`` (and ``c_n``) as our nested state: the inverse of ``ours_to_torch_state``."""
    per_direction = [tuple(p[i] for p in parts) if kind == "lstm" else parts[0][i] for i in range(len(parts[0]))]
    dirs = 2 if bidirectional else 1
    per_layer = [tuple(per_direction[k * dirs:(k + 1) * dirs]) if bidirectional else per_direction[k]
                 for k in range(num_layers)]
    return per_layer if num_layers > 1 else per_layer[0]


def parameter_gradients_as_ours(module, layer):
    """torch's parameter gradients in our layout, by dotted name.

    The map from torch's parameters to ours is linear except for ``b = b_ih + b_hh``, whose
    gradient is ``d b_ih`` (= ``d b_hh``): put the gradients in a copy's place, zero ``b_hh`` for
    the RNN and LSTM, and convert with ``from_torch``.
    """
    grads_module = copy.deepcopy(module)
    with torch.no_grad():
        for (name, value), (_, original) in zip(grads_module.named_parameters(), module.named_parameters()):
            value.copy_(original.grad)
            if name.startswith("bias_hh") and not isinstance(module, torch.nn.GRU):
                value.zero_()
    scratch = copy.deepcopy(layer)
    from_torch(grads_module, scratch)
    return {name: value for name, value, _ in scratch.named_parameters()}


# --- parity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("num_layers, bidirectional", ARCHITECTURES)
@pytest.mark.parametrize("kind", KINDS)
def test_forward_and_every_gradient_match_torch(rng, kind, num_layers, bidirectional):
    layer = numpy_layer(kind, num_layers, bidirectional)
    module = to_torch(layer, torch_module(kind, num_layers, bidirectional))
    dirs = 2 if bidirectional else 1
    xs = rng.standard_normal((N, T, D))
    init_parts = tuple(rng.standard_normal((num_layers * dirs, N, H)) for _ in range(2 if kind == "lstm" else 1))
    d_out = rng.standard_normal((N, T, dirs * H))
    d_final_parts = tuple(rng.standard_normal(p.shape) for p in init_parts)

    hs = layer.forward(xs, initial_state=torch_to_ours_state(init_parts, kind, num_layers, bidirectional))
    final_parts = ours_to_torch_state(layer.final_state, kind, num_layers, bidirectional)
    dxs = layer.backward(d_out, torch_to_ours_state(d_final_parts, kind, num_layers, bidirectional))
    d_init_parts = ours_to_torch_state(layer.initial_state_grad, kind, num_layers, bidirectional)

    xs_t = torch.tensor(xs, requires_grad=True)
    init_t = tuple(torch.tensor(p, requires_grad=True) for p in init_parts)
    out_t, final_t = module(xs_t, init_t if kind == "lstm" else init_t[0])
    final_t = final_t if kind == "lstm" else (final_t,)
    loss = (out_t * torch.tensor(d_out)).sum()
    loss = loss + sum((f * torch.tensor(d)).sum() for f, d in zip(final_t, d_final_parts))
    loss.backward()

    close = dict(rtol=0, atol=1e-10)
    np.testing.assert_allclose(hs, out_t.detach().numpy(), **close, err_msg="outputs")
    for ours, theirs in zip(final_parts, final_t, strict=True):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), **close, err_msg="final state")
    np.testing.assert_allclose(dxs, xs_t.grad.numpy(), **close, err_msg="dxs")
    for ours, theirs in zip(d_init_parts, init_t, strict=True):
        np.testing.assert_allclose(ours, theirs.grad.numpy(), **close, err_msg="initial_state_grad")
    expected = parameter_gradients_as_ours(module, layer)
    for name, _, grad in layer.named_parameters():
        np.testing.assert_allclose(grad, expected[name], **close, err_msg=name)


@pytest.mark.parametrize("num_layers, bidirectional", ARCHITECTURES)
@pytest.mark.parametrize("kind", KINDS)
def test_padding_matches_pack_padded_sequence(rng, kind, num_layers, bidirectional):
    layer = numpy_layer(kind, num_layers, bidirectional)
    module = to_torch(layer, torch_module(kind, num_layers, bidirectional))
    lengths = np.array([5, 2, 3])
    mask = np.arange(T)[None, :] < lengths[:, None]
    xs = rng.standard_normal((N, T, D))
    xs[~mask] = 1e3  # garbage in the padding

    hs = layer.forward(xs, mask)
    final_parts = ours_to_torch_state(layer.final_state, kind, num_layers, bidirectional)

    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(xs), torch.tensor(lengths), batch_first=True,
                                                     enforce_sorted=False)
    out_packed, final_t = module(packed)
    out_t, _ = torch.nn.utils.rnn.pad_packed_sequence(out_packed, batch_first=True, total_length=T)
    final_t = final_t if kind == "lstm" else (final_t,)

    np.testing.assert_allclose(hs[mask], out_t.detach().numpy()[mask], rtol=0, atol=1e-10)
    assert np.all(hs[~mask] == 0)
    for ours, theirs in zip(final_parts, final_t, strict=True):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=0, atol=1e-10, err_msg="final state")


@pytest.mark.parametrize("kind", KINDS)
def test_float32_modules_get_float32_copies_and_agree(rng, kind):
    layer = numpy_layer(kind, 1, False)
    module = to_torch(layer, KINDS[kind][2](input_size=D, hidden_size=H, batch_first=True))
    assert module.weight_ih_l0.dtype == torch.float32
    xs = rng.standard_normal((N, T, D)).astype(np.float32)
    np.testing.assert_allclose(layer.forward(xs), module(torch.tensor(xs))[0].detach().numpy(), atol=1e-5)


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("num_layers, bidirectional", ARCHITECTURES)
@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_preserves_the_weights_exactly(kind, num_layers, bidirectional):
    layer = numpy_layer(kind, num_layers, bidirectional, seed=0)
    for _, value, _ in layer.named_parameters():  # biases too
        value[...] = np.random.default_rng(value.size).standard_normal(value.shape)
    before = layer.state_dict()
    copy_of_layer = numpy_layer(kind, num_layers, bidirectional, seed=5)
    arrays = [value for _, value, _ in copy_of_layer.named_parameters()]
    from_torch(to_torch(layer, torch_module(kind, num_layers, bidirectional)), copy_of_layer)
    for name, value, _ in copy_of_layer.named_parameters():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    assert all(a is b for a, (_, b, _) in zip(arrays, copy_of_layer.named_parameters())), "copied in place"


def test_torch_to_numpy_to_torch_preserves_a_gru_exactly():
    module = torch_module("gru", 2, True)
    again = to_torch(from_torch(module, numpy_layer("gru", 2, True)), torch_module("gru", 2, True, seed=7))
    for (name, ours), (_, theirs) in zip(again.named_parameters(), module.named_parameters()):
        assert torch.equal(ours, theirs), name


def test_lstm_biases_are_summed_from_torch(rng):
    module = torch_module("lstm", 1, False)
    layer = from_torch(module, numpy_layer("lstm", 1, False))
    np.testing.assert_allclose(layer.cell.params["b"], (module.bias_ih_l0 + module.bias_hh_l0).detach().numpy(),
                               rtol=0, atol=0)
    back = to_torch(layer, torch_module("lstm", 1, False, seed=3))
    assert torch.all(back.bias_hh_l0 == 0)


def test_gru_update_gate_is_negated(rng):
    layer = numpy_layer("gru", 1, False)
    module = to_torch(layer, torch_module("gru", 1, False))
    W_x = layer.cell.params["W_x"]
    weight_ih = module.weight_ih_l0.detach().numpy()  # (3H, D), blocks (r, z, n)
    np.testing.assert_array_equal(weight_ih[:H], W_x[:, :H].T)
    np.testing.assert_array_equal(weight_ih[H:2 * H], -W_x[:, H:2 * H].T)
    np.testing.assert_array_equal(weight_ih[2 * H:], W_x[:, 2 * H:].T)


def test_a_one_layer_stack_maps_onto_num_layers_1(rng):
    layer = numpy_layer("lstm", 1, True, stacked=True)
    module = to_torch(layer, torch_module("lstm", 1, True))
    xs = rng.standard_normal((N, T, D))
    np.testing.assert_allclose(layer.forward(xs), module(torch.tensor(xs))[0].detach().numpy(), atol=1e-12)


# --- what cannot be mapped ------------------------------------------------------------------


def test_the_lectures_gru_cannot_be_mapped_onto_torch():
    layer = GRU(D, H, reset_after=False)
    module = torch.nn.GRU(D, H, batch_first=True)
    for call in (lambda: to_torch(layer, module), lambda: from_torch(module, layer)):
        with pytest.raises(ValueError, match="reset_after=False.*cannot be mapped onto torch.nn.GRU") as error:
            call()
        assert "reset_after=True" in str(error.value)


@pytest.mark.parametrize("module, layer, message", [
    (lambda: torch.nn.GRU(D, H + 1), lambda: GRU(D, H, reset_after=True),
     r"weight_ih_l0: expected shape \(12, 3\), got \(15, 3\)"),
    (lambda: torch.nn.LSTM(D + 1, H), lambda: LSTM(D, H), r"weight_ih_l0: expected shape \(16, 3\), got \(16, 4\)"),
    (lambda: torch.nn.LSTM(D, H, num_layers=2), lambda: LSTM(D, H), "num_layers is 2, the NumPy layer needs 1"),
    (lambda: torch.nn.LSTM(D, H, bidirectional=True), lambda: LSTM(D, H), "bidirectional is True"),
    (lambda: torch.nn.GRU(D, H), lambda: LSTM(D, H), "LSTM maps onto torch.nn.LSTM, got GRU"),
    (lambda: torch.nn.RNN(D, H, nonlinearity="relu"), lambda: RNN(D, H), "nonlinearity='relu'"),
    (lambda: torch.nn.LSTM(D, H, bias=False), lambda: LSTM(D, H), "bias=True"),
    (lambda: torch.nn.LSTM(D, H, proj_size=2), lambda: LSTM(D, H), "proj_size=2"),
    (lambda: torch.nn.LSTM(H, H, num_layers=2), lambda: Stacked([LSTM(H, H), Residual(LSTM(H, H))]), "Residual"),
    (lambda: torch.nn.LSTM(D, H), lambda: LSTM(D, H, reverse=True), "reverse=True"),
    (lambda: torch.nn.LSTM(D, H, num_layers=2), lambda: Stacked([LSTM(D, H), GRU(H, H, reset_after=True)]),
     "same kind"),
])
def test_mismatches_raise_clear_errors(module, layer, message):
    module, layer = module(), layer()
    with pytest.raises(ValueError, match=message):
        to_torch(layer, module)
    before = layer.state_dict()
    with pytest.raises(ValueError, match=message):
        from_torch(module, layer)
    for name, value, _ in layer.named_parameters():
        np.testing.assert_array_equal(value, before[name], err_msg="a failed copy must change nothing")


def test_a_failed_copy_to_torch_changes_nothing():
    layer = Stacked([LSTM(D, H), LSTM(H, H + 1)])
    module = torch.nn.LSTM(D, H, num_layers=2)  # layer 0 fits, layer 1 does not
    before = {name: value.clone() for name, value in module.named_parameters()}
    with pytest.raises(ValueError, match=r"weight_ih_l1: expected shape \(20, 4\), got \(16, 4\)"):
        to_torch(layer, module)
    for name, value in module.named_parameters():
        assert torch.equal(value, before[name]), name


# --- Affine and Embedding -------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_affine_round_trip_and_parity(rng, bias):
    affine = Affine(4, 3, rng=rng, bias=bias)
    if bias:
        affine.params["b"][...] = rng.standard_normal(3)
    linear = affine_to_torch(affine, torch.nn.Linear(4, 3, bias=bias).double())
    x = rng.standard_normal((2, 5, 4))
    np.testing.assert_allclose(affine.forward(x), linear(torch.tensor(x)).detach().numpy(), rtol=0, atol=1e-12)
    again = affine_from_torch(linear, Affine(4, 3, rng=9, bias=bias))
    for name in affine.params:
        np.testing.assert_array_equal(again.params[name], affine.params[name])


def test_affine_mismatches():
    with pytest.raises(ValueError, match=r"weight: expected shape \(3, 4\), got \(4, 3\)"):
        affine_to_torch(Affine(4, 3), torch.nn.Linear(3, 4))
    with pytest.raises(ValueError, match=r"weight: expected shape \(3, 4\), got \(4, 3\)"):
        affine_from_torch(torch.nn.Linear(3, 4), Affine(4, 3))
    with pytest.raises(ValueError, match="bias"):
        affine_to_torch(Affine(4, 3), torch.nn.Linear(4, 3, bias=False))
    with pytest.raises(ValueError, match="bias"):
        affine_from_torch(torch.nn.Linear(4, 3), Affine(4, 3, bias=False))
    with pytest.raises(ValueError, match="linear: expected a torch.nn.Linear, got Embedding"):
        affine_to_torch(Affine(4, 3), torch.nn.Embedding(4, 3))


def test_embedding_round_trip_and_parity(rng):
    embed = Embedding(7, 3, rng=rng)
    module = embedding_to_torch(embed, torch.nn.Embedding(7, 3).double())
    ids = rng.integers(0, 7, (2, 4))
    np.testing.assert_array_equal(embed.forward(ids), module(torch.tensor(ids)).detach().numpy())
    again = embedding_from_torch(module, Embedding(7, 3, rng=4))
    np.testing.assert_array_equal(again.params["W"], embed.params["W"])
    with pytest.raises(ValueError, match=r"weight: expected shape \(7, 3\), got \(8, 3\)"):
        embedding_to_torch(embed, torch.nn.Embedding(8, 3))
    with pytest.raises(ValueError, match=r"weight: expected shape \(7, 3\), got \(7, 2\)"):
        embedding_from_torch(torch.nn.Embedding(7, 2), embed)


# --- between the tracks ----------------------------------------------------------------------

CONFIG = np_seq2seq.Seq2seqConfig(source_vocab_size=6, target_vocab_size=7, embed_dim=3, hidden_size=3, cell="lstm",
                                  num_layers=2, residual=True, score="additive", dtype="float64")


def test_round_trip_numpy_torch_numpy_is_exact(parity, rng):
    original = parity.randomize(np_seq2seq.AttentionSeq2seq(CONFIG, rng=1), rng)
    module = numpy_to_torch(original, th_seq2seq.AttentionSeq2seq(CONFIG, rng=2))
    parity.assert_same_parameters(original, module)
    back = torch_to_numpy(module, np_seq2seq.AttentionSeq2seq(CONFIG, rng=3))
    for (name, value, _), (other_name, other, _) in zip(original.named_parameters(), back.named_parameters()):
        assert name == other_name
        np.testing.assert_array_equal(other, value, err_msg=name)


def test_copies_keep_the_targets_dtype_and_the_optimizers_references(parity, rng):
    original = parity.randomize(np_seq2seq.AttentionSeq2seq(CONFIG, rng=1), rng)
    module = th_seq2seq.AttentionSeq2seq(dataclasses.replace(CONFIG, dtype="float32"))
    before = {name: p for name, p in module.named_parameters()}
    numpy_to_torch(original, module)
    for name, value, _ in original.named_parameters():
        assert before[name] is dict(module.named_parameters())[name], "copied in place"
        assert before[name].dtype == torch.float32
        np.testing.assert_array_equal(before[name].detach().numpy(), value.astype(np.float32), err_msg=name)
    float32_numpy = np_seq2seq.AttentionSeq2seq(dataclasses.replace(CONFIG, dtype="float32"))
    arrays = {name: value for name, value, _ in float32_numpy.named_parameters()}
    torch_to_numpy(module, float32_numpy)
    for name, value, _ in float32_numpy.named_parameters():
        assert value is arrays[name], "written in place"


@pytest.mark.parametrize("other, match", [
    (dict(hidden_size=4), r"parameter '[\w.]+': NumPy shape"),
    (dict(cell="gru"), r"only in NumPy \[.*'encoder\.rnn\.0\.forward_layer\.cell\.b_h'"),
    (dict(num_layers=1), r"only in NumPy \[.*'encoder\.rnn\.1\."),
    (dict(score="dot"), r"only in NumPy \[.*'decoder\.attention\.attention_weight\.score\.U_a'"),
])
def test_a_different_config_is_refused_naming_the_parameter(other, match):
    numpy_model = np_seq2seq.AttentionSeq2seq(dataclasses.replace(CONFIG, **other))
    module = th_seq2seq.AttentionSeq2seq(CONFIG)
    with pytest.raises(ValueError, match=match):
        numpy_to_torch(numpy_model, module)
    with pytest.raises(ValueError, match=match):
        torch_to_numpy(module, numpy_model)


def test_a_refused_copy_changes_nothing():
    numpy_model = np_seq2seq.AttentionSeq2seq(dataclasses.replace(CONFIG, hidden_size=4), rng=5)
    module = th_seq2seq.AttentionSeq2seq(CONFIG)
    before = {name: p.detach().clone() for name, p in module.named_parameters()}
    with pytest.raises(ValueError):
        numpy_to_torch(numpy_model, module)
    assert all(torch.equal(before[name], p) for name, p in module.named_parameters())


@pytest.mark.parametrize("kind", ["attention", "seq2seq"])
def test_state_dict_to_numpy_matches_the_numpy_state_dict(kind):
    cfg = dataclasses.replace(CONFIG, bidirectional=kind == "attention")
    numpy_state = np_seq2seq.build_model(kind, cfg, rng=4).state_dict()
    torch_state = state_dict_to_numpy(th_seq2seq.build_model(kind, cfg, rng=4))
    assert list(torch_state) == list(numpy_state), "same names, same order"
    for name, value in numpy_state.items():
        assert isinstance(torch_state[name], np.ndarray) and torch_state[name].dtype == np.float64
        np.testing.assert_array_equal(torch_state[name], value, err_msg=name)
    loaded = np_seq2seq.build_model(kind, cfg, rng=9)
    loaded.load_state_dict(torch_state)  # the checkpoint format: loads into the NumPy model


def test_state_dict_to_numpy_writes_bfloat16_as_float32():
    module = th_seq2seq.AttentionSeq2seq(CONFIG).to(torch.bfloat16)
    state = state_dict_to_numpy(module)
    assert {value.dtype for value in state.values()} == {np.dtype(np.float32)}
