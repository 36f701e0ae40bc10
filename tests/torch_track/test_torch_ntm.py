"""Tests for attention_course/torch_track/ntm.py: each layer and the whole machine against the NumPy track."""

import numpy as np
import pytest
import torch

from attention_course.core.configs import NTMConfig
from attention_course.numpy_track import ntm as numpy_ntm
from attention_course.torch_track import ntm as torch_ntm

N, h, R, C, S = 2, 3, 7, 4, 3


def distribution(rng, *shape):
    x = rng.uniform(0.05, 1.0, shape)
    return x / x.sum(axis=-1, keepdims=True)


def layer_parity(parity, numpy_layer, module, inputs: dict, rng):
    """Outputs and every input's gradient, for a random upstream gradient, NumPy against autograd."""
    out = numpy_layer.forward(**inputs)
    outs = out if isinstance(out, tuple) else (out,)
    douts = tuple(rng.standard_normal(o.shape) for o in outs)
    grads = numpy_layer.backward(douts if isinstance(out, tuple) else douts[0])
    grads = grads if isinstance(grads, tuple) else (grads,)
    tensors = {name: parity.as_torch(value, requires_grad=True) for name, value in inputs.items()}
    out_t = module(*tensors.values())
    outs_t = out_t if isinstance(out_t, tuple) else (out_t,)
    sum(((o * parity.as_torch(d)).sum() for o, d in zip(outs_t, douts))).backward()
    for index, (o_t, o) in enumerate(zip(outs_t, outs, strict=True)):
        parity.assert_close(f"output {index}", o_t, o)
    for (name, tensor), grad in zip(tensors.items(), grads, strict=True):
        parity.assert_close(f"gradient of {name}", tensor.grad, grad)


@pytest.mark.parametrize("name", ["ContentAddressing", "Interpolation", "ConvolutionalShift", "Sharpening",
                                  "Addressing", "HeadParameters", "ReadHead", "WriteHead"])
def test_layer_parity(parity, rng, name):
    heads = 2
    inputs = {
        "ContentAddressing": lambda: {"memory": rng.standard_normal((N, R, C)), "key": rng.standard_normal((N, h, C)),
                                      "strength": rng.uniform(0.5, 3, (N, h))},
        "Interpolation": lambda: {"content_weights": distribution(rng, N, h, R),
                                  "previous_weights": distribution(rng, N, h, R), "gate": rng.uniform(0, 1, (N, h))},
        "ConvolutionalShift": lambda: {"weights": distribution(rng, N, h, R), "shift": distribution(rng, N, h, 5)},
        "Sharpening": lambda: {"weights": distribution(rng, N, h, R), "gamma": rng.uniform(1, 4, (N, h))},
        "Addressing": lambda: {"memory": rng.standard_normal((N, R, C)),
                               "previous_weights": distribution(rng, N, h, R), "key": rng.standard_normal((N, h, C)),
                               "strength": rng.uniform(0.5, 3, (N, h)), "gate": rng.uniform(0.1, 0.9, (N, h)),
                               "shift": distribution(rng, N, h, S), "gamma": rng.uniform(1, 3, (N, h))},
        "HeadParameters": lambda: {"raw": rng.standard_normal((N, h, C + 3 + S))},
        "ReadHead": lambda: {"memory": rng.standard_normal((N, R, C)), "weights": distribution(rng, N, heads, R)},
        "WriteHead": lambda: {"memory": rng.standard_normal((N, R, C)), "weights": distribution(rng, N, heads, R),
                              "erase": rng.uniform(0, 1, (N, heads, C)), "add": rng.uniform(-1, 1, (N, heads, C))},
    }[name]()
    arguments = (C, S) if name == "HeadParameters" else ()
    layer_parity(parity, getattr(numpy_ntm, name)(*arguments), getattr(torch_ntm, name)(*arguments), inputs, rng)


