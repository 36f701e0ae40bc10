"""No submission can touch another, and every wait has a deadline and every input a budget.

One batch, graded in order on one worker (so each submission runs in the sandbox the one before it
used), short limits (``--cell-timeout 10``):

* ``a_planter`` leaves everything it can for the next job: folders named as the next job's might
  be (unreadable, undeletable by mode), unreadable folders and files in /tmp and /dev/shm, a tree
  too deep for a recursive clean-up, System V IPC objects, a key in the uid's keyring, and a
  daemon that keeps writing a file;
* ``b_reader`` (correct answers) looks for every one of those traces and prints what it finds;
* ``c_halfframe`` sends a reply frame's length and then nothing, from inside a call;
* ``d_flood`` prints 300,000 characters from each of 400 cells (120 MB);
* ``e_bigreply`` answers one call with a 160 MiB array, every other one correctly;
* ``f_control`` and ``g_control`` (correct answers) come after all of them.

Each honest control must get exactly its score, the reader must find nothing, the half-sent frame
and the flood must end within their limits, and the big reply must fail only its own test cell.
"""

from __future__ import annotations

import json
import shutil
import sys
import time

import nbformat
import pytest

from autograder import judge, similarity

from grader_helpers import REPO, FixtureCourse, needs_bwrap

pytestmark = needs_bwrap

ASSIGNMENT = "fx_softmax"
FULL = 5.0
CELL_TIMEOUT = 10  # long enough to send (and drop) a 160 MiB reply on a loaded machine

PLANT = r'''
import ctypes, os, time
here = os.getcwd()
root = os.path.dirname(here)
for number in range(64):  # guesses at the next job's folder, each unreadable and holding a file
    folder = os.path.join(root, f"submission-{number:032x}")
    os.makedirs(os.path.join(folder, "inner"), exist_ok=True)
    open(os.path.join(folder, "inner", "planted"), "w").write("PLANTED")
    os.chmod(os.path.join(folder, "inner"), 0)
    os.chmod(folder, 0)
for base in ("/tmp", "/dev/shm"):  # (/dev/shm is not writable in the sandbox: the attempt is the point)
    try:
        os.makedirs(base + "/locked/inner", exist_ok=True)
        open(base + "/locked/inner/planted", "w").write("PLANTED")
        os.chmod(base + "/locked/inner", 0)
        os.chmod(base + "/locked", 0)
        open(base + "/planted.txt", "w").write("PLANTED")
    except OSError:
        pass
for line in open("/proc/self/mountinfo"):  # the folders above a mount under /tmp (a checkout there)
    mount = line.split()[4]
    while mount.startswith("/tmp/") and os.path.dirname(mount) != "/tmp":
        mount = os.path.dirname(mount)
        try:
            open(mount + "/planted.txt", "w").write("PLANTED")
        except OSError:
            pass
os.mkdir("/tmp/deep")  # deeper than any path may be long, and than Python may recurse
os.chdir("/tmp/deep")
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
os.chdir(here)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget(0x4711, 4096, 0o1666)
libc.semget(0x4712, 1, 0o1666)
libc.msgget(0x4713, 0o1666)
libc.syscall(248, b"user", b"planted", b"PLANTED", 7, -4)  # add_key into the uid's keyring
if os.fork() == 0:  # a daemon that outlives the submission, rewriting a file
    os.setsid()
    if os.fork() == 0:
        while True:
            try:
                open("/tmp/daemon.txt", "w").write("PLANTED")
            except OSError:
                pass
            time.sleep(0.05)
    os._exit(0)
'''

