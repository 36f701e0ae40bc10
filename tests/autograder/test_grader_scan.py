"""The static scan flags answers that patch, call the reference, or leave the kernel's control."""

from __future__ import annotations

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
