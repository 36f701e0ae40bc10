"""The sandbox the student's code runs in: bubblewrap, an unprivileged uid, resource limits.

The zygote (``runner.py``) runs as::

    bwrap  <namespaces: ipc pid net uts cgroup>  --die-with-parent --new-session --clearenv
           <read-only: /usr, the Python installation, the venv, the attention_course package folder,
            runner.py and wire.py in /grader, the assignment's data files in /grader-data>
           <synthetic /etc/passwd, /etc/group, /etc/hosts; the real /etc/ld.so.cache and /etc/fonts>
           --dev /dev --proc /proc --tmpfs /tmp (size-limited) --tmpfs <the working folder> (size-limited)
      -- setpriv --reuid U --regid U --clear-groups --no-new-privs (drop every capability)
      -- prlimit --as --cpu --nproc --fsize --nofile --core=0
      -- <venv>/bin/python /grader/runner.py --control-fd N --sandboxed ...

Nothing from outside is writable. Its only channel out is the control socket the judge passed
in (fd N), and for each submission a socket of that submission's own.

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
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import GradingError

UID_BASE = 61000
MiB = 1024 * 1024


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
    """Folders of installed packages outside the venv and the Python installation: the course
    package's folder when it is installed editable, and site folders that a ``.pth`` adds (a
    course hub's users' environment loads the course's packages that way, see hub.py)."""
    inside = [os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]
    folders: list[str] = []
    spec = importlib.util.find_spec("attention_course")
    if spec is not None and spec.submodule_search_locations:
        folders.append(os.path.realpath(list(spec.submodule_search_locations)[0]))
    user_site = os.path.realpath(site.getusersitepackages())
    for entry in sys.path:
        path = os.path.realpath(entry or ".")
        if os.path.basename(path) in ("site-packages", "dist-packages") and os.path.isdir(path) \
                and path != user_site:
            folders.append(path)
    return tuple(dict.fromkeys(f for f in folders if not any(_inside(f, p) for p in inside)))


def make_config(bwrap: str | None, limits: Limits, run_dir: Path, workers: int,
                uids: list[int] | tuple[int, ...] = ()) -> SandboxConfig:
    """The sandbox of one run; as root, ``uids`` (one per worker, from ``UidLease``) run the sandboxes."""
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
    for name in ("passwd", "group", "hosts"):
        os.chmod(etc / name, 0o644)
    os.chmod(etc, 0o755)
    return SandboxConfig(bwrap=bwrap, package_dirs=package_dirs(), etc_dir=str(etc),
                         setpriv=shutil.which("setpriv"), prlimit=shutil.which("prlimit"),
                         uids=tuple(uids), limits=limits)


def sandbox_env(config: SandboxConfig) -> dict[str, str]:
    """The sandbox's whole environment (the instructor's is not passed in)."""
    library = os.path.join(config.python_home, "lib")
    # A copied interpreter (a course hub's, see hub.py) finds its libpython only through this:
    shared = {"LD_LIBRARY_PATH": library} if os.path.realpath(config.python_home) != "/usr" and \
        any(name.startswith("libpython") for name in (os.listdir(library) if os.path.isdir(library) else [])) else {}
    return {
        **shared,
        "PATH": f"{config.venv}/bin:/usr/local/bin:/usr/bin:/bin",
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
            f"--nofile={limits.open_files}", "--core=0", "--"]


