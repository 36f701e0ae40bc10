"""The torch track follows its inputs' dtypes and devices: no module hard-codes a device, and
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
from attention_course.torch_track import seq2seq as th_seq2seq

CONFIG = th_seq2seq.Seq2seqConfig(source_vocab_size=6, target_vocab_size=7, embed_dim=3, hidden_size=3, cell="lstm",
                                  num_layers=2, residual=True, score="additive", dtype="float64")

# --- devices and dtypes ----------------------------------------------------------------------

SOURCE_FILES = sorted(Path(inspect.getfile(torch_track)).parent.glob("*.py"))
# Where naming a device is the point: resolving the user's choice, and loading onto it (by default the CPU).
ALLOWED = {("trainer.py", "resolve_device"), ("track.py", "make_trainer"), ("track.py", "to_device")}


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
