"""Copies flagged for review (``autograder/similarity.py``): the package's code pasted into an answer, one
answer copied into another, the exercise's solution or reference copied under other names, each is found
with the student's lines (and never quoted); answers written from the page are not."""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import io
import textwrap
import tokenize
from pathlib import Path

import nbformat
import pytest

from autograder import leakscan, sandbox, similarity
from autograder.course import REPO_ROOT
from autograder.prepare import student_cells
from autograder.similarity import CopyCheck, package_sources

from attention_course.numpy_track import WeightSum
from attention_course.numpy_track.transformer import MultiHeadAttention

from grader_helpers import FIXTURES, needs_bwrap


@functools.lru_cache(maxsize=1)
def _check() -> CopyCheck:
    """The package fingerprinted once for the module (a check holds no state between batches)."""
    offered = set(sandbox.library_modules(["attention_course.functional"]))
    return CopyCheck(package_sources(sandbox.package_root(), offered))


def test_the_packages_code_pasted_into_an_answer_is_flagged_with_its_lines():
    check = _check()
    pasted = "import numpy as np\n\n\n" + textwrap.dedent(inspect.getsource(MultiHeadAttention.backward))
    renamed = pasted.replace("dout", "upstream").replace("self", "layer")  # names do not hide it
    flags = check.flags({"pasted": pasted, "renamed": renamed})
    for who in ("pasted", "renamed"):
        assert any("attention_course/numpy_track/transformer.py" in f for f in flags[who]), flags
    assert "lines 4-" in next(f for f in flags["pasted"] if "transformer.py" in f)


def test_an_answer_written_from_the_equations_is_not_flagged():
    honest = '''
import numpy as np

def weight_sum_backward(dc, hs, a):
    """dhs_j = sum_i a_ij dc_i, da_ij = h_j . dc_i"""
    if a.ndim == 2:
        return a[:, :, None] * dc[:, None, :], np.einsum("nh,njh->nj", dc, hs)
    return np.einsum("nij,nih->njh", a, dc), np.einsum("nih,njh->nij", dc, hs)
'''
    assert _check().flags({"honest": honest}) == {}


def test_answers_copied_from_each_other_are_flagged_both_ways():
    original = textwrap.dedent(inspect.getsource(WeightSum.backward)).replace("self._cache", "cache")
    other = original.replace("encoder_states", "states").replace("d_context", "upstream")
    different = ("def backward(dout, cache):\n    x, w = cache\n    total = np.zeros_like(x)\n"
                 "    for i in range(len(w)):\n        total += w[i] * dout\n    return total, None\n")
    check = CopyCheck({})  # no package: only the batch
    flags = check.flags({"ann": original, "bob": other, "cid": different})
    assert any("student bob's answer" in f for f in flags["ann"]) and any("student ann's answer" in f for f in flags["bob"])
    assert "cid" not in flags


def test_what_the_released_notebook_holds_is_not_a_copy():
    skeleton = textwrap.dedent(inspect.getsource(MultiHeadAttention.backward))
    check = _check()
    assert check.flags({"student": skeleton}, boilerplate_sources=[skeleton]) == {}
    assert similarity.normalise("x = 'a'  # note\ny = x")[0] == "V=SV=V"


