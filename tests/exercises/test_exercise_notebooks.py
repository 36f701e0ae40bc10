"""The exercise notebooks (``solutions/<assignment>/<assignment>.ipynb``) and what grading them gives.

For every notebook:

* its structure is what nbgrader needs (markers, unique grade ids, points, hidden tests, no outputs);
* the solution runs top to bottom without an error and in under 30 s, and scores full marks;
* the student version (nbgrader's ``ClearSolutions`` + ``ClearHiddenTests``) still runs through,
  and every graded test cell fails, so it scores zero;
* each plausible wrong answer in ``WRONG_ANSWERS`` loses points;
* answers that tamper with what the tests rely on (``TAMPERING``) or call the reference
  implementation (``REFERENCE_CALLS``) are caught, with a message saying what was caught.

Scores are computed as nbgrader's autograde computes them (``nbgrader.utils.determine_grade``: a
graded cell with an error or anything on stderr scores 0). The notebooks run in kernels started
from this interpreter (a kernelspec written to a temporary folder), two at a time; the runs of one
notebook's variants are made together, the first time a test needs one of them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
from nbgrader.utils import determine_grade, is_grade, is_locked, is_solution

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
PACKAGE = ROOT / "attention_course"
NOTEBOOKS = {path.stem: path for path in sorted(SOLUTIONS.glob("*/*.ipynb"))}
NOTEBOOK_LIMIT_S = 30.0
WORKERS = 2  # kernels running at once (this machine has two cores)
REFERENCE_CALL = "the exercise must not call the reference implementation"

# ------------------------------------------------------------------------------------------------
# Plausible wrong answers: (notebook, function, what is wrong, the body that replaces the solution).
# Each must cost points.
WRONG_ANSWERS = [
    ("ch1a_lstm_backward", "lstm_step_backward", "the cell state's gradient ignores the path through h_t", """
        x, h_prev, c_prev, W_x, W_h, i, f, g, o, tanh_c = cache
        dc_total = dc
        da = np.concatenate([dc_total * g * i * (1 - i), dc_total * c_prev * f * (1 - f), dc_total * i * (1 - g ** 2),
                             dh * tanh_c * o * (1 - o)], axis=1)
        return da @ W_x.T, da @ W_h.T, dc_total * f, x.T @ da, h_prev.T @ da, da.sum(axis=0)
    """),
    ("ch1a_lstm_backward", "lstm_step_backward", "the bias gradient is averaged, not summed, over the batch", """
        x, h_prev, c_prev, W_x, W_h, i, f, g, o, tanh_c = cache
        dc_total = dc + dh * o * (1 - tanh_c ** 2)
        da = np.concatenate([dc_total * g * i * (1 - i), dc_total * c_prev * f * (1 - f), dc_total * i * (1 - g ** 2),
                             dh * tanh_c * o * (1 - o)], axis=1)
        return da @ W_x.T, da @ W_h.T, dc_total * f, x.T @ da, h_prev.T @ da, da.mean(axis=0)
    """),
    ("ch1b_gru_step_torch", "gru_step", "the reset gate acts after the recurrent product (torch's form)", """
        H = h_prev.shape[-1]
        from_x = x @ W_x + b
        r = torch.sigmoid(from_x[:, :H] + h_prev @ W_h[:, :H] + b_h[:H])
        z = torch.sigmoid(from_x[:, H:2 * H] + h_prev @ W_h[:, H:2 * H] + b_h[H:2 * H])
        n = torch.tanh(from_x[:, 2 * H:] + r * (h_prev @ W_h[:, 2 * H:] + b_h[2 * H:]))
        return (1 - z) * h_prev + z * n
    """),
    ("ch1b_gru_step_torch", "gru_step", "the update gate weighs the old state", """
        H = h_prev.shape[-1]
        from_x = x @ W_x + b
        r = torch.sigmoid(from_x[:, :H] + h_prev @ W_h[:, :H] + b_h[:H])
        z = torch.sigmoid(from_x[:, H:2 * H] + h_prev @ W_h[:, H:2 * H] + b_h[H:2 * H])
        n = torch.tanh(from_x[:, 2 * H:] + (r * h_prev) @ W_h[:, 2 * H:] + b_h[2 * H:])
        return z * h_prev + (1 - z) * n
    """),
    ("ch2a_encoder_states", "rnn_encoder_backward", "no gradient carried from step t+1 back to step t", """
        xs, states, W_x, W_h = cache
        N, T, D = xs.shape
        dxs = np.empty_like(xs)
        dW_x, dW_h, db = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros(W_h.shape[0])
        for t in range(T - 1, -1, -1):
            local = dhs[:, t] * (1 - states[:, t + 1] ** 2)
            dxs[:, t] = local @ W_x.T
            dW_x += xs[:, t].T @ local
            dW_h += states[:, t].T @ local
            db += local.sum(axis=0)
        return dxs, local @ W_h.T, dW_x, dW_h, db
    """),
    ("ch2a_encoder_states", "rnn_encoder_backward", "dW_h uses the new state instead of the previous one", """
        xs, states, W_x, W_h = cache
        N, T, D = xs.shape
        dxs = np.empty_like(xs)
        dW_x, dW_h, db = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros(W_h.shape[0])
        carried = np.zeros_like(states[:, 0])
        for t in range(T - 1, -1, -1):
            local = (dhs[:, t] + carried) * (1 - states[:, t + 1] ** 2)
            dxs[:, t] = local @ W_x.T
            dW_x += xs[:, t].T @ local
            dW_h += states[:, t + 1].T @ local
            db += local.sum(axis=0)
            carried = local @ W_h.T
        return dxs, carried, dW_x, dW_h, db
    """),
    ("ch2b_encoder_padding_torch", "encode_padded", "the state moves on over the padding", """
        N, T, _ = xs.shape
        h = xs.new_zeros((N, W_h.shape[0]))
        outputs = []
        for t in range(T):
            real = mask[:, t].unsqueeze(1)
            h = torch.tanh(xs[:, t] @ W_x + h @ W_h + b)
            outputs.append(torch.where(real, h, torch.zeros_like(h)))
        return torch.stack(outputs, dim=1), h
    """),
    ("ch2b_encoder_padding_torch", "encode_padded", "padded positions output the held state instead of zeros", """
        N, T, _ = xs.shape
        h = xs.new_zeros((N, W_h.shape[0]))
        outputs = []
        for t in range(T):
            real = mask[:, t].unsqueeze(1)
            h = torch.where(real, torch.tanh(xs[:, t] @ W_x + h @ W_h + b), h)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h
    """),
    ("ch3a_weight_sum", "weight_sum_backward", "dhs takes the last decoder step only, not the sum over steps", """
        if a.ndim == 2:
            return np.einsum("nj,nh->njh", a, dc), np.einsum("nh,njh->nj", dc, hs)
        return np.einsum("nj,nh->njh", a[:, -1], dc[:, -1]), np.einsum("nih,njh->nij", dc, hs)
    """),
    ("ch3a_weight_sum", "weight_sum_forward", "the weights' two time axes are swapped", """
        if a.ndim == 2:
            return np.einsum("nj,njh->nh", a, hs)
        return np.einsum("nji,njh->nih", a, hs)
    """),
    ("ch3b_context_torch", "context_matmul", "the weights are transposed", """
        return torch.bmm(a.transpose(1, 2), hs)
    """),
    ("ch3b_context_torch", "context_broadcast", "the sum runs over the hidden axis", """
        return (a[:, :, None] * hs).sum(dim=2)
    """),
    ("ch4a_score_functions", "scaled_dot_score_backward", "the backward pass forgets the 1/sqrt(H)", """
        return np.einsum("nij,nik->njk", de, s), np.einsum("nij,njk->nik", de, hs)
    """),
    ("ch4a_score_functions", "general_score_backward", "dW_a is transposed", """
        dhs = np.einsum("nij,nie->nje", de, s @ W_a)
        ds = np.einsum("nij,njd->nid", de, hs @ W_a.T)
        return dhs, ds, np.einsum("nij,nid,nje->ed", de, s, hs)
    """),
    ("ch4a_score_functions", "additive_score_backward", "the tanh derivative is missing", """
        joint = np.tanh((s @ W_a)[:, :, None, :] + (hs @ U_a)[:, None, :, :])
        dv_a = np.einsum("nij,nija->a", de, joint)
        d_inside = de[..., None] * v_a
        d_s, d_h = d_inside.sum(axis=2), d_inside.sum(axis=1)
        return d_h @ U_a.T, d_s @ W_a.T, np.einsum("nid,nia->da", s, d_s), np.einsum("nje,nja->ea", hs, d_h), dv_a
    """),
    ("ch4b_masked_softmax", "masked_softmax_backward", "the second term of the softmax Jacobian is missing", """
        return alpha * dalpha
    """),
    ("ch4b_masked_softmax", "masked_softmax", "masked scores filled with -1e9: fully padded rows come out uniform", """
        masked = np.where(mask[:, None, :], e, -1e9)
        weights = np.exp(masked - masked.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)
    """),
    ("ch4b_masked_softmax", "masked_softmax", "no maximum subtracted: large scores overflow", """
        weights = np.where(mask[:, None, :], np.exp(e), 0.0)
        total = weights.sum(axis=-1, keepdims=True)
        return weights / np.where(total > 0, total, 1.0)
    """),
    ("ch4b_masked_softmax", "masked_softmax_torch", "-inf and torch.softmax: NaN on fully padded rows", """
        return torch.softmax(e.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    """),
    ("ch5a_time_attention", "time_attention_backward", "no gradient to the encoder states through the weighted sum", """
        hs, s, alpha = cache
        dscores = softmax_backward(alpha, np.einsum("nih,njh->nij", dcontext, hs))
        return np.einsum("nij,nih->njh", dscores, s), np.einsum("nij,njh->nih", dscores, hs)
    """),
    ("ch5a_time_attention", "time_attention_forward", "padding not masked", """
        alpha = masked_softmax(np.einsum("nih,njh->nij", s, hs), None)
        return np.einsum("nij,njh->nih", alpha, hs), alpha, (hs, s, alpha)
    """),
    ("ch5b_attention_decoder", "combine_forward", "the state comes first in the concatenation", """
        joined = np.concatenate([s, context], axis=-1)
        h_tilde = np.tanh(joined @ W_c + b_c)
        return h_tilde, (joined, W_c, h_tilde, context.shape[-1])
    """),
    ("ch5b_attention_decoder", "combine_backward", "dW_c from the first example only (not summed over the batch)", """
        joined, W_c, h_tilde, H_enc = cache
        d_pre = dh_tilde * (1 - h_tilde ** 2)
        d_joined = d_pre @ W_c.T
        dW_c = np.einsum("tk,th->kh", joined[0], d_pre[0])
        return d_joined[..., :H_enc], d_joined[..., H_enc:], dW_c, d_pre.sum(axis=(0, 1))
    """),
    ("ch5b_attention_decoder", "decoder_outputs_torch", "padding not masked", """
        alpha = torch.softmax((s @ W_a) @ hs.transpose(1, 2), dim=-1)
        h_tilde = torch.tanh(torch.cat([alpha @ hs, s], dim=-1) @ W_c + b_c)
        return h_tilde @ W_o + b_o, alpha
    """),
    ("ch6a_bidirectional", "reverse_padded", "the whole row is flipped, padding included", """
        return xs[:, ::-1].copy()
    """),
    ("ch6a_bidirectional", "bidirectional_backward", "the backward half's input gradient is not reversed back", """
        H = dout.shape[-1] // 2
        real = (np.arange(dout.shape[1])[None, :] < np.asarray(lengths)[:, None])[:, :, None]
        dout = dout * real
        d_right = backward_dir.backward(reverse_padded(dout[..., H:], lengths))
        return forward_dir.backward(dout[..., :H]) + d_right
    """),
    ("ch6b_bigru_torch", "bigru_encode", "no packing: the backward direction starts in the padding", """
        out, final = gru(embedded)
        real = torch.arange(embedded.shape[1])[None, :] < torch.tensor(list(lengths))[:, None]
        return out * real[:, :, None], out[:, 0, out.shape[-1] // 2:]
    """),
    ("ch6b_bigru_torch", "bigru_encode", "the forward direction's final state instead of the backward one's", """
        packed = nn.utils.rnn.pack_padded_sequence(embedded, torch.tensor(list(lengths)), batch_first=True,
                                                   enforce_sorted=False)
        packed_out, final = gru(packed)
        hs, _ = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True, total_length=embedded.shape[1])
        return hs, final[0]
    """),
    ("ch7a_residual", "block_backward", "the skip connection's identity path is missing", """
        xs, W, branch, keep, skip = cache
        d_pre = dys * keep * (1 - branch ** 2)
        return d_pre @ W.T, np.einsum("ntd,nte->de", xs, d_pre), d_pre.sum(axis=(0, 1))
    """),
    ("ch7a_residual", "block_backward", "the gradient on padded positions is not masked", """
        xs, W, branch, keep, skip = cache
        d_pre = dys * (1 - branch ** 2)
        dxs = d_pre @ W.T + (dys if skip else 0)
        return dxs, np.einsum("ntd,nte->de", xs, d_pre), d_pre.sum(axis=(0, 1))
    """),
    ("ch7b_stacked_residual_torch", "stacked_rnn", "a skip connection around the first layer too", """
        outputs, current = [], xs
        for rnn in layers:
            out, _ = rnn(current)
            if residual:
                out = out + current
            outputs.append(out)
            current = out
        return current, outputs
    """),
    ("ch7b_stacked_residual_torch", "layer_gradient_norms", "the norms are shifted by one level", """
        xs = xs.detach().requires_grad_(True)
        top, outputs = stacked_rnn(xs, layers, residual)
        grads = torch.autograd.grad((top * dout).sum(), [xs] + outputs)
        return [float(g.norm()) for g in grads[1:]] + [float(dout.norm())]
    """),
]

# Answers that tamper with what the tests rely on: (notebook, the solution cell (by function) whose code
# is preceded by the tampering, what it does, the text every failing cell must name, the code). The
# solutions stay correct: every graded cell must then fail because the tampering was detected.
TAMPERING = [
    ("ch3a_weight_sum", "weight_sum_forward", "numpy's comparison functions replaced", "numpy.allclose", """
        import numpy
        numpy.allclose = lambda *args, **kwargs: True
        numpy.testing.assert_allclose = lambda *args, **kwargs: None
    """),
    ("ch4b_masked_softmax", "masked_softmax", "the course's check helpers replaced", "attention_course.testing", """
        import attention_course.testing as course_testing
        course_testing.assert_grads_close = lambda *args, **kwargs: None
        course_testing.check_layer_gradients = lambda *args, **kwargs: None
        course_testing.gradcheck.numerical_vjp = lambda f, x, dout, eps=1e-6: x * 0
    """),
    ("ch1a_lstm_backward", "lstm_step_backward", "the code of numpy.allclose and of a check helper swapped",
     "numpy.allclose", """
        import numpy
        import attention_course.testing.gradcheck as gradcheck
        numpy.allclose._implementation.__code__ = (lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: True).__code__
        gradcheck.assert_grads_close.__code__ = (lambda name, analytic, numeric, rtol=1e-6, atol=1e-8: None).__code__
    """),
    ("ch7a_residual", "block_forward", "numpy.allclose's tolerances widened through its defaults", "numpy.allclose", """
        import numpy
        numpy.allclose._implementation.__defaults__ = (1e300, 1e300, False)
    """),
    ("ch5a_time_attention", "time_attention_forward", "the exercise checks' own helpers replaced",
     "attention_course.testing.exercise", """
        import attention_course.testing.exercise as exercise_checks
        exercise_checks.assert_close = lambda *args, **kwargs: None
        exercise_checks.check_gradients = lambda *args, **kwargs: None
    """),
    ("ch2a_encoder_states", "rnn_encoder_forward", "the reference layer replaced to agree with the answer",
     "Recurrent.backward", """
        from attention_course.numpy_track import recurrent
        recurrent.Recurrent.backward = lambda self, dhs, d_final_state=None: dhs
    """),
    ("ch6b_bigru_torch", "bigru_encode", "torch's autograd replaced", "torch.autograd.grad", """
        import torch.autograd
        torch.autograd.grad = lambda outputs, inputs, *args, **kwargs: tuple(x * 0 for x in inputs)
    """),
]

# Answers that call the reference implementation instead of implementing the exercise:
# (notebook, function, how, body). Each must cost points, with the guard's message in the error.
REFERENCE_CALLS = [
    ("ch1a_lstm_backward", "lstm_step_backward", "LSTMCell's backward", """
        from attention_course.numpy_track import LSTMCell
        x, h_prev, c_prev, W_x, W_h, i, f, g, o, tanh_c = cache
        cell = LSTMCell(x.shape[1], h_prev.shape[1])
        cell.params["W_x"][...], cell.params["W_h"][...] = W_x, W_h
        cell.forward(x, (h_prev, c_prev))
        dx, (dh_prev, dc_prev) = cell.backward((dh, dc))
        return dx, dh_prev, dc_prev, cell.grads["W_x"], cell.grads["W_h"], cell.grads["b"]
    """),
    ("ch1b_gru_step_torch", "gru_step", "the torch track's GRUCell", """
        from attention_course.torch_track import GRUCell
        cell = GRUCell(x.shape[1], h_prev.shape[1], reset_after=False).double()
        return cell(x, h_prev)
    """),
    ("ch2a_encoder_states", "rnn_encoder_forward", "the NumPy RNN layer", """
        from attention_course.numpy_track import RNN
        layer = RNN(xs.shape[2], h0.shape[1])
        layer.cell.params["W_x"][...], layer.cell.params["W_h"][...], layer.cell.params["b"][...] = W_x, W_h, b
        return layer.forward(xs, initial_state=h0), layer
    """),
    ("ch2b_encoder_padding_torch", "encode_padded", "the NumPy RNN layer, wrapped in tensors", """
        from attention_course.numpy_track import RNN
        layer = RNN(xs.shape[2], W_h.shape[0])
        hs = layer.forward(xs.detach().numpy(), mask.numpy())
        return torch.from_numpy(hs), torch.from_numpy(layer.final_state)
    """),
    ("ch3a_weight_sum", "weight_sum_forward", "WeightSum", """
        from attention_course.numpy_track import WeightSum
        return WeightSum().forward(hs, a)
    """),
    ("ch3a_weight_sum", "weight_sum_backward", "a reference layer made before the tests start", """
        CAPTURED.forward(hs, a)
        return CAPTURED.backward(dc)
    """),
    ("ch3b_context_torch", "context_matmul", "the torch track's WeightSum", """
        from attention_course.torch_track import WeightSum
        return WeightSum()(hs, a)
    """),
    ("ch4a_score_functions", "dot_score", "DotScore", """
        from attention_course.numpy_track import DotScore
        return DotScore(hs.shape[-1], hs.shape[-1]).forward(hs, s)
    """),
    ("ch4b_masked_softmax", "masked_softmax", "the package's masked_softmax", """
        from attention_course.numpy_track import masked_softmax as reference
        return reference(e, mask[:, None, :])
    """),
    ("ch5a_time_attention", "time_attention_forward", "TimeAttention", """
        from attention_course.numpy_track import TimeAttention
        layer = TimeAttention("dot", hs.shape[-1], hs.shape[-1])
        context = layer.forward(hs, s, mask)
        return context, layer.attention_weights, layer
    """),
    ("ch5a_time_attention", "time_attention_backward", "the torch track, imported only while the tests run", """
        from attention_course.torch_track import TimeAttention
        return cache[0] * 0, cache[1] * 0
    """),
    ("ch5b_attention_decoder", "combine_forward", "Affine", """
        from attention_course.numpy_track import Affine
        affine = Affine(*W_c.shape)
        affine.params["W"][...], affine.params["b"][...] = W_c, b_c
        joined = np.concatenate([context, s], axis=-1)
        h_tilde = np.tanh(affine.forward(joined))
        return h_tilde, (joined, W_c, h_tilde, context.shape[-1])
    """),
    ("ch6a_bidirectional", "bidirectional_forward", "Bidirectional around the directions' layers", """
        from attention_course.numpy_track import Bidirectional
        mask = np.arange(xs.shape[1])[None, :] < np.asarray(lengths)[:, None]
        return Bidirectional(forward_dir._rnn, backward_dir._rnn).forward(xs, mask)
    """),
    ("ch6b_bigru_torch", "bigru_encode", "the NumPy Bidirectional GRU", """
        from attention_course.numpy_track import GRU, Bidirectional
        layer = Bidirectional(GRU(embedded.shape[2], gru.hidden_size, reset_after=True),
                              GRU(embedded.shape[2], gru.hidden_size, reset_after=True))
        return layer.forward(embedded.detach().numpy()), None
    """),
    ("ch7a_residual", "block_forward", "Residual", """
        from attention_course.numpy_track import Residual
        return Residual(None).forward(xs, mask), None
    """),
    ("ch7b_stacked_residual_torch", "stacked_rnn", "the torch track's Stacked and Residual", """
        from attention_course.torch_track import make_recurrent
        stack = make_recurrent("rnn", xs.shape[-1], layers[0].hidden_size, num_layers=len(layers), residual=residual)
        return stack(xs), []
    """),
]
# Top-level code that some REFERENCE_CALLS put in their answer cell (it runs before any test does).
REFERENCE_CALL_SETUP = {
    ("ch3a_weight_sum", "weight_sum_backward"): """
        from attention_course.numpy_track import WeightSum
        CAPTURED = WeightSum()
    """,
}


# ------------------------------------------------------------------------------------------------
# Notebook helpers
def read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS[name], as_version=4)


def released(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student version: nbgrader's ClearSolutions and ClearHiddenTests, as generate_assignment applies them."""
    nb = copy.deepcopy(nb)
    nb, resources = ClearSolutions().preprocess(nb, {})
    nb, _ = ClearHiddenTests().preprocess(nb, resources)
    return nb


def solution_cell(nb: nbformat.NotebookNode, function: str) -> nbformat.NotebookNode:
    cells = [cell for cell in nb.cells if is_solution(cell) and re.search(rf"^def {function}\(", cell.source, re.M)]
    assert len(cells) == 1, f"expected one solution cell defining {function}, found {len(cells)}"
    return cells[0]


def _indented(body: str, indent: str) -> list[str]:
    from textwrap import dedent

    return [indent + line if line.strip() else "" for line in dedent(body).strip("\n").split("\n")]


def with_body(nb: nbformat.NotebookNode, function: str, body: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose solution of ``function`` is ``body`` (what a student might have written)."""
    nb = copy.deepcopy(nb)
    cell = solution_cell(nb, function)
    lines = cell.source.split("\n")
    begin = next(i for i, line in enumerate(lines) if "### BEGIN SOLUTION" in line)
    end = next(i for i, line in enumerate(lines) if "### END SOLUTION" in line)
    indent = re.match(r"\s*", lines[begin]).group(0)
    cell.source = "\n".join(lines[:begin] + _indented(body, indent) + lines[end + 1:])
    return nb


def with_prefix(nb: nbformat.NotebookNode, function: str, code: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose answer cell for ``function`` runs ``code`` first (at the cell's top level)."""
    nb = copy.deepcopy(nb)
    cell = solution_cell(nb, function)
    cell.source = "\n".join(_indented(code, "")) + "\n\n" + cell.source
    return nb


def solution_lines(nb: nbformat.NotebookNode) -> list[str]:
    """The stripped, non-blank, non-comment lines between the solution markers."""
    found = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.split("\n"):
            if "### BEGIN SOLUTION" in line:
                inside = True
            elif "### END SOLUTION" in line:
                inside = False
            elif inside and line.strip() and not line.strip().startswith("#"):
                found.append(line.strip())
    return found


def hidden_test_lines(nb: nbformat.NotebookNode, outside: bool = False) -> list[str]:
    """The stripped, non-blank lines between the hidden-test markers (or, with ``outside``, all the others)."""
    found = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.split("\n"):
            if "### BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "### END HIDDEN TESTS" in line:
                inside = False
            elif inside != outside and line.strip():
                found.append(line.strip())
    return found


# ------------------------------------------------------------------------------------------------
# Running notebooks
_TEMPORARY = []  # folders removed when the test process ends


def _temporary_folder(prefix: str) -> Path:
    folder = tempfile.TemporaryDirectory(prefix=prefix)
    _TEMPORARY.append(folder)
    return Path(folder.name)


@lru_cache(maxsize=1)
def _kernel_specs() -> KernelSpecManager:
    """A kernelspec "python3" that runs this interpreter (the venv's), whatever else is installed."""
    folder = _temporary_folder("exercise-kernels-")
    spec = folder / "python3"
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (exercise tests)",
        "language": "python",
    }))
    return KernelSpecManager(kernel_dirs=[str(folder)])


