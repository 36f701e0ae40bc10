"""The sandbox's command line, its preflight, and the refusal to grade without it."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import sandbox
from autograder.course import REPO_ROOT, package_folder
from autograder.errors import GradingError

from grader_helpers import needs_bwrap

ASSIGNMENT = "fx_softmax"


UIDS = (61990, 61991)   # written into the command line only; nothing runs as them here


def _argv(tmp_path: Path, bwrap: str = "/usr/bin/bwrap", autodiff: bool = False) -> list[str]:
    config = sandbox.make_config(bwrap, sandbox.Limits(), tmp_path, workers=2, uids=UIDS, autodiff=autodiff)
    staged = sandbox.Staged()
    try:
        return sandbox.runner_argv(config, uid=config.uid(1), work_dir=str(tmp_path / "w"), data_dir=None,
                                   preload=["numpy"], control_fd=7, staged=staged)
    finally:
        staged.close()


@pytest.fixture
def lease():
    """A uid for a probe (root mode); a normal user's kernels run as that user."""
    if os.geteuid() != 0:
        yield ()
        return
    held = sandbox.UidLease(1)
    yield held.uids
    held.release()


def _pairs(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == option]


def test_the_sandbox_sees_only_what_it_needs(tmp_path):
    argv = _argv(tmp_path)
    end = argv.index("--")
    bwrap = argv[:end]
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--clearenv", "--die-with-parent", "--new-session",
                 "--as-pid-1"):
        assert flag in bwrap
    assert _pairs(bwrap, "--bind") == [], "nothing from outside is writable"
    # The working folder is a size-limited tmpfs of the sandbox's own, at a path that names nothing of the course.
    assert bwrap[bwrap.index(sandbox.INSIDE_WORK) - 1] == "--tmpfs"
    # What is bound from outside: the system, the Python installation and the venv (seen at /opt/venv);
    # nothing of the run folder, the checkout's autograder/ or the course package (mountinfo would name it).
    sources = {bwrap[i + 1]: bwrap[i + 2] for i, arg in enumerate(bwrap) if arg in ("--ro-bind", "--ro-bind-try")}
    venv = os.path.realpath(sys.prefix)
    assert sources[venv] == sandbox.INSIDE_VENV
    assert set(sources) <= {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache",
                            "/etc/fonts", "/etc/localtime", os.path.realpath(sys.base_prefix), venv}, sources
    # The runner, the wire format, the gradients, /etc's files and the sandbox library are copied in.
    copied = [bwrap[i + 2] for i, arg in enumerate(bwrap) if arg == "--file"]
    assert {"/grader/runner.py", "/grader/wire.py", "/grader/gradients.py", "/etc/passwd", "/etc/group",
            "/etc/hosts", f"{sandbox.INSIDE_LIBRARY}/attention_course/__init__.py"} <= set(copied), copied
    assert not [path for path in copied if "track" in path]
    # The /tmp tmpfs comes before the working folder's tmpfs; both sizes are limited.
    tmpfs = [bwrap[i + 1] for i, arg in enumerate(bwrap) if arg == "--tmpfs"]
    assert tmpfs[0] == "/tmp" and tmpfs[-1] == sandbox.INSIDE_WORK
    # ... and after every mount, the root is made read-only (nothing written there outlives a submission)
    mounts = [i for i, arg in enumerate(bwrap) if arg in ("--tmpfs", "--ro-bind", "--bind", "--dir", "--symlink",
                                                          "--file", "--ro-bind-data")]
    read_only_after = [i for i, arg in enumerate(bwrap) if arg == "--remount-ro"]
    assert [bwrap[i + 1] for i in read_only_after][:2] == ["/", "/dev"] and min(read_only_after) > max(mounts)
    assert _pairs(bwrap, "--size") == [str(256 * 1024 * 1024)] * 2
    environment = dict(zip(_pairs(bwrap, "--setenv"), [bwrap[i + 2] for i, a in enumerate(bwrap) if a == "--setenv"]))
    assert "JPY_PARENT_PID" not in environment and environment["HOME"] == "/tmp"
    assert environment["PYTHONPATH"] == sandbox.INSIDE_LIBRARY
    # No path of this machine on the runner's command line (it is pid 1: /proc/1/cmdline shows it).
    command = argv[argv.index(f"{sandbox.INSIDE_VENV}/bin/python"):]
    assert command[1] == "/grader/runner.py"
    assert not [arg for arg in command + list(environment.values()) if str(tmp_path) in arg or venv in arg
                or str(REPO_ROOT) in arg]