def test_the_copy_check_loads_copydetects_winnowing_without_its_report_writer():
    """copydetect's package imports matplotlib for its HTML reports; the copy check loads only its
    winnowing functions (``_copydetect_utils``), and leaves copydetect importable as a whole."""
    import subprocess
    import sys

    from autograder.course import REPO_ROOT

    code = ("import sys\nfrom autograder import similarity\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\n"
            "assert not [m for m in sys.modules if m.startswith('copydetect')], 'copydetect left half-imported'\n"
            "assert similarity.get_document_fingerprints.__module__ == 'copydetect.utils'\n"
            "import copydetect\n"
            "assert copydetect.CopyDetector and copydetect.utils.get_document_fingerprints\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]


def test_code_is_normalised_up_to_where_it_stops_tokenizing():
    """A line that does not tokenize (an unterminated bracket or string) leaves the lines before it
    normalised, names and all: only from that line on is the code compared as it is."""
    assert similarity.normalise("a = b\nc = (")[0] == "V=V" + "c=("
    normalised, lines = similarity.normalise("first = 1\nsecond = '''never closed")
    assert normalised.startswith("V=1") and list(lines[:3]) == [1, 1, 1]


# --- the answer key: the source notebook's solution cells and the exercise's reference ---------------

COURSE = REPO_ROOT / "solutions"


def _exercise(source: Path):
    """(the source notebook, the released one: nbgrader's ClearSolutions, as ``release`` makes it)."""
    from nbgrader.preprocessors import ClearSolutions

    nb = nbformat.read(source, as_version=4)
    released, _ = ClearSolutions().preprocess(copy.deepcopy(nb), {})
    return nb, released


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _solutions(nb) -> dict[str, str]:
    return {_grade_id(c): c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _handed_in(released, answers: dict[str, str]) -> list[tuple[str, str]]:
    """What the copy check reads of a student's notebook: the released one with ``answers`` typed in."""
    nb = copy.deepcopy(released)
    for cell in nb.cells:
        if _grade_id(cell) in answers:
            cell.source = answers[_grade_id(cell)]
    return student_cells(nb)


def _boilerplate(released) -> list[str]:
    return [cell.source for cell in released.cells if cell.cell_type == "code"]


def _renamed(code: str) -> str:
    """``code`` with every name it assigns (its locals) renamed: what a student who copies would do."""
    assigned = sorted({node.id for node in ast.walk(ast.parse(code))
                       if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)})
    names = {name: f"my_{index}_{name[::-1]}" for index, name in enumerate(assigned)}
    tokens = [(tok.type, names.get(tok.string, tok.string) if tok.type == tokenize.NAME else tok.string)
              for tok in tokenize.generate_tokens(io.StringIO(code).readline)]
    return tokenize.untokenize(tokens)


def _code_lines(*texts: str) -> set[str]:
    """Every line of code in ``texts`` worth quoting (stripped; no comment, no marker, 12 characters or more)."""
    return {line.strip() for text in texts for line in text.splitlines()
            if len(line.strip()) >= 12 and not line.strip().startswith("#")}


# A softmax and its backward pass written from the notebook's text, one row at a time (the solution
# is vectorised): an honest answer.
HONEST_SOFTMAX = {
    "softmax": '''def softmax(x):
    """Row-wise softmax of a 2-D array of scores."""
    result = np.empty(np.shape(x))
    for row_index, row in enumerate(np.asarray(x, dtype=float)):
        largest = max(row)
        weights = [np.exp(value - largest) for value in row]
        total = sum(weights)
        result[row_index] = [weight / total for weight in weights]
    return result
''',
    "softmax_backward": '''def softmax_backward(probabilities, dout):
    """dx = p * (dout - sum(dout * p)), one row at a time."""
    gradient = np.zeros(np.shape(dout))
    for i in range(len(probabilities)):
        p, g = probabilities[i], dout[i]
        gradient[i] = p * g - p * np.dot(p, g)
    return gradient
''',
}

# fx_reference's reference.py (one row at a time, in log space), adapted to the notebook's signature.
ADAPTED_REFERENCE = '''def sharpen(weights, gamma):
    """w_i^gamma / sum_j w_j^gamma, row by row (the NTM's sharpening).

    Shapes:
        weights: (N, C), rows of non-negative weights.  gamma: a number >= 1.  returns: (N, C).
    """
    sharpened_rows = []
    for row_of_weights in np.asarray(weights, dtype=np.float64):
        log_powers = gamma * np.log(row_of_weights)
        log_powers -= log_powers.max()
        sharpened_rows.append(np.exp(log_powers) / np.exp(log_powers).sum())
    return np.stack(sharpened_rows)
'''


def test_the_answer_key_is_the_code_between_the_solution_markers_and_the_reference():
    key = similarity.answer_key(FIXTURES / "fx_reference" / "fx_reference.ipynb",
                                FIXTURES / "fx_reference" / "reference.py")
    assert sorted(key) == ["the exercise's reference.py", "the solution cells of fx_reference.ipynb"]
    [(where, code)] = key["the solution cells of fx_reference.ipynb"]
    assert where == "cell 'sharpen'"
    assert code.strip().startswith("powered_weights_of_each_row = np.power(weights, gamma)")
    assert "def sharpen" not in code and "Shapes" not in code and "SOLUTION" not in code   # (the released part)
    source = _solutions(nbformat.read(FIXTURES / "fx_reference" / "fx_reference.ipynb", as_version=4))["sharpen"]
    assert code.splitlines()[7] == "powered_weights_of_each_row = np.power(weights, gamma)" == \
        source.splitlines()[7].strip(), "line numbers are the cell's own"
    assert similarity.answer_key(None, None) == {}


def test_a_copy_of_the_solution_under_other_names_is_flagged_with_the_students_lines_only():
    source, released = _exercise(FIXTURES / "fx_softmax" / "fx_softmax.ipynb")
    solution = _solutions(source)
    copied = {grade_id: _renamed(code) for grade_id, code in solution.items()}
    assert copied != solution
    key = similarity.answer_key(FIXTURES / "fx_softmax" / "fx_softmax.ipynb", None)
    answers = {"copier": _handed_in(released, copied), "honest": _handed_in(released, HONEST_SOFTMAX)}
    flags = CopyCheck({}).flags(answers, _boilerplate(released), key)
    assert "honest" not in flags, flags
    [flag] = flags["copier"]
    assert similarity.is_copy_flag(flag) and "the solution cells of fx_softmax.ipynb" in flag
    # where in the student's own cells (here), where in the solution (there): line numbers, no code
    here = flag[flag.index("(") + 1:flag.index(" here;")]
    assert here.startswith("cell 'softmax' lines 8-10") and "cell 'softmax_backward' lines 8-9" in here, flag
    assert not [line for line in _code_lines(*solution.values(), *copied.values()) if line in flag], flag


def test_an_answer_adapted_from_the_reference_is_flagged():
    source, released = _exercise(FIXTURES / "fx_reference" / "fx_reference.ipynb")
    key = similarity.answer_key(FIXTURES / "fx_reference" / "fx_reference.ipynb",
                                FIXTURES / "fx_reference" / "reference.py")
    answers = {"adapter": _handed_in(released, {"sharpen": ADAPTED_REFERENCE}),
               "control": _handed_in(released, _solutions(source))}
    flags = CopyCheck({}).flags(answers, _boilerplate(released), key)
    [flag] = flags["adapter"]
    assert "the exercise's reference.py (cell 'sharpen' lines 7-12 here; reference.py lines 7-12 there)" in flag
    reference = (FIXTURES / "fx_reference" / "reference.py").read_text()
    assert not [line for line in _code_lines(reference) if line in flag], flag
    # the solution is two short lines, as any student would write them: too short to call a copy
    assert "control" not in flags


@pytest.mark.parametrize("assignment", sorted(p.name for p in COURSE.iterdir() if (p / f"{p.name}.ipynb").is_file())
                         if COURSE.is_dir() else [])
def test_every_exercise_copied_under_other_names_is_flagged(assignment):
    notebook = COURSE / assignment / f"{assignment}.ipynb"
    source, released = _exercise(notebook)
    copied = {grade_id: _renamed(code) for grade_id, code in _solutions(source).items()}
    key = similarity.answer_key(notebook, COURSE / assignment / "reference.py")
    flags = _check().flags({"copier": _handed_in(released, copied)}, _boilerplate(released), key)
    assert any(f"the solution cells of {assignment}.ipynb" in flag for flag in flags.get("copier", [])), flags


# Honest answers to three of the course's exercises, written from the notebooks' text and each
# structured unlike the solution and the reference (loops where they vectorise, einsum, the
# distances from their differences). Each scores full marks in the grader (python -m autograder
# autograde, checked when they were written).
HONEST = {
    "ch7a_highway": {
        "highway_forward": '''def highway_forward(xs, mask, W_H, b_H, W_T, b_T):
    """A highway layer, one position at a time."""
    N, T, D = xs.shape
    ys = np.zeros_like(xs)
    candidates = np.zeros_like(xs)
    gates = np.zeros_like(xs)
    for n in range(N):
        for t in range(T):
            if not mask[n, t]:
                continue
            x = xs[n, t]
            candidate = np.tanh(x.dot(W_H) + b_H)
            g = 1.0 / (1.0 + np.exp(-(x.dot(W_T) + b_T)))
            candidates[n, t], gates[n, t] = candidate, g
            ys[n, t] = g * candidate + (1.0 - g) * x
    return ys, {"xs": xs, "mask": mask, "candidates": candidates, "gates": gates, "W_H": W_H, "W_T": W_T}
''',
        "highway_backward": '''def highway_backward(dys, cache):
    """The gradients of highway_forward, one position at a time."""
    xs, mask = cache["xs"], cache["mask"]
    W_H, W_T = cache["W_H"], cache["W_T"]
    N, T, D = xs.shape
    dxs = np.zeros_like(xs)
    dW_H, dW_T = np.zeros_like(W_H), np.zeros_like(W_T)
    db_H, db_T = np.zeros(D), np.zeros(D)
    for n in range(N):
        for t in range(T):
            if not mask[n, t]:
                continue
            x, dy = xs[n, t], dys[n, t]
            candidate, g = cache["candidates"][n, t], cache["gates"][n, t]
            d_candidate_input = dy * g * (1.0 - candidate * candidate)   # through tanh
            d_gate_input = dy * (candidate - x) * g * (1.0 - g)          # through the gate's sigmoid
            dW_H += np.outer(x, d_candidate_input)
            db_H += d_candidate_input
            dW_T += np.outer(x, d_gate_input)
            db_T += d_gate_input
            dxs[n, t] = dy * (1.0 - g) + W_H.dot(d_candidate_input) + W_T.dot(d_gate_input)
    return dxs, dW_H, db_H, dW_T, db_T
''',
        "highway_gradient_norms": '''def highway_gradient_norms(xs, mask, layers, dys):
    """||dL/dx_l|| at every level, from the input to the top."""
    level_caches = []
    current = xs
    for params in layers:
        current, level_cache = highway_forward(current, mask, params["W_H"], params["b_H"], params["W_T"], params["b_T"])
        level_caches.append(level_cache)
    upstream = dys * mask[:, :, None]
    result = np.zeros(len(layers) + 1)
    result[len(layers)] = np.sqrt((upstream ** 2).sum())
    for level in range(len(layers) - 1, -1, -1):
        upstream = highway_backward(upstream, level_caches[level])[0]
        result[level] = np.sqrt(np.sum(upstream * upstream))
    return result
''',
    },
    "ch3a_multi_query_penalty": {
        "multi_weighted_sum_forward": '''def multi_weighted_sum_forward(hs, A):
    """r weighted sums and the penalty, with einsum."""
    M = np.einsum("nrt,nth->nrh", A, hs)
    gram = np.einsum("nrt,nst->nrs", A, A)
    residual = gram - np.eye(A.shape[1])[None]
    penalty = np.einsum("nrs,nrs->n", residual, residual)
    return M, penalty, {"hs": hs, "A": A, "residual": residual}
''',
        "multi_weighted_sum_backward": '''def multi_weighted_sum_backward(dM, dpenalty, cache):
    """Gradients: the weighted sums by einsum, the penalty through R = A A^T - I."""
    hs, A, residual = cache["hs"], cache["A"], cache["residual"]
    dhs = np.einsum("nrt,nrh->nth", A, dM)
    d_from_sums = np.einsum("nrh,nth->nrt", dM, hs)
    d_residual = 2.0 * residual * dpenalty[:, None, None]          # d penalty / d R
    symmetric = d_residual + np.swapaxes(d_residual, 1, 2)
    d_from_penalty = np.einsum("nrs,nst->nrt", symmetric, A)       # R = A A^T - I
    return dhs, d_from_sums + d_from_penalty
''',
    },
    "ch4a_l2_attention": {
        "l2_attention_forward": '''def l2_attention_forward(decoder_states, encoder_states, W_Q, W_K, mask):
    """Negative squared distances, from their differences."""
    queries = np.einsum("nih,ha->nia", decoder_states, W_Q)
    keys = np.einsum("njh,ha->nja", encoder_states, W_K)
    differences = queries[:, :, None, :] - keys[:, None, :, :]   # (N, T_dec, T_enc, A)
    distances = np.sum(differences * differences, axis=3)
    scale = 1.0 / np.sqrt(W_Q.shape[1])
    attention = masked_softmax(-scale * distances, mask[:, None, :])
    return attention, {"s": decoder_states, "h": encoder_states, "W_Q": W_Q, "W_K": W_K,
                       "differences": differences, "attention": attention, "scale": scale}
''',
        "l2_attention_backward": '''def l2_attention_backward(dweights, cache):
    """Back through the softmax, the distances and the two projections."""
    differences, scale = cache["differences"], cache["scale"]
    d_scores = softmax_backward(cache["attention"], dweights)
    d_distances = -scale * d_scores
    d_differences = 2.0 * differences * d_distances[..., None]
    d_queries = d_differences.sum(axis=2)
    d_keys = -d_differences.sum(axis=1)
    d_s = np.einsum("nia,ha->nih", d_queries, cache["W_Q"])
    d_h = np.einsum("nja,ha->njh", d_keys, cache["W_K"])
    d_W_Q = np.einsum("nih,nia->ha", cache["s"], d_queries)
    d_W_K = np.einsum("njh,nja->ha", cache["h"], d_keys)
    return d_s, d_h, d_W_Q, d_W_K
''',
    },
}


@pytest.mark.parametrize("assignment", sorted(HONEST))
def test_honest_answers_to_the_courses_exercises_are_not_flagged(assignment):
    notebook = COURSE / assignment / f"{assignment}.ipynb"
    source, released = _exercise(notebook)
    assert set(HONEST[assignment]) == set(_solutions(source)), "an honest answer for every answer cell"
    key = similarity.answer_key(notebook, COURSE / assignment / "reference.py")
    answers = {"honest": _handed_in(released, HONEST[assignment]), "solution": _handed_in(released, _solutions(source))}
    flags = _check().flags(answers, _boilerplate(released), key)
    assert "honest" not in flags, flags["honest"]
    assert any(f"the solution cells of {assignment}.ipynb" in flag for flag in flags["solution"])   # (the key works)


# --- the whole path: autograde writes the flags, feedback shows none of them ---------------------------


@pytest.fixture(scope="module")
def graded(released_template, tmp_path_factory):
    import json
    import shutil

    from grader_helpers import FixtureCourse

    root = tmp_path_factory.mktemp("copies") / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root)
    solution = _solutions(course.source_notebook("fx_softmax"))
    handed_in = {
        ("fx_softmax", "copier"): course.solved("fx_softmax", **{g: _renamed(c) for g, c in solution.items()}),
        ("fx_softmax", "honest"): course.solved("fx_softmax", **HONEST_SOFTMAX),
        ("fx_reference", "adapter"): course.solved("fx_reference", sharpen=ADAPTED_REFERENCE),
        ("fx_reference", "control"): course.solved("fx_reference"),
    }
    for (assignment, student), nb in handed_in.items():
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    reports = {}
    for assignment in ("fx_softmax", "fx_reference"):
        done = course.cli("autograde", assignment, "--workers", "1")
        assert done.returncode == 0, done.stderr
        feedback = course.cli("feedback", assignment)
        assert feedback.returncode == 0, feedback.stdout + feedback.stderr
        reports[assignment] = json.loads((root / "reports" / f"{assignment}.json").read_text())["students"]
    return course, reports, handed_in


