"""The course hub's fork server: each user's Jupyter server is forked from a process that has
already imported the server's code, instead of starting a fresh interpreter.

A Jupyter server's start cost about 5.6 CPU seconds here (server, first kernel and a cell),
nearly all of it imports (JupyterHub's single-user extension, which brings SQLAlchemy;
jupyter_server; JupyterLab, whose import also runs ``node`` for yarn's configuration, 0.7 CPU s;
nbgrader's extensions). A class logging in at once paid that thirty times. ``hub start`` starts
this process as root, in the users' environment, before the hub and with none of the hub's
secrets in its environment:

1. it imports the single-user server's code and the kernel's (``PRELOAD``: ipykernel, NumPy,
   the course package), refuses to go on if that started a thread, freezes what it imported
   (``gc.freeze``: the collector leaves those pages alone, so children share them), and listens
   on a unix socket in a folder only root can enter; a connection from any uid but root's is
   closed unread (``SO_PEERCRED``);
2. for each connection it forks and goes back to listening. It never reads a request: the
   token the hub makes for a server reaches the forked child only, so this process holds no
   secret of the hub's or of any user;
3. the child says at once that it is there (its pid, and a pidfd of itself): only then does the
   hub send the request (the plan of ``enter.py``, the server's environment and arguments, and the
   write end of the pipe to the user's own log, ``userlog.py``, as the server's output). The child
   closes every other descriptor, starts a session of its own, does what ``enter.py`` does
   (``enter.enter``: the user's cgroups, a private mount namespace with capped ``/tmp`` and
   ``/dev/shm``, an IPC namespace of its own, rlimits, the user's groups and uid for good, no
   capabilities left, the user's home), takes the server's environment and ``sys.path`` (without
   the fork server's PYTHONPATH), forks the user's kernel zygote (``kernels.py``), answers, and
   only then becomes dumpable by its user (a drop from root without exec leaves a process
   undumpable: until its answer is sent, nothing of the user's can reach its socket to the hub) and
   runs the server's main. The spawner polls and signals exactly that process through its pidfd,
   whatever pids are reused later.

Every wait has a deadline. If no fork server listens (no socket: it was stopped, or is being
replaced), a server starts through ``enter.py`` instead. If one is there but its child does not say
so within ``ANSWER_WITHIN`` seconds while the fork server makes no progress (stopped, hung; a busy
one is given up to ``PATIENCE``), or nobody listens on its socket (it died), the start goes the
other way too and the hub replaces the fork server (``Unresponsive``): the request was never sent,
so no server is on its way. If its child took the request but gave no server (an error, or no
answer within the start's time, after which it is killed through its pidfd), the start fails.

The children share the fork server's pages copy-on-write: a student's memory is what their
server and kernel change, the rest is counted once, in the fork server. What they also share:
the fork server's address-space layout and Python's hash seed (each user's server and kernels
have the same), as every process forked from one zygote does; ``random`` reseeds itself in a
forked child, and a kernel reseeds NumPy's global generator.

    python -P -m autograder.jupyterhub.forkserver SOCKET    (as root; hub start does it)
"""

from __future__ import annotations

import array
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from . import enter, kernels

MAX_REQUEST = 1 << 20
# In the environment of the fork server, hence of every server and kernel forked from it (a
# process's /proc/PID/environ is the one it started with): the hub's folder.
MARK = "ATTENTION_HUB_FORKS"
# Seconds for the fork server's child to say it is there. The fork server only accepts and forks
# (a few milliseconds each; a class logging in at once queues thirty), so a longer silence while
# neither it nor the children it forked for requests run means it is stopped or stuck; one that
# is busy is given up to PATIENCE.
ANSWER_WITHIN = 5.0
PATIENCE = 30.0
# What a student's server and first kernel import (the single-user server and the extensions it
# loads; the kernel and what the course's notebooks import first), in the order they load.
PRELOAD = (
    "jupyterhub.singleuser",
    "jupyterhub.singleuser.extension",
    "jupyter_server.serverapp",
    "jupyter_server_terminals",
    "jupyterlab",
    "jupyterlab.labapp",
    "jupyterlab_server",
    "nbgrader.server_extensions.assignment_list",
    "nbgrader.server_extensions.validate_assignment",
    "nbgitpuller",
    "jupytext",
    "jupyterlab_jupytext",
    "jupyter_client.provisioning",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "numpy",
    "attention_course",
    "attention_course.numpy_track",
    "autograder.jupyterhub.kernels",
)


