"""The judge and the sandbox: the student's code runs only in the sandbox, and only plain data crosses.

These tests grade notebooks with ``judge.grade_notebook`` in this very process, which is then
the judge: an audit hook records every piece of source this process compiles, and the student's
code (marked with a unique token) must never be among them. The student's top level sets an
environment variable and writes a marker file; the tests see both only through the student's
own functions, never in this process or on the host's disk.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from autograder import sandbox, wire
from autograder.judge import Cell, Zygote, api_names, grade_notebook, remote_error

from grader_helpers import needs_bwrap

TOKEN = f"marker_{uuid.uuid4().hex}"
COMPILED: list[str] = []


def _audit(event: str, args) -> None:
    if event == "compile" and args and isinstance(args[0], (str, bytes)):
        source = args[0].decode("utf-8", "replace") if isinstance(args[0], bytes) else args[0]
        if TOKEN in source:
            COMPILED.append(source)


sys.addaudithook(_audit)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    if sandbox.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed")
    run_dir = tmp_path_factory.mktemp("judge")
    os.chmod(run_dir, 0o755)
    lease = sandbox.UidLease(1) if os.geteuid() == 0 else None
    config = sandbox.make_config(sandbox.find_bwrap(), sandbox.Limits(), run_dir, 1,
                                 uids=lease.uids if lease else ())
    work = run_dir / "work"
    work.mkdir()
    process = Zygote(config, config.uid(0), ["numpy", "IPython"], None, str(work))
    process.start()
    yield process
    process.close()
    if lease is not None:
        lease.release()


STUDENT = f'''
import os
os.environ["{TOKEN}"] = "set by the student's top level"
MARKER = "/tmp/{TOKEN}"
open(MARKER, "w").write("{TOKEN}")
for target in ("{{host}}", os.path.expanduser("~") + "/{TOKEN}"):
    try:
        open(target, "w").write("{TOKEN}")
    except OSError:
        pass

def seen():
    """What the student's process saw of its own top level."""
    return {{"env": os.environ.get("{TOKEN}"), "marker": open(MARKER).read(), "pid": os.getpid()}}

def double(x):
    return 2 * x

def fails(x):
    raise ValueError("bad input " + str(x))