def bwrap_argv(config: SandboxConfig, *, workdir: str, runtime_dir: str | None, uid: int | None,
               command: list[str], files: tuple[str, ...] | list[str] = (),
               read_only: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """The full bubblewrap command line around ``command`` (run inside, as the sandbox uid).

    ``workdir`` is a fresh size-limited tmpfs inside the sandbox (its working folder), holding
    read-only binds of ``files`` (the assignment's data files); ``runtime_dir``, if given, is the
    one folder bound read-write from outside; ``read_only`` binds more (outside path, inside path).
    """
    assert config.bwrap is not None
    argv = [config.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session",
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
        argv += ["--ro-bind", os.path.join(config.etc_dir, name), f"/etc/{name}"]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--ro-bind-try", "/etc/fonts", "/etc/fonts",
             "--ro-bind-try", "/etc/localtime", "/etc/localtime"]

    installed: list[str] = []
    for path in (config.python_home, config.venv, *config.package_dirs):
        path = os.path.realpath(path)
        if not any(_inside(path, p) for p in ["/usr", *installed]):
            installed.append(path)
    workdir = os.path.realpath(workdir)
    writable = [os.path.realpath(runtime_dir)] if runtime_dir else []
    extra = [(os.path.realpath(outside), inside) for outside, inside in read_only]
    # bwrap creates missing parents with mode 0700, which the unprivileged uid could not
    # traverse: create every parent first, world-readable.
    made = {"/", "/usr", "/tmp", "/etc", "/dev", "/proc"}
    for path in installed + writable + [workdir] + [inside for _, inside in extra]:
        parents = []
        parent = os.path.dirname(path)
        while parent not in made and parent != "/":
            parents.append(parent)
            parent = os.path.dirname(parent)
        for parent in reversed(parents):
            argv += ["--perms", "0755", "--dir", parent]
            made.add(parent)
        made.add(path)
    for path in installed:
        argv += ["--ro-bind", path, path]
    for path in writable:
        argv += ["--bind", path, path]
    for outside, inside in extra:
        argv += ["--ro-bind", outside, inside]
    argv += ["--perms", "1777", "--size", str(config.limits.work_mb * MiB), "--tmpfs", workdir]
    for file in files:
        argv += ["--ro-bind", os.path.realpath(file), os.path.join(workdir, os.path.basename(file))]
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


GRADER_FILES = ("runner.py", "wire.py")   # what of the autograder the sandbox sees: the runner, nothing else
INSIDE_GRADER = "/grader"
INSIDE_DATA = "/grader-data"


def runner_argv(config: SandboxConfig, *, uid: int | None, work_dir: str, data_dir: str | None,
                preload: list[str], control_fd: int) -> list[str]:
    """The command that starts the zygote (``runner.py``) in its sandbox, its control socket on ``control_fd``.

    Inside: the runner and the wire format, read-only in ``/grader``; the assignment's data files,
    read-only in ``/grader-data`` (copied into each submission's working folder); ``work_dir``, a
    size-limited tmpfs where each submission gets a fresh folder. Unsandboxed, the same command
    runs on the real paths, with the resource limits only.
    """
    here = Path(__file__).resolve().parent
    if config.sandboxed:
        binds = tuple((str(here / name), f"{INSIDE_GRADER}/{name}") for name in GRADER_FILES)
        if data_dir:
            binds += ((data_dir, INSIDE_DATA),)
        command = [config.python, f"{INSIDE_GRADER}/runner.py", "--work", os.path.realpath(work_dir),
                   "--preload", ",".join(preload), "--control-fd", str(control_fd), "--sandboxed"]
        if data_dir:
            command += ["--data", INSIDE_DATA]
        return bwrap_argv(config, workdir=work_dir, runtime_dir=None, uid=uid, command=command, read_only=binds)
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
import json, os, sys
import IPython, numpy, attention_course
hidden = [p for p in json.loads(sys.argv[1]) if os.path.exists(p)]
open("probe", "w").write("ok")
print(json.dumps({"uid": os.getuid(), "visible": hidden, "cwd": os.getcwd()}))
"""


def preflight(config: SandboxConfig, must_not_see: list[Path]) -> str:
    """Run one tiny sandbox before grading: it must start, import what the runner needs, and see none of ``must_not_see``.

    Returns a one-line description of the sandbox; raises GradingError when it does not work.
    """
    if not config.sandboxed:
        return "UNSANDBOXED: student code runs as this user, with only resource limits"
    with tempfile.TemporaryDirectory(prefix="ag-probe-") as tmp:
        workdir, runtime = Path(tmp) / "work", Path(tmp) / "run"
        uid = config.uid(0)
        prepare_dirs(config, uid, workdir, runtime)
        argv = bwrap_argv(config, workdir=str(workdir), runtime_dir=str(runtime), uid=uid,
                          command=[config.python, "-c", _PROBE, json.dumps([str(p) for p in must_not_see])])
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GradingError(f"sandbox does not start ({config.bwrap}): {exc}") from None
        try:
            report = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
        except (ValueError, IndexError):
            report = None
        if report is None or report.get("cwd") != os.path.realpath(workdir):
            lines = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()
            raise GradingError(f"sandbox does not work ({config.bwrap}): {lines[-1]}")
    if report["visible"]:
        raise GradingError(f"sandbox exposes {report['visible'][0]}; refusing to grade")
    who = f"uid {report['uid']}" + (" (dropped from root)" if config.privileged else " (user namespace)")
    limits = config.limits
    tree = (f"{tree_memory_limit(limits) // MiB} MiB per worker (cgroup)" if memory_cgroup() is not None
            else "no cgroup memory cap (rlimits only)")
    return (f"bubblewrap sandbox, {who}; limits: {limits.memory_mb} MiB address space per process, {tree}, "
            f"{limits.cpu_seconds} s CPU, {limits.processes} processes, /tmp and working folder "
            f"{limits.tmp_mb}+{limits.work_mb} MiB")
