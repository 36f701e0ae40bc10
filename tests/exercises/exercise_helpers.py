"""What the exercise tests share: the notebooks, their student versions, and answers to try.

``WRONG_ANSWERS``: plausible wrong answers, each must cost points. ``REFERENCE_CALLS``: answers
that call the course's reference implementation; they are flagged for review. Chapters 1-7's
are below; a later chapter keeps its own in ``answers_ch<N>.py`` next to this file (the same two
lists), added to these when this module loads.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
from nbgrader.utils import is_solution

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
PACKAGE = ROOT / "attention_course"
NOTEBOOKS = {path.stem: path for path in sorted(SOLUTIONS.glob("*/*.ipynb"))}

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
        lengths, forward_dir, backward_dir = cache
        H = dout.shape[-1] // 2
        real = (np.arange(dout.shape[1])[None, :] < np.asarray(lengths)[:, None])[:, :, None]
        dout = dout * real
        d_right = backward_dir.backward(reverse_padded(dout[..., H:], lengths))
        return forward_dir.backward(dout[..., :H]) + d_right, forward_dir.grads, backward_dir.grads
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
# Answers that call the reference implementation instead of implementing the exercise:
# (notebook, function, how, body). Nothing stops that from running (the package is public and the
# book shows its code); the static scan flags each for review.
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
        forward_dir, backward_dir = Direction(forward_weights), Direction(backward_weights)
        mask = np.arange(xs.shape[1])[None, :] < np.asarray(lengths)[:, None]
        hs = Bidirectional(forward_dir._rnn, backward_dir._rnn).forward(xs, mask)
        return hs, (lengths, forward_dir, backward_dir)
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


def _chapter_tables() -> None:
    import importlib

    for path in sorted(Path(__file__).parent.glob("answers_ch*.py")):
        module = importlib.import_module(path.stem)
        WRONG_ANSWERS.extend(getattr(module, "WRONG_ANSWERS", []))
        REFERENCE_CALLS.extend(getattr(module, "REFERENCE_CALLS", []))


_chapter_tables()