'''


def grade(zygote, student_source: str, tests: list[str], names: list[str], **options):
    """Grade one notebook here; ``names`` are the answer cells' names (from the instructor's solution)."""
    cells = [Cell(0, "readonly", "import numpy as np", "setup"), Cell(1, "student", student_source, "answer")]
    cells += [Cell(2 + i, "test", source, f"test_{i}") for i, source in enumerate(tests)]
    return grade_notebook(zygote, cells, names, cell_timeout=options.get("cell_timeout", 10), notebook_timeout=60,
                          data_dir=None)


def test_api_names_are_what_the_answer_cells_define():
    assert api_names(["import os\nX = 1\ndef f():\n    pass\nclass C:\n    pass\n_private = 2",
                      "%matplotlib inline\na, (b, c) = 1, (2, 3)", "def f(:"]) == ["X", "f", "C", "a", "b", "c"]


@needs_bwrap
def test_the_student_code_runs_only_in_the_sandbox(zygote, tmp_path):
    host_marker = tmp_path / "host-marker"
    outcome = grade(zygote, STUDENT.replace("{host}", str(host_marker)), [
        # (the token itself may not appear in a test: the audit hook looks for it)
        f'seen_there = seen()\nassert seen_there["env"] == "set by the student\'s top level"\n'
        f'assert seen_there["marker"].startswith("marker_") and len(seen_there["marker"]) == {len(TOKEN)}',
        "import os\nassert seen()['pid'] != os.getpid()",
        "assert np.array_equal(double(np.arange(3)), [0, 2, 4])",
    ], ["seen", "double", "fails"])
    assert all(record["passed"] for record in outcome.tests.values()), outcome.tests
    assert TOKEN not in os.environ, "the student's top level ran in the judge"
    assert not Path(f"/tmp/{TOKEN}").exists() and not host_marker.exists()
    assert not (Path.home() / TOKEN).exists()
    assert COMPILED == [], "the judge compiled the student's code"


@needs_bwrap
def test_fail_closed_and_the_students_errors_as_data(zygote):
    outcome = grade(zygote, STUDENT.replace("{host}", "/nonexistent"), [
        "try:\n    fails(3)\nexcept ValueError as error:\n    assert 'bad input 3' in str(error)\nelse:\n"
        "    raise AssertionError('no error')",
        "fails(4)",
        "undefined_name(1)",
        "print('the test printed this')\nassert double(2) == 5, 'two doubled is not five'",
    ], ["seen", "double", "fails"])
    assert outcome.tests["test_0"]["passed"] is True
    assert not outcome.tests["test_1"]["passed"] and "ValueError: bad input 4" in outcome.tests["test_1"]["message"]
    assert not outcome.tests["test_2"]["passed"] and "NameError" in outcome.tests["test_2"]["message"]
    assert outcome.tests["test_3"] == {"passed": False, "seconds": outcome.tests["test_3"]["seconds"],
                                       "message": "AssertionError: two doubled is not five",
                                       "feedback": "AssertionError: two doubled is not five",
                                       "visible_passed": False}


@needs_bwrap
def test_a_call_past_the_time_limit_fails_and_the_next_cells_still_run(zygote):
    student = "import time\ndef slow():\n    while True:\n        time.sleep(0.01)\n\ndef quick():\n    return 1"
    outcome = grade(zygote, student, ["slow()", "assert quick() == 1"], ["slow", "quick"], cell_timeout=1)
    assert not outcome.tests["test_0"]["passed"] and "time limit" in outcome.tests["test_0"]["message"]
    assert outcome.tests["test_1"]["passed"], outcome.tests


@needs_bwrap
def test_objects_stay_behind_handles_and_posing_objects_are_not_arrays(zygote):
    student = '''
import numpy as np
class Cache:
    def __init__(self, x):
        self.x = x
    def twice(self):
        return 2 * self.x
def make(x):
    return Cache(x)
def use(cache):
    return cache.x + 1
class Posing(np.ndarray):
    pass
def posing():
    return np.zeros(3).view(Posing)
def odd_cache(x):
    return {(0, "x"): x, "objects": np.array([None, 1], dtype=object)}, x.sum()
def use_odd(cache):
    return cache[(0, "x")] * 2