def socket_path(hub_dir: Path) -> Path:
    return Path(hub_dir) / "run" / "forkserver.sock"


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a unix socket."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)


def peer_uid(conn: socket.socket) -> int:
    return peer_credentials(conn)[1]


def preload(names=PRELOAD) -> list[str]:
    """Import what the servers and kernels will need; the names that could not be imported."""
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an extension that is not installed is left to the server
            missing.append(name)
    return missing


def serve(path: str) -> None:
    """Listen on ``path`` (a unix socket, made root's only) and fork a server per connection. The
    socket is bound and listening under another name first: once ``path`` exists, it answers."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    staging = f"{path}.{os.getpid()}"
    if os.path.exists(staging):
        os.unlink(staging)
    old = os.umask(0o077)
    listener.bind(staging)
    os.umask(old)
    os.chmod(staging, 0o600)
    listener.listen(64)
    os.replace(staging, path)

    def reap(*_) -> None:
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return

    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"forkserver: ready on {path} (pid {os.getpid()})", flush=True)
    while True:
        conn, _ = listener.accept()
        try:
            if peer_uid(conn) != 0:
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                kernels.run_child(_server, conn)
        except OSError as exc:
            print(f"forkserver: {exc}", file=sys.stderr, flush=True)
        finally:
            conn.close()


def _received_fds(ancillary) -> list[int]:
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return list(fds)


def _receive_request(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """The hub's request and the descriptors that came with it; None if the hub gave up first."""
    try:
        data, ancillary, _flags, _ = conn.recvmsg(MAX_REQUEST, socket.CMSG_LEN(array.array("i").itemsize))
    except TimeoutError:
        return None, []
    fds = _received_fds(ancillary)
    if not data:
        return None, fds
    try:
        request = json.loads(data)
    except ValueError:
        request = None
    if not isinstance(request, dict) or not {"plan", "env", "argv"} <= set(request):
        raise SystemExit("forkserver: a request is JSON with plan, env and argv")
    return request, fds