@needs_bwrap
def test_copies_keep_their_scores_and_are_flagged_for_the_instructor_only(graded):
    import sqlite3

    course, reports, handed_in = graded
    copier, honest = reports["fx_softmax"]["copier"], reports["fx_softmax"]["honest"]
    adapter, control = reports["fx_reference"]["adapter"], reports["fx_reference"]["control"]
    assert copier["score"] == honest["score"] == copier["max_score"] > 0, "a flag changes no score"
    assert adapter["score"] == control["score"] == adapter["max_score"] > 0
    assert any("the solution cells of fx_softmax.ipynb (cell 'softmax' lines" in f for f in copier["flags"]), copier
    assert any("the exercise's reference.py (cell 'sharpen' lines" in f for f in adapter["flags"]), adapter
    assert honest["flags"] == [] and control["flags"] == []
    with sqlite3.connect(course.root / "gradebook.db") as db:
        flagged = dict(db.execute(
            "select student.id, submitted_notebook.flagged from submitted_notebook "
            "join submitted_assignment on submitted_notebook.assignment_id = submitted_assignment.id "
            "join student on submitted_assignment.student_id = student.id"))
    assert flagged["copier"] and flagged["adapter"] and not flagged["honest"] and not flagged["control"]

    # The flags quote no line of the solution or of the reference: only where, in the student's cells.
    secrets = leakscan.course_secrets(FIXTURES, REPO_ROOT / "attention_course", ["fx_softmax", "fx_reference"])
    flags = "\n".join(copier["flags"] + adapter["flags"])
    assert not [s.origin for s in secrets if s.kind == "solution" and s.line in leakscan.normalize(flags)]
    sources = [*_solutions(course.source_notebook("fx_softmax")).values(),
               *_solutions(course.source_notebook("fx_reference")).values(),
               (FIXTURES / "fx_reference" / "reference.py").read_text()]
    assert not [line for line in _code_lines(*sources) if line in flags], flags

    # A student's feedback page says nothing of a flag, and shows no solution line the student did
    # not write themselves.
    for (assignment, student), nb in handed_in.items():
        page = (course.root / "feedback" / student / assignment / f"{assignment}.html").read_text()
        text = leakscan.text_of("page.html", page.encode())
        assert similarity.COPY_FLAG not in text and "reference.py" not in text and "solution cells" not in text
        typed = "\n".join(leakscan.normalize(line) for cell in nb.cells for line in cell.source.splitlines())
        shown = [leak.secret.line for leak in leakscan.scan([course.root / "feedback" / student], secrets,
                                                            kinds=("solution",)) if leak.secret.line not in typed]
        assert shown == [], (student, shown)