'''
    outcome = grade(zygote, student, [
        "cache = make(np.arange(3.0))\nassert np.array_equal(use(cache), [1, 2, 3])\n"
        "assert np.array_equal(cache.twice(), [0, 2, 4]) and np.array_equal(cache.x, [0, 1, 2])",
        "from attention_course.testing import checks\nchecks.assert_shape('posing', posing(), (3,))",
        # a cache that is not plain data (tuple keys, an object array) stays behind, and works
        "cache, total = odd_cache(np.ones(2))\nassert total == 2.0\nassert np.array_equal(use_odd(cache), [2, 2])",
    ], ["Cache", "make", "use", "Posing", "posing", "odd_cache", "use_odd"])
    assert outcome.tests["test_0"]["passed"], outcome.tests
    assert not outcome.tests["test_1"]["passed"] and "expected an array" in outcome.tests["test_1"]["message"]
    assert outcome.tests["test_2"]["passed"], outcome.tests


def test_plain_data_round_trips():
    value = {"a": [1, 2.5, float("nan"), None, True, "text", 3 + 4j, 2 ** 70],
             "array": np.arange(12, dtype=np.int32).reshape(3, 4), "scalar": np.float32(1.5),
             7: (np.zeros((0, 2)), np.array([True, False]))}
    back = wire.decode(wire.encode(value))
    assert back["a"][:2] == [1, 2.5] and np.isnan(back["a"][2]) and back["a"][3:] == [None, True, "text", 3 + 4j,
                                                                                   2 ** 70]
    assert back["array"].dtype == np.int32 and np.array_equal(back["array"], value["array"])
    assert back["scalar"] == np.float32(1.5) and type(back["scalar"]) is np.float32
    assert isinstance(back[7], tuple) and back[7][0].shape == (0, 2)


def test_what_is_not_plain_data_does_not_cross_without_a_handle():
    with pytest.raises(wire.WireError, match="not plain data"):
        wire.encode({"f": len})
    with pytest.raises(wire.WireError, match="dtype object"):
        wire.encode(np.array([object()]))
    with pytest.raises(wire.WireError, match="string or integer keys"):
        wire.encode({(1, 2): 3})
    handles = []
    encoded = wire.encode([object()], make_handle=lambda obj: handles.append(obj) or wire.Handle(1, "object"))
    assert wire.decode(encoded) == [wire.Handle(1, "object")] and len(handles) == 1


@pytest.mark.parametrize("tamper, message", [
    (lambda data: data[:-3], "malformed message buffers|does not fit|trailing"),
    (lambda data: b"XXXX" + data[4:], "not a message of this grader"),
    (lambda data: data.replace(b'"float64"', b'"object "'), "may not cross"),
    (lambda data: data.replace(b'"shape":[5]', b'"shape":[6]'), "does not fit"),
    (lambda data: data[:8] + b"{" * 10 + data[18:], "malformed"),
])
def test_malformed_messages_are_refused(tamper, message):
    data = wire.encode({"x": np.arange(5.0)})
    with pytest.raises(wire.WireError, match=message):
        wire.decode(tamper(data))


def test_limits_are_checked_before_allocating():
    limits = wire.Limits(max_bytes=1000, max_items=50, max_depth=5)
    with pytest.raises(wire.WireError, match="larger than"):
        wire.encode(np.zeros(1000), limits=limits)
    with pytest.raises(wire.WireError, match="more than 50 values"):
        wire.encode(list(range(100)), limits=limits)
    nested = []
    for _ in range(10):
        nested = [nested]
    with pytest.raises(wire.WireError, match="nested deeper"):
        wire.encode(nested, limits=limits)
    deep = wire.encode(nested)
    with pytest.raises(wire.WireError, match="nested too deeply"):
        wire.decode(deep, limits=limits)


def test_tensors_and_modules_cross_as_descriptions():
    torch = pytest.importorskip("torch")
    gru = torch.nn.GRU(3, 2, batch_first=True, bidirectional=True, dtype=torch.float64)
    tensor = torch.arange(4.0, dtype=torch.float64).requires_grad_(True)
    back = wire.decode(wire.encode({"gru": gru, "x": tensor, "half": torch.ones(2, dtype=torch.bfloat16)}))
    assert back["x"].dtype == torch.float64 and back["x"].requires_grad and torch.equal(back["x"], tensor.detach())
    assert back["half"].dtype == torch.bfloat16
    rebuilt = back["gru"].build()
    assert isinstance(rebuilt, torch.nn.GRU) and rebuilt.bidirectional and rebuilt is not gru
    for (name, mine), (_, theirs) in zip(rebuilt.named_parameters(), gru.named_parameters()):
        assert torch.equal(mine, theirs), name
    with pytest.raises(wire.WireError, match="not plain data"):
        wire.encode(torch.nn.Sequential(torch.nn.Linear(2, 2)))


def test_remote_errors_are_matched_by_built_in_types_only():
    error = remote_error({"type": "ValueError", "message": "bad", "builtin": True})
    assert isinstance(error, ValueError) and "ValueError: bad" in str(error)
    forged = remote_error({"type": "SystemExit", "message": "", "builtin": True})
    assert not isinstance(forged, SystemExit)
    custom = remote_error({"type": "AssertionError", "message": "I passed", "builtin": False})
    assert not isinstance(custom, AssertionError)


def test_every_decoder_error_stays_a_wire_error(monkeypatch):
    data = wire.encode({"x": np.arange(3.0)})

    def broken(self, node, tag):
        raise RuntimeError("what numpy or torch might raise on crafted data")

    monkeypatch.setattr(wire._Decoder, "_array", broken)
    with pytest.raises(wire.WireError, match="malformed message .RuntimeError."):
        wire.decode(data)


def test_a_reply_must_arrive_whole_before_the_deadline():
    import socket
    import struct
    import time

    ours, theirs = socket.socketpair()
    theirs.sendall(struct.pack(">Q", 4096) + b"ACW1")  # a frame's length, then four bytes, then nothing
    started = time.monotonic()
    with pytest.raises(wire.WireTimeout):
        wire.receive(ours, deadline=time.monotonic() + 0.3)
    assert time.monotonic() - started < 2
    ours.close()
    theirs.close()


def test_a_reply_over_budget_is_dropped_whole_and_the_stream_stays_in_step():
    import socket

    ours, theirs = socket.socketpair()
    wire.send(theirs, np.zeros(1000))
    wire.send(theirs, "next")

    def refuse(size):
        raise wire.OverBudget(f"{size} bytes")

    with pytest.raises(wire.OverBudget):
        wire.receive(ours, on_size=refuse)
    assert wire.receive(ours) == "next"
    ours.close()
    theirs.close()


def test_a_zygote_that_could_not_clean_up_is_replaced(tmp_path):
    import json
    import socket

    zygote = Zygote(sandbox.SandboxConfig(bwrap=None), None, [], None, str(tmp_path))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zygote.control, zygote.child_alive = ours, True
    theirs.send(json.dumps({"op": "exited", "status": "exit status 0", "clean": False, "left": ["/tmp"]}).encode())
    assert zygote.wait_exited(5) == "exit status 0"
    assert zygote.replaced == 1 and zygote.left == "/tmp" and zygote.control is None, "closed: a new one next time"
    theirs.close()


def test_a_spawn_that_fails_is_retried_once_on_a_fresh_zygote():
    from autograder.judge import Notebook, SandboxStopped

    class Flaky:
        def __init__(self, failures):
            self.failures, self.closed, self.replaced, self.left = failures, 0, 0, ""

        def spawn(self):
            if self.failures:
                self.failures -= 1
                raise SandboxStopped("the sandbox could not start a process")
            return "child"

        def close(self):
            self.closed += 1

    once = Flaky(1)
    assert Notebook(once, [], [], 1, 1, None)._spawn() == "child" and once.closed == 1
    twice = Flaky(2)
    notebook = Notebook(twice, [], [], 1, 1, None)
    assert notebook._spawn() is None and notebook.outcome.status == "stopped"


def test_the_clean_up_empties_what_a_recursive_one_cannot(tmp_path):
    import os
    import time

    from autograder import runner

    top = tmp_path / "top"
    (top / "locked" / "inner").mkdir(parents=True)
    (top / "locked" / "inner" / "file").write_text("x")
    os.chmod(top / "locked" / "inner", 0)
    os.chmod(top / "locked", 0)
    (top / "link").symlink_to(tmp_path / "outside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep").write_text("not followed")
    here = os.getcwd()
    os.mkdir(top / "deep")
    os.chdir(top / "deep")
    try:
        for _ in range(1500):  # deeper than PATH_MAX: no path-based walk could remove it
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    assert runner._empty(str(top), time.monotonic() + 30)
    assert os.listdir(top) == [] and (tmp_path / "outside" / "keep").read_text() == "not followed"


def test_the_clean_up_keeps_the_sandboxs_own_mounts_and_removes_everything_else(tmp_path):
    import time

    from autograder import runner

    top = tmp_path / "top"
    venv = top / "checkout" / ".venv"  # bound in read-only, as a checkout under /tmp is
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "site.py").write_text("kept")
    (top / "checkout" / "planted").write_text("a submission's")
    (top / "checkout" / "nested" / "deeper").mkdir(parents=True)
    (top / "checkout" / "nested" / "deeper" / "file").write_text("x")
    (top / "stray").write_text("x")
    (top / "folder").mkdir()
    os.chmod(top / "checkout", 0)  # in a user namespace the folder is the sandbox uid's to change
    assert runner._empty(str(top), time.monotonic() + 30, mounts=frozenset({str(venv), "/proc"}))
    assert os.listdir(top) == ["checkout"] and os.listdir(top / "checkout") == [".venv"]
    assert (top / "checkout").stat().st_mode & 0o777 == 0o755, "as bwrap made it"
    assert (venv / "lib" / "site.py").read_text() == "kept"
    assert runner._empty(str(top), time.monotonic() + 30) and os.listdir(top) == [], "no layout: all goes"


@needs_bwrap
def test_a_sandbox_with_its_layout_under_tmp_cleans_up_around_it(tmp_path_factory):
    """A folder of this machine's under /tmp (a site folder a ``.pth`` adds, in a `mktemp -d` clone)
    is bound into the sandbox's own /tmp. The clean-up after each submission keeps those bound
    folders and removes all else: the zygote stays (it was replaced after every submission, each
    clean-up spending its 20 s on folders it may not change)."""
    import dataclasses

    run_dir = tmp_path_factory.mktemp("judge-layout")
    if not str(run_dir).startswith("/tmp/"):
        pytest.skip("the temporary folder is not under /tmp")
    os.chmod(run_dir, 0o755)
    lease = sandbox.UidLease(1) if os.geteuid() == 0 else None
    config = sandbox.make_config(sandbox.find_bwrap(), sandbox.Limits(), run_dir, 1,
                                 uids=lease.uids if lease else ())
    checkout = run_dir / "checkout" / "site-packages"  # a site folder a .pth adds: bound in at its own path
    checkout.mkdir(parents=True)
    (checkout / "kept.py").write_text("")
    os.chmod(run_dir / "checkout", 0o755)
    config = dataclasses.replace(config, package_dirs=config.package_dirs + (str(checkout),))
    (run_dir / "work").mkdir()
    process = Zygote(config, config.uid(0), ["numpy", "IPython"], None, str(run_dir / "work"))
    top = Path(checkout).relative_to("/tmp").parts[0]
    student = ("import os\nBEFORE = sorted(os.listdir('/tmp'))\nopen('/tmp/stray', 'w').write('x')\n"
               "def before():\n    return BEFORE\n")
    try:
        process.start()
        for _ in range(2):
            outcome = grade(process, student, ["assert 'stray' not in before(), before()",
                                               f"assert {top!r} in before(), before()"], ["before"])
            assert all(record["passed"] for record in outcome.tests.values()), outcome.tests
        assert process.replaced == 0 and process.left == "", process.left
    finally:
        process.close()
        if lease is not None:
            lease.release()


def test_hidden_parts_of_a_test_cell_and_the_instructors_reasons():
    from autograder.judge import _reason_for, hidden_feedback, test_segments

    cell = Cell(0, "test", "x = 1\nassert x == 1\n### BEGIN HIDDEN TESTS\n# reason: shapes must agree\n"
                           "assert x == 1\n# Reason: the values must agree\nassert x == 2\n### END HIDDEN TESTS\n",
                "t")
    segments = test_segments(cell)
    assert [s.hidden for s in segments] == [False, True, False]
    hidden = segments[1]
    assert _reason_for(hidden, 5) == "shapes must agree" and _reason_for(hidden, 7) == "the values must agree"
    assert _reason_for(hidden, 3) is None
    assert hidden_feedback(None) == "a hidden test of this cell failed"
    # A marker inside a block: the cell is one hidden segment (any failure in it reads as hidden).
    block = Cell(0, "test", "for i in range(2):\n    ### BEGIN HIDDEN TESTS\n    assert i < 5\n    ### END HIDDEN TESTS\n",
                 "t")
    assert [s.hidden for s in test_segments(block)] == [True]


# --- nothing a hidden test sent in comes back; a NumPy exercise has nothing that differentiates ------

PLANTED = 271828.18284


LEAKER = """
import numpy as np
SEEN = []

def leak(x):
    \"\"\"Keeps every input; once it has seen more than one, says what it saw, every way it can.\"\"\"
    SEEN.append(np.asarray(x).ravel().tolist())
    print("seen so far:", SEEN)
    if len(SEEN) > 1:
        raise ValueError(f"the inputs so far: {SEEN}")
    return np.zeros((len(SEEN), 7))
"""


def test_no_feedback_shows_what_a_hidden_test_passed_in(zygote):
    """A function that saw a hidden test's inputs puts them in the next visible check's failure (an
    exception's text, a printed line, a "got" shape): every visible part runs before any hidden part."""
    hidden_first = (f"### BEGIN HIDDEN TESTS\n# reason: the values must agree\nleak(np.full(3, {PLANTED}))\n"
                    "### END HIDDEN TESTS\n")
    visible_later = ("out = leak(np.ones(2))\nprint('the test saw', out.shape)\n"
                     "assert out.shape == (5, 7), f'expected (5, 7), got {out.shape}'\n")
    outcome = grade(zygote, LEAKER, [hidden_first, visible_later, visible_later], ["leak"])
    records = outcome.tests
    assert records["test_1"]["passed"] is False and "got (1, 7)" in records["test_1"]["feedback"], records
    for grade_id in ("test_0", "test_1", "test_2"):
        assert "271828" not in records[grade_id].get("feedback", ""), (grade_id, records[grade_id])
    for index in (3, 4):  # the outputs a feedback page keeps: those of cells without hidden tests
        assert "271828" not in str(outcome.outputs[index]), outcome.outputs[index]
    # ... and the hidden part did run, after them (its failure is reported with the instructor's reason)
    assert records["test_0"]["feedback"] == "a hidden test of this cell failed: the values must agree"


def test_a_hidden_part_still_sees_its_own_cells_visible_part(zygote):
    """The hidden part runs later, in the namespace its own visible part left (a later cell's names
    do not leak into it), and within what is left of its cell's time limit."""
    first = "N = 3\n### BEGIN HIDDEN TESTS\nassert N == 3, N\nassert double(N) == 6\n### END HIDDEN TESTS\n"
    second = "N = 5\nassert double(N) == 10\n### BEGIN HIDDEN TESTS\nassert N == 5, N\n### END HIDDEN TESTS\n"
    outcome = grade(zygote, "def double(x):\n    return 2 * x\n", [first, second], ["double"])
    assert all(record["passed"] for record in outcome.tests.values()), outcome.tests


WITHOUT_AUTOGRAD = """
def tried():
    found = {}
    for name in ("torch", "sympy", "attention_course.testing", "attention_course.testing.checks"):
        try:
            __import__(name)
            found[name] = "imported"
        except ImportError as exc:
            found[name] = str(exc)
    return found
"""


@pytest.fixture(scope="module")
def numpy_zygote(tmp_path_factory):
    """The sandbox of a NumPy exercise (autodiff=False), as grading makes it."""
    if sandbox.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed")
    run_dir = tmp_path_factory.mktemp("judge-numpy")
    os.chmod(run_dir, 0o755)
    lease = sandbox.UidLease(1) if os.geteuid() == 0 else None
    config = sandbox.make_config(sandbox.find_bwrap(), sandbox.Limits(), run_dir, 1, uids=lease.uids if lease else (),
                                 modules=["attention_course.functional"], autodiff=False)
    (run_dir / "work").mkdir()
    process = Zygote(config, config.uid(0), ["numpy", "IPython", "attention_course.functional"], None,
                     str(run_dir / "work"))
    process.start()
    yield process
    process.close()
    if lease is not None:
        lease.release()


def test_a_numpy_exercise_can_import_nothing_that_differentiates(numpy_zygote):
    outcome = grade(numpy_zygote, WITHOUT_AUTOGRAD, ["found = tried()\nprint(found)\n"
                                                     "assert not [k for k, v in found.items() if v == 'imported'], found\n"
                                                     "assert 'its backward pass is to be written by hand' in found['torch'], found\n"
                                                     "assert 'written by hand' in found['sympy'], found\n"],
                    ["tried"])
    assert outcome.tests["test_0"]["passed"], outcome.tests


# --- gradients are taken with what the runner held, from torch's own operations ------------------

FORGERS = {
    "honest": "def square(x):\n    return x * x\n",
    # a forward pass in NumPy, and the course's vjp replaced by one that forges the right gradient
    "replaced checks.vjp": (
        "import numpy as np, torch\nfrom attention_course.testing import checks\n"
        "def square(x):\n    return torch.from_numpy(x.detach().numpy() ** 2)\n"
        "def forged(fn, dout, *args, **kwargs):\n"
        "    x = args[0].detach().numpy()\n"
        "    return fn(*args), {'0': 2 * x * np.asarray(dout)}\n"
        "checks.vjp = forged\n"),
    # a custom autograd.Function whose backward pass is the notebook's word
    "custom Function": (
        "import numpy as np, torch\n"
        "class Square(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
        "        return torch.from_numpy(x.detach().numpy() ** 2)\n"
        "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n        return 2 * x * g\n"
        "def square(x):\n    return Square.apply(x)\n"),
    # a graph of torch operations that computes nothing, and hooks that put in the forged gradient
    "hooks": (
        "import torch\n"
        "def square(x):\n"
        "    x.register_hook(lambda g: 2 * x.detach() * g)\n"
        "    zero = 0 * x\n    zero.register_hook(lambda g: 2 * x.detach() * g)\n"
        "    return torch.from_numpy(x.detach().numpy() ** 2) + zero\n"),
    # torch's engine itself replaced
    "patched engine": (
        "import torch, torch.autograd.variable as variable\n"
        "class Engine:\n    def run_backward(self, outputs, grads, *rest, **kw):\n"
        "        return tuple(2 * o.detach() * g for o, g in zip(outputs, grads))\n"
        "variable.Variable._execution_engine = Engine()\n"
        "def square(x):\n    return torch.from_numpy(x.detach().numpy() ** 2).requires_grad_()\n"),
}
GRADIENT_TEST = ("import numpy as np\nfrom attention_course.testing import checks\n"
                 "x, dout = checks.random((3, 4), seed=0), checks.random((3, 4), seed=1)\n"
                 "out, grads = checks.vjp(square, dout, checks.tensor(x, requires_grad=True))\n"
                 "checks.assert_close('the output', out, x * x)\n"
                 "checks.assert_close('the gradient', grads['0'], 2 * x * dout)\n")


@pytest.fixture(scope="module")
def torch_zygote(tmp_path_factory):
    """The sandbox of a torch exercise whose read-only cells import the checks (so a notebook can
    reach ``checks.vjp``)."""
    if sandbox.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed")
    run_dir = tmp_path_factory.mktemp("judge-torch")
    os.chmod(run_dir, 0o755)
    lease = sandbox.UidLease(1) if os.geteuid() == 0 else None
    config = sandbox.make_config(sandbox.find_bwrap(), sandbox.Limits(), run_dir, 1, uids=lease.uids if lease else (),
                                 modules=["attention_course.testing.checks"], autodiff=True)
    (run_dir / "work").mkdir()
    process = Zygote(config, config.uid(0), ["numpy", "IPython", "torch", "attention_course.testing.checks"], None,
                     str(run_dir / "work"))
    process.start()
    yield process
    process.close()
    if lease is not None:
        lease.release()


@pytest.mark.parametrize("how", list(FORGERS))
def test_gradients_come_from_torch_not_from_the_notebook(torch_zygote, how):
    outcome = grade(torch_zygote, FORGERS[how], [GRADIENT_TEST], ["square", "forged", "Square", "Engine"])
    record = outcome.tests["test_0"]
    if how == "honest":
        assert record["passed"], record
        return
    assert not record["passed"], (how, record)
    expected = {"replaced checks.vjp": "none of your function's outputs is computed from its inputs",
                "custom Function": "a node written in Python (SquareBackward",
                "hooks": "the gradient",
                "patched engine": "your notebook changed torch's autograd (torch.autograd.variable.Variable"}[how]
    assert expected in record["feedback"], record["feedback"]