def _server(conn: socket.socket) -> int:
    """In the forked child: say it is there, take the request, enter the user's limits, answer,
    run the server."""
    for signum in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.settimeout(30)
    pidfd = os.pidfd_open(os.getpid())
    conn.sendmsg([json.dumps({"pid": os.getpid()}).encode()],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))])
    os.close(pidfd)
    request, fds = _receive_request(conn)
    if request is None:   # the hub gave up waiting for this child: nothing to start
        return 0
    # The server's output: the pipe to the user's own log, or nowhere; its input: nothing.
    null = os.open(os.devnull, os.O_RDWR)
    output = fds[0] if fds else null
    for target, fd in ((0, null), (1, output), (2, output)):
        os.dup2(fd, target)
    keep = {0, 1, 2, conn.fileno()}
    for name in os.listdir("/proc/self/fd"):   # nothing else of the fork server's reaches the user
        if int(name) not in keep:
            try:
                os.close(int(name))
            except OSError:
                pass
    try:
        os.setsid()   # a session of its own, as the hub's Popen(start_new_session=True) gave a server
        enter.enter(request["plan"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = list(request["argv"])
        sys.argv = [argv[0], *argv[1:], *lab_folders()]
        # the path the script would have started with (not the fork server's PYTHONPATH)
        sys.path[:] = [os.path.dirname(os.path.realpath(argv[0])), *kernels.python_path(os.environ)]

        kernels.start_zygote(close=[conn.fileno()])
    except Exception as exc:  # noqa: BLE001 - the spawner reports it, in one line
        conn.sendall(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        return 1
    conn.sendall(json.dumps({"ready": True}).encode())
    conn.close()
    # Dropping root without exec left this process undumpable (its /proc files root's, no ptrace
    # even by its user): until its answer is sent, nothing of the user's may reach its socket to the
    # hub. From here on it is the user's like any process they started (exec would have made it so).
    enter.make_dumpable()
    from jupyterhub.singleuser import main

    return main() or 0


def lab_folders() -> list[str]:
    """Options that give a forked server JupyterLab's folders for its user's settings and
    workspaces, from the environment now in place (the user's). LabApp takes their defaults from
    the environment as it is imported (``Unicode(get_workspaces_dir())``), that is, here, from the
    fork server's HOME (``run/``, root's alone): every save of a student's layout or of a setting
    failed (500). A server started as a new process takes them from its user's environment, as
    these options do. None where JupyterLab was not preloaded (its import then sees the user's)."""
    if "jupyterlab.labapp" not in sys.modules:
        return []
    from jupyterlab import commands

    return [f"--LabApp.user_settings_dir={commands.get_user_settings_dir()}",
            f"--LabApp.workspaces_dir={commands.get_workspaces_dir()}"]


# --- the spawner's side -----------------------------------------------------------------------------


class NotListening(OSError):
    """No fork server answers at the path: the server may start as a new process instead (no
    request was sent, so no server is on its way)."""


class Unresponsive(NotListening):
    """A fork server is there (its socket is) but it died or stopped answering: start the server
    the other way, and replace the fork server. ``pid``: the fork server's, where known."""

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class ForkError(RuntimeError):
    """The fork server's child took the request but gave no server: the start failed, and is not
    tried again another way (the child is stopped first, if it is still there)."""


# Process states in which a fork server will not take a connection, and what they mean.
STALLED = {"": "gone", "Z": "gone", "X": "gone", "T": "stopped", "t": "stopped by a tracer"}


def _run_time(pid: int) -> tuple[str, int]:
    """The process's state (a letter of /proc/PID/stat, "" if it is gone) and the time it has run
    (nanoseconds, or clock ticks where the kernel keeps no schedstat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return "", 0
    try:
        return fields[0], int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return fields[0], int(fields[11]) + int(fields[12])


def progress(pid: int) -> tuple[str, tuple]:
    """The fork server's state, and a mark of its progress that changes with whatever work it does:
    the time it and its children still working on a request (root's: not yet their user's) have run,
    and which those children are."""
    state, spent = _run_time(pid)
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        children = []
    working = []
    for child in children:
        try:
            if Path(f"/proc/{child}/status").read_text().split("\nUid:")[1].split()[0] == "0":
                working.append(child)
                spent += _run_time(child)[1]
        except (OSError, IndexError):
            continue
    return state, (spent, tuple(working))


def _await_child(conn: socket.socket, answer_within: float, patience: float) -> tuple[int, int]:
    """The fork server's child's pid and pidfd, once it says it is there."""
    server = peer_credentials(conn)[0]
    started = time.monotonic()
    spent = progress(server)[1]
    conn.settimeout(answer_within)
    while True:
        try:
            data, ancillary, _flags, _ = conn.recvmsg(4096, socket.CMSG_LEN(array.array("i").itemsize))
            break
        except TimeoutError:
            waited = time.monotonic() - started
            state, now = progress(server)
            if state in STALLED or now == spent or waited >= patience:
                why = STALLED.get(state) or ("running no code" if now == spent else "busy, past its patience")
                raise Unresponsive(f"the fork server (pid {server}) gave no answer within {waited:.1f} s ({why})",
                                   server) from None
            spent = now
        except OSError as exc:
            raise NotListening(f"the fork server closed the connection: {exc}") from exc
    fds = _received_fds(ancillary)
    if not data:   # it closed the connection unanswered: it could not fork, or was stopped for good
        raise NotListening(f"the fork server (pid {server}) closed the connection before a child answered")
    try:
        hello = json.loads(data)
        child = int(hello["pid"])
    except (ValueError, KeyError, TypeError):
        child = None
    if child is None or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ForkError(f"the fork server's child said it was there without its pid and a pidfd: {data[:100]!r}")
    return child, fds[0]


def _stop_child(pidfd: int, wait: float = 5.0) -> None:
    """Kill the child behind ``pidfd`` (if it is still there) and wait, a while, for it to end."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        return
    select.select([pidfd], [], [], wait)


def request_server(path: str, plan: dict, env: dict[str, str], argv: list[str], output: int | None = None,
                   answer_within: float = ANSWER_WITHIN, patience: float = PATIENCE,
                   timeout: float = 60.0) -> tuple[int, int]:
    """Ask the fork server at ``path`` for a server (as root); returns its pid and a pidfd of it.

    ``output``: the descriptor the server writes its output to (the write end of the user's log,
    ``userlog.py``); None: nowhere. The request goes to the fork server's child only once the child
    has said that it is there; raises ``NotListening`` (or ``Unresponsive``) before anything was
    sent, ``ForkError`` after."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.settimeout(answer_within)
        try:
            conn.connect(path)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise NotListening(f"{path}: {exc.strerror}") from exc
        except ConnectionRefusedError as exc:   # its socket is there, nobody listens: it died
            raise Unresponsive(f"nobody listens on the fork server's socket {path}") from exc
        except TimeoutError:   # its queue of connections is full: it has stopped taking them
            raise Unresponsive(f"the fork server at {path} took no connection within {answer_within:.1f} s") from None
        except OSError as exc:
            raise NotListening(f"{path}: {exc.strerror or exc}") from exc
        child, pidfd = _await_child(conn, answer_within, patience)
        try:
            conn.settimeout(timeout)
            conn.sendmsg([json.dumps({"plan": plan, "env": env, "argv": argv}).encode()],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [output]))] if output is not None
                         else [])
            data = conn.recv(65536)
        except TimeoutError:
            _stop_child(pidfd)
            os.close(pidfd)
            raise ForkError(f"the fork server's child (pid {child}) gave no server within {timeout:.0f} s; "
                            "it was stopped") from None
        except OSError as exc:
            _stop_child(pidfd)
            os.close(pidfd)
            raise ForkError(f"the fork server's child (pid {child}) did not answer: {exc}") from exc
    try:
        answer = json.loads(data) if data else {"error": "it ended before it answered (see the user's log)"}
    except ValueError:
        answer = {"error": f"its answer is not JSON: {data[:100]!r}"}
    if not isinstance(answer, dict) or answer.get("ready") is not True:
        _stop_child(pidfd)
        os.close(pidfd)
        error = answer.get("error") if isinstance(answer, dict) else None
        raise ForkError(f"the fork server's child (pid {child}) gave no server: {error or answer!r}")
    return child, pidfd


# --- starting and stopping it (hub start, and the hub when it replaces one) -------------------------


def launch(hub_dir: Path, environment: Path, library_path: str, python_path: Path, timeout: float = 180.0) -> str:
    """Start the users' servers' fork server for the hub in ``hub_dir`` (replacing the one there), as
    root, from the users' environment, with none of the hub's secrets; returns its socket's path
    once it listens (after its imports). Its socket is in ``run/``, root's alone; its log in
    ``logs/forkserver.log``. Raises RuntimeError, with the log's last lines, if it does not start."""
    hub_dir = Path(hub_dir)
    stop(hub_dir)
    run = hub_dir / "run"
    run.mkdir(exist_ok=True)
    os.chmod(run, 0o700)
    path = socket_path(hub_dir)
    env = {"PATH": f"{environment / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(run), "LANG": "C.UTF-8",
           "PYTHONPATH": str(python_path), "PYTHONNOUSERSITE": "1", MARK: str(hub_dir),
           # no BLAS threads in the fork server (a fork keeps only the thread that forked): a kernel's
           # NumPy computes on one thread, which is what a student's CPU limit (1 by default) allows
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           **{name: os.environ[name] for name in ("OPENBLAS_CORETYPE",) if name in os.environ},
           **({"LD_LIBRARY_PATH": library_path} if library_path else {})}
    log_path = hub_dir / "logs" / "forkserver.log"
    log = open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600), "ab")
    with log:
        server = subprocess.Popen([str(environment / "bin" / "python"), "-P", "-m", "autograder.jupyterhub.forkserver",
                                   str(path)], cwd=run, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  start_new_session=True, umask=0o077)
    pid_file = hub_dir / "forkserver.pid"
    with open(os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "w") as handle:
        handle.write(str(server.pid))
    deadline = time.monotonic() + timeout
    while not path.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            stop(hub_dir)
            try:
                tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-3:])
            except OSError:
                tail = ""
            raise RuntimeError(f"the users' servers' fork server did not start; see {log_path}: {tail}")
        time.sleep(0.2)
    return str(path)


