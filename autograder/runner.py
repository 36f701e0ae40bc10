"""The sandbox side of the grader: it runs a student's cells and answers calls. It never judges.

Started inside bubblewrap (``sandbox.py``) as ``python runner.py --preload numpy,torch,...`` with
a control socket on fd 3, it is a fork server (a *zygote*):

1. it imports what the notebooks will need once (numpy, torch, IPython, the course package), makes
   an IPython shell, makes itself non-dumpable (no other process of its uid may trace it or open
   its ``/proc`` files), says ``ready`` and waits;
2. for each submission the judge sends ``spawn`` with one end of a fresh socket pair: the zygote
   forks a *child* that owns that socket. The child closes the control socket before it runs a
   line of the student's code, so the student's code holds only its own connection;
3. the child runs the student's cells (``run``) in the IPython shell, then answers calls (``call``,
   ``vjp``, ``describe``, ``getattr``) with plain data (``wire.py``); any other object it returns
   stays here, behind a handle;
4. when the child exits (the judge closed the socket) or is killed (``interrupt`` sends SIGINT,
   ``kill`` SIGKILL), the zygote kills every other process left in the sandbox, empties the
   working folders and says ``exited``: nothing of one submission is there for the next.

Everything the child sends is the student's data. The judge reads it as such: it decides nothing
on what this process says about itself, only on values it checks itself.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402  (this file runs as a script, next to wire.py)

MAX_OUTPUT = 256 * 1024       # characters of a cell's output sent back
PR_SET_DUMPABLE = 4


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _make_shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False      # no SQLite file, nothing kept between runs
    config.InteractiveShell.colors = "NoColor"
    config.InteractiveShell.xmode = "Plain"
    shell = InteractiveShell.instance(config=config)
    shell.user_ns["__name__"] = "__main__"
    return shell


# --- the child: one submission -------------------------------------------------------------------


class _Capture:
    """Whatever the process writes to fds 1 and 2 during a request, into a memory file."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.fd = os.memfd_create("output")
        self.saved = (os.dup(1), os.dup(2))
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)
        return self

    def __exit__(self, *exc) -> None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - the student may have closed or replaced them
            pass
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        for fd in self.saved:
            os.close(fd)
        os.lseek(self.fd, 0, os.SEEK_SET)
        data = os.read(self.fd, MAX_OUTPUT * 4 + 1)
        os.close(self.fd)
        text = data.decode("utf-8", "replace")
        if len(text) > MAX_OUTPUT:
            text = text[:MAX_OUTPUT] + "\n[output truncated by the grader]\n"
        self.text = text


def _error(exc: BaseException) -> dict:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"type": type(exc).__name__, "message": str(exc)[:4000], "traceback": text[-20000:],
            "builtin": type(exc).__module__ == "builtins"}


class _Session:
    def __init__(self, sock: socket.socket, shell) -> None:
        self.sock = sock
        self.shell = shell
        self.handles: dict[int, object] = {}

    # handles: objects that are not plain data stay here
    def make_handle(self, obj) -> wire.Handle:
        key = len(self.handles) + 1
        self.handles[key] = obj
        return wire.Handle(key, type(obj).__qualname__)

    def resolve(self, handle: wire.Handle):
        if handle.key not in self.handles:
            raise wire.WireError(f"no object behind handle {handle.key}")
        return self.handles[handle.key]

    def target(self, name):
        if isinstance(name, str):
            if name not in self.shell.user_ns:
                raise NameError(f"name {name!r} is not defined in your notebook")
            return self.shell.user_ns[name]
        return name  # an object a handle resolved to

    @staticmethod
    def build_modules(value):
        """Arguments with every ``ModuleSpec`` replaced by the module it describes."""
        if isinstance(value, wire.ModuleSpec):
            return value.build()
        if isinstance(value, list):
            return [_Session.build_modules(item) for item in value]
        if isinstance(value, tuple):
            return tuple(_Session.build_modules(item) for item in value)
        if isinstance(value, dict):
            return {key: _Session.build_modules(item) for key, item in value.items()}
        return value

    def handle_request(self, request: dict) -> dict:
        op = request.get("op")
        if op == "run":
            result = self.shell.run_cell(request["code"], store_history=True)
            error = result.error_before_exec or result.error_in_exec
            return {"ok": error is None, "error": None if error is None else _error(error)}
        if op == "describe":
            described = {}
            for name in request["names"]:
                if name not in self.shell.user_ns:
                    described[name] = {"kind": "missing"}
                elif callable(self.shell.user_ns[name]):
                    described[name] = {"kind": "callable"}
                else:
                    described[name] = {"kind": "value", "value": self.shell.user_ns[name]}
            return {"ok": True, "value": described}
        if op == "call":
            function = self.target(request["target"])
            args = self.build_modules(request.get("args", []))
            kwargs = self.build_modules(request.get("kwargs", {}))
            return {"ok": True, "value": function(*args, **kwargs)}
        if op == "vjp":
            from attention_course.testing import checks

            function = self.target(request["target"])
            args = self.build_modules(request.get("args", []))
            kwargs = self.build_modules(request.get("kwargs", {}))
            return {"ok": True, "value": checks.vjp(function, request["dout"], *args, **kwargs)}
        if op == "getattr":
            return {"ok": True, "value": getattr(self.target(request["target"]), request["name"])}
        if op == "ping":
            return {"ok": True, "value": os.getpid()}
        raise ValueError(f"unknown request {op!r}")

    def serve(self) -> None:
        while True:
            try:
                request = wire.receive(self.sock, resolve_handle=self.resolve)
            except EOFError:
                return
            except KeyboardInterrupt:  # an interrupt between requests: nothing to stop
                continue
            except wire.WireError as exc:
                request = None
                reply = {"ok": False, "error": _error(exc)}
            if request is not None:
                started = time.perf_counter()
                with _Capture() as captured:
                    try:
                        reply = self.handle_request(request)
                    except BaseException as exc:  # noqa: BLE001 - the student's error, reported as data
                        reply = {"ok": False, "error": _error(exc)}
                reply["output"] = captured.text
                reply["seconds"] = time.perf_counter() - started
            try:
                wire.send(self.sock, reply, make_handle=self.make_handle)
            except wire.WireError as exc:
                wire.send(self.sock, {"ok": False, "error": _error(exc), "output": reply.get("output", "")})
            except (BrokenPipeError, ConnectionResetError):
                return


