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
3. the child reads the request (the plan of ``enter.py``, the server's environment and
   arguments, and the hub's log as its output, passed as descriptors), closes every other
   descriptor, starts a session of its own, does what ``enter.py`` does (``enter.enter``: the
   user's cgroups, a private mount namespace with capped ``/tmp`` and ``/dev/shm``, rlimits, the
   user's groups and uid for good, no capabilities left, the user's home), takes the server's
   environment and ``sys.path`` (without the fork server's PYTHONPATH), forks the user's kernel
   zygote (``kernels.py``), answers with a pidfd of itself (the spawner polls and signals exactly
   this process, whatever pids are reused later), and only then becomes dumpable by its user
   (a drop from root without exec leaves a process undumpable: until its answer is sent, nothing
   of the user's can reach its socket to the hub) and runs the server's main.

If the hub finds no fork server listening, a server starts through ``enter.py`` as before; if the
fork server took a request but gave no server, the start fails (it is not tried twice).

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
import signal
import socket
import struct
import sys

from . import enter, kernels

MAX_REQUEST = 1 << 20
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


def peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


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
    """Listen on ``path`` (a unix socket, made root's only) and fork a server per connection."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.path.exists(path):
        os.unlink(path)
    old = os.umask(0o077)
    listener.bind(path)
    os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(64)

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


def _receive_request(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    data, ancillary, _flags, _ = conn.recvmsg(MAX_REQUEST, socket.CMSG_LEN(2 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def _server(conn: socket.socket) -> int:
    """In the forked child: take the request, enter the user's limits, answer, run the server."""
    for signum in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.settimeout(30)
    request, fds = _receive_request(conn)
    if len(fds) != 2:
        raise SystemExit("forkserver: a request needs the server's stdout and stderr")
    null = os.open(os.devnull, os.O_RDONLY)
    for target, fd in ((0, null), (1, fds[0]), (2, fds[1])):
        os.dup2(fd, target)
        os.close(fd)
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
        sys.argv = [argv[0], *argv[1:]]
        # the path the script would have started with (not the fork server's PYTHONPATH)
        sys.path[:] = [os.path.dirname(os.path.realpath(argv[0])), *kernels.python_path(os.environ)]

        kernels.start_zygote(close=[conn.fileno()])
        pidfd = os.pidfd_open(os.getpid())
    except Exception as exc:  # noqa: BLE001 - the spawner reports it, in one line
        conn.sendall(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        return 1
    conn.sendmsg([json.dumps({"pid": os.getpid()}).encode()],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))])
    os.close(pidfd)
    conn.close()
    # Dropping root without exec left this process undumpable (its /proc files root's, no ptrace
    # even by its user): until its answer is sent, nothing of the user's may reach its socket to the
    # hub. From here on it is the user's like any process they started (exec would have made it so).
    enter.make_dumpable()
    from jupyterhub.singleuser import main

    return main() or 0


# --- the spawner's side -----------------------------------------------------------------------------


class NotListening(OSError):
    """No fork server listens at the path: the server may start as a new process instead."""


class ForkError(RuntimeError):
    """The fork server took the request but gave no server (its child may have failed): the start
    failed, and is not tried again another way (a child might still be on its way)."""


def request_server(path: str, plan: dict, env: dict[str, str], argv: list[str], timeout: float = 60) -> tuple[int, int]:
    """Ask the fork server at ``path`` for a server (as root); returns its pid and a pidfd of it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(path)
        except OSError as exc:
            raise NotListening(f"{path}: {exc.strerror or exc}") from exc
        fds = array.array("i")
        try:
            conn.sendmsg([json.dumps({"plan": plan, "env": env, "argv": argv}).encode()],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [1, 2]))])
            data, ancillary, _flags, _ = conn.recvmsg(65536, socket.CMSG_LEN(fds.itemsize))
        except OSError as exc:
            raise ForkError(f"the fork server's child did not answer: {exc}") from exc
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if not data:
        raise ForkError("the fork server's child ended before it answered (see the hub's log)")
    answer = json.loads(data)
    if "error" in answer or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ForkError(answer.get("error", "the fork server's child sent no pidfd"))
    return int(answer["pid"]), fds[0]


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
