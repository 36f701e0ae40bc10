"""``gradients.py``: the sandbox's own backward pass equals torch's, and refuses what is not torch's.

The sandbox takes the gradients of a student's torch code without torch's engine (so that no hook,
patch or custom ``autograd.Function`` of the notebook's can answer for it). Here it is compared
with ``torch.autograd.grad`` on random programs (shared intermediates, broadcasting, reductions,
views, several outputs) and on the recurrent modules, and shown to refuse each way of forging one.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

from grader_helpers import REPO  # noqa: E402

sys.path.insert(0, str(REPO / "autograder"))   # (as the runner imports it, beside itself)
import gradients  # noqa: E402

# Only for that import: left there, autograder/ would shadow top-level packages for every later test
# module (its jupyterhub/ folder, jupyterhub: ltiauthenticator's import of jupyterhub.app fails).
sys.path.remove(str(REPO / "autograder"))

AUTOGRAD = gradients.Autograd(torch, np)

# Each step makes a new tensor from earlier ones (any of them, so intermediates are shared);
# every tensor is (3, 4) or broadcasts against it.
UNARY = [torch.tanh, torch.sigmoid, torch.exp, lambda t: t * t, lambda t: 1 - t, lambda t: t.softmax(-1),
         lambda t: t.cumsum(-1), lambda t: t.flip(-1), lambda t: t.sum(-1, keepdim=True),
         lambda t: t.mean(0, keepdim=True), lambda t: t.transpose(-1, -2).transpose(-1, -2),
         lambda t: t.masked_fill(torch.tensor([[True, False, False, True]] * 3), 0.0),
         lambda t: torch.where(t > 0, t, 0.1 * t), lambda t: t[..., 1:].clone().roll(1, -1).repeat(1, 1)[..., :3].sum(-1, keepdim=True),
         lambda t: t[:, None].squeeze(1)]
BROADCASTING = [torch.add, torch.mul, torch.sub, lambda a, b: a / (1.5 + b * b), torch.maximum]  # (the engine sums back)
BINARY = [lambda a, b: a @ b.transpose(-1, -2) @ b, lambda a, b: torch.cat([a, b], -1).split([4, 4], -1)[1] * a,
          lambda a, b: torch.einsum("ij,kj->ik", a, b).sum(-1, keepdim=True) * a, lambda a, b: torch.stack([a, b]).sum(0)]


def _program(steps):
    def run(x, y, b):
        values = [x, y, b]
        for kind, op, i, j in steps:
            first, second = values[i % len(values)], values[j % len(values)]
            if kind == "unary":
                values.append(UNARY[op % len(UNARY)](first.expand(3, 4)))   # (some need both dimensions)
            elif kind == "broadcast":
                values.append(BROADCASTING[op % len(BROADCASTING)](first, second))
            else:
                values.append(BINARY[op % len(BINARY)](first.expand(3, 4), second.expand(3, 4)))
        return values[-1].expand(3, 4), (values[-2] + values[-3]).expand(3, 4)
    return run


STEP = st.tuples(st.sampled_from(["unary", "broadcast", "binary"]), st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    return [torch.tensor(rng.normal(size=shape), requires_grad=True) for shape in ((3, 4), (3, 1), (4,))]


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_the_sandboxs_backward_pass_is_torchs(steps, seed):
    run = _program(steps)
    rng = np.random.default_rng(seed + 1)
    douts = (rng.normal(size=(3, 4)), rng.normal(size=(3, 4)))
    inputs = _inputs(seed)
    outputs = run(*inputs)
    if not any(out.requires_grad for out in outputs):
        return
    wanted = torch.autograd.grad([o for o in outputs if o.requires_grad], inputs,
                                 [torch.tensor(d) for o, d in zip(outputs, douts) if o.requires_grad],
                                 allow_unused=True)
    _, got = AUTOGRAD.vjp(run, douts, _inputs(seed), {})
    for index, want in enumerate(wanted):
        expected = np.zeros(inputs[index].shape) if want is None else want.numpy()
        np.testing.assert_allclose(got[str(index)], expected, rtol=1e-10, atol=1e-12, err_msg=f"input {index}")


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
def test_the_recurrent_modules_and_their_parameters(kind):
    module = getattr(torch.nn, kind)(3, 5, num_layers=2, batch_first=True, bidirectional=True, dtype=torch.float64)
    x = torch.tensor(np.random.default_rng(0).normal(size=(2, 4, 3)), requires_grad=True)
    dout = np.random.default_rng(1).normal(size=(2, 4, 10))

    def encode(x, rnn):
        return rnn(x)[0]

    _, got = AUTOGRAD.vjp(encode, dout, [x], {"rnn": module})
    wanted = torch.autograd.grad(encode(x, module), [x, *module.parameters()], torch.tensor(dout))
    names = ["0"] + [f"rnn.{name}" for name, _ in module.named_parameters()]
    assert sorted(got) == sorted(names)
    for name, want in zip(names, wanted):
        np.testing.assert_allclose(got[name], want.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_hooks_play_no_part():
    x = torch.tensor(np.arange(1.0, 5.0), requires_grad=True)

    def hooked(x):
        x.register_hook(lambda g: g * 0 + 7)
        y = x * x
        y.register_hook(lambda g: g * 100)
        y.grad_fn.register_prehook(lambda grads: tuple(g * 3 for g in grads))
        return y.sum()

    _, got = AUTOGRAD.vjp(hooked, 1.0, [x], {})
    np.testing.assert_array_equal(got["0"], 2 * np.arange(1.0, 5.0))
    assert torch.autograd.grad(hooked(x), [x])[0].tolist() == [7.0] * 4, "torch's engine would have run them"


def test_what_is_not_torchs_is_refused(monkeypatch):
    x = torch.tensor(np.ones(3), requires_grad=True)

    class Forged(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 5

    with pytest.raises(gradients.Refused, match="a node written in Python"):
        AUTOGRAD.vjp(lambda t: Forged.apply(t) + t, np.ones(3), [x], {})
    with pytest.raises(gradients.Refused, match="none of your function's outputs is computed from its inputs"):
        AUTOGRAD.vjp(lambda t: torch.from_numpy(t.detach().numpy() * 2), np.ones(3), [x], {})
    with pytest.raises(AssertionError, match="expected a torch tensor"):
        AUTOGRAD.vjp(lambda t: t.detach().numpy(), np.ones(3), [x], {})
    with torch.inference_mode():
        with pytest.raises(gradients.Refused, match="inference mode"):
            AUTOGRAD.vjp(lambda t: t * 2, np.ones(3), [x], {})
    for module, name in ((torch.autograd, "grad"), (torch.autograd.graph, "_engine_run_backward"),
                         (torch.Tensor, "backward"), (torch, "ones_like")):
        monkeypatch.setattr(module, name, lambda *args, **kwargs: None)
        with pytest.raises(gradients.Refused, match=f"changed torch's autograd .*{name}"):
            AUTOGRAD.vjp(lambda t: t * 2, np.ones(3), [x], {})
        monkeypatch.undo()
    monkeypatch.setitem(vars(torch.autograd), "isinstance", lambda *args: True)   # shadows a builtin there
    with pytest.raises(gradients.Refused, match="torch.autograd.isinstance"):
        AUTOGRAD.vjp(lambda t: t * 2, np.ones(3), [x], {})
    monkeypatch.undo()
    assert AUTOGRAD.changed() is None
    assert AUTOGRAD.vjp(lambda t: t * 2, np.ones(3), [x], {})[1]["0"].tolist() == [2.0] * 3