def _child(fd: int, control: socket.socket, shell, workdir: str) -> None:
    """In the forked child: drop the control socket, then serve the submission's requests."""
    code = 0
    try:
        control.close()  # before any student code: the child holds only its own connection
        os.setpgid(0, 0)  # a process group of its own: what it starts can be killed with it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        os.close(null)
        os.chdir(workdir)
        _Session(socket.socket(fileno=fd), shell).serve()
    except BaseException:  # noqa: BLE001 - whatever happened, the child ends here
        code = 1
    finally:
        os._exit(code)


# --- the zygote ------------------------------------------------------------------------------------


def _in_own_pid_namespace() -> bool:
    """True in a fresh pid namespace (bwrap's), where this process is one of the first few."""
    return os.getpid() <= 3


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _clean(work_root: str, sandboxed: bool, child: int) -> None:
    """After a child: no process of it left, and nothing of it on disk for the next one.

    In the sandbox (its own pid namespace, an unprivileged uid), every process but pid 1 and this
    one is killed and the sandbox's own /tmp and /dev/shm are emptied. Unsandboxed (the
    instructor's ``--unsafe-no-sandbox``), only the child's process group is killed and only the
    working folder emptied: ``kill(-1)`` or emptying /tmp there would reach the whole machine.
    """
    me = os.getpid()
    if sandboxed and _in_own_pid_namespace():
        for _ in range(200):
            if not [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]:
                break
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _reap()
            time.sleep(0.005)
        folders = ("/tmp", "/dev/shm", work_root)
    else:
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _reap()
        folders = (work_root,)
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(folder, entry)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass


def _workdir(work_root: str, data_dir: str | None, number: int) -> str:
    """A fresh working folder, with links to the assignment's data files (read-only where they are)."""
    folder = os.path.join(work_root, f"submission-{number}")
    os.mkdir(folder, 0o700)
    if data_dir and os.path.isdir(data_dir):
        for name in os.listdir(data_dir):
            os.symlink(os.path.join(data_dir, name), os.path.join(folder, name))
    return folder


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"killed by {name}"
    return f"exit status {os.WEXITSTATUS(status)}"


def serve(control: socket.socket, shell, work_root: str, data_dir: str | None, sandboxed: bool) -> None:
    child, pidfd, number = None, None, 0

    def say(message: dict) -> None:
        control.send(json.dumps(message).encode())

    while True:
        watched = [control] + ([pidfd] if pidfd is not None else [])
        ready, _, _ = select.select(watched, [], [])
        if pidfd is not None and pidfd in ready:
            _, status = os.waitpid(child, 0)
            os.close(pidfd)
            _clean(work_root, sandboxed, child)
            child, pidfd = None, None
            say({"op": "exited", "status": _status(status)})
        if control in ready:
            message, fds, _, _ = socket.recv_fds(control, 1 << 16, 4)
            if not message:
                for fd in fds:
                    os.close(fd)
                if child is not None:
                    os.kill(child, signal.SIGKILL)
                return
            command = json.loads(message)
            op = command.get("op")
            if op == "spawn" and child is None and len(fds) == 1:
                number += 1
                folder = _workdir(work_root, data_dir, number)
                pid = os.fork()
                if pid == 0:
                    _child(fds[0], control, shell, folder)
                os.close(fds[0])
                child, pidfd = pid, os.pidfd_open(pid)
                say({"op": "spawned", "pid": pid})
            elif op in ("interrupt", "kill") and child is not None:
                try:
                    os.kill(child, signal.SIGINT if op == "interrupt" else signal.SIGKILL)
                except ProcessLookupError:
                    pass
            else:
                for fd in fds:
                    os.close(fd)
                say({"op": "refused", "request": str(op)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preload", default="")
    parser.add_argument("--work", required=True, help="the folder submissions work in (a tmpfs)")
    parser.add_argument("--data", help="the assignment's data files, copied into each working folder")
    parser.add_argument("--control-fd", type=int, default=3)
    parser.add_argument("--sandboxed", action="store_true",
                        help="inside bubblewrap: clean up by killing every other process and emptying /tmp")
    args = parser.parse_args(argv)
    control = socket.socket(fileno=args.control_fd)
    failed = []
    for name in filter(None, args.preload.split(",")):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - reported; the notebook will meet the same error
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    if "torch" in sys.modules:  # autograd's first pass, once here rather than in every child
        torch = sys.modules["torch"]
        torch.set_num_threads(1)  # no thread pool before the forks: the workers are the parallelism
        warm = torch.ones(2, dtype=torch.float64, requires_grad=True)
        torch.autograd.grad((warm * warm).sum(), [warm])
    shell = _make_shell()
    _prctl(PR_SET_DUMPABLE, 0)
    control.send(json.dumps({"op": "ready", "pid": os.getpid(), "preload_failed": failed}).encode())
    serve(control, shell, args.work, args.data, args.sandboxed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
