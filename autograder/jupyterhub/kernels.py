"""A student's kernels forked from a zygote of their own, not started afresh.

A Python kernel's start costs about a CPU second here (ipykernel and IPython, then NumPy and the
course package in the first cell), which a class logging in at once pays thirty times. A server
forked by the fork server (``forkserver.py``) already holds all of that, imported once by the fork
server before any user's request. Before the server's main runs, as the user, inside the user's
cgroups and mount namespace, that server forks a *kernel zygote* (``start_zygote``): a process of
the user's own, with nothing of the server's running yet (no thread, no event loop, no socket but
its end of a socket pair with the server). The server's kernel manager launches a Python kernel
through ``ForkProvisioner``: it asks the zygote, which forks; the child takes the kernel's
environment, working folder and arguments, starts a session of its own and runs
``ipykernel_launcher`` as ``python -m`` would (its folder first on ``sys.path``).

The zygote reaps a kernel only when the server asks (``wait``), as ``Popen`` would: until then the
kernel's pid cannot be reused, so that signalling it never reaches another process. The zygote
dies with its server. Anything else (another kernelspec, a server that was not forked, a zygote
that is gone) is started by jupyter_client's own ``LocalProvisioner``, as before.
"""

from __future__ import annotations

import ctypes
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time

from jupyter_client.provisioning import LocalProvisioner

from . import enter

PR_SET_PDEATHSIG = 1
MAX_MESSAGE = 1 << 20
LAUNCHER = "ipykernel_launcher"

# In a server forked by the fork server: the client of its user's kernel zygote (else None).
ZYGOTE = None
# sys.path of the fork server without its PYTHONPATH: the interpreter's own entries and the
# environment's site-packages, which a server or kernel forked from it starts with.
BASE_PATH: list[str] = []


def python_path(env, base: list[str] | None = None) -> list[str]:
    """sys.path after the script's folder, for a process started with environment ``env``."""
    extra = [os.path.abspath(entry) for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return [*extra, *(BASE_PATH if base is None else base)]


def _send(sock: socket.socket, message: dict) -> None:
    sock.sendall(json.dumps(message).encode())


def _receive(sock: socket.socket) -> dict | None:
    data = sock.recv(MAX_MESSAGE)
    return json.loads(data) if data else None


def forkable(cmd: list[str]) -> bool:
    """Whether ``cmd`` starts this interpreter's ipykernel (``python -m ipykernel_launcher ...``)."""
    return len(cmd) >= 3 and cmd[1:3] == ["-m", LAUNCHER] and \
        os.path.realpath(cmd[0]) == os.path.realpath(sys.executable)


# --- the zygote (the user's process, forked from the server before the server's main) -------------


def start_zygote(close: list[int] = ()) -> None:
    """Fork the user's kernel zygote, which closes the descriptors ``close`` first (the server's
    socket to the hub) and becomes dumpable by its user; this process (the server) keeps the
    client in ``ZYGOTE``."""
    global ZYGOTE
    server_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            server_end.close()
            for fd in close:
                os.close(fd)
            enter.make_dumpable()
            status = _zygote(zygote_end)
        finally:
            os._exit(status)
    zygote_end.close()
    ZYGOTE = Zygote(server_end, pid)


def _zygote(sock: socket.socket) -> int:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:   # the server died before the line above
        return 0
    while True:
        request = _receive(sock)
        if request is None:   # the server is gone
            return 0
        try:
            if request.get("op") == "launch":
                _send(sock, {"pid": _fork_kernel(sock, request["argv"], request["env"], request["cwd"])})
            elif request.get("op") == "wait":
                pid, status = os.waitpid(int(request["pid"]), os.WNOHANG)
                _send(sock, {"status": os.waitstatus_to_exitcode(status) if pid else None})
            else:
                _send(sock, {"error": f"unknown request {request.get('op')!r}"})
        except ChildProcessError:
            _send(sock, {"status": 0})   # reaped before (a wait after a wait)
        except (OSError, KeyError, TypeError, ValueError) as exc:
            _send(sock, {"error": f"{type(exc).__name__}: {exc}"})


def _fork_kernel(sock: socket.socket, argv: list[str], env: dict[str, str], cwd: str) -> int:
    if not forkable(argv):
        raise ValueError(f"not a command of this interpreter's ipykernel: {argv[:3]}")
    pid = os.fork()
    if pid:
        return pid
    sock.close()
    run_child(_kernel, argv, env, cwd)


def run_child(main, *args) -> None:
    """In a forked child: run ``main(*args)`` and end the process as the interpreter would end
    (exit handlers, flushed output) with its status; whatever ends it, it ends here, reported,
    never back in the parent's code."""
    status = 1
    try:
        status = main(*args)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):   # a message, as the interpreter would print it
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - see above
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status if isinstance(status, int) else 1)