@dataclass
class Run:
    nb: nbformat.NotebookNode
    seconds: float

    def graded(self) -> list[tuple[str, float, float, str]]:
        """(grade_id, points scored, points possible, error text) for every graded cell."""
        rows = []
        for cell in self.nb.cells:
            if is_grade(cell):
                score, possible = determine_grade(cell)
                rows.append((cell.metadata.nbgrader["grade_id"], score, possible, error_text(cell)))
        return rows

    def score(self) -> tuple[float, float]:
        rows = self.graded()
        return sum(r[1] for r in rows), sum(r[2] for r in rows)

    def errors(self) -> dict[str, str]:
        """Cell id -> error text, for every code cell with an error or anything on stderr."""
        return {cell.metadata.get("nbgrader", {}).get("grade_id", cell.id): error_text(cell)
                for cell in self.nb.cells if cell.cell_type == "code" and error_text(cell)}


def error_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            parts.append(f"{output.ename}: {output.evalue}")
        elif output.output_type == "stream" and output.name == "stderr":
            parts.append(f"stderr: {output.text}")
    return "\n".join(parts)


def run_all(notebooks: dict[str, nbformat.NotebookNode]) -> dict[str, Run]:
    """Execute every notebook top to bottom (errors allowed), WORKERS kernels at a time."""
    workdir = _temporary_folder("exercise-runs-")

    async def one(key, nb, gate):
        async with gate:
            nb = copy.deepcopy(nb)
            # IPC sockets in a private folder: no TCP ports, no warning about unencrypted TCP on stderr
            manager = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=_kernel_specs(), transport="ipc",
                                         ip=str(workdir / f"kernel-{len(started)}"))
            started.append(key)
            client = NotebookClient(nb, km=manager, timeout=120, allow_errors=True, kernel_name="python3",
                                    resources={"metadata": {"path": str(workdir)}})
            start = time.perf_counter()
            await client.async_execute()
            return key, Run(nb, time.perf_counter() - start)

    started = []

    async def main():
        gate = asyncio.Semaphore(WORKERS)
        return dict(await asyncio.gather(*(one(key, nb, gate) for key, nb in notebooks.items())))

    return asyncio.run(main())