READ = r'''
import ctypes, json, os
def _traces():
    found = []
    # The sandbox's own layout: its mount points (a checkout under /tmp is bound in there) and
    # the folders leading to them, which must hold nothing else.
    mounts = {line.split()[4] for line in open("/proc/self/mountinfo")}
    leading = {os.path.dirname(m) for m in mounts}
    for m in list(leading):
        while m not in ("/", ""):
            leading.add(m)
            m = os.path.dirname(m)
    def look(folder):
        for name in os.listdir(folder):
            path = f"{folder}/{name}"
            if path in mounts:
                continue
            if path in leading:
                look(path)
            else:
                found.append(path)
    for base in ("/tmp", "/dev/shm"):
        look(base)
    here = os.getcwd()
    root = os.path.dirname(here)
    found += [f"{root}/{name}" for name in os.listdir(root) if os.path.join(root, name) != here]
    found += [f"{here}/{name}" for name in os.listdir(here) if not os.path.islink(os.path.join(here, name))]
    for kind in ("shm", "sem", "msg"):
        rows = open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
        found += [f"sysv {kind} {row.split()[0]}" for row in rows if row.strip()]
    found += [f"process {pid}" for pid in os.listdir("/proc") if pid.isdigit() and int(pid) not in (1, os.getpid())]
    key = ctypes.CDLL(None, use_errno=True).syscall(250, 10, -4, b"user", b"planted", 0)  # KEYCTL_SEARCH
    if key > 0:
        found.append(f"key {key}")
    return found
print("TRACES", json.dumps(_traces()))
print("PROC", json.dumps({pid: open(f"/proc/{pid}/cmdline", "rb").read().decode("utf-8", "replace")
                          for pid in os.listdir("/proc") if pid.isdigit()}))
import sys
print("SHOWN", json.dumps({"mountinfo": open("/proc/self/mountinfo").read(), "environ": dict(os.environ),
                           "path": sys.path, "prefix": sys.prefix, "executable": sys.executable}))
'''

HALF_FRAME = r'''
import os, struct, time
def softmax(x):
    """Sends the length of a reply, four bytes of it, and then nothing."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                os.write(int(name), struct.pack(">Q", 4096) + b"ACW1")
        except OSError:
            pass
    time.sleep(600)
'''

BIG_REPLY = r'''
import numpy as np
def softmax(x):
    if x.shape == (2, 3):  # the shape test only: a reply far over the limit
        return np.zeros(160 * 1024 * 1024 // 8)
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
'''


