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
   ``kill`` SIGKILL), the zygote kills every other process left in the sandbox, empties /tmp,
   /dev/shm and the working folder (permissions restored first; no recursion, so no tree is too
   deep), removes System V IPC objects and the uid's keyrings, and says ``exited`` with ``clean``
   true only when all of that is gone: the judge replaces a zygote that could not clean up before
   the next submission, so nothing of one submission is there for the next.

Each submission works in a fresh folder with an unpredictable name, made exclusively in a working
folder that was verified empty: nothing another submission planted can be in it or in its way.

Everything the child sends is the student's data. The judge reads it as such: it decides nothing
on what this process says about itself, only on values it checks itself.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import re
import secrets
import select
import signal
import socket
import stat
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradients  # noqa: E402  (this file runs as a script, next to wire.py and gradients.py)
import wire  # noqa: E402

AUTOGRAD: "gradients.Autograd | None" = None   # torch's autograd as it was before any student line ran

MAX_OUTPUT = 256 * 1024       # characters of a cell's output sent back (the judge may ask for fewer)
PR_SET_DUMPABLE = 4
CLEAN_SECONDS = 20.0          # the most time a clean-up may take; past it, the judge replaces the zygote


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
    """Whatever the process writes to fds 1 and 2 during a request, into a memory file; at most
    ``limit`` characters of it are kept (the judge's remaining output budget for the notebook)."""

    def __init__(self, limit: int = MAX_OUTPUT) -> None:
        self.limit = max(0, min(int(limit), MAX_OUTPUT))

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
        size = os.fstat(self.fd).st_size
        os.lseek(self.fd, 0, os.SEEK_SET)
        data = os.read(self.fd, self.limit * 4 + 1)
        os.close(self.fd)
        text = data.decode("utf-8", "replace")
        if len(text) > self.limit or size > len(data):
            text = text[:self.limit] + "\n[output truncated by the grader]\n"
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
            if AUTOGRAD is None:
                raise RuntimeError("torch is not offered in this exercise's sandbox: no gradient can be taken")
            function = self.target(request["target"])
            args = self.build_modules(request.get("args", []))
            kwargs = self.build_modules(request.get("kwargs", {}))
            try:
                return {"ok": True, "value": AUTOGRAD.vjp(function, request["dout"], args, kwargs)}
            except gradients.Refused as exc:  # the reason, as an AssertionError of the test's
                raise AssertionError(str(exc)) from None
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
                limit = request.get("max_output", MAX_OUTPUT) if isinstance(request, dict) else MAX_OUTPUT
                with _Capture(limit if isinstance(limit, int) else MAX_OUTPUT) as captured:
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


def _mount_points() -> frozenset[str]:
    """Every mount point of this process's mount namespace (``/proc/self/mountinfo``, field 5).

    Read once, before any student code runs: bubblewrap made every mount there is, and no
    process in the sandbox can make another (no capabilities, no new user namespaces).
    """
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            fields = [line.split() for line in handle]
    except OSError:
        return frozenset()

    def unescape(text: str) -> str:  # mountinfo writes a space as \040, a backslash as \134
        return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), text)

    return frozenset(os.path.normpath(unescape(f[4])) for f in fields if len(f) > 4)


def _layout_in(folder: str, mounts) -> tuple[frozenset[str], frozenset[str]]:
    """The sandbox's own layout inside ``folder``, as paths relative to it: the mount points in it
    (a checkout or a virtual environment under /tmp, bound in read-only) and the folders that
    lead to them. Emptying ``folder`` keeps these and removes everything else, in them too."""
    folder = os.path.normpath(folder)
    inside = [os.path.relpath(m, folder) for m in mounts if m.startswith(folder.rstrip("/") + "/")]
    leading = {os.path.dirname(rel) for rel in inside}
    for rel in list(leading):
        while rel:
            leading.add(rel)
            rel = os.path.dirname(rel)
    leading.discard("")
    return frozenset(inside), frozenset(leading - set(inside))


def _empty(folder: str, deadline: float, mounts=frozenset()) -> bool:
    """Remove everything inside ``folder`` but the sandbox's own mount points in it (``mounts``,
    absolute paths) and the folders leading to them; True when nothing else is left.

    It cannot be stopped by what a submission left: each folder's permissions are restored before
    it is read, and a folder inside a folder is first moved up to ``folder`` itself (``renameat``),
    so the walk never goes deeper than one level (no recursion, no path too long) and holds at most
    two descriptors. The folders leading to a mount point are walked the same way (their depth is
    the layout's, not the submission's), and are never changed themselves. It gives up at
    ``deadline`` (then the judge replaces the zygote).
    """
    bound, leading = _layout_in(folder, mounts)
    kept = {rel.split("/")[0] for rel in bound | leading}
    try:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    moved = [0]

    def move_up_or_unlink(dir_fd: int, entry: str) -> None:
        """Out of the way: a file unlinked, a folder moved up to ``folder`` (emptied there)."""
        try:
            if _is_dir(dir_fd, entry):
                # moving a folder to another parent needs write access to it ("..")
                os.chmod(entry, 0o700, dir_fd=dir_fd)
                moved[0] += 1
                os.rename(entry, f".ag-{moved[0]}-{secrets.token_hex(4)}", src_dir_fd=dir_fd, dst_dir_fd=top)
            else:
                os.unlink(entry, dir_fd=dir_fd)
        except OSError:
            pass

    def clear_leading(rel: str) -> bool:
        """Empty a folder of the layout but for the layout in it; True when only that is left."""
        try:
            fd = top
            for part in rel.split("/"):
                try:  # as bwrap made it (in a user namespace the folder is the sandbox uid's to change)
                    os.chmod(part, 0o755, dir_fd=fd)
                except OSError:
                    pass  # root's: nobody in the sandbox could have changed it
                following = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                if fd != top:
                    os.close(fd)
                fd = following
        except OSError:
            return False
        try:
            clean = True
            for entry in os.listdir(fd):
                path = f"{rel}/{entry}"
                if path in bound:
                    continue
                if path in leading:
                    clean = clear_leading(path) and clean
                    continue
                move_up_or_unlink(fd, entry)
                clean = False  # looked at again on the next pass
            return clean
        finally:
            os.close(fd)

    try:
        while time.monotonic() < deadline:
            names = os.listdir(top)
            stray = [name for name in names if name not in kept]
            layout_clean = all(clear_leading(name) for name in names if name in leading)
            if not stray and layout_clean:
                return True
            for name in stray:
                if time.monotonic() >= deadline:
                    break
                try:
                    if not _is_dir(top, name):
                        os.unlink(name, dir_fd=top)
                        continue
                    os.chmod(name, 0o700, dir_fd=top)  # no process is left to swap it for a link
                    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
                except OSError:
                    continue
                try:
                    for entry in os.listdir(inner):
                        move_up_or_unlink(inner, entry)
                finally:
                    os.close(inner)
                try:
                    os.rmdir(name, dir_fd=top)
                except OSError:
                    pass
        return not [name for name in os.listdir(top) if name not in kept] and \
            all(clear_leading(name) for name in kept if name in leading)
    except OSError:
        return False
    finally:
        os.close(top)


