"""The sandbox the student's code runs in: bubblewrap, an unprivileged uid, resource limits.

The zygote (``runner.py``) runs as::

    bwrap  <namespaces: ipc pid net uts cgroup>  --as-pid-1 --die-with-parent --new-session --clearenv
           <read-only: /usr, the Python installation, the venv, runner.py and wire.py in /grader, the
            assignment's data files in /grader-data>
           <the course package: only the *sandbox library*, a copy of the modules the notebook's
            read-only cells import (data sets, checks, stateless building blocks), bound over every
            place the package is installed; never the tracks or anything that computes an answer>
           <synthetic /etc/passwd, /etc/group, /etc/hosts; the real /etc/ld.so.cache and /etc/fonts>
           --dev /dev --proc /proc --tmpfs /tmp (size-limited) --tmpfs /sandbox (size-limited)
      -- setpriv --reuid U --regid U --clear-groups --no-new-privs (drop every capability)
      -- prlimit --as --cpu --nproc --fsize --nofile --msgqueue=0 --core=0
      -- <venv>/bin/python /grader/runner.py --control-fd N --sandboxed ...

Nothing from outside is writable. Its only channel out is the control socket the judge passed
in (fd N), and for each submission a socket of that submission's own. The runner is pid 1 of the
sandbox's pid namespace (``--as-pid-1``): ``/proc`` shows the sandbox's own processes only, and
no command line there holds a path of the course (the working folder is ``/sandbox``).

Run as root (CI, the course machine), bwrap creates no user namespace and ``setpriv`` drops to a
uid of its own per worker (leased from 61000-61999 for the run): outside the sandbox that uid owns
nothing and is not root, so file permissions apply on top of the mounts, and ``RLIMIT_NPROC``
(which the kernel never enforces for uid 0) bounds a fork bomb, per worker. Run as a normal user,
bwrap maps the user's own uid in a new user namespace instead; the limits are the same.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import GradingError

UID_BASE = 61000
MiB = 1024 * 1024

GRADER_FILES = ("runner.py", "wire.py", "gradients.py")   # what of the autograder the sandbox sees
INSIDE_GRADER = "/grader"
INSIDE_DATA = "/grader-data"
INSIDE_WORK = "/sandbox"                  # the working folder's tmpfs: no path of the course in /proc
INSIDE_VENV = "/opt/venv"                 # where the sandbox sees the venv (sys.prefix, the runner's path)
INSIDE_LIBRARY = "/opt/course"            # the sandbox library: /opt/course/attention_course
STAGED_BUDGET = 64 * MiB                  # what may be copied into a sandbox's root (data files)


@dataclass(frozen=True)
class Limits:
    """Per-sandbox limits. ``cpu_seconds`` and ``memory_mb`` are per process (RLIMIT_CPU, RLIMIT_AS)."""

    memory_mb: int = 4096
    cpu_seconds: int = 900
    processes: int = 256       # tasks (threads count) of the sandbox uid
    file_mb: int = 256         # largest file the student's code may write
    tmp_mb: int = 256          # size of the sandbox's /tmp (a tmpfs, so it is memory)
    work_mb: int = 256         # size of the working folder (a tmpfs too: nothing reaches the disk)
    open_files: int = 1024


@dataclass(frozen=True)
class SandboxConfig:
    """Everything a worker needs to build the sandbox's command; JSON-serialisable."""

    bwrap: str | None                   # None: no sandbox (--unsafe-no-sandbox)
    python: str = sys.executable
    venv: str = sys.prefix
    python_home: str = sys.base_prefix
    package_dirs: tuple[str, ...] = ()
    etc_dir: str = ""                   # synthetic passwd/group/hosts for the sandbox
    setpriv: str | None = None
    prlimit: str | None = None
    privileged: bool = field(default_factory=lambda: os.geteuid() == 0)
    uids: tuple[int, ...] = ()          # root mode: one leased uid per worker (see claim_uids)
    limits: Limits = Limits()
    library: str = ""                   # the sandbox library: a folder holding the offered attention_course
    overlays: tuple[str, ...] = ()      # where the real package is installed: hidden (an empty folder) in each
    withheld: tuple[str, ...] = ()      # packages that differentiate, hidden for a NumPy exercise (see WITHHELD)

    @property
    def relocated(self) -> bool:
        """Whether the venv is seen inside at ``INSIDE_VENV`` (no path of the machine's on the runner's
        command line, in ``sys.prefix`` or ``PATH``): a real virtual environment whose interpreter is in
        it, outside /usr and the Python installation."""
        venv, home = os.path.realpath(self.venv), os.path.realpath(self.python_home)
        return (self.sandboxed and os.path.isfile(os.path.join(self.venv, "pyvenv.cfg"))
                and _inside(os.path.abspath(self.python), os.path.abspath(self.venv))
                and not _inside(venv, "/usr") and not _inside(venv, home) and not _inside(home, venv))

    def inside(self, path: str) -> str:
        """Where a path of this machine is seen inside the sandbox (the venv's paths move to
        ``INSIDE_VENV``; everything else bound keeps its path)."""
        if self.relocated:
            for venv in (os.path.abspath(self.venv), os.path.realpath(self.venv)):
                if _inside(path, venv):
                    return INSIDE_VENV + path[len(venv):]
        return path

    @property
    def inside_python(self) -> str:
        return self.inside(os.path.abspath(self.python))

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "SandboxConfig":
        data = dict(data)
        data["limits"] = Limits(**data["limits"])
        data["package_dirs"] = tuple(data["package_dirs"])
        data["uids"] = tuple(data["uids"])
        data["overlays"] = tuple(data.get("overlays", ()))
        data["withheld"] = tuple(data.get("withheld", ()))
        return cls(**data)

    def uid(self, worker: int) -> int | None:
        """The uid the sandbox runs as (root mode only; otherwise the caller's own)."""
        return self.uids[worker] if (self.sandboxed and self.privileged) else None