def stop(hub_dir: Path) -> bool:
    """Stop the fork server and remove its socket, so that servers start as new processes (the
    servers it forked are the hub's to stop); False if none ran."""
    hub_dir = Path(hub_dir)
    pid_file = hub_dir / "forkserver.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        pid = None
    pid_file.unlink(missing_ok=True)
    socket_path(hub_dir).unlink(missing_ok=True)
    if not pid or not is_fork_server(pid, hub_dir):
        return False
    try:
        os.kill(pid, signal.SIGKILL)   # stopped or not
    except ProcessLookupError:
        return False
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:   # not this process's child (hub start made it): wait for it otherwise
        deadline = time.monotonic() + 10
        while is_fork_server(pid, hub_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
    return True


def is_fork_server(pid: int, hub_dir: Path) -> bool:
    """Whether ``pid`` is (still) the fork server of the hub in ``hub_dir``: a reused pid is not."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"{MARK}={hub_dir}".encode() in handle.read().split(b"\0")
    except OSError:
        return False


def replace(hub_dir: Path, environment: Path, library_path: str, python_path: Path, unresponsive: int | None) -> str:
    """Replace the fork server that did not answer (pid ``unresponsive``, if known), unless it has
    been replaced already; what was done, in a sentence."""
    try:
        current = int((Path(hub_dir) / "forkserver.pid").read_text().strip())
    except (OSError, ValueError):
        current = None
    if unresponsive is not None and current != unresponsive:
        return f"the fork server (pid {unresponsive}) was replaced already"
    launch(hub_dir, environment, library_path, python_path)
    return f"the fork server (pid {current}) is replaced by pid {(Path(hub_dir) / 'forkserver.pid').read_text()}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or os.geteuid() != 0:
        print("usage (as root): python -P -m autograder.jupyterhub.forkserver SOCKET", file=sys.stderr)
        return 2
    missing = preload()
    kernels.BASE_PATH = [entry for entry in sys.path if entry not in kernels.python_path(os.environ, base=[])]
    if missing:
        print(f"forkserver: not preloaded (the servers import them themselves): {', '.join(missing)}", flush=True)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:   # a fork copies only the forking thread: a lock another one held stays held
        print(f"forkserver: an import started {threads - 1} thread(s); a process with threads cannot fork safely",
              file=sys.stderr, flush=True)
        return 1
    # What was imported is never collected: the collector then leaves those objects' pages alone,
    # and a forked server shares them instead of copying them (a student's memory is what they change)
    gc.freeze()
    serve(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