def _is_dir(dir_fd: int, name: str) -> bool:
    return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)


def _remove_ipc() -> bool:
    """Remove the System V IPC objects of this IPC namespace (the sandbox's own): True when none is left."""
    libc = ctypes.CDLL(None, use_errno=True)
    IPC_RMID = 0
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None))):
        try:
            with open(f"/proc/sysvipc/{kind}") as handle:
                ids = [int(line.split()[1]) for line in handle.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ident in ids:
            remove(ident)
    left = 0
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as handle:
                left += len([line for line in handle.readlines()[1:] if line.strip()])
        except OSError:
            pass
    return left == 0


def _clear_keyrings() -> None:
    """Empty the uid's own keyrings (shared by every process of the uid): nothing kept there carries over."""
    libc = ctypes.CDLL(None, use_errno=True)
    SYS_KEYCTL, KEYCTL_CLEAR = 250, 7
    for keyring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
        libc.syscall(SYS_KEYCTL, KEYCTL_CLEAR, keyring)


def _clean(work_root: str, sandboxed: bool, child: int, mounts=frozenset()) -> list[str]:
    """After a child: no process of it left, and nothing of it for the next one. Returns what is
    left (empty: clean).

    In the sandbox (its own pid namespace, an unprivileged uid), every process but this one (pid 1)
    is killed; the sandbox's own /tmp, /dev/shm and the working folder are emptied, its System V
    IPC objects removed and the uid's keyrings cleared. Unsandboxed (the instructor's
    ``--unsafe-no-sandbox``), only the child's process group is killed and only the working
    folder emptied: ``kill(-1)`` or emptying /tmp there would reach the whole machine.
    """
    me = os.getpid()
    deadline = time.monotonic() + CLEAN_SECONDS
    left: list[str] = []
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
        else:
            left.append("processes")
        _reap()
        folders = ("/tmp", "/dev/shm", work_root)
        if not _remove_ipc():
            left.append("System V IPC objects")
        _clear_keyrings()
    else:
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _reap()
        folders = (work_root,)
    for folder in folders:
        if os.path.isdir(folder) and not _empty(folder, deadline, mounts):
            left.append(folder)
    return left


def _workdir(work_root: str, data_dir: str | None) -> str:
    """A fresh working folder with an unpredictable name, made exclusively, with links to the
    assignment's data files (read-only where they are)."""
    while True:
        folder = os.path.join(work_root, f"submission-{secrets.token_hex(16)}")
        try:
            os.mkdir(folder, 0o700)
            break
        except FileExistsError:
            continue
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


def serve(control: socket.socket, shell, work_root: str, data_dir: str | None, sandboxed: bool,
          mounts=frozenset()) -> None:
    child, pidfd = None, None

    def say(message: dict) -> None:
        control.send(json.dumps(message).encode())

    while True:
        watched = [control] + ([pidfd] if pidfd is not None else [])
        ready, _, _ = select.select(watched, [], [])
        if pidfd is not None and pidfd in ready:
            _, status = os.waitpid(child, 0)
            os.close(pidfd)
            left = _clean(work_root, sandboxed, child, mounts)
            child, pidfd = None, None
            say({"op": "exited", "status": _status(status), "clean": not left, "left": left[:8]})
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
                folder = _workdir(work_root, data_dir)
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
        global AUTOGRAD
        torch = sys.modules["torch"]
        torch.set_num_threads(1)  # no thread pool before the forks: the workers are the parallelism
        warm = torch.ones(2, dtype=torch.float64, requires_grad=True)
        torch.autograd.grad((warm * warm).sum(), [warm])
        AUTOGRAD = gradients.Autograd(torch, importlib.import_module("numpy"))
    shell = _make_shell()
    mounts = _mount_points() if args.sandboxed else frozenset()  # the layout: never emptied away
    if args.sandboxed:  # what the imports and the shell wrote (IPython's profile): the first child starts as the rest
        for folder in ("/tmp", args.work):
            _empty(folder, time.monotonic() + CLEAN_SECONDS, mounts)
    _prctl(PR_SET_DUMPABLE, 0)
    control.send(json.dumps({"op": "ready", "pid": os.getpid(), "preload_failed": failed}).encode())
    serve(control, shell, args.work, args.data, args.sandboxed, mounts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