def _kernel(argv: list[str], env: dict[str, str], cwd: str) -> int:
    """In the kernel's process: what ``Popen(argv, env=env, cwd=cwd, start_new_session=True)``
    would have given ``python -m ipykernel_launcher``, then the launcher itself."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    os.environ["JPY_PARENT_PID"] = str(os.getppid())
    # -m puts the working folder first on sys.path (a notebook imports its folder's modules)
    sys.path[:] = [os.getcwd(), *python_path(env)]
    # ipykernel read JPY_PARENT_PID when the fork server imported it: say who the parent is (the
    # zygote, which dies with the server: then the kernel stops, as it would with its server)
    sys.argv = [LAUNCHER, *argv[3:], f"--IPKernelApp.parent_handle={os.getppid()}"]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()   # NumPy's global generator, seeded once in the fork server: a fresh seed each
    runpy.run_module(LAUNCHER, run_name="__main__", alter_sys=True)
    return 0


# --- in the server: the client and the provisioner -----------------------------------------------


class Zygote:
    """The server's end of its zygote: launch a kernel, ask whether one has ended."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid = sock, pid
        self.lock = threading.Lock()   # a validation's kernel may start from another thread
        sock.settimeout(30)

    def request(self, message: dict) -> dict:
        with self.lock:
            _send(self.sock, message)
            answer = _receive(self.sock)
        if answer is None:
            raise OSError("the kernel zygote is gone")
        if "error" in answer:
            raise OSError(f"the kernel zygote: {answer['error']}")
        return answer

    def launch(self, argv: list[str], env: dict[str, str], cwd: str) -> ForkedKernel:
        answer = self.request({"op": "launch", "argv": argv, "env": env, "cwd": cwd})
        return ForkedKernel(self, int(answer["pid"]), argv)


class ForkedKernel:
    """What jupyter_client uses of a ``Popen``, for a kernel that is the zygote's child."""

    stdin = stdout = stderr = None

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self.zygote, self.pid, self.args = zygote, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.zygote.request({"op": "wait", "pid": self.pid})["status"]
            except OSError:
                self.returncode = -signal.SIGKILL   # the zygote died: so did its kernels (they were killed)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:   # not reaped: the pid is still this kernel's
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> ForkedKernel:
        return self

    def __exit__(self, *exc) -> None:
        pass


class ForkProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, but a Python kernel of this environment is forked from
    the user's zygote (when the server has one)."""

    async def launch_kernel(self, cmd: list[str], **kwargs):
        zygote = ZYGOTE
        if zygote is None or not forkable(cmd):
            return await super().launch_kernel(cmd, **kwargs)
        env = dict(kwargs.get("env") or os.environ)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            self.process = zygote.launch([os.path.expanduser(part) for part in cmd], env, cwd)
        except OSError as exc:
            self.log.warning("kernel zygote: %s; starting the kernel as a new process", exc)
            return await super().launch_kernel(cmd, **kwargs)
        self.pid = self.pgid = self.process.pid   # the kernel's own session (setsid)
        self.cwd = cwd
        return self.connection_info