class UidLease:
    """uids held for one grading run: a lock file per uid, released when the run (or process) ends.

    Two grading runs on one machine (two courses, or CI next to an instructor) never share a uid,
    so one run's cleanup (killing every process of its uid) and process limit never touch another's.
    """

    LOCK_DIR = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"

    def __init__(self, count: int, base: int = UID_BASE, span: int = 1000) -> None:
        self.handles = []
        self.uids: list[int] = []
        for uid in range(base, base + span):
            if len(self.uids) == count:
                break
            handle = open(os.path.join(self.LOCK_DIR, f"autograder-uid-{uid}.lock"), "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self.handles.append(handle)
            self.uids.append(uid)
        if len(self.uids) < count:
            self.release()
            raise GradingError(f"sandbox: no free uid in {base}..{base + span - 1} (too many grading runs at once)")

    def release(self) -> None:
        for handle in self.handles:
            handle.close()
        self.handles, self.uids = [], []


def memory_cgroup() -> Path | None:
    """This process's memory cgroup folder, when new cgroups with a memory limit can be made in it.

    cgroup v1 (a ``memory`` hierarchy) or v2 (``memory`` enabled for children). None where there is
    none, or it is not writable (not root, no delegation): the rlimits still apply.
    """
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (folder / "memory.limit_in_bytes").exists() and os.access(folder, os.W_OK):
                return folder
    for line in lines:
        if line.startswith("0::"):
            folder = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            try:
                enabled = (folder / "cgroup.subtree_control").read_text().split()
            except OSError:
                return None
            if "memory" in enabled and os.access(folder, os.W_OK):
                return folder
    return None


def enter_memory_cgroup(limit_bytes: int) -> Path | None:
    """Move this process (and so every sandbox it starts) into a new cgroup capped at ``limit_bytes``.

    The per-process RLIMIT_AS does not bound a tree (a fork bomb of big allocations); this does:
    past the cap, the kernel's OOM killer ends a process of this cgroup only. Returns the cgroup.
    """
    base = memory_cgroup()
    if base is None:
        return None
    folder = base / f"autograder-{os.getpid()}"
    try:
        folder.mkdir(exist_ok=True)
        limit_file = "memory.limit_in_bytes" if (folder / "memory.limit_in_bytes").exists() else "memory.max"
        (folder / limit_file).write_text(str(limit_bytes))
        if (folder / "memory.swap.max").exists():
            (folder / "memory.swap.max").write_text("0")
        (folder / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        try:
            folder.rmdir()
        except OSError:
            pass
        return None
    return folder


def remove_memory_cgroup(pid: int) -> None:
    """Remove the cgroup of a worker that has exited (once its last sandboxed process is gone)."""
    base = memory_cgroup()
    folder = base / f"autograder-{pid}" if base is not None else None
    for _ in range(20):
        if folder is None or not folder.exists():
            return
        try:
            folder.rmdir()
            return
        except OSError:
            time.sleep(0.05)


def tree_memory_limit(limits: "Limits") -> int:
    """The cap of one worker's cgroup: the sandbox's address space, both tmpfs, and the worker itself."""
    return (limits.memory_mb + limits.tmp_mb + limits.work_mb + 512) * MiB


def find_bwrap(explicit: str | None = None) -> str | None:
    """``explicit``, else $AUTOGRADER_BWRAP, else bwrap on PATH; None when that is not an executable file."""
    candidate = explicit or os.environ.get("AUTOGRADER_BWRAP") or shutil.which("bwrap")
    if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return os.path.abspath(candidate)
    return None


def package_dirs() -> tuple[str, ...]:
    """Site folders outside the venv and the Python installation that a ``.pth`` adds (a course
    hub's users' environment loads the course's packages that way, see hub.py). The course package
    itself is never bound from where it is installed: the sandbox library is bound there instead."""
    inside = [os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]
    folders: list[str] = []
    user_site = os.path.realpath(site.getusersitepackages())
    for entry in sys.path:
        path = os.path.realpath(entry or ".")
        if os.path.basename(path) in ("site-packages", "dist-packages") and os.path.isdir(path) \
                and path != user_site:
            folders.append(path)
    return tuple(dict.fromkeys(f for f in folders if not any(_inside(f, p) for p in inside)))


# --- the sandbox library: what of the course package the sandbox offers --------------------------

PACKAGE = "attention_course"
# What a notebook's read-only cells may import, and so what the sandbox may offer: the data sets, the
# checks, the stateless building blocks. Never a track, nor anything else that computes an answer.
OFFERABLE = ("attention_course", "attention_course.functional", "attention_course.data",
             "attention_course.data.*", "attention_course.testing", "attention_course.testing.checks",
             "attention_course.testing.gradcheck", "attention_course.core", "attention_course.core.shapes",
             "attention_course.viz.heatmap")
# Always offered: the package's top level. (The checks only where a read-only cell imports them: they
# hold numerical gradients; the runner's ``vjp`` is its own, gradients.py.)
ALWAYS_OFFERED = ("attention_course",)

# What differentiates, never in a NumPy exercise's sandbox (whose backward pass is written by hand):
# autograd (torch, JAX, autograd, TensorFlow), symbolic (SymPy) and numerical differentiation
# (mpmath, SciPy, numdifftools, findiff). Where one is installed, an empty read-only folder hides it,
# and its ``import`` raises an ImportError that says why.
WITHHELD = ("torch", "functorch", "torchgen", "jax", "jaxlib", "autograd", "tensorflow", "sympy", "mpmath",
            "scipy", "numdifftools", "findiff")
WITHHELD_MESSAGE = ("{name} is not available when this exercise is graded: its backward pass is to be written "
                    "by hand (what you may use: NumPy and what the setup cell imports)")


def withheld_locations(names=WITHHELD) -> tuple[str, ...]:
    """Where each of ``names`` that this interpreter could import is installed (a package's folders,
    a module's file), found without importing it."""
    found: list[str] = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            found += [os.path.realpath(path) for path in spec.submodule_search_locations]
        elif spec.origin and os.path.isfile(spec.origin):
            found.append(os.path.realpath(spec.origin))
    return tuple(dict.fromkeys(found))


def _offerable(name: str) -> bool:
    return any(name == pattern or (pattern.endswith(".*") and name.startswith(pattern[:-1]))
               for pattern in OFFERABLE)


def _module_file(root: Path, name: str) -> Path | None:
    """The source file of ``attention_course.<...>`` under the package folder ``root``."""
    parts = name.split(".")[1:]
    folder = root.joinpath(*parts)
    if (folder / "__init__.py").is_file():
        return folder / "__init__.py"
    file = root.joinpath(*parts[:-1], parts[-1] + ".py") if parts else None
    return file if file is not None and file.is_file() else None


def _imports_of(path: Path, name: str, root: Path) -> set[str]:
    """The ``attention_course`` modules a module's source imports (absolute and relative)."""
    import ast

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            found.add(target)
            for alias in node.names:  # ``from attention_course import data``: a submodule, when it is one
                if _module_file(root, f"{target}.{alias.name}") is not None:
                    found.add(f"{target}.{alias.name}")
    return found


def library_modules(requested, root: Path | None = None) -> list[str]:
    """Every module the sandbox library needs for ``requested`` (and ``ALWAYS_OFFERED``): their parent
    packages and what they import, recursively. Raises ``GradingError`` naming a module that may not
    be offered (a track, or anything not in ``OFFERABLE``) and what asked for it."""
    root = Path(root) if root is not None else package_root()
    wanted = [(name, "the grader") for name in ALWAYS_OFFERED] + [(name, "a read-only cell") for name in requested]
    done: dict[str, str] = {}
    while wanted:
        name, by = wanted.pop()
        if name in done:
            continue
        if not _offerable(name):
            raise GradingError(f"{by} imports {name}, which the grading sandbox never offers (it offers "
                               "the data sets, the checks and attention_course.functional): import it in "
                               "a test cell, which runs in the judge, or use what the sandbox offers")
        path = _module_file(root, name)
        if path is None:
            raise GradingError(f"{by} imports {name}, which is not a module of {root}")
        done[name] = str(path)
        parents = name.split(".")
        wanted += [(".".join(parents[:i]), name) for i in range(1, len(parents))]
        wanted += [(other, name) for other in _imports_of(path, name, root)]
    return sorted(done)


def package_root() -> Path:
    """The folder of the installed ``attention_course`` package (what the library is copied from)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise GradingError(f"the {PACKAGE} package is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def build_library(target: Path, requested=()) -> Path:
    """Copy the modules the sandbox may offer into ``target/attention_course``; returns ``target``.

    Only source files are copied (no ``__pycache__``), world-readable, so the sandbox's uid reads them.
    """
    root = package_root()
    for name in library_modules(requested, root):
        source = _module_file(root, name)
        destination = target / PACKAGE / source.relative_to(root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
        os.chmod(destination, 0o644)
    for folder in [target, *(p for p in target.rglob("*") if p.is_dir())]:
        os.chmod(folder, 0o755)
    return target


def package_locations() -> tuple[str, ...]:
    """Every folder the sandbox's interpreter could import ``attention_course`` from: where it is
    installed (editable or not) and any ``attention_course`` folder on the import path. The sandbox
    library is bound over each, so the real package is nowhere to be found inside."""
    found: list[str] = [str(package_root())]
    for entry in sys.path:
        candidate = os.path.join(entry or ".", PACKAGE)
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            found.append(os.path.realpath(candidate))
    return tuple(dict.fromkeys(found))


def make_config(bwrap: str | None, limits: Limits, run_dir: Path, workers: int,
                uids: list[int] | tuple[int, ...] = (), modules=(), autodiff: bool = False) -> SandboxConfig:
    """The sandbox of one run; as root, ``uids`` (one per worker, from ``UidLease``) run the sandboxes.

    ``modules``: the ``attention_course`` modules the notebooks' read-only cells import; the sandbox
    library (in ``run_dir/lib``) holds those and what they need, and nothing else of the package.
    ``autodiff``: the notebooks use torch (a torch exercise); otherwise every package of ``WITHHELD``
    is hidden, torch included.
    """
    etc = run_dir / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    users = ["root:x:0:0:root:/root:/usr/sbin/nologin", "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"]
    groups = ["root:x:0:", "nogroup:x:65534:"]
    if os.geteuid() == 0 and bwrap is not None and len(uids) < workers:
        raise GradingError(f"sandbox: {workers} worker(s) need as many uids, got {len(uids)}")
    ids = list(uids) if os.geteuid() == 0 else [os.getuid()]
    for uid in ids:
        users.append(f"student:x:{uid}:{uid if os.geteuid() == 0 else os.getgid()}:student:/tmp:/usr/sbin/nologin")
        groups.append(f"student:x:{uid if os.geteuid() == 0 else os.getgid()}:")
    (etc / "passwd").write_text("\n".join(users) + "\n")
    (etc / "group").write_text("\n".join(groups) + "\n")
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    library = build_library(run_dir / "lib", modules)
    return SandboxConfig(bwrap=bwrap, package_dirs=package_dirs(), etc_dir=str(etc),
                         setpriv=shutil.which("setpriv"), prlimit=shutil.which("prlimit"),
                         uids=tuple(uids), limits=limits, library=str(library), overlays=package_locations(),
                         withheld=() if autodiff else withheld_locations())


def sandbox_env(config: SandboxConfig) -> dict[str, str]:
    """The sandbox's whole environment (the instructor's is not passed in)."""
    library = os.path.join(config.python_home, "lib")
    # A copied interpreter (a course hub's, see hub.py) finds its libpython only through this:
    shared = {"LD_LIBRARY_PATH": library} if os.path.realpath(config.python_home) != "/usr" and \
        any(name.startswith("libpython") for name in (os.listdir(library) if os.path.isdir(library) else [])) else {}
    return {
        **shared,
        "PATH": f"{config.inside(os.path.abspath(config.venv))}/bin:/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": INSIDE_LIBRARY,     # the sandbox library, first on the path
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "IPYTHONDIR": "/tmp/ipython",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        # One BLAS/OpenMP thread per sandbox: the workers are the parallelism.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NBGRADER_EXECUTION": "autograde",
    }


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _limits_argv(config: SandboxConfig) -> list[str]:
    limits = config.limits
    if not config.prlimit:
        return []
    return [config.prlimit, f"--as={limits.memory_mb * MiB}", f"--cpu={limits.cpu_seconds}",
            f"--nproc={limits.processes}", f"--fsize={limits.file_mb * MiB}",
            f"--nofile={limits.open_files}", "--msgqueue=0", "--core=0", "--"]


class Staged:
    """Files copied into the sandbox's own root (bubblewrap's ``--file``) rather than bound: no path of
    this machine's (the run folder, the checkout's autograder/) is a bind source that the sandbox's
    ``/proc/self/mountinfo`` would show. Holds the descriptors bubblewrap reads them from: pass
    ``fds`` to the process that starts it, then ``close()``."""

    def __init__(self, budget: int = STAGED_BUDGET) -> None:
        self.argv: list[str] = []
        self.fds: list[int] = []
        self.left = budget

    def file(self, source: str, inside: str, mode: str = "0644") -> None:
        fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        self.fds.append(fd)
        self.left -= os.fstat(fd).st_size
        if self.left < 0:
            self.close()
            raise GradingError(f"sandbox: the files copied into the sandbox (the assignment's data files) are over "
                               f"{STAGED_BUDGET // MiB} MiB")
        self.argv += ["--perms", mode, "--file", str(fd), inside]

    def memory(self, content: str) -> int:
        """A descriptor bubblewrap reads ``content`` from."""
        fd = os.memfd_create("staged", os.MFD_CLOEXEC)
        os.write(fd, content.encode())
        os.lseek(fd, 0, os.SEEK_SET)
        self.fds.append(fd)
        return fd

    def text(self, content: str, inside: str) -> None:
        self.argv += ["--perms", "0644", "--file", str(self.memory(content)), inside]

    def tree(self, source: str, inside: str) -> None:
        """A folder, its subfolders and files (no links followed)."""
        self.argv += ["--perms", "0755", "--dir", inside]
        for entry in sorted(os.scandir(source), key=lambda e: e.name):
            target = f"{inside}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                self.tree(entry.path, target)
            elif entry.is_file(follow_symlinks=False):
                self.file(entry.path, target)

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


def bwrap_argv(config: SandboxConfig, *, workdir: str, uid: int | None, command: list[str],
               staged: Staged, data_dir: str | None = None) -> list[str]:
    """The full bubblewrap command line around ``command`` (run inside, as the sandbox uid).

    ``workdir`` is a fresh size-limited tmpfs inside the sandbox (its working folder). The runner,
    the sandbox library, ``/etc``'s synthetic files and ``data_dir`` (the assignment's data files, at
    ``INSIDE_DATA``) are copied in (``staged``), not bound. What is bound, read-only: /usr, the
    Python installation, the venv (at ``INSIDE_VENV``), site folders a ``.pth`` adds.
    """
    assert config.bwrap is not None
    argv = [config.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--as-pid-1", "--die-with-parent", "--new-session",
            "--clearenv"]
    if not config.privileged:
        argv += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid()), "--disable-userns"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--dev", "/dev", "--proc", "/proc",
             "--perms", "1777", "--size", str(config.limits.tmp_mb * MiB), "--tmpfs", "/tmp",
             "--perms", "0755", "--dir", "/etc"]
    for name in ("passwd", "group", "hosts"):
        staged.file(os.path.join(config.etc_dir, name), f"/etc/{name}")
    argv += staged.argv
    staged.argv = []
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--ro-bind-try", "/etc/fonts", "/etc/fonts",
             "--ro-bind-try", "/etc/localtime", "/etc/localtime"]

    binds: list[tuple[str, str]] = []   # (outside, inside)
    if config.relocated:
        binds.append((os.path.realpath(config.venv), INSIDE_VENV))
    for path in (config.python_home, config.venv, *config.package_dirs):
        path = os.path.realpath(path)
        if not any(_inside(path, p) for p in ["/usr", *(outside for outside, _ in binds)]):
            binds.append((path, path))
    # The course package: the real one is hidden wherever it is installed in a bound folder (an empty
    # read-only folder), and the sandbox library is copied to INSIDE_LIBRARY, first on PYTHONPATH.
    # Every package that differentiates is hidden the same way in a NumPy exercise (config.withheld).
    hidden = [(path, None) for path in config.overlays] + \
        [(path, os.path.basename(path).partition(".")[0]) for path in config.withheld]
    hidden = [(path, name) for path, name in hidden if any(_inside(path, outside) for outside, _ in binds)]
    workdir = os.path.realpath(workdir)
    # bwrap creates missing parents with mode 0700, which the unprivileged uid could not
    # traverse: create every parent first, world-readable.
    made = {"/", "/usr", "/tmp", "/etc", "/dev", "/proc"}
    for path in [inside for _, inside in binds] + [workdir]:
        parents = []
        parent = os.path.dirname(path)
        while parent not in made and parent != "/" and not any(_inside(parent, i) for _, i in binds):
            parents.append(parent)
            parent = os.path.dirname(parent)
        for parent in reversed(parents):
            argv += ["--perms", "0755", "--dir", parent]
            made.add(parent)
        made.add(path)
    for outside, inside in binds:
        argv += ["--ro-bind", outside, inside]
    remount = []
    for path, name in hidden:
        inside = config.inside(path)
        blocker = f"raise ImportError({WITHHELD_MESSAGE.format(name=name)!r})\n" if name else None
        if os.path.isdir(path):
            argv += ["--perms", "0755", "--tmpfs", inside]
            if blocker:
                staged.text(blocker, f"{inside}/__init__.py")
                argv += staged.argv
                staged.argv = []
            remount.append(inside)
        else:  # a module that is one file
            argv += ["--ro-bind-data", str(staged.memory(blocker or "")), inside]
    if not config.library:
        raise GradingError("sandbox: no sandbox library (make the config with make_config)")
    staged.argv += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", INSIDE_LIBRARY]
    staged.tree(os.path.join(config.library, PACKAGE), f"{INSIDE_LIBRARY}/{PACKAGE}")
    if data_dir:
        staged.tree(data_dir, INSIDE_DATA)
    argv += staged.argv
    staged.argv = []
    argv += ["--perms", "1777", "--size", str(config.limits.work_mb * MiB), "--tmpfs", workdir]
    # The root (bwrap's own tmpfs, with the folders and files made above), /dev and the hiding
    # folders read-only, after the last mount: in a user namespace they are the sandbox uid's, and
    # what a submission wrote there would be there for the next. Only /tmp and the working folder
    # stay writable (and the device nodes, which are mounts of their own).
    for path in ["/", "/dev", *remount]:
        argv += ["--remount-ro", path]
    argv += ["--chdir", workdir]
    for key, value in sandbox_env(config).items():
        argv += ["--setenv", key, value]
    argv.append("--")
    if config.privileged:
        if not config.setpriv:
            raise GradingError("sandbox: setpriv (util-linux) not found; it drops root inside the sandbox")
        argv += [config.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
    return argv + _limits_argv(config) + command


def runner_argv(config: SandboxConfig, *, uid: int | None, work_dir: str, data_dir: str | None,
                preload: list[str], control_fd: int, staged: Staged | None = None) -> list[str]:
    """The command that starts the zygote (``runner.py``) in its sandbox, its control socket on ``control_fd``.

    Inside: the runner, the wire format and the gradients, copied into ``/grader``; the assignment's
    data files, copied into ``/grader-data`` (linked into each submission's working folder);
    ``/sandbox``, a size-limited tmpfs where each submission gets a fresh folder. Unsandboxed, the
    same command runs on the real paths (``work_dir`` is the working folder), with the resource
    limits only. Sandboxed, ``staged`` collects the descriptors the command needs (pass them on).
    """
    here = Path(__file__).resolve().parent
    if config.sandboxed:
        if staged is None:
            raise GradingError("sandbox: runner_argv needs a Staged to copy the runner into the sandbox")
        staged.argv += ["--perms", "0755", "--dir", INSIDE_GRADER]
        for name in GRADER_FILES:
            staged.file(str(here / name), f"{INSIDE_GRADER}/{name}")
        command = [config.inside_python, f"{INSIDE_GRADER}/runner.py", "--work", INSIDE_WORK,
                   "--preload", ",".join(preload), "--control-fd", str(control_fd), "--sandboxed"]
        if data_dir:
            command += ["--data", INSIDE_DATA]
        return bwrap_argv(config, workdir=INSIDE_WORK, uid=uid, command=command, staged=staged, data_dir=data_dir)
    command = [config.python, str(here / "runner.py"), "--work", work_dir, "--preload", ",".join(preload),
               "--control-fd", str(control_fd)] + (["--data", data_dir] if data_dir else [])
    prefix = [config.setpriv, "--pdeathsig=KILL", "--"] if config.setpriv else []
    return prefix + _limits_argv(config) + command


def prepare_dirs(config: SandboxConfig, uid: int | None, *paths: Path) -> None:
    """Make folders the sandboxed process's own (it runs as ``uid``)."""
    for path in paths:
        path.mkdir(parents=True, exist_ok=True)
        if uid is not None:
            for dirpath, dirnames, filenames in os.walk(path):
                os.chown(dirpath, uid, uid)
                for name in filenames:
                    os.chown(os.path.join(dirpath, name), uid, uid)
            os.chmod(path, 0o700)


_PROBE = """
import importlib, importlib.util, json, os, pkgutil, sys
import IPython, numpy, attention_course
secrets, never, withheld = json.loads(sys.stdin.read())  # (not on the command line, which it checks)
hidden = [p for p in secrets if os.path.exists(p)]
forbidden = [m for m in never if importlib.util.find_spec(m) is not None]
def imports(name):
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False
modules = sorted(["attention_course"] + [m.name for m in pkgutil.walk_packages(attention_course.__path__, "attention_course.")])
open("probe", "w").write("ok")
def writable(folder):
    try:
        open(os.path.join(folder, ".probe"), "w").close()
        return True
    except OSError:
        return False
def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
shown = {"/proc/1/cmdline": read("/proc/1/cmdline"), "/proc/self/mountinfo": read("/proc/self/mountinfo"),
         "the environment": json.dumps(dict(os.environ)), "sys.path": json.dumps(sys.path + [sys.prefix, sys.executable])}
print(json.dumps({"uid": os.getuid(), "visible": hidden, "importable": forbidden, "modules": modules,
                  "differentiates": [m for m in withheld if imports(m)],
                  "mentions": sorted({f"{where} names {p}" for p in secrets for where, text in shown.items() if p in text}),
                  "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
                  "cwd": os.getcwd(), "pid": os.getpid(), "writable": [p for p in ("/", "/etc", "/dev", "/dev/shm") if writable(p)]}))
"""

# Never importable in the sandbox: the tracks and everything built on them (checked by the preflight).
NEVER_OFFERED = ("attention_course.numpy_track", "attention_course.torch_track", "attention_course.tracks",
                 "attention_course.convert", "attention_course.checkpoint", "attention_course.training",
                 "attention_course.tasks", "attention_course.cli")


def probe(config: SandboxConfig, must_not_see: list[Path]) -> dict:
    """Run one tiny sandbox as grading runs it; its report: uid, pid, which of ``must_not_see`` it
    sees (``visible``) or names in its pid 1's command line, its mounts, its environment or its
    import path (``mentions``), which of ``NEVER_OFFERED`` it can import, which of ``WITHHELD`` it can
    import where they are withheld (``differentiates``), every ``attention_course`` module it can
    import, and its open descriptors.

    Raises GradingError when the sandbox does not start or does not work.
    """
    uid = config.uid(0)
    staged = Staged()
    withheld = [name for name in WITHHELD if config.withheld and importlib.util.find_spec(name) is not None]
    try:
        argv = bwrap_argv(config, workdir=INSIDE_WORK, uid=uid, staged=staged,
                          command=[config.inside_python, "-c", _PROBE])
        question = json.dumps([[str(p) for p in must_not_see], NEVER_OFFERED, withheld])
        done = subprocess.run(argv, input=question, capture_output=True, text=True, timeout=120, pass_fds=staged.fds)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GradingError(f"sandbox does not start ({config.bwrap}): {exc}") from None
    finally:
        staged.close()
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (ValueError, IndexError):
        report = None
    if not isinstance(report, dict) or report.get("cwd") != INSIDE_WORK:
        lines = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()
        raise GradingError(f"sandbox does not work ({config.bwrap}): {lines[-1]}")
    return report


def preflight(config: SandboxConfig, must_not_see: list[Path]) -> str:
    """Run one tiny sandbox before grading: it must start, import what the runner needs, see none of
    ``must_not_see`` nor name it (pid 1's command line, mounts, environment, import path), import none
    of ``NEVER_OFFERED``, and, for a NumPy exercise, none of ``WITHHELD``.

    Returns a one-line description of the sandbox; raises GradingError when it does not work.
    """
    if not config.sandboxed:
        return "UNSANDBOXED: student code runs as this user, with only resource limits"
    report = probe(config, must_not_see)
    if report["importable"]:
        raise GradingError(f"sandbox offers {report['importable'][0]} (a reference implementation); refusing to grade")
    if report["visible"]:
        raise GradingError(f"sandbox exposes {report['visible'][0]}; refusing to grade")
    if report["mentions"]:
        raise GradingError(f"sandbox shows a path it must not: {report['mentions'][0]}; refusing to grade")
    if report["differentiates"]:
        raise GradingError(f"sandbox offers {report['differentiates'][0]} to a NumPy exercise, whose backward pass "
                           "is to be written by hand; refusing to grade")
    if report["writable"]:
        raise GradingError(f"sandbox lets a submission write to {report['writable'][0]}, where it would outlive "
                           "the submission; refusing to grade")
    who = f"uid {report['uid']}" + (" (dropped from root)" if config.privileged else " (user namespace)")
    limits = config.limits
    tree = (f"{tree_memory_limit(limits) // MiB} MiB per worker (cgroup)" if memory_cgroup() is not None
            else "no cgroup memory cap (rlimits only)")
    offers = "; torch offered" if not config.withheld else "; nothing that differentiates (a NumPy exercise)"
    return (f"bubblewrap sandbox, {who}{offers}; limits: {limits.memory_mb} MiB address space per process, {tree}, "
            f"{limits.cpu_seconds} s CPU, {limits.processes} processes, /tmp and working folder "
            f"{limits.tmp_mb}+{limits.work_mb} MiB")
