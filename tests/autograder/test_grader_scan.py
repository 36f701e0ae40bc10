"""The static scan flags answers that patch, call the reference, or leave the kernel's control."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder import scan

INSTRUCTOR = [
    "import numpy as np\nfrom attention_course.testing import assert_grads_close, numerical_vjp",
    "def numerical_softmax_gradient(x, dout):\n    return numerical_vjp(lambda: softmax(x), x, dout)",
    "from attention_course.numpy_track.layers import Softmax as ReferenceSoftmax\nassert True",
]
SOLUTION = ["def softmax(x):\n    shifted = x - x.max(axis=1, keepdims=True)\n"
            "    exponentials = np.exp(shifted)\n    return exponentials / exponentials.sum(axis=1, keepdims=True)"]


def findings(source: str) -> list[str]:
    context = scan.build_context(INSTRUCTOR, SOLUTION)
    return scan.scan_cells([("cell 'softmax'", source)], context, scan.instructor_modules(INSTRUCTOR))


@pytest.mark.parametrize("source", [
    SOLUTION[0],
    "import numpy as np\nimport math\nx = np.zeros(3)\nx[0] = 1.0\n",
    "class Layer:\n    def __init__(self):\n        self.params = {}\n        self.params['W'] = 1\n        setattr(self, 'b', 2)\n",
    "def softmax(x):\n    max_score = x.max()\n    return np.exp(x - max_score) / np.exp(x - max_score).sum()",
    "import numpy as np  # the same alias the instructor uses",
    "%matplotlib inline\nresult = [i * i for i in range(3)]",
    "%%time\nresult = np.ones(3).sum()",
    "def f(:\n",   # does not parse: it cannot run either
])
def test_plain_answers_are_not_flagged(source):
    assert findings(source) == []


@pytest.mark.parametrize("source, expected", [
    ("np.allclose = lambda *a, **k: True", "assigns to np.allclose: patches numpy"),
    ("import numpy\nnumpy.testing.assert_allclose = print", "assigns to numpy.testing.assert_allclose"),
    ("setattr(np, 'allclose', lambda *a, **k: True)", "calls setattr() on np"),
    ("del np.isclose", "deletes np.isclose"),
    ("np.__dict__['allclose'] = print", "reaches np.__dict__"),
    ("assert_grads_close = lambda *a, **k: None", "rebinds 'assert_grads_close'"),
    ("import attention_course.testing as t\nt.assert_grads_close = print", "patches attention_course.testing"),
    ("from attention_course import testing\ntesting.check_layer_gradients = print", "patches attention_course.testing"),
    ("assert_grads_close.__code__ = (lambda *a, **k: None).__code__", "assigns to assert_grads_close.__code__"),
    ("def f():\n    global np\n    np = None", "declares global 'np'"),
    ("all = lambda values: True", "rebinds the builtin 'all'"),
    ("import builtins\nbuiltins.len = lambda x: 0", "assigns to builtins.len"),
    ("import importlib\nimportlib.reload(np)", "calls reload()"),
    ("from attention_course.numpy_track.attention import WeightSum", "imports the reference implementation"),
    ("import attention_course.torch_track as tt", "imports the reference implementation"),
    ("from attention_course import numpy_track", "imports the reference implementation"),
    ("import attention_course\nlayer = attention_course.numpy_track.layers.Softmax()", "uses the reference implementation"),
    ("import importlib\nm = importlib.import_module('attention_course.numpy_track.layers')", "imports the reference implementation"),
    ("def softmax(x):\n    return ReferenceSoftmax().forward(x)", "uses 'ReferenceSoftmax'"),
    ("import os\nos._exit(0)", "uses os._exit"),
    ("from os import _exit", "imports os._exit"),
    ("import os\ngetattr(os, '_exit')(0)", "uses os._exit"),
    ("import ctypes", "imports ctypes"),
    ("import subprocess", "imports subprocess"),
    ("import socket", "imports socket"),
    ("import signal", "imports signal"),
    ("import sys\nsys.modules['numpy'].allclose = print", "uses sys.modules"),
    ("get_ipython().events.register('pre_run_cell', print)", "calls get_ipython()"),
    ("!cat /etc/passwd", "calls get_ipython()"),
    ("%load_ext autoreload", "calls get_ipython()"),
    ("%%timeit\nnp.allclose = print", "assigns to np.allclose"),
    ("print(In)", "reads In"),
    ("exec('np.allclose = print')", "calls exec()"),
    ("globals()['np'] = None", "calls globals()"),
])
def test_tampering_is_flagged_with_the_reason(source, expected):
    found = findings(source)
    assert any(expected in finding for finding in found), found
    assert all(finding.startswith("cell 'softmax'") and ", line " in finding for finding in found)


def test_what_the_reference_solution_does_is_allowed():
    # An exercise whose reference answer subclasses a layer from the package lets students do the same.
    solution = ["from attention_course.numpy_track.base import Layer\nclass WeightSum(Layer):\n    pass"]
    context = scan.build_context(INSTRUCTOR, solution)
    same = "from attention_course.numpy_track.base import Layer\nclass WeightSum(Layer):\n    pass"
    other = "from attention_course.numpy_track.attention import WeightSum"
    assert scan.scan_cells([("c", same)], context) == []
    assert scan.scan_cells([("c", other)], context)


def test_the_batch_scanner_answers_each_notebook_as_a_process_of_its_own_would():
    context = scan.build_context(INSTRUCTOR, SOLUTION)
    modules = scan.instructor_modules(INSTRUCTOR)
    notebooks = [[("cell 'softmax'", SOLUTION[0])],
                 [("cell 'softmax'", "np.allclose = lambda *a, **k: True")],
                 [("cell 'softmax'", "import subprocess\nsubprocess.run(['ls'])"), ("cell 'b'", "x = 1")]]
    scanner = scan.Scanner()
    try:
        batch = [scanner.scan(cells, context, modules) for cells in notebooks]
        first = scanner._process.pid
        assert scanner.scan(notebooks[1], context, modules) == batch[1]
        assert scanner._process.pid == first  # one process for the whole batch
    finally:
        scanner.close()
    assert batch == [scan.scan_in_subprocess(cells, context, modules) for cells in notebooks]
    assert batch[0] == [] and batch[1] and batch[2]


def test_a_scan_that_fails_is_one_flag_and_the_next_gets_a_fresh_process():
    context = scan.build_context(INSTRUCTOR, SOLUTION)
    modules = scan.instructor_modules(INSTRUCTOR)
    honest = [("cell 'softmax'", SOLUTION[0])]
    patched = [("cell 'softmax'", "np.allclose = lambda *a, **k: True")]
    scanner = scan.Scanner()
    try:
        assert scanner.scan(honest, context, modules) == []
        scanner._process.kill()  # the process died (a limit, a crash) between requests
        scanner._process.wait()
        (flag,) = scanner.scan(patched, context, modules)
        assert "the static scan failed on this notebook" in flag
        assert scanner._process is None
        assert scanner.scan(patched, context, modules) == findings("np.allclose = lambda *a, **k: True")

        # A request past the deadline (a huge expression: seconds to parse) ends its process too.
        scanner.seconds = 0.2
        (flag,) = scanner.scan([("cell 'x'", "x = " + "(" * 100_000 + "1" + ")" * 100_000)], context)
        assert "ran past its" in flag and scanner._process is None
        scanner.seconds = scan.SCAN_SECONDS + 10
        assert scanner.scan(patched, context, modules) == findings("np.allclose = lambda *a, **k: True")
    finally:
        scanner.close()


# -- numerical differentiation: a backward pass by finite differences of the student's own forward ------
NUMERICAL = {
    "central differences over np.ndindex, the element set and put back": """