def variants(name: str) -> dict[str, nbformat.NotebookNode]:
    """Every version of notebook ``name`` the tests grade, by key."""
    nb = read(name)
    found = {"solution": nb, "released": released(nb)}
    for index, (notebook, function, _, body) in enumerate(WRONG_ANSWERS):
        if notebook == name:
            found[f"wrong-{index}"] = with_body(nb, function, body)
    for index, (notebook, function, _, _, code) in enumerate(TAMPERING):
        if notebook == name:
            found[f"tamper-{index}"] = with_prefix(nb, function, code)
    for index, (notebook, function, _, body) in enumerate(REFERENCE_CALLS):
        if notebook == name:
            variant = with_body(nb, function, body)
            setup = REFERENCE_CALL_SETUP.get((notebook, function))
            if setup:
                variant = with_prefix(variant, function, setup)
            found[f"reference-{index}"] = variant
    return found


@lru_cache(maxsize=None)
def results(name: str) -> dict[str, Run]:
    return run_all(variants(name))


def _ids(table, columns=(0, 1, 2)):
    return [" / ".join(str(row[c]) for c in columns) for row in table]


# ------------------------------------------------------------------------------------------------
# Structure (no kernel)
def test_there_are_two_assignments_for_each_chapter_one_to_seven():
    assert len(NOTEBOOKS) >= 14
    for chapter in range(1, 8):
        found = [name for name in NOTEBOOKS if name.startswith(f"ch{chapter}")]
        assert len(found) >= 2, f"chapter {chapter}: expected two assignments, found {found}"
        torch_ones = [name for name in found if "import torch" in "".join(c.source for c in read(name).cells)]
        assert len(torch_ones) == 1, f"chapter {chapter}: exactly one exercise should use PyTorch, got {torch_ones}"
    for name, path in NOTEBOOKS.items():
        assert path.parent.name == name, f"{path}: the notebook must sit in solutions/{name}/"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_structure(name):
    raw = json.loads(NOTEBOOKS[name].read_text())
    nb = read(name)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    ids = [cell.metadata.nbgrader["grade_id"] for cell in nb.cells if "nbgrader" in cell.metadata]
    assert len(ids) == len(set(ids)), f"duplicate grade ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    assert all("nbgrader" in cell.metadata for cell in nb.cells), "every cell carries nbgrader metadata"
    for cell, raw_cell in zip(nb.cells, raw["cells"]):
        meta = cell.metadata.nbgrader
        assert meta["schema_version"] == 3
        if cell.cell_type == "code":
            assert raw_cell["outputs"] == [] and raw_cell["execution_count"] is None, \
                f"{meta['grade_id']}: outputs left in"
        if is_solution(cell):
            assert cell.cell_type == "code" and not meta["grade"] and not meta["locked"]
            source = cell.source
            assert source.count("### BEGIN SOLUTION") == 1 and source.count("### END SOLUTION") == 1, meta["grade_id"]
            assert source.index("### BEGIN SOLUTION") < source.index("### END SOLUTION")
            assert re.search(r'^def \w+\(.*\):\n    """', source, re.M | re.S), \
                f"{meta['grade_id']}: signature and docstring"
            assert "Shapes:" in source, f"{meta['grade_id']}: the docstring lists the shapes"
        elif is_grade(cell):
            assert cell.cell_type == "code" and meta["locked"] and meta["points"] > 0, meta["grade_id"]
            assert "load_checks()" in cell.source, f"{meta['grade_id']}: a test cell starts from fresh checks"
        else:
            assert is_locked(cell), f"{meta['grade_id']}: explanation and given code are read-only"
    graded = [cell for cell in nb.cells if is_grade(cell)]
    assert len(graded) >= 2
    assert any("### BEGIN HIDDEN TESTS" not in cell.source for cell in graded), "visible tests exist"
    hidden = [cell for cell in graded if "### BEGIN HIDDEN TESTS" in cell.source]
    assert hidden, "hidden tests exist"
    for cell in hidden:
        assert cell.source.count("### BEGIN HIDDEN TESTS") == cell.source.count("### END HIDDEN TESTS") == 1


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_released_version_holds_no_solution_and_no_hidden_test(name):
    nb = read(name)
    student = released(nb)
    text = "\n".join(cell.source for cell in student.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert text.count("raise NotImplementedError()") == sum(is_solution(cell) for cell in nb.cells)
    student_lines = {line.strip() for line in text.split("\n")}
    leaked = [line for line in solution_lines(nb) if len(line) > 12 and line in student_lines]
    assert not leaked, f"solution lines in the student version: {leaked}"
    # hidden-test lines, apart from those the visible tests share (such as the reference guard's line)
    visible = set(hidden_test_lines(nb, outside=True))
    leaked = [line for line in hidden_test_lines(nb) if line in student_lines and line not in visible]
    assert not leaked, f"hidden-test lines in the student version: {leaked}"


def test_solutions_are_not_copied_from_the_package():
    """A leak scan of the built wheel looks for solution lines in the package: there must be none."""
    package_lines = set()
    for path in PACKAGE.rglob("*.py"):
        package_lines.update(line.strip() for line in path.read_text().split("\n"))
    for name in NOTEBOOKS:
        shared = [line for line in solution_lines(read(name)) if len(line) >= 16 and line in package_lines]
        assert not shared, f"{name}: solution lines also found in attention_course/: {shared}"


def test_the_wrong_answer_and_cheat_tables_cover_every_notebook():
    for name in NOTEBOOKS:
        assert any(row[0] == name for row in WRONG_ANSWERS), f"{name}: no wrong answer is tried"
        assert any(row[0] == name for row in REFERENCE_CALLS), f"{name}: no call of the reference is tried"
    for row in WRONG_ANSWERS + REFERENCE_CALLS + TAMPERING:
        solution_cell(read(row[0]), row[1])  # the function exists


def test_nbgrader_generates_every_assignment(tmp_path, monkeypatch):
    """nbgrader's own generate_assignment accepts every notebook and releases what ``released`` builds."""
    from traitlets.config import Config
    from nbgrader.apps import NbGraderAPI

    # nbgrader creates the gradebook with the venv's `alembic` command
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    config.CourseDirectory.source_directory = str(SOLUTIONS.relative_to(SOLUTIONS.parent))
    config.CourseDirectory.release_directory = "release"
    config.CourseDirectory.db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    (tmp_path / SOLUTIONS.name).symlink_to(SOLUTIONS)
    api = NbGraderAPI(config=config)
    for name in NOTEBOOKS:
        result = api.generate_assignment(name, force=True, create=True)
        assert result["success"], f"{name}: {result.get('error')}"
        generated = nbformat.read(tmp_path / "release" / name / f"{name}.ipynb", as_version=4)
        assert [c.source for c in generated.cells] == [c.source for c in released(read(name)).cells], name


# ------------------------------------------------------------------------------------------------
# Grading (kernels)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_solution_runs_clean_and_scores_full_marks(name):
    run = results(name)["solution"]
    assert not run.errors(), f"errors or stderr output: {run.errors()}"
    score, possible = run.score()
    assert possible > 0 and score == possible, run.graded()
    assert run.seconds < NOTEBOOK_LIMIT_S, f"{name} took {run.seconds:.1f} s"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_released_version_runs_through_and_scores_zero(name):
    run = results(name)["released"]
    assert all(cell.execution_count is not None for cell in run.nb.cells if cell.cell_type == "code"), "it ran through"
    for grade_id, score, possible, error in run.graded():
        assert score == 0, f"{grade_id} passes without an answer"
        assert "NotImplementedError" in error, f"{grade_id}: {error}"
    assert not {k: v for k, v in run.errors().items() if not k.startswith("test")}, "only the test cells fail"


def test_nbgrader_validator_agrees_with_the_scores():
    """nbgrader's Validator (the student's "Validate" button) finds no failure in a solution, and every
    graded cell failing in a released notebook."""
    from nbgrader.validator import Validator

    validator = Validator()
    name = next(iter(NOTEBOOKS))
    assert validator._get_failed_cells(results(name)["solution"].nb) == []
    released_run = results(name)["released"].nb
    assert len(validator._get_failed_cells(released_run)) == sum(is_grade(c) for c in released_run.cells)
    assert validator.validate(str(NOTEBOOKS[name])) == {}  # executes the source notebook itself


@pytest.mark.parametrize("row", WRONG_ANSWERS, ids=_ids(WRONG_ANSWERS))
def test_wrong_answer_loses_points(row):
    name, function, what, _ = row
    key = f"wrong-{WRONG_ANSWERS.index(row)}"
    run = results(name)[key]
    score, possible = run.score()
    assert score < possible, f"{name}: the wrong {function} ({what}) keeps full marks"
    failed = [(grade_id, error) for grade_id, points, _, error in run.graded() if points == 0]
    assert failed and all("NotImplementedError" not in error for _, error in failed), failed
    assert all(cell.execution_count is not None for cell in run.nb.cells if cell.cell_type == "code")


@pytest.mark.parametrize("row", TAMPERING, ids=_ids(TAMPERING))
def test_tampering_is_caught(row):
    name, function, what, named, _ = row
    run = results(name)[f"tamper-{TAMPERING.index(row)}"]
    for grade_id, score, _, error in run.graded():
        assert score == 0, f"{grade_id} passes although {what}"
        assert "TamperingError" in error and named in error, f"{grade_id}: {error}"


@pytest.mark.parametrize("row", REFERENCE_CALLS, ids=_ids(REFERENCE_CALLS))
def test_calling_the_reference_is_caught(row):
    name, function, how, _ = row
    run = results(name)[f"reference-{REFERENCE_CALLS.index(row)}"]
    score, possible = run.score()
    assert score < possible, f"{name}: {function} calling {how} keeps full marks"
    assert any(REFERENCE_CALL in error for *_, error in run.graded()), run.graded()