@pytest.fixture(scope="module")
def graded(released_template, tmp_path_factory):
    root = tmp_path_factory.mktemp("isolation") / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root)
    solved = course.solved(ASSIGNMENT)
    softmax = next(c.source for c in solved.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    flood = course.solved(ASSIGNMENT)
    flood.cells += [nbformat.v4.new_code_cell("print('x' * 300_000)") for _ in range(400)]
    submissions = {
        "a_planter": course.solved(ASSIGNMENT, softmax=softmax + "\n" + PLANT),
        "b_reader": course.solved(ASSIGNMENT, softmax=softmax + "\n" + READ),
        "c_halfframe": course.solved(ASSIGNMENT, softmax=HALF_FRAME),
        "d_flood": flood,
        "e_bigreply": course.solved(ASSIGNMENT, softmax=BIG_REPLY),
        "f_control": course.solved(ASSIGNMENT),
        "g_control": course.solved(ASSIGNMENT),
    }
    for student, nb in submissions.items():
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
    started = time.monotonic()
    done = course.cli("autograde", ASSIGNMENT, "--workers", "1", "--cell-timeout", str(CELL_TIMEOUT),
                      "--notebook-timeout", "60")
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    report = json.loads((root / "reports" / f"{ASSIGNMENT}.json").read_text())["students"]
    return {"course": course, "root": root, "report": report, "seconds": seconds}


def _graded_nb(graded, student):
    return nbformat.read(graded["root"] / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)


def _text(nb, grade_id=None) -> str:
    cells = [c for c in nb.cells if c.cell_type == "code"
             and (grade_id is None or c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)]
    return "\n".join(o.get("text", "") + o.get("evalue", "") for c in cells for o in c.outputs)


def _test(graded, student, grade_id) -> dict:
    return graded["report"][student]["notebooks"][ASSIGNMENT]["tests"][grade_id]


def test_the_honest_controls_get_exactly_their_scores(graded):
    for student in ("f_control", "g_control"):
        entry = graded["report"][student]
        # (the controls hand in the same answer as others: the copy check says so, and that is all)
        assert entry["score"] == FULL and not [f for f in entry["flags"] if not similarity.is_copy_flag(f)], entry
    assert graded["report"]["b_reader"]["score"] == FULL  # (flagged for importing ctypes: a flag scores nothing)


def test_nothing_one_submission_leaves_is_visible_to_the_next(graded):
    line = next(line for line in _text(_graded_nb(graded, "b_reader"), "softmax").splitlines()
                if line.startswith("TRACES "))
    assert json.loads(line[len("TRACES "):]) == [], line


def test_a_half_sent_frame_ends_within_the_cell_limit(graded):
    record = _test(graded, "c_halfframe", "test_softmax_shape")
    assert not record["passed"] and "did not arrive whole" in record["message"], record
    assert record["seconds"] < CELL_TIMEOUT + 2 * judge.INTERRUPT_GRACE + 2, record
    timing = graded["report"]["c_halfframe"]["notebooks"][ASSIGNMENT]["execution"]["timing"]
    assert timing["checks"] < CELL_TIMEOUT + 2 * judge.INTERRUPT_GRACE + 5, timing
    assert graded["report"]["c_halfframe"]["score"] == 0.0


def test_an_output_flood_is_cut_to_the_notebooks_budget(graded):
    path = graded["root"] / "autograded" / "d_flood" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert path.stat().st_size < judge.OUTPUT_BUDGET * 1.5, path.stat().st_size
    assert len(_text(_graded_nb(graded, "d_flood"))) <= judge.OUTPUT_BUDGET + 400 * 64
    notes = " ".join(graded["report"]["d_flood"]["notes"])
    assert "output budget" in notes, notes
    assert graded["report"]["d_flood"]["score"] == FULL, "the flood's own answers are still graded"


def test_a_reply_over_the_limit_fails_only_its_own_cell(graded):
    record = _test(graded, "e_bigreply", "test_softmax_shape")
    assert not record["passed"] and "over one reply's limit" in record["message"], record
    assert _test(graded, "e_bigreply", "test_softmax_values")["passed"]
    assert _test(graded, "e_bigreply", "test_softmax_backward")["passed"]
    assert graded["report"]["e_bigreply"]["score"] == FULL - 1


def test_the_batch_takes_no_longer_than_its_limits(graded):
    # Seven notebooks on one worker: one sandbox start, the planter's clean-up, one timed-out cell.
    assert graded["seconds"] < 120, graded["seconds"]


def test_proc_shows_the_sandbox_alone_and_no_path_of_the_course(graded):
    line = next(line for line in _text(_graded_nb(graded, "b_reader"), "softmax").splitlines()
                if line.startswith("PROC "))
    processes = json.loads(line[len("PROC "):])
    assert "1" in processes and len(processes) == 2, processes  # the runner (pid 1) and the reader itself
    runner = processes["1"]
    assert "/grader/runner.py" in runner and "bwrap" not in runner, runner
    for path in (str(graded["root"]), "/tmp/ag-", "solutions", "grading", "release", str(REPO), sys.prefix):
        assert path not in runner, (path, runner)
    # Nothing of the run folder, the course or the checkout's code is bound in (mountinfo names a bind
    # mount's source), and the interpreter, its path and environment name none of them either.
    line = next(line for line in _text(_graded_nb(graded, "b_reader"), "softmax").splitlines()
                if line.startswith("SHOWN "))
    shown = json.loads(line[len("SHOWN "):])
    seen = json.dumps({key: shown[key] for key in ("environ", "path", "prefix", "executable")})
    for path in (str(graded["root"]), "/tmp/ag-", str(REPO / "autograder"), str(REPO / "attention_course"),
                 str(REPO / "solutions"), sys.prefix):
        assert path not in seen, (path, seen)
    for path in (str(graded["root"]), "/tmp/ag-", str(REPO / "autograder"), str(REPO / "attention_course"),
                 str(REPO / "solutions")):
        assert path not in shown["mountinfo"], (path, shown["mountinfo"])