def test_write_head_parity_for_one_head(parity, rng):
    # one write head takes the short path (no product over heads)
    layer_parity(parity, numpy_ntm.WriteHead(), torch_ntm.WriteHead(),
                 {"memory": rng.standard_normal((N, R, C)), "weights": distribution(rng, N, 1, R),
                  "erase": rng.uniform(0, 1, (N, 1, C)), "add": rng.uniform(-1, 1, (N, 1, C))}, rng)


@pytest.mark.parametrize("heads", [(1, 1), (2, 2)])
def test_ntm_parity(parity, rng, heads):
    config = NTMConfig(3, 2, controller_size=5, memory_size=6, memory_width=3, num_read_heads=heads[0],
                       num_write_heads=heads[1], dtype="float64")
    numpy_model = numpy_ntm.NTM(config, rng=0)
    module = torch_ntm.NTM(config, rng=0)
    parity.assert_same_parameters(numpy_model, module)  # the same initial weights for a seed
    module = parity.copied(numpy_model, module, rng)
    inputs = rng.standard_normal((2, 5, 3))
    targets = (rng.random((2, 5, 2)) > 0.5).astype(float)
    mask = parity.lengths_mask([5, 3], 5)
    loss_layer = numpy_ntm.SigmoidCrossEntropy()
    loss = loss_layer.forward(numpy_model.forward(inputs), targets, mask)
    d_inputs = numpy_model.backward(loss_layer.backward())
    inputs_t = parity.as_torch(inputs, requires_grad=True)
    loss_t = torch_ntm.SigmoidCrossEntropy()(module(inputs_t, record=True), parity.as_torch(targets),
                                             parity.as_torch(mask))
    loss_t.backward()
    parity.assert_close("loss", loss_t, np.float64(loss))
    parity.assert_close("input gradient", inputs_t.grad, d_inputs)
    parity.assert_parameter_grads(numpy_model, module)
    parity.assert_close("read weights", module.read_weights, numpy_model.read_weights)
    parity.assert_close("write weights", module.write_weights, numpy_model.write_weights)


def test_lstm_baseline_parity(parity, rng):
    numpy_model = numpy_ntm.LSTMBaseline(3, 2, hidden_size=4, rng=0, dtype=np.float64)
    module = parity.copied(numpy_model, torch_ntm.LSTMBaseline(3, 2, hidden_size=4, rng=0), rng)
    inputs = rng.standard_normal((2, 5, 3))
    logits = numpy_model.forward(inputs)
    d_logits = rng.standard_normal(logits.shape)
    numpy_model.backward(d_logits)
    out = module(parity.as_torch(inputs))
    (out * parity.as_torch(d_logits)).sum().backward()
    parity.assert_close("logits", out, logits)
    parity.assert_parameter_grads(numpy_model, module)


def test_ntm_records_only_outside_training(rng):
    module = torch_ntm.NTM(NTMConfig(3, 2, controller_size=5, memory_size=6, memory_width=3), rng=0)
    inputs = torch.from_numpy(rng.standard_normal((2, 4, 3)).astype(np.float32))
    module.train()
    module(inputs)
    assert module.read_weights is None
    module.eval()
    with torch.no_grad():
        module(inputs)
    assert module.read_weights.shape == (2, 4, 1, 6) and not module.read_weights.requires_grad
    torch.testing.assert_close(module.write_weights.sum(-1), torch.ones(2, 4, 1))


def test_shape_errors_name_the_argument(rng):
    with pytest.raises(ValueError, match=r"strength: expected shape \(N=2, h=3\)"):
        torch_ntm.ContentAddressing()(torch.zeros(N, R, C), torch.zeros(N, h, C), torch.zeros(N, 2))
    with pytest.raises(ValueError, match="shift: expected an odd number of offsets"):
        torch_ntm.ConvolutionalShift()(torch.zeros(N, h, R), torch.zeros(N, h, 2))
