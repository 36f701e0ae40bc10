"""Hostile and broken submissions: each ends in a defined outcome while the rest of the batch is graded.

One batch, graded once for the module (``graded``):

1. ``bystander`` (a correct answer) and ``empty`` (the released notebook, unanswered) are graded
   alone first; their grades and files are recorded.
2. Every hostile submission, a correct ``control`` and an honest wrong answer are graded together,
   in parallel, in the sandbox, with short time limits: ``--cell-timeout 3 --notebook-timeout 25``,
   1 GiB of address space and 64 processes per sandbox.
3. The tests check each outcome (score, flag and reason), that the hostile ones could not read or
   change anything outside their own folder, and that nothing else changed: the bystanders'
   grades and files, the source notebooks, the gradebook's integrity.

The cheats (``CHEATS``) implement neither function and attack the tests instead, by family:
IPython's input and AST transformers, a custom exception handler, replacing numpy and the check
functions, objects posing as arrays, modules written into the working folder, reading frames,
tampering with the session that carries the results. The tests run in the judge, outside the
student's process, so each scores zero on every test, whether the scan flags it or not.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
import threading
from pathlib import Path

import nbformat
import pytest

from autograder import leakscan, sandbox, similarity
from autograder.course import package_folder

from grader_helpers import FIXTURES, FixtureCourse, needs_bwrap

pytestmark = needs_bwrap

ASSIGNMENT = "fx_softmax"
FULL, BACKWARD_POINTS, SHAPE_POINTS = 5.0, 2.0, 1.0
WRONG_SOFTMAX = 'def softmax(x):\n    """Wrong on purpose."""\n    return x'
WRONG_BACKWARD = 'def softmax_backward(probabilities, dout):\n    """Wrong on purpose."""\n    return dout'
MISSING_SOFTMAX = 'def softmax(x):\n    raise NotImplementedError("not done")\n'
MISSING_BACKWARD = 'def softmax_backward(probabilities, dout):\n    raise NotImplementedError("not done")\n'

# Each cheat implements neither function; its code goes after the missing softmax.
CHEATS = {
    "transformers": '''
ip = get_ipython()
ip.input_transformers_post.append(lambda lines: ["pass\\n"])
import ast
class NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()
ip.ast_transformers.append(NoAsserts())
''',
    "exception_handler": '''
import sys
get_ipython().set_custom_exc((BaseException,), lambda shell, etype, evalue, tb, tb_offset=None: None)
sys.excepthook = lambda *args: None
get_ipython().showtraceback = lambda *args, **kwargs: None
''',
    "patched_checks": '''
import numpy, numpy.testing
import attention_course.testing as testing
from attention_course.testing import checks, gradcheck
numpy.allclose = lambda *args, **kwargs: True
numpy.testing.assert_allclose = lambda *args, **kwargs: None
testing.assert_grads_close = gradcheck.assert_grads_close = lambda *args, **kwargs: None
testing.numerical_vjp = gradcheck.numerical_vjp = lambda f, x, dout, eps=1e-6: 0
checks.assert_shape = checks.assert_close = lambda *args, **kwargs: None
import builtins
builtins.AssertionError = type("NotAnError", (Exception,), {})
''',
    "posing_object": '''
class Liar:
    shape = (2, 3)
    dtype = float
    def __eq__(self, other):
        return True
    def __array__(self, *args, **kwargs):
        return numpy.zeros(self.shape)
    def __getattr__(self, name):
        return Liar()
    def __call__(self, *args, **kwargs):
        return True
    def __bool__(self):
        return True
    def __sub__(self, other):
        return 0.0
    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __sub__
import numpy
def softmax(x):
    return Liar()
def softmax_backward(probabilities, dout):
    return Liar()
''',
    "posing_array": '''
import numpy
class AlwaysClose(numpy.ndarray):
    def __eq__(self, other):
        return numpy.ones(numpy.shape(self), dtype=bool)
    def __array_ufunc__(self, *args, **kwargs):
        return numpy.zeros(self.shape)
def softmax(x):
    return numpy.zeros(numpy.shape(x)).view(AlwaysClose)
def softmax_backward(probabilities, dout):
    return numpy.zeros(numpy.shape(dout)).view(AlwaysClose)
''',
    "module_in_workdir": '''
import os
os.makedirs("attention_course/testing", exist_ok=True)
open("attention_course/__init__.py", "w").write("")
open("attention_course/testing/__init__.py", "w").write("assert_grads_close = numerical_vjp = lambda *a, **k: None")
open("numpy.py", "w").write("allclose = lambda *a, **k: True")
open("sitecustomize.py", "w").write("import builtins; builtins.__dict__['all'] = lambda *a: True")
''',
    "frames": '''
import sys
def _peek():
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("hidden_expected", "expected", "probabilities"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    raise NotImplementedError("nothing to copy")
def softmax(x):
    return _peek()
def softmax_backward(probabilities, dout):
    return _peek()
''',
    "session": '''
import sys
wire = sys.modules.get("wire")
if wire is not None:
    wire.encode = lambda value, *args, **kwargs: wire.MAGIC + b"passed"
    wire.send = lambda sock, value, *args, **kwargs: sock.sendall(b"passed" * 100)
get_ipython().user_ns["In"][:] = []
import os
for fd in range(3, 64):
    try:
        os.write(fd, b"passed")
    except OSError:
        pass
''',
}

SNOOP = '''
import json, os
found = {}
for name, path in TARGETS.items():
    try:
        if os.path.isdir(path):
            found[name] = "LISTED " + ",".join(sorted(os.listdir(path)))
        else:
            with open(path, "rb") as handle:
                found[name] = "READ " + handle.read(300).decode("latin-1")
    except Exception as exc:
        found[name] = "DENIED " + type(exc).__name__
found["root listing"] = ",".join(sorted(os.listdir("/")))
found["uid"] = os.getuid()
print("SNOOP" + json.dumps(found))
'''

TAMPER = '''
import json, os, sqlite3
results = {}
for name, path in TARGETS.items():
    try:
        with open(path, "ab") as handle:
            handle.write(b"tampered")
        results[name] = "WROTE"
    except Exception as exc:
        results[name] = "DENIED " + type(exc).__name__
try:
    connection = sqlite3.connect(TARGETS["gradebook"])
    connection.execute("update grade set auto_score = 100")
    connection.commit()
    results["sql update"] = "WROTE"
except Exception as exc:
    results["sql update"] = "DENIED " + type(exc).__name__
print("TAMPER" + json.dumps(results))
'''


# Sixteen children asking for 256 MiB each (4 GiB), more than the worker's cgroup cap (2 GiB with
# --memory-mb 1024). Each child inherits the kernel's address space, so its own RLIMIT_AS (1 GiB)
# may stop it first: it takes 16 MiB at a time, touching every page, reports each chunk through a
# pipe, and keeps what it got. The parent counts the MiB its children hold and the children the
# out-of-memory killer took, for at most WINDOW seconds (in the batch, within its 3 s cell limit,
# a loaded machine may not get far: there it only has to be flagged; the cap itself is proved by a
# run of this notebook alone, with a longer window).
FORKMEM = '''

import os, signal, time
read_end, write_end = os.pipe()
children = []
for _ in range(16):
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            hoard = []
            try:
                for _ in range(16):
                    chunk = bytearray(16 * 1024 * 1024)
                    chunk[::4096] = b"\\x01" * len(chunk[::4096])  # touch every page
                    hoard.append(chunk)
                    os.write(write_end, b"r")
            except MemoryError:
                pass
            time.sleep(30)
        finally:
            os._exit(0)
    children.append(pid)
os.close(write_end)
os.set_blocking(read_end, False)
chunks, killed, deadline = 0, 0, time.time() + WINDOW
while children and not killed and time.time() < deadline:
    try:
        chunks += len(os.read(read_end, 4096))
    except BlockingIOError:
        pass
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.remove(pid)
            killed += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    time.sleep(0.02)
for pid in children:  # all at once: under the cap's pressure each takes a while to go
    os.kill(pid, signal.SIGKILL)
print("OOM-KILLED", killed, "HELD-MIB", 16 * chunks, flush=True)
for pid in children:
    os.waitpid(pid, 0)
'''


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _grade_rows(db: Path, students: list[str]) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        marks = ",".join("?" * len(students))
        return connection.execute(
            "select student.id, base_cell.name, grade.auto_score, grade.manual_score, grade.needs_manual_grade "
            "from grade join submitted_notebook on grade.notebook_id = submitted_notebook.id "
            "join submitted_assignment on submitted_notebook.assignment_id = submitted_assignment.id "
            "join student on submitted_assignment.student_id = student.id "
            "join base_cell on grade.cell_id = base_cell.id "
            f"where student.id in ({marks}) order by student.id, base_cell.name", students).fetchall()


class _Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.server.close()


def _submissions(course: FixtureCourse, folder: Path, listener_port: int) -> dict[str, object]:
    """Student id -> notebook (or raw text) of every submission in the batch."""
    solved = course.solved
    answers = {c.metadata.nbgrader.grade_id: c.source for c in course.source_notebook(ASSIGNMENT).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    softmax, backward = answers["softmax"], answers["softmax_backward"]
    root = course.root
    snoop_targets = {
        "gradebook": str(root / "gradebook.db"),
        "gradebook backup": str(root / "gradebook.db.bak"),
        "other submission": str(root / "submitted" / "bystander" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
        "other autograded": str(root / "autograded" / "bystander" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
        "hidden tests (source)": str(FIXTURES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
        "course folder": str(root),
        "submissions folder": str(root / "submitted"),
        "reports": str(root / "reports"),
        "autograder code": str(Path(__file__).resolve().parents[2] / "autograder"),
        "solutions folder": str(Path(__file__).resolve().parents[2] / "solutions"),
        "tests folder": str(Path(__file__).resolve().parents[2] / "tests"),
        "shadow": "/etc/shadow",
    }
    tamper_targets = {
        "gradebook": str(root / "gradebook.db"),
        "other submission": str(root / "submitted" / "bystander" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
        "source notebook": str(FIXTURES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
        "package": str(package_folder() / "__init__.py"),
        "new file in course": str(root / "planted.txt"),
    }
    edited = solved(ASSIGNMENT, softmax=WRONG_SOFTMAX)
    for cell in edited.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax_values":
            cell.source = "pass  # nothing to test here"
    deleted = solved(ASSIGNMENT)
    deleted.cells = [c for c in deleted.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_softmax_backward"]
    stripped = json.loads(nbformat.writes(solved(ASSIGNMENT)))
    for cell in stripped["cells"]:
        del cell["metadata"]
    many_cells = solved(ASSIGNMENT)
    many_cells.cells += [nbformat.v4.new_code_cell("x = 1") for _ in range(10_000)]
    return {
        "bystander": solved(ASSIGNMENT),
        "empty": course.released(ASSIGNMENT),
        "control": solved(ASSIGNMENT),
        "loop": solved(ASSIGNMENT, softmax=softmax + "\n\nwhile True:\n    pass"),
        "nointerrupt": solved(ASSIGNMENT, softmax=softmax + "\n\nimport signal\n"
                              "signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"),
        "exits": solved(ASSIGNMENT, softmax_backward=backward + "\n\nimport os\nos._exit(0)"),
        "killed": solved(ASSIGNMENT, softmax_backward=backward + "\n\nimport os\nos.kill(os.getpid(), 9)"),
        "segfault": solved(ASSIGNMENT, softmax_backward=backward + "\n\nimport ctypes\nctypes.string_at(0)"),
        "badjson": '{"cells": [ {"cell_type": "code", "source": "oops"',
        "edited": edited,
        "deleted": deleted,
        "stripped": json.dumps(stripped),
        "patcher": solved(ASSIGNMENT, softmax=WRONG_SOFTMAX + "\n\nnp.allclose = lambda *args, **kwargs: True",
                          softmax_backward=WRONG_BACKWARD + "\n\nassert_grads_close = lambda *args, **kwargs: None"),
        "snoop": solved(ASSIGNMENT, softmax=softmax + f"\n\nTARGETS = {snoop_targets!r}\n" + SNOOP),
        "tamper": solved(ASSIGNMENT, softmax=softmax + f"\n\nTARGETS = {tamper_targets!r}\n" + TAMPER),
        "forkbomb": solved(ASSIGNMENT, softmax=softmax + "\n\nimport os\nwhile True:\n    try:\n"
                           "        os.fork()\n    except OSError:\n        pass"),
        "membomb": solved(ASSIGNMENT, softmax=softmax + "\n\nhoard = []\nwhile True:\n"
                          "    hoard.append(bytes(64 * 1024 * 1024))"),  # calloc: the limit, not the page faults, stops it
        "network": solved(ASSIGNMENT, softmax=softmax + "\n\nimport socket\ntry:\n"
                          f"    socket.create_connection(('127.0.0.1', {listener_port}), timeout=3)\n"
                          "    print('NETWORK connected')\nexcept OSError as exc:\n"
                          "    print('NETWORK failed', type(exc).__name__)"),
        "leaky": solved(ASSIGNMENT, softmax_backward=backward + "\n\nprint(In)"),
        "forkmem": solved(ASSIGNMENT, softmax_backward=backward + FORKMEM.replace("WINDOW", "1.5")),
        "diskfill": solved(ASSIGNMENT, softmax=softmax + "\n\ntry:\n    for number in range(40):\n"
                           "        with open(f'big{number}', 'wb') as handle:\n"
                           "            handle.write(bytes(16 * 1024 * 1024))\n"
                           "except OSError as exc:\n    print('DISK', exc.strerror)"),
        "flood": solved(ASSIGNMENT, softmax=softmax + "\n\nfor _ in range(40):\n    print('x' * 1_000_000)"),
        "honestwrong": solved(ASSIGNMENT, softmax=WRONG_SOFTMAX),
        "unparseable": solved(ASSIGNMENT, softmax_backward="def softmax_backward(probabilities, dout)\n    return dout"),
        "scanbomb": solved(ASSIGNMENT, softmax_backward=backward + "\n\nbomb = " + "-" * 100000 + "1"),
        "toomanycells": many_cells,
        **{f"cheat_{name}": solved(ASSIGNMENT, softmax=MISSING_SOFTMAX + code, softmax_backward=MISSING_BACKWARD
                                   if name not in ("posing_object", "posing_array", "frames") else "pass")
           for name, code in CHEATS.items()},
    }


HOSTILE_OPTIONS = ["--workers", "2", "--cell-timeout", "3", "--notebook-timeout", "25",
                   "--memory-mb", "1024", "--max-processes", "64"]


@pytest.fixture(scope="module")
def graded(released_template, tmp_path_factory):
    import shutil

    root = tmp_path_factory.mktemp("hostile") / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root)
    listener = _Listener()
    folder = tmp_path_factory.mktemp("hostile-submissions")
    submissions = _submissions(course, folder, listener.port)
    for student, nb in submissions.items():
        path = folder / f"{student}.ipynb"
        path.write_text(nb if isinstance(nb, str) else nbformat.writes(nb))
    sources_before = {p: _sha(p) for p in FIXTURES.rglob("*.ipynb")}

    done = course.cli("import", ASSIGNMENT, "--from", str(folder))
    assert done.returncode == 0, done.stderr
    first = course.cli("autograde", ASSIGNMENT, "--student", "bystander", "--student", "empty", *HOSTILE_OPTIONS)
    assert first.returncode == 0, first.stderr
    bystanders = ["bystander", "empty"]
    rows_before = _grade_rows(root / "gradebook.db", bystanders)
    files_before = {p: _sha(p) for s in bystanders for p in (root / "autograded" / s).rglob("*") if p.is_file()}
    report_before = json.loads((root / "reports" / f"{ASSIGNMENT}.json").read_text())["students"]

    hostile = [s for s in submissions if s not in bystanders]
    batch = course.cli("autograde", ASSIGNMENT, *[a for s in hostile for a in ("--student", s)], *HOSTILE_OPTIONS)
    listener.close()
    report = json.loads((root / "reports" / f"{ASSIGNMENT}.json").read_text())["students"]
    yield {
        "course": course, "root": root, "batch": batch, "report": report, "hostile": hostile,
        "rows_before": rows_before, "files_before": files_before, "report_before": report_before,
        "bystanders": bystanders, "sources_before": sources_before, "listener": listener,
    }


def _outputs(graded, student: str, grade_id: str) -> str:
    nb = nbformat.read(graded["root"] / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(o.get("text", "") + o.get("ename", "") + " " + o.get("evalue", "") for o in cell.outputs)


def _flags(graded, student: str) -> str:
    return " | ".join(graded["report"][student]["flags"])


def test_the_batch_completes_and_every_submission_has_a_result(graded):
    assert graded["batch"].returncode == 0, graded["batch"].stderr
    for student in graded["hostile"]:
        assert graded["report"][student]["status"] in ("graded", "flagged"), student
        assert graded["report"][student]["max_score"] == FULL


@pytest.mark.parametrize("student, score, flagged, reason", [
    ("control", FULL, False, None),
    ("loop", FULL, True, "ran past its 3 s time limit and was interrupted"),
    ("nointerrupt", 0.0, True, "ignored the interrupt"),
    ("exits", FULL - BACKWARD_POINTS, True, "the process running your code has stopped"),
    ("killed", FULL - BACKWARD_POINTS, True, "the process running your code has stopped"),
    ("segfault", FULL - BACKWARD_POINTS, True, "the process running your code has stopped"),
    ("badjson", 0.0, True, "is not valid JSON"),
    ("edited", 1.0, True, "read-only cell 'test_softmax_values' was edited: restored from the source"),
    ("deleted", FULL, True, "test cell 'test_softmax_backward' was missing from the submission: restored"),
    ("stripped", FULL, True, "recovered by matching the released notebook"),
    # What its code earns, patches or not: an identity "softmax" keeps the shape, and returning dout
    # is the right backward pass of the identity (the gradient test checks backward against forward).
    ("patcher", SHAPE_POINTS + BACKWARD_POINTS, True, "assigns to np.allclose"),
    ("honestwrong", SHAPE_POINTS, False, None),
    ("unparseable", FULL - BACKWARD_POINTS, False, None),
    ("scanbomb", FULL - BACKWARD_POINTS, True, "the static scan failed"),  # the bomb's cell cannot compile
    ("toomanycells", 0.0, True, "over the grader's limit of 2000"),
    ("snoop", FULL, False, None),
    ("tamper", FULL, False, None),
    ("membomb", FULL, False, None),
    ("network", FULL, True, "imports socket"),
    ("leaky", FULL, True, "reads In"),
    ("flood", FULL, False, None),
    ("diskfill", FULL, False, None),
])
def test_outcome(graded, student, score, flagged, reason):
    entry = graded["report"][student]
    assert entry["score"] == score, (student, entry)
    # Many of these hand in the same correct code: the copy check flags that (a flag scores nothing);
    # the flags that matter here are the others.
    own = [flag for flag in entry["flags"] if not similarity.is_copy_flag(flag)]
    assert bool(own) == flagged, (student, entry["flags"])
    if reason:
        assert reason in _flags(graded, student)


def test_a_fork_bomb_is_bounded_and_flagged(graded):
    entry = graded["report"]["forkbomb"]
    assert entry["status"] == "flagged"
    flags = _flags(graded, "forkbomb")
    assert "time limit" in flags or "has stopped" in flags, flags
    # Nothing of any sandbox of the batch survives the run (processes killed at the end may take a
    # moment to leave /proc).
    uids = {notebook["execution"].get("uid") for entry in graded["report"].values()
            for notebook in entry["notebooks"].values()} - {None}
    assert uids
    import time

    for _ in range(40):
        leftovers = []
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                lines = status.read_text().splitlines()
                uid = int(next(line for line in lines if line.startswith("Uid:")).split()[1])
                state = next(line for line in lines if line.startswith("State:")).split()[1]
            except (OSError, StopIteration, ValueError, IndexError):
                continue
            if uid in uids and state != "Z":
                leftovers.append(status.parent.name)
        if not leftovers:
            break
        time.sleep(0.05)
    assert leftovers == []


def test_patching_is_flagged_with_every_reason(graded):
    flags = _flags(graded, "patcher")
    assert "assigns to np.allclose: patches numpy" in flags
    assert "rebinds 'assert_grads_close'" in flags
    assert all(flag for flag in graded["report"]["patcher"]["flags"])


def _records(graded, student: str) -> dict:
    return graded["report"][student]["notebooks"][ASSIGNMENT]["tests"]


def test_a_lost_process_fails_the_cells_it_did_not_run(graded):
    # The cell that stopped the process, and those after it, are not run; a new process re-ran
    # the cells before it, so the tests of what they defined still pass.
    for student in ("exits", "killed", "segfault"):
        assert "GraderStopped" in _outputs(graded, student, "softmax_backward")
        records = _records(graded, student)
        assert records["test_softmax_values"]["passed"] is True
        assert records["test_softmax_backward"]["passed"] is False
        assert "softmax_backward" in records["test_softmax_backward"]["message"]
    assert "GraderStopped" in _outputs(graded, "nointerrupt", "softmax")
    assert not any(record["passed"] for record in _records(graded, "nointerrupt").values())


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_cheat_scores_zero_on_every_test(graded, cheat):
    student = f"cheat_{cheat}"
    entry = graded["report"][student]
    assert entry["score"] == 0.0, (student, _records(graded, student))
    assert not any(record["passed"] for record in _records(graded, student).values())


def test_honest_answers_in_the_same_batch_get_exactly_their_scores(graded):
    assert set(_records(graded, "control")) == {"test_softmax_shape", "test_softmax_values", "test_softmax_backward"}
    assert all(record["passed"] for record in _records(graded, "control").values())
    wrong = _records(graded, "honestwrong")
    assert wrong["test_softmax_shape"]["passed"] and not wrong["test_softmax_values"]["passed"]
    assert "equal scores give equal weights" in wrong["test_softmax_values"]["message"]


def test_one_notebooks_troubles_stay_its_own(graded):
    # an unparseable cell fails where it is; a scan that blows up is one flag; 10,000 cells are refused
    assert "SyntaxError" in _outputs(graded, "unparseable", "softmax_backward")
    assert _records(graded, "unparseable")["test_softmax_values"]["passed"] is True
    assert _flags(graded, "scanbomb").count("static scan") == 1
    assert _records(graded, "scanbomb")["test_softmax_values"]["passed"] is True
    assert "has 10" in _flags(graded, "toomanycells") and _records(graded, "toomanycells") == {}


def test_a_memory_bomb_raises_memory_error(graded):
    assert "MemoryError" in _outputs(graded, "membomb", "softmax")


def test_a_forked_memory_bomb_is_flagged_in_the_batch(graded):
    entry = graded["report"]["forkmem"]
    assert entry["status"] == "flagged" and "uses os.fork" in _flags(graded, "forkmem")
    assert entry["score"] >= FULL - BACKWARD_POINTS


# The forked memory bomb alone, with time to reach the cap: a 20 s cell limit, a 12 s window.
FORKMEM_ALONE_OPTIONS = ["--workers", "1", "--cell-timeout", "20", "--notebook-timeout", "60",
                         "--memory-mb", "1024", "--max-processes", "64"]


@pytest.fixture(scope="module")
def forkmem_alone(released_template, tmp_path_factory):
    import shutil

    if sandbox.memory_cgroup() is None:
        pytest.skip("no writable memory cgroup here: only the per-process limits bound this")
    root = tmp_path_factory.mktemp("forkmem") / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root)
    answers = {c.metadata.nbgrader.grade_id: c.source for c in course.source_notebook(ASSIGNMENT).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    folder = tmp_path_factory.mktemp("forkmem-submissions")
    nb = course.solved(ASSIGNMENT, softmax_backward=answers["softmax_backward"] + FORKMEM.replace("WINDOW", "12"))
    (folder / "forkmem.ipynb").write_text(nbformat.writes(nb))
    done = course.cli("import", ASSIGNMENT, "--from", str(folder))
    assert done.returncode == 0, done.stderr
    done = course.cli("autograde", ASSIGNMENT, "--student", "forkmem", *FORKMEM_ALONE_OPTIONS)
    assert done.returncode == 0, done.stderr
    report = json.loads((root / "reports" / f"{ASSIGNMENT}.json").read_text())["students"]
    return {"root": root, "report": report}


def test_a_forked_memory_bomb_is_bounded_by_the_cgroup(forkmem_alone):
    entry = forkmem_alone["report"]["forkmem"]
    assert entry["status"] == "flagged" and entry["score"] >= FULL - BACKWARD_POINTS
    text = _outputs(forkmem_alone, "forkmem", "softmax_backward")
    assert "OOM-KILLED" in text, text
    killed, held = int(text.split("OOM-KILLED")[1].split()[0]), int(text.split("HELD-MIB")[1].split()[0])
    cap = sandbox.tree_memory_limit(sandbox.Limits(memory_mb=1024)) // sandbox.MiB
    # The children asked for twice the cap between them: the out-of-memory killer took one once
    # they held about the cap (their interpreters' own pages count too, so somewhat less).
    assert killed >= 1, text
    assert cap // 2 <= held, text


def test_snooping_reads_nothing_outside_the_sandbox(graded):
    text = _outputs(graded, "snoop", "softmax")
    found = json.loads(text[text.index("SNOOP") + len("SNOOP"):].splitlines()[0])
    for name, value in found.items():
        if name in ("root listing", "uid"):
            continue
        assert value.startswith("DENIED"), (name, value)
    assert found["uid"] != 0
    assert "SQLite format 3" not in text
    secrets = leakscan.course_secrets(FIXTURES, package_folder(), [ASSIGNMENT])
    assert not [s for s in secrets if s.kind == "hidden test" and s.line in leakscan.normalize(text)]
    assert "bystander" not in text


def test_tampering_writes_nothing(graded):
    text = _outputs(graded, "tamper", "softmax")
    results = json.loads(text[text.index("TAMPER") + len("TAMPER"):].splitlines()[0])
    assert all(value.startswith("DENIED") for value in results.values()), results
    assert not (graded["root"] / "planted.txt").exists()
    with sqlite3.connect(graded["root"] / "gradebook.db") as connection:
        assert connection.execute("pragma integrity_check").fetchone()[0] == "ok"
        assert connection.execute("select count(*) from grade where auto_score > 100").fetchone()[0] == 0


def test_no_connection_leaves_the_sandbox(graded):
    assert graded["listener"].accepted == 0
    assert "NETWORK failed" in _outputs(graded, "network", "softmax")


def test_the_working_folder_is_bounded(graded):
    assert "DISK No space left on device" in _outputs(graded, "diskfill", "softmax")


def test_output_is_capped(graded):
    path = graded["root"] / "autograded" / "flood" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert path.stat().st_size < 5 * 1024 * 1024
    assert "output truncated by the grader" in path.read_text()


def test_nothing_else_changed(graded):
    root = graded["root"]
    assert _grade_rows(root / "gradebook.db", graded["bystanders"]) == graded["rows_before"]
    assert {p: _sha(p) for p in graded["files_before"]} == graded["files_before"]
    for student in graded["bystanders"]:
        assert graded["report"][student] == graded["report_before"][student]
    assert {p: _sha(p) for p in FIXTURES.rglob("*.ipynb")} == graded["sources_before"]
    submitted = root / "submitted" / "bystander" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert b"tampered" not in submitted.read_bytes()
    assert graded["report_before"]["bystander"]["score"] == FULL
    assert graded["report_before"]["empty"]["score"] == 0.0
    assert graded["report_before"]["empty"]["status"] == "graded"


def test_regrading_is_idempotent(graded):
    course = graded["course"]
    students = ["control", "deleted", "badjson"]
    before = _grade_rows(graded["root"] / "gradebook.db", students)
    again = course.cli("autograde", ASSIGNMENT, *[a for s in students for a in ("--student", s)], *HOSTILE_OPTIONS)
    assert again.returncode == 0, again.stderr
    assert _grade_rows(graded["root"] / "gradebook.db", students) == before
    report = json.loads((graded["root"] / "reports" / f"{ASSIGNMENT}.json").read_text())["students"]
    for student in students:
        assert report[student]["score"] == graded["report"][student]["score"]
        assert report[student]["flags"] == graded["report"][student]["flags"]


def test_feedback_never_shows_hidden_tests(graded):
    course = graded["course"]
    # The student who printed IPython's history saw only their own cells: no test ever ran there.
    printed = _outputs(graded, "leaky", "softmax_backward")
    assert "def softmax_backward" in printed
    assert "checks.assert_shape" not in printed and "hidden" not in printed and "probabilities = " not in printed
    done = course.cli("feedback", ASSIGNMENT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WITHHELD" not in done.stdout
    pages = list((graded["root"] / "feedback").rglob("*.html"))
    assert len(pages) >= 20
    secrets = leakscan.course_secrets(FIXTURES, package_folder(), [ASSIGNMENT])
    assert leakscan.scan([graded["root"] / "feedback"], secrets, kinds=("hidden test",)) == []
    # An unanswered notebook's feedback shows no solution either.
    assert leakscan.scan([graded["root"] / "feedback" / "empty"], secrets) == []
    # ... while the autograded notebooks (instructor only) do hold the hidden tests: the scan works.
    assert leakscan.scan([graded["root"] / "autograded" / "control"], secrets, kinds=("hidden test",))
    page = (graded["root"] / "feedback" / "control" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "hidden tests: not shown" in page and "passed" in page
    # what a page says about a test is the judge's record, whatever the student's cells printed
    page = (graded["root"] / "feedback" / "cheat_session" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "Tests of this cell: passed" not in page and page.count(": failed (") == 3


def test_export_writes_the_grade_table_and_histogram(graded, tmp_path):
    course = graded["course"]
    done = course.cli("export", "--csv", str(tmp_path / "grades.csv"), "--histogram", str(tmp_path / "scores.png"))
    assert done.returncode == 0, done.stderr
    import csv

    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    softmax = {row["student"]: row for row in rows if row["assignment"] == ASSIGNMENT}
    assert softmax["control"]["score"] == "5.0"
    # (the control hands in the same code as many others: only the copy check flags it)
    assert all(similarity.is_copy_flag(flag) for flag in softmax["control"]["flags"].split(" | ") if flag)
    assert softmax["badjson"]["status"] == "flagged" and "not valid JSON" in softmax["badjson"]["flags"]
    assert softmax["nointerrupt"]["needs_manual_grade"] == "True"
    scale = {row["student"]: row for row in rows if row["assignment"] == "fx_scale"}
    assert scale["control"]["status"] == "missing" and scale["control"]["score"] == "0.0"
    assert (tmp_path / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
