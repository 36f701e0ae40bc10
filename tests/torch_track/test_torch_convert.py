"""Tests for attention_course/torch_track/convert.py, and for the torch track following dtypes and devices.

Weights copy name for name in both directions, exactly; a model of another configuration is
refused with a ValueError naming the parameter. No torch-track module hard-codes a device, and
every tensor a forward pass creates follows its input's dtype.
"""

import ast
import dataclasses
import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

import attention_course.torch_track as torch_track
from attention_course.numpy_track import seq2seq as np_seq2seq
from attention_course.torch_track import numpy_to_torch, state_dict_to_numpy, torch_to_numpy
from attention_course.torch_track import seq2seq as th_seq2seq

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


# --- devices and dtypes ----------------------------------------------------------------------

SOURCE_FILES = sorted(Path(inspect.getfile(torch_track)).parent.glob("*.py"))
# Where naming a device is the point: resolving the user's choice, and leaving torch for NumPy
# (NumPy arrays live on the CPU).
ALLOWED = {("trainer.py", "resolve_device"), ("convert.py", "torch_to_numpy")}


def _device_literals(path: Path):
    """``(function, line, code)`` for every call that names a device with a string literal."""
    tree = ast.parse(path.read_text())
    found = []

    def is_device_string(node):
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and \
            node.value.split(":")[0] in ("cuda", "cpu", "mps", "meta")

    def visit(node, function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            named = [k.value for k in node.keywords if k.arg == "device"]
            positional = node.args[:1] if callee in ("to", "device", "Generator") else []
            if callee in ("cuda",) or any(is_device_string(arg) for arg in named + positional):
                found.append((function, node.lineno, ast.get_source_segment(path.read_text(), node)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def test_the_scan_finds_a_hard_coded_device(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(x):\n    y = torch.zeros(3, device='cuda')\n    return x.to('cpu') + y.cuda()\n")
    assert [line for _, line, _ in _device_literals(sample)] == [2, 3, 3]


def test_no_module_hard_codes_a_device():
    assert len(SOURCE_FILES) >= 9
    offending = [(path.name, function, line, code) for path in SOURCE_FILES
                 for function, line, code in _device_literals(path) if (path.name, function) not in ALLOWED]
    assert not offending, f"hard-coded devices: {offending}"


def _run_attention_model(module, dtype, rng):
    batch = dict(source=rng.integers(0, 6, (3, 5)), source_mask=np.arange(5)[None] < np.array([[5], [0], [2]]),
                 decoder_input=rng.integers(0, 7, (3, 4)), decoder_target=rng.integers(0, 7, (3, 4)),
                 target_mask=np.arange(4)[None] < np.array([[4], [2], [3]]))
    tensors = {name: torch.from_numpy(value) for name, value in batch.items()}
    loss = module(**tensors)
    states = module.encoder.final_state
    ids, weights = module.generate(tensors["source"], tensors["source_mask"], 0, 3)
    return loss, states, weights


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
@pytest.mark.parametrize("cfg", [CONFIG, dataclasses.replace(CONFIG, cell="gru", reset_after=True, score="scaled_dot"),
                                 dataclasses.replace(CONFIG, cell="rnn", bidirectional=False, score="dot")],
                         ids=["lstm", "gru_reset_after", "rnn"])
def test_float32_model_stays_float32_when_the_default_dtype_is_float64(parity, rng, cfg, fused):
    """A tensor made in ``forward`` without ``dtype=`` would come out float64 here, and spread."""
    module = th_seq2seq.AttentionSeq2seq(dataclasses.replace(cfg, dtype="float32"), fused=fused)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        for training in (True, False):
            loss, states, weights = _run_attention_model(module.train(training), torch.float32, rng)
            assert loss.dtype == torch.float32
            assert {s.dtype for s in parity.flatten(states)} == {torch.float32}
            assert weights.dtype == torch.float32
            loss.backward()
            assert {p.grad.dtype for p in module.parameters() if p.grad is not None} == {torch.float32}
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "loop"])
def test_to_float64_after_construction_equals_a_float64_model(parity, rng, fused):
    cfg32 = dataclasses.replace(CONFIG, dtype="float32")
    converted = th_seq2seq.AttentionSeq2seq(cfg32, rng=6, fused=fused)
    built = th_seq2seq.AttentionSeq2seq(CONFIG, rng=0, fused=fused)
    built.load_state_dict(converted.state_dict())  # the float32 initial values, in float64
    converted = converted.to(torch.float64)
    assert {p.dtype for p in converted.parameters()} == {torch.float64}
    seed = int(rng.integers(1000))
    loss_converted, states_converted, weights_converted = _run_attention_model(converted, torch.float64,
                                                                               np.random.default_rng(seed))
    loss_built, states_built, weights_built = _run_attention_model(built, torch.float64, np.random.default_rng(seed))
    assert loss_converted.dtype == torch.float64
    parity.assert_close("loss", loss_converted, loss_built, 0.0)
    parity.assert_nested_close("encoder final state", states_converted, states_built, 0.0)
    parity.assert_close("attention weights", weights_converted, weights_built, 0.0)