def test_a_numpy_exercise_is_offered_nothing_that_differentiates(tmp_path):
    numpy_only, with_torch = _argv(tmp_path / "a"), _argv(tmp_path / "b", autodiff=True)
    torch_inside = f"{sandbox.INSIDE_VENV}/{Path(importlib.util.find_spec('torch').origin).parent.relative_to(sys.prefix)}"
    hidden = [numpy_only[i + 1] for i, arg in enumerate(numpy_only) if arg == "--tmpfs"]
    assert torch_inside in hidden and f"{sandbox.INSIDE_VENV}/{Path(importlib.util.find_spec('sympy').origin).parent.relative_to(sys.prefix)}" in hidden
    assert f"{torch_inside}/__init__.py" in [numpy_only[i + 2] for i, arg in enumerate(numpy_only) if arg == "--file"]
    assert torch_inside in [numpy_only[i + 1] for i, arg in enumerate(numpy_only) if arg == "--remount-ro"], \
        "the hiding folder is read-only: nothing written there outlives a submission"
    assert torch_inside not in [with_torch[i + 1] for i, arg in enumerate(with_torch) if arg == "--tmpfs"]


def test_the_library_holds_only_what_may_be_offered(tmp_path):
    modules = sandbox.library_modules(["attention_course.functional", "attention_course.data.vocab"])
    assert {"attention_course", "attention_course.functional", "attention_course.data",
            "attention_course.data.vocab"} <= set(modules)
    assert not [m for m in modules if m.startswith("attention_course.testing")], \
        "the checks (numerical gradients) only where a read-only cell imports them"
    assert not [m for m in modules if m.split(".")[1:2] in (["numpy_track"], ["torch_track"], ["tracks"])]
    built = sandbox.build_library(tmp_path / "lib", ["attention_course.functional", "attention_course.testing.checks"])
    files = sorted(str(p.relative_to(built)) for p in built.rglob("*.py"))
    assert "attention_course/functional.py" in files and "attention_course/testing/checks.py" in files
    assert not [f for f in files if "track" in f or "__pycache__" in f]
    for name, by in [("attention_course.numpy_track", "numpy_track"), ("attention_course.tracks", "tracks"),
                     ("attention_course.viz", "viz")]:
        with pytest.raises(GradingError, match=f"imports {name.replace('.', '[.]')}, which the grading sandbox never offers"):
            sandbox.library_modules([name])


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop is the root mode")
def test_root_drops_to_an_unprivileged_uid_with_limits(tmp_path):
    argv = _argv(tmp_path)
    inside = argv[argv.index("--") + 1:]
    assert inside[0].endswith("setpriv")
    assert f"--reuid={UIDS[1]}" in inside and "--no-new-privs" in inside and "--bounding-set=-all" in inside
    limits = inside[inside.index("--") + 1:]
    assert limits[0].endswith("prlimit")
    assert "--nproc=256" in limits and f"--as={4096 * 1024 * 1024}" in limits and "--core=0" in limits
    command = limits[limits.index("--") + 1:]
    assert command[:2] == [f"{sandbox.INSIDE_VENV}/bin/python", "/grader/runner.py"] and "--sandboxed" in command


@pytest.mark.skipif(os.geteuid() != 0, reason="uids are leased in the root mode")
def test_concurrent_runs_never_share_a_uid():
    first, second = sandbox.UidLease(2), sandbox.UidLease(2)
    try:
        assert not set(first.uids) & set(second.uids)
    finally:
        first.release()
        second.release()
    again = sandbox.UidLease(2)
    assert again.uids  # released uids are free again
    again.release()