def softmax_backward(x, dout, eps=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + eps
        plus = softmax(x)
        x[index] = original - eps
        minus = softmax(x)
        x[index] = original
        grad[index] = np.sum(dout * (plus - minus)) / (2 * eps)
    return grad
""",
    "nested range loops, the element shifted with += and -=": """
def layer_backward(dout, cache):
    x, W = cache
    dx, h = np.zeros_like(x), 1e-5
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            x[i, j] += h
            up = (dout * layer_forward(x, W)[0]).sum()
            x[i, j] -= 2 * h
            down = (dout * layer_forward(x, W)[0]).sum()
            x[i, j] += h
            dx[i, j] = (up - down) / (2 * h)
    return dx
""",
    "cs231n's np.nditer while loop": """
def eval_numerical_gradient_array(f, x, df, h=1e-5):
    grad = np.zeros_like(x)
    it = np.nditer(x, flags=['multi_index'], op_flags=['readwrite'])
    while not it.finished:
        ix = it.multi_index
        oldval = x[ix]
        x[ix] = oldval + h
        pos = f(x).copy()
        x[ix] = oldval - h
        neg = f(x).copy()
        x[ix] = oldval
        grad[ix] = np.sum((pos - neg) * df) / (2 * h)
        it.iternext()
    return grad
""",
    "a step vector over range(x.size), the quotient in one line": """
def softmax_backward(x, dout):
    grad = np.empty_like(x)
    for k in range(x.size):
        step = np.zeros(x.size)
        step[k] = 1e-6
        step = step.reshape(x.shape)
        grad.flat[k] = np.sum(dout * (softmax(x + step) - softmax(x - step))) / 2e-6
    return grad
""",
    "forward differences against a base value, through x.flat": """
def softmax_backward(x, dout, eps=1e-7):
    base = np.sum(dout * softmax(x))
    grad = np.zeros_like(x)
    for i in range(x.size):
        x.flat[i] += eps
        grad.flat[i] = (np.sum(dout * softmax(x)) - base) / eps
        x.flat[i] -= eps
    return grad
""",
    "one column of every example at once (the batched trick)": """
def encoder_backward(drs, cache):
    xs, params = cache
    saved = xs.copy()
    dxs = np.zeros_like(xs)
    for j in range(xs.shape[1]):
        xs[:, j] = saved[:, j] + 1e-6
        plus = encoder_forward(xs, *params)[0]
        xs[:, j] = saved[:, j] - 1e-6
        minus = encoder_forward(xs, *params)[0]
        xs[:, j] = saved[:, j]
        dxs[:, j] = (drs * (plus - minus)).sum(axis=tuple(range(1, drs.ndim))) / 2e-6
    return dxs
""",
    "a lambda for the difference quotient": """
derivative = lambda f, x, e: (f(x + e) - f(x - e)) / (2 * e)
""",
}
NUMERICAL_LIBRARIES = [
    ("from scipy.optimize import approx_fprime\ng = approx_fprime(x, lambda v: softmax(v).sum(), 1e-7)",
     "imports scipy.optimize.approx_fprime, which differentiates numerically"),
    ("import scipy.optimize\ng = scipy.optimize.approx_fprime(x, f, 1e-7)", "uses scipy.optimize.approx_fprime"),
    ("import numdifftools as nd\njacobian = nd.Jacobian(softmax)(x)", "imports numdifftools, which differentiates"),
    ("from attention_course.testing import checks\n\ndef softmax_backward(x, dout):\n"
     "    return checks.numerical_vjp(lambda: softmax(x), x, dout)",
     "uses attention_course.testing.checks.numerical_vjp, which differentiates numerically"),
    ("def softmax_backward(x, dout):\n    return numerical_vjp(lambda: softmax(x), x, dout)",
     "uses attention_course.testing.numerical_vjp"),
    ("from attention_course.testing.gradcheck import numerical_vjp", "imports attention_course.testing.gradcheck.numerical_vjp"),
    ("import torch\ndef softmax_backward(x, dout):\n    t = torch.tensor(x, requires_grad=True)\n"
     "    torch.softmax(t, -1).backward(torch.tensor(dout))\n    return t.grad.numpy()",
     "imports torch, an autograd library this exercise does not use"),
    ("from jax import grad", "imports jax, an autograd library"),
    ("import autograd.numpy as anp\nfrom autograd import grad", "imports autograd, an autograd library"),
]
HONEST = {
    "backpropagation through time, accumulating in place, a helper called twice": """
def gate(a, k, H):
    return 1 / (1 + np.exp(-a[:, k * H:(k + 1) * H]))

def encoder_backward(drs, cache):
    xs, W_x, W_h, steps = cache
    dxs, dW_x = np.zeros_like(xs), np.zeros_like(W_x)
    dh_next = np.zeros_like(drs[:, 0])
    for t in range(xs.shape[1] - 1, -1, -1):
        a, h_prev = steps[t]
        i, f = gate(a, 0, h_prev.shape[1]), gate(a, 1, h_prev.shape[1])
        dh = drs[:, t] + dh_next
        dxs[:, t] = (dh * i * (1 - i)) @ W_x.T
        dxs[:, t] += dh_next
        dxs[:, t] += dh
        dW_x += xs[:, t].T @ (dh * f)
        dh_next = dh @ W_h.T
    return dxs, dW_x
""",
    "a convolution's backward pass over the kernel's taps": """
def conv_backward(dwindows, T, r):
    dpadded = np.zeros((dwindows.shape[0], T + r - 1))
    for m in range(r):
        dpadded[:, m:m + T] += dwindows[:, :, m]
    return dpadded[:, (r - 1) // 2:(r - 1) // 2 + T]
""",
    "a forward loop that stores each state, with a helper called twice": """
def cell(x, h):
    return np.tanh(x + h)

def run(xs, h0):
    hs = np.zeros_like(xs)
    h = h0
    for t in range(xs.shape[1]):
        candidate = cell(xs[:, t], h)
        h = cell(candidate, h)
        hs[:, t] = h + 0.5
    return hs
""",
    "sinh by hand, and a quotient of two module calls": """
def sinh(x):
    return (np.exp(x) - np.exp(-x)) / 2

def ratio(x):
    return (np.log(x + 1) - np.log(x)) / 1e-3
""",
}


@pytest.mark.parametrize("what", sorted(NUMERICAL))
def test_a_backward_by_finite_differences_is_flagged(what):
    found = findings(NUMERICAL[what])
    numerical = [finding for finding in found if "differentiates numerically" in finding]
    assert len(numerical) == 1, found
    # one sentence that says what was seen: the element shifted or the quotient, and the function called
    assert "by finite differences, not by hand" in numerical[0] and numerical[0].count(". ") == 0
    assert ("a loop that shifts" in numerical[0] and " in place and calls " in numerical[0]) or \
        "a difference quotient of two calls of " in numerical[0]


def test_the_flag_names_the_element_and_the_function():
    (flag,) = findings(NUMERICAL["central differences over np.ndindex, the element set and put back"])
    assert flag == ("cell 'softmax', line 3: differentiates numerically: a loop that shifts x[index] in place and "
                    "calls softmax() each time (a backward pass by finite differences, not by hand)")
    (flag,) = findings(NUMERICAL["a lambda for the difference quotient"])
    assert "a difference quotient of two calls of f()" in flag


@pytest.mark.parametrize("source, expected", NUMERICAL_LIBRARIES)
def test_numerical_gradients_and_autograd_libraries_are_flagged(source, expected):
    found = findings(source)
    assert any(expected in finding for finding in found), found


def test_an_autograd_library_the_exercise_uses_is_not_flagged():
    torch_exercise = ["import torch\nfrom attention_course.testing import checks"]
    context = scan.build_context(torch_exercise, ["def f(x):\n    return torch.tanh(x)"])
    assert scan.scan_cells([("c", "import torch\nimport torch.nn.functional as F")], context) == []
    assert scan.scan_cells([("c", "import jax")], context)  # another library still is


@pytest.mark.parametrize("what", sorted(HONEST))
def test_hand_written_backward_passes_are_not_flagged(what):
    assert findings(HONEST[what]) == []


NUMPY_EXERCISES = sorted((Path(__file__).resolve().parents[2] / "solutions").glob("ch*a_*/*.ipynb"))


@pytest.mark.parametrize("path", NUMPY_EXERCISES, ids=lambda path: path.stem)
def test_the_numpy_exercises_solutions_are_not_flagged(path):
    nb = nbformat.read(path, as_version=4)
    instructor, solutions, answers = [], [], []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            solutions.append(cell.source)
            answers.append((f"cell {meta['grade_id']!r}", cell.source))
        elif meta.get("locked") or meta.get("grade"):
            instructor.append(cell.source)
    context = scan.build_context(instructor, solutions)
    assert not context.autograd_imports  # a NumPy exercise: an answer's `import torch` is flagged
    assert scan.scan_cells(answers, context, scan.instructor_modules(instructor)) == []
