"""The adversary of ``tools/check_exercise.py --adversarial`` (``tools/exercise_adversary.py``), on small
notebooks written here: its fakes are what they claim (the linear fake passes a gradient check of its
own forward pass, so only a reference can catch it), its mutants are single edits of the solution
code only, and its equivalence test tells an equivalent mutant from a real mistake the tests miss.

The whole check on every exercise of ``solutions/`` runs in ``tests/exercises/test_exercise_grading.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import exercise_adversary as adversary  # noqa: E402
from attention_course.testing import checks  # noqa: E402


def _cell(kind: str, grade_id: str, source: str, points: int = 0):
    cell = nbformat.v4.new_code_cell(textwrap.dedent(source).strip("\n"))
    cell.metadata = {"nbgrader": {"grade_id": grade_id, "grade": kind == "test", "solution": kind == "answer",
                                  "locked": kind != "answer", "schema_version": 3, "task": False,
                                  **({"points": points} if kind == "test" else {})}}
    return cell


SCALE_FORWARD = '''
def scale_forward(x, W, mask):
    """y = (x W) * mask, summed over the last axis.

    Shapes:
        x: (N, T, D).  W: (D, H).  mask: (N, T) bool.  returns: y (N, T), cache.
    """
    ### BEGIN SOLUTION
    y = (x @ W).sum(axis=2) * mask
    return y, (x, W, mask)
    ### END SOLUTION
'''

SCALE_BACKWARD = '''
def scale_backward(dy, cache):
    """Gradients of scale_forward.

    Shapes:
        dy: (N, T).  returns: dx (N, T, D), dW (D, H).
    """
    ### BEGIN SOLUTION
    x, W, mask = cache
    d = dy * mask
    dx = d[:, :, None] * W.sum(axis=1)[None, None, :]
    dW = np.einsum("nt,ntd->d", d, x)[:, None] * np.ones(W.shape[1])
    return dx, dW
    ### END SOLUTION
'''

WEAK_TEST = '''
import numpy as np
x, W = np.ones((2, 3, 2)), np.ones((2, 2))
mask = np.ones((2, 3), dtype=bool)
y, cache = scale_forward(x, W, mask)
assert y.shape == (2, 3)
'''


def scale_notebook(test_source: str = WEAK_TEST) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[
        _cell("given", "setup", "import numpy as np"),
        _cell("answer", "scale_forward", SCALE_FORWARD),
        _cell("answer", "scale_backward", SCALE_BACKWARD),
        _cell("test", "test_shape", test_source, points=1),
    ])


def _namespace(nb, answers: dict[str, str] | None = None) -> dict:
    namespace: dict = {}
    for cell in nb.cells:
        if cell.metadata.nbgrader.get("grade"):
            continue
        source = (answers or {}).get(cell.metadata.nbgrader["grade_id"], cell.source)
        exec(compile(source, cell.metadata.nbgrader["grade_id"], "exec"), namespace)  # noqa: S102
    return namespace


def test_roles_pair_a_backward_with_its_forward():
    assert adversary.roles(scale_notebook()) == {"scale_forward": "forward", "scale_backward": "backward"}
    assert adversary.answer_functions(scale_notebook()) == ["scale_forward", "scale_backward"]


@pytest.mark.parametrize("kind", adversary.FAKE_KINDS)
def test_every_fake_runs_and_is_not_the_solution(kind):
    nb = scale_notebook()
    fake = _namespace(nb, adversary.fake_answers(nb, kind))
    solution = _namespace(nb)
    x, W = checks.random((2, 3, 2), seed=1), checks.random((2, 4), seed=2)
    mask = checks.lengths_mask([3, 1], 3)
    if kind == "exception":
        with pytest.raises(RuntimeError):
            fake["scale_forward"](x, W, mask)
        return
    got = fake["scale_forward"](x, W, mask)
    if kind == "none":
        assert got is None
    elif kind == "first_argument":
        assert got is x
    else:
        want = solution["scale_forward"](x, W, mask)
        assert np.shape(got[0]) == np.shape(want[0])
        assert not np.allclose(got[0], want[0])


def test_the_linear_fake_passes_a_gradient_check_of_its_own_forward_pass():
    """What makes it dangerous: a test that checks a backward pass only against the student's own
    forward pass gives it full marks."""
    nb = scale_notebook()
    fake = _namespace(nb, adversary.fake_answers(nb, "linear"))
    x, W = checks.random((2, 3, 2), seed=3), checks.random((2, 4), seed=4)
    mask = checks.lengths_mask([3, 2], 3)
    dy = checks.random((2, 3), seed=5)
    y, cache = fake["scale_forward"](x, W, mask)
    dx, dW = fake["scale_backward"](dy, cache)
    checks.check_gradients(lambda: fake["scale_forward"](x, W, mask)[0], {"x": x, "W": W}, {"x": dx, "W": dW}, dy)
    # and it is linear: twice the input, twice the output
    checks.assert_close("the fake of 2x", fake["scale_forward"](2 * x, 2 * W, mask)[0], 2 * y)


def test_the_linear_fake_of_torch_code_is_differentiated_by_autograd():
    torch = pytest.importorskip("torch")
    nb = nbformat.v4.new_notebook(cells=[
        _cell("given", "setup", "import torch"),
        _cell("answer", "mix", '''
            def mix(a, b):
                """tanh(a) * b.

                Shapes:
                    a, b: (N, H).  returns: (N, H).
                """
                ### BEGIN SOLUTION
                return torch.tanh(a) * b
                ### END SOLUTION
        '''),
    ])
    fake = _namespace(nb, adversary.fake_answers(nb, "linear"))["mix"]
    a, b = checks.random((2, 3), seed=6), checks.random((2, 3), seed=7)
    dout = checks.random((2, 3), seed=8)
    out, grads = checks.vjp(fake, dout, checks.tensor(a, requires_grad=True), checks.tensor(b, requires_grad=True))
    checks.check_gradients(lambda: fake(torch.from_numpy(a), torch.from_numpy(b)), {"a": a, "b": b},
                           {"a": grads["0"], "b": grads["1"]}, dout)
    assert not np.allclose(checks.as_array("out", out), np.tanh(a) * b)


def test_mutants_are_single_edits_of_the_solution_code_only():
    nb = scale_notebook()
    found = adversary.mutants(nb)
    kinds = {mutant.kind for mutant in found}
    assert {"flipped sign", "dropped term", "off by one", "mask ignored", "changed constant", "transpose",
            "swapped values", "another function"} <= kinds | {"changed constant"}, kinds
    originals = {cell.metadata.nbgrader["grade_id"]: cell.source for cell in adversary.answer_cells(nb)}
    for mutant in found:
        original = originals[mutant.grade_id]
        head = original[:original.index(adversary.BEGIN)]
        assert mutant.source.startswith(head), f"{mutant.description}: the signature or docstring changed"
        assert mutant.source != original
        compile(mutant.source, mutant.grade_id, "exec")
    sources = [m.source for m in found]
    assert len(sources) == len(set(sources)), "the same mutant twice"
    assert any("axis=3" in m.source or "axis=1" in m.source for m in found), "no mutant sums over another axis"
    assert any(m.kind == "mask ignored" and "* mask" not in m.source.split(adversary.BEGIN)[1] for m in found)


def test_a_sample_of_mutants_is_spread_over_kinds_and_is_the_same_each_time():
    found = adversary.mutants(scale_notebook())
    chosen = adversary.sample(found, 6, seed=1)
    assert len(chosen) == 6 and chosen == adversary.sample(found, 6, seed=1)
    assert len({m.kind for m in chosen}) >= 5
    assert adversary.sample(found, None) == found


def _run_job(nb, mutant_sources: dict[str, tuple[str, str]], tmp_path: Path) -> dict:
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.nbgrader
        kind = "answer" if meta.get("solution") else "test" if meta.get("grade") else "given"
        functions = adversary.answer_functions(nbformat.v4.new_notebook(cells=[cell])) if kind == "answer" else []
        cells.append({"grade_id": meta["grade_id"], "kind": kind, "source": cell.source, "functions": functions})
    job = {"cells": cells, "reference": None, "workers": 2,
           "mutants": [{"id": key, "grade_id": grade_id, "source": source}
                       for key, (grade_id, source) in mutant_sources.items()]}
    (tmp_path / "job.json").write_text(json.dumps(job))
    subprocess.run([sys.executable, str(ROOT / "tools" / "exercise_adversary.py"), "run", str(tmp_path / "job.json"),
                    str(tmp_path / "out.json")], check=True, timeout=300, cwd=tmp_path)
    return json.loads((tmp_path / "out.json").read_text())


def test_the_screen_and_the_equivalence_test(tmp_path):
    """With a weak test (shapes only), a real mistake passes the tests but is told apart from the
    solution on random inputs; an edit that changes nothing is equivalent; a mistake the test sees
    fails it."""
    nb = scale_notebook()
    forward = SCALE_FORWARD.strip("\n")
    mutants = {
        "sign": ("scale_forward", forward.replace("(x @ W).sum(axis=2) * mask", "-(x @ W).sum(axis=2) * mask")),
        "same": ("scale_forward", forward.replace("(x @ W).sum(axis=2)", "(x @ W).sum(axis=-1)")),
        "shape": ("scale_forward", forward.replace("(x @ W).sum(axis=2)", "(x @ W).sum(axis=1)")),
        "backward": ("scale_backward", SCALE_BACKWARD.strip("\n").replace("d = dy * mask", "d = dy")),
    }
    result = _run_job(nb, mutants, tmp_path)
    assert result["problems"] == []
    verdicts = result["mutants"]
    assert verdicts["sign"].startswith("differs: "), verdicts
    assert verdicts["same"] == "equivalent", verdicts
    assert verdicts["shape"].startswith("fails test_shape"), verdicts
    # the backward pass is never called by the weak test, so nothing recorded tells it apart
    assert verdicts["backward"] == "equivalent", verdicts


def test_calls_linked_through_a_cache_are_replayed_with_consistent_inputs(tmp_path):
    """The backward mutant that ignores the mask differs only on padded inputs: a test that calls the
    backward pass on the forward pass's cache lets the replay find it, with the cache recomputed from
    perturbed inputs."""
    linked_test = WEAK_TEST + textwrap.dedent('''
        x = np.random.default_rng(0).standard_normal((2, 3, 2))
        mask = np.array([[True, True, True], [True, False, False]])
        y, cache = scale_forward(x, W, mask)
        dx, dW = scale_backward(np.ones((2, 3)), cache)
        assert dx.shape == x.shape
    ''')
    nb = scale_notebook(linked_test)
    mutants = {"backward": ("scale_backward", SCALE_BACKWARD.strip("\n").replace("d = dy * mask", "d = dy")),
               "rename": ("scale_backward", SCALE_BACKWARD.strip("\n").replace("d = dy * mask", "d = mask * dy"))}
    verdicts = _run_job(nb, mutants, tmp_path)["mutants"]
    assert verdicts["backward"].startswith("differs: "), verdicts
    assert verdicts["rename"] == "equivalent", verdicts


def test_a_mutant_that_never_ends_is_stopped(tmp_path):
    nb = scale_notebook()
    looping = SCALE_FORWARD.strip("\n").replace("    y = (x @ W)", "    while True:\n        pass\n    y = (x @ W)")
    job_mutants = {"loop": ("scale_forward", looping)}
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.nbgrader
        kind = "answer" if meta.get("solution") else "test" if meta.get("grade") else "given"
        cells.append({"grade_id": meta["grade_id"], "kind": kind, "source": cell.source,
                      "functions": adversary.answer_functions(nbformat.v4.new_notebook(cells=[cell])) if kind == "answer" else []})
    job = {"cells": cells, "reference": None, "timeout": 3,
           "mutants": [{"id": "loop", "grade_id": "scale_forward", "source": job_mutants["loop"][1]}]}
    (tmp_path / "job.json").write_text(json.dumps(job))
    subprocess.run([sys.executable, str(ROOT / "tools" / "exercise_adversary.py"), "run", str(tmp_path / "job.json"),
                    str(tmp_path / "out.json")], check=True, timeout=120, cwd=tmp_path)
    assert json.loads((tmp_path / "out.json").read_text())["mutants"]["loop"].startswith("fails: over the")


# ------------------------------------------------------------------------------------------------
# The core mistake, and --help without the grading extras
CORE = '''
import this_module_does_not_exist  # never run: the core mistake is read, not imported


def something():
    return 1


CORE_MISTAKE = {
    "what": "the mask is ignored",
    "message": "the padded steps",
    "answers": {"scale_forward": """
        y = (x @ W).sum(axis=2)
        return y, (x, W, mask)
    """},
}
'''


def test_the_core_mistake_is_read_from_the_reference_without_running_it(tmp_path):
    path = tmp_path / "reference.py"
    path.write_text(CORE)
    mistake = adversary.core_mistake(path)
    assert mistake["message"] == "the padded steps" and list(mistake["answers"]) == ["scale_forward"]
    assert adversary.core_mistake(tmp_path / "missing.py") is None
    path.write_text("def f():\n    return 1\n")
    assert adversary.core_mistake(path) is None
    for broken in ('CORE_MISTAKE = {"what": "x", "message": "y"}\n',
                   'CORE_MISTAKE = {"what": "x", "message": "", "answers": {"f": "return 1"}}\n',
                   'CORE_MISTAKE = {"what": "x", "message": "y", "answers": {}}\n'):
        path.write_text(broken)
        with pytest.raises(ValueError):
            adversary.core_mistake(path)


def test_the_core_mistake_replaces_the_solution_of_the_functions_it_names():
    nb = scale_notebook()
    path_free = {"what": "the mask is ignored", "message": "the padded steps",
                 "answers": {"scale_forward": "y = (x @ W).sum(axis=2)\nreturn y, (x, W, mask)"}}
    answers = adversary.core_mistake_answers(nb, path_free)
    assert list(answers) == ["scale_forward"]
    source = answers["scale_forward"]
    assert adversary.BEGIN not in source and adversary.END not in source
    assert source.startswith(SCALE_FORWARD.strip("\n").split("    ### BEGIN")[0])  # signature and docstring kept
    assert "    y = (x @ W).sum(axis=2)\n    return y, (x, W, mask)" in source
    namespace = _namespace(nb, answers)
    x, W = checks.random((1, 2, 2), seed=1), checks.random((2, 3), seed=2)
    y, _ = namespace["scale_forward"](x, W, np.array([[True, False]]))
    assert y[0, 1] != 0  # the mask is ignored: the mistake is made
    with pytest.raises(ValueError):
        adversary.core_mistake_answers(nb, {**path_free, "answers": {"no_such_function": "return 1"}})


def test_a_core_mistake_counts_as_named_only_by_a_visible_failure_that_holds_its_words():
    from autograder.judge import HIDDEN_FAILED

    assert adversary.HIDDEN_FAILED == HIDDEN_FAILED
    mistake = {"what": "w", "message": "The Padded Steps", "answers": {}}
    visible = {"passed": False, "message": "AssertionError: the padded steps: mismatch", "feedback": "AssertionError: ..."}
    assert adversary.names_the_mistake(visible, mistake)
    assert not adversary.names_the_mistake({**visible, "message": "AssertionError: the shape"}, mistake)
    assert not adversary.names_the_mistake({**visible, "passed": True}, mistake)
    assert not adversary.names_the_mistake({**visible, "feedback": f"{HIDDEN_FAILED}: the padded steps"}, mistake)


def test_check_exercise_wants_the_core_mistake_named_by_a_visible_test():
    import check_exercise

    mistake = {"what": "w", "message": "the padded steps", "answers": {}}

    def entry(score, records):
        found = check_exercise.Entry("core-mistake", "core mistake: w", "core", {}, mistake=mistake)
        found.score, found.max_score, found.status, found.records = score, 4, "graded", records
        return found

    named = {"test_a": {"passed": False, "message": "AssertionError: the padded steps differ", "feedback": "AssertionError"},
             "test_b": {"passed": True}}
    hidden = {"test_a": {"passed": False, "message": "AssertionError: the padded steps differ",
                         "feedback": "a hidden test of this cell failed: padding"}}
    entries = [entry(2, named), entry(2, hidden), entry(4, {"test_a": {"passed": True}})]
    check_exercise.judge(entries)
    assert entries[0].verdict.startswith("ok") and not entries[0].problem
    assert entries[1].problem and "no visible test" in entries[1].verdict
    assert entries[2].problem and "keeps full marks" in entries[2].verdict


BLOCK_EXTRAS = '''
import importlib.abc, runpy, sys
BLOCKED = ("nbgrader", "nbformat", "nbclient", "jupyter_client", "traitlets", "copydetect", "autograder", "torch")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed here")
sys.meta_path.insert(0, Block())
sys.argv = [sys.argv[1], "--help"]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def test_help_works_without_the_grading_extras():
    run = subprocess.run([sys.executable, "-c", BLOCK_EXTRAS, str(ROOT / "tools" / "check_exercise.py")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "usage: check_exercise.py" in run.stdout and "--adversarial" in run.stdout