@needs_bwrap
def test_preflight_refuses_a_sandbox_that_shows_too_much(tmp_path, lease):
    config = sandbox.make_config(sandbox.find_bwrap(), sandbox.Limits(), tmp_path, workers=1, uids=lease)
    assert "bubblewrap sandbox" in sandbox.preflight(config, [REPO_ROOT / "solutions", REPO_ROOT / "autograder"])
    with pytest.raises(GradingError, match="sandbox exposes"):
        sandbox.preflight(config, [Path(sys.base_prefix)])   # bound in, at its own path
    with pytest.raises(GradingError, match="sandbox shows a path it must not: /proc/self/mountinfo names"):
        # the venv is seen at /opt/venv, but a bind mount's source path shows in mountinfo's "root" field
        sandbox.preflight(config, [Path(os.path.realpath(sys.prefix))])


@needs_bwrap
def test_the_sandbox_cannot_import_the_reference_implementation(tmp_path, lease):
    config = sandbox.make_config(sandbox.find_bwrap(), sandbox.Limits(), tmp_path, workers=1, uids=lease,
                                 modules=["attention_course.functional"])
    report = sandbox.probe(config, [])
    assert report["importable"] == [], "the tracks (and what stands on them) are out of reach"
    assert report["modules"] == sandbox.library_modules(["attention_course.functional"])
    assert report["pid"] == 1, "the sandbox's command is pid 1: /proc shows no bwrap command line"
    assert report["writable"] == [], "outside /tmp and the working folder, nothing is writable"


def test_preflight_refuses_a_broken_bwrap(tmp_path, lease):
    config = sandbox.make_config("/bin/false", sandbox.Limits(), tmp_path, workers=1, uids=lease)
    with pytest.raises(GradingError, match="sandbox does not work"):
        sandbox.preflight(config, [])


def test_find_bwrap_honours_the_override(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOGRADER_BWRAP", str(tmp_path / "missing" / "bwrap"))
    assert sandbox.find_bwrap() is None
    assert sandbox.find_bwrap(str(tmp_path / "nope")) is None


def _submit(course, student: str, nb) -> None:
    folder = course.root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")


@pytest.mark.parametrize("how", ["option", "environment"])
def test_grading_refuses_to_run_without_bwrap(fixture_course, tmp_path, how):
    _submit(fixture_course, "alice", fixture_course.solved(ASSIGNMENT))
    missing = str(tmp_path / "no" / "bwrap")
    if how == "option":
        done = fixture_course.cli("autograde", ASSIGNMENT, "--bwrap", missing)
    else:
        done = fixture_course.cli("autograde", ASSIGNMENT, env={"AUTOGRADER_BWRAP": missing})
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "bubblewrap (bwrap) not found" in done.stderr and "--unsafe-no-sandbox" in done.stderr
    assert not (fixture_course.root / "autograded").exists()
    assert not (fixture_course.root / "reports").exists()


@needs_bwrap
def test_data_files_are_read_only_in_the_working_folder(fixture_course):
    # linked into each submission's working folder from a read-only bind
    nb = fixture_course.solved("fx_scale", scale=fixture_course.solved("fx_scale").cells[1].source
                               + "\n\ntry:\n    open('scale_factor.txt', 'w')\nexcept OSError as exc:\n"
                               "    print('READ-ONLY', type(exc).__name__)")
    folder = fixture_course.root / "submitted" / "alice" / "fx_scale"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "fx_scale.ipynb")
    done = fixture_course.cli("autograde", "fx_scale", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "alice: 1/1" in done.stdout
    graded = (fixture_course.root / "autograded" / "alice" / "fx_scale" / "fx_scale.ipynb").read_text()
    assert "READ-ONLY" in graded
    assert (fixture_course.root / "release" / "fx_scale" / "scale_factor.txt").read_text() == "2.0\n"


def test_the_unsafe_flag_grades_without_a_sandbox(fixture_course, tmp_path):
    _submit(fixture_course, "alice", fixture_course.solved(ASSIGNMENT))
    done = fixture_course.cli("autograde", ASSIGNMENT, "--bwrap", str(tmp_path / "no" / "bwrap"),
                              "--unsafe-no-sandbox", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "UNSANDBOXED" in done.stdout
    report = json.loads((fixture_course.root / "reports" / f"{ASSIGNMENT}.json").read_text())
    assert report["students"]["alice"]["score"] == 5.0
