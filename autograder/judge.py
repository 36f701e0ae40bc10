"""The trusted side of grading: the judge runs the test cells; the student's code runs elsewhere.

For one notebook, ``grade_notebook``:

1. runs the student's cells and the read-only code cells, in notebook order, in a fresh child of
   the sandbox's zygote (``runner.py``). A cell over its time limit is interrupted; a child that
   ignores the interrupt, or dies, is replaced by a new one that re-runs the cells before the one
   that stopped it, and that cell and the cells after it are not run (the reason is recorded);
2. runs the test cells and the read-only code cells, in notebook order, *here*, in a namespace of
   their own. The names the exercise asks the student to define (``api_names``) are proxies: a
   call sends its arguments to the child as plain data and returns the child's plain data; any
   other object stays in the child behind a handle. Expected values are computed here, from this
   process's own inputs; nothing the child says decides anything but its own answers;
3. writes one record per test cell: ``passed`` only when every statement of the cell ran here
   without an exception, within the cell's time limit. Anything else, including a child that is
   gone, is a failure with its reason. The student's prints and stderr play no part.

This module never executes a line of the student's code, and never sends a test's source to the
sandbox.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import os
import select
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import wire
from .sandbox import SandboxConfig, runner_argv

MAX_TEST_OUTPUT = 64 * 1024
INTERRUPT_GRACE = 2.0


class SandboxStopped(RuntimeError):
    """The child that ran the student's code is gone (it exited, was killed, or stopped answering)."""


class CellTimeout(RuntimeError):
    """A call into the student's code ran past the cell's time limit."""


class StudentCodeError(Exception):
    """An exception raised by the student's code, as the child reported it."""

    def __init__(self, kind: str, message: str, traceback: str = "") -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind, self.remote_message, self.remote_traceback = kind, message, traceback


_REMOTE_CLASSES: dict[str, type] = {}


def remote_error(error: dict) -> StudentCodeError:
    """The child's error as an exception here; a built-in type (``ValueError``) is matched by ``except``."""
    kind = str(error.get("type", "Exception"))[:100]
    message = str(error.get("message", ""))[:2000]
    base = getattr(builtins, kind, None) if error.get("builtin") else None
    if not (isinstance(base, type) and issubclass(base, Exception)) or base is Exception:
        base = None
    if base is None:
        return StudentCodeError(kind, message, str(error.get("traceback", ""))[-4000:])
    if kind not in _REMOTE_CLASSES:
        try:
            _REMOTE_CLASSES[kind] = type(f"Student{kind}", (StudentCodeError, base), {})
        except TypeError:  # a built-in that cannot be subclassed together with ours
            return StudentCodeError(kind, message, str(error.get("traceback", ""))[-4000:])
    return _REMOTE_CLASSES[kind](kind, message, str(error.get("traceback", ""))[-4000:])


# --- the zygote and its children -------------------------------------------------------------------


class Zygote:
    """One sandbox process (bubblewrap around ``runner.py``) that forks a child per submission."""

    def __init__(self, config: SandboxConfig, uid: int | None, preload: list[str], data_dir: str | None,
                 work_dir: str, log=None) -> None:
        self.config, self.uid, self.preload = config, uid, list(preload)
        self.data_dir, self.work_dir, self.log = data_dir, work_dir, log
        self.proc: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.child_alive = False
        self.startup_seconds = 0.0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 180.0) -> None:
        started = time.perf_counter()
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = runner_argv(self.config, uid=self.uid, work_dir=self.work_dir, data_dir=self.data_dir,
                           preload=self.preload, control_fd=theirs.fileno())
        self.proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=self.log or subprocess.DEVNULL, stderr=self.log or subprocess.DEVNULL,
                                     start_new_session=True)
        theirs.close()
        self.control = ours
        message = self._read(timeout)
        if message is None or message.get("op") != "ready":
            self.close()
            raise SandboxStopped(f"the sandbox did not start ({message or 'no answer'})")
        self.startup_seconds = time.perf_counter() - started

    def _read(self, timeout: float) -> dict | None:
        if self.control is None:
            return None
        ready, _, _ = select.select([self.control], [], [], max(0.0, timeout))
        if not ready:
            return None
        data = self.control.recv(1 << 16)
        if not data:
            return None
        try:
            message = json.loads(data)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None

    def spawn(self) -> "Child":
        if not self.alive:
            self.start()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        socket.send_fds(self.control, [json.dumps({"op": "spawn"}).encode()], [theirs.fileno()])
        theirs.close()
        message = self._read(30.0)
        if message is None or message.get("op") != "spawned":
            ours.close()
            self.close()
            raise SandboxStopped(f"the sandbox could not start a process for the submission ({message})")
        self.child_alive = True
        return Child(self, ours)

    def signal(self, op: str) -> None:
        if self.control is not None and self.alive:
            try:
                self.control.send(json.dumps({"op": op}).encode())
            except OSError:
                pass

    def wait_exited(self, timeout: float = 20.0) -> str | None:
        """After a child's socket closed: the zygote's report that it is gone and all is cleaned."""
        deadline = time.monotonic() + timeout
        while self.child_alive:
            message = self._read(deadline - time.monotonic())
            if message is None:
                self.close()  # no answer: the zygote itself is in trouble; a new one next time
                return None
            if message.get("op") == "exited":
                self.child_alive = False
                return str(message.get("status", ""))[:200]
        return None

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
            self.proc.wait()
            self.proc = None
        self.child_alive = False


class Child:
    """The connection to one submission's process in the sandbox."""

    def __init__(self, zygote: Zygote, sock: socket.socket) -> None:
        self.zygote = zygote
        self.sock = sock
        self.stopped: str | None = None   # why it is gone, once it is
        self.exit_status: str | None = None

    def request(self, message: dict, timeout: float) -> dict:
        """Send one request and return the child's reply; SandboxStopped or CellTimeout otherwise."""
        if self.stopped:
            raise SandboxStopped(self.stopped)
        try:
            wire.send(self.sock, message)
        except wire.WireError:
            raise
        except OSError:
            self._stop("the process running your code has stopped")
            raise SandboxStopped(self.stopped) from None
        timed_out = False
        if not self._wait(timeout):
            timed_out = True
            self.zygote.signal("interrupt")
            if not self._wait(INTERRUPT_GRACE):
                self.zygote.signal("kill")
                self._stop("your code ran past its time limit and ignored the interrupt: its process was stopped")
                raise CellTimeout(self.stopped)
        try:
            reply = wire.receive(self.sock)
        except (EOFError, OSError):
            self._stop("the process running your code has stopped")
            raise SandboxStopped(self.stopped) from None
        except wire.WireError as exc:
            self.zygote.signal("kill")
            self._stop(f"your code sent back data the grader cannot read ({exc})")
            raise SandboxStopped(self.stopped) from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            self.zygote.signal("kill")
            self._stop("the process running your code answered out of turn")
            raise SandboxStopped(self.stopped)
        if timed_out:
            reply = dict(reply, timed_out=True)
        return reply

    def _wait(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        return bool(ready)

    def _stop(self, reason: str) -> None:
        if self.stopped is None:
            self.stopped = reason
        self.close()

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.sock.close()
            self.exit_status = self.zygote.wait_exited()


# --- proxies in the test namespace -----------------------------------------------------------------


class _Calls:
    """What the proxies of one notebook share: the child, and the running cell's deadline."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self.deadline = float("inf")

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CellTimeout("the test cell ran past its time limit")
        return left

    def outgoing(self, value):
        """Arguments as plain data: proxies become their handles (they name objects in the child)."""
        if isinstance(value, RemoteObject):
            return value._handle
        if isinstance(value, (list, tuple)):
            items = [self.outgoing(item) for item in value]
            return items if type(value) is list else tuple(items)
        if isinstance(value, dict):
            return {key: self.outgoing(item) for key, item in value.items()}
        return value

    def incoming(self, value):
        """A reply's value here: handles become proxies of the objects they name."""
        if isinstance(value, wire.Handle):
            return RemoteObject(self, value)
        if isinstance(value, list):
            return [self.incoming(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self.incoming(item) for item in value)
        if isinstance(value, dict):
            return {key: self.incoming(item) for key, item in value.items()}
        return value

    def ask(self, message: dict):
        try:
            reply = self.child.request(self.outgoing(message), self.remaining())
        except wire.WireError as exc:
            raise TypeError(f"the test cannot send this to your code: {exc}") from None
        if reply.get("timed_out"):
            raise CellTimeout("your code ran past the test cell's time limit and was interrupted")
        if not reply["ok"]:
            raise remote_error(reply.get("error") or {})
        return self.incoming(reply.get("value"))


class RemoteFunction:
    """A name the student defines, as the tests see it: calling it calls the student's code."""

    def __init__(self, calls: _Calls, name: str) -> None:
        self._calls, self._name = calls, name

    def __call__(self, *args, **kwargs):
        return self._calls.ask({"op": "call", "target": self._name, "args": list(args), "kwargs": kwargs})

    def course_remote_vjp(self, dout, args: tuple, kwargs: dict):
        """``checks.vjp``: call and differentiate where the student's code runs; returns (output, grads)."""
        return self._calls.ask({"op": "vjp", "target": self._name, "dout": dout, "args": list(args),
                                "kwargs": kwargs})

    def __repr__(self) -> str:
        return f"<your {self._name}>"


class RemoteObject(RemoteFunction):
    """An object that stays in the student's process (a cache, an instance, a bound method)."""

    def __init__(self, calls: _Calls, handle: wire.Handle) -> None:
        super().__init__(calls, handle.kind or "object")
        self._handle = handle

    def __call__(self, *args, **kwargs):
        return self._calls.ask({"op": "call", "target": self._handle, "args": list(args), "kwargs": kwargs})

    def course_remote_vjp(self, dout, args: tuple, kwargs: dict):
        return self._calls.ask({"op": "vjp", "target": self._handle, "dout": dout, "args": list(args),
                                "kwargs": kwargs})

    def __getattr__(self, name: str):
        if name.startswith("__") or name.startswith("_calls") or name in ("_handle", "_name"):
            raise AttributeError(name)
        return self._calls.ask({"op": "getattr", "target": self._handle, "name": name})

    def __repr__(self) -> str:
        return f"<your {self._name} object>"


# --- one notebook ----------------------------------------------------------------------------------


@dataclass
class Cell:
    index: int
    kind: str            # "student", "readonly" (instructor code), "test"
    source: str
    grade_id: str | None = None


@dataclass
class Outcome:
    status: str = "ok"   # ok | timeout (a cell was interrupted) | stopped (a process was lost)
    reasons: list[str] = field(default_factory=list)
    outputs: dict[int, list] = field(default_factory=dict)      # cell index -> nbformat outputs
    tests: dict[str, dict] = field(default_factory=dict)        # grade id -> record
    timing: dict[str, float] = field(default_factory=lambda: {"startup": 0.0, "student": 0.0, "checks": 0.0})
    notes: list[str] = field(default_factory=list)

    def note(self, status: str, reason: str) -> None:
        if status == "stopped" or self.status == "ok":
            self.status = status
        self.reasons.append(reason)

    def to_json(self) -> dict:
        return {"status": self.status, "reasons": self.reasons, "notes": self.notes, "timing": self.timing,
                "outputs": {str(k): v for k, v in self.outputs.items()}, "tests": self.tests}


def api_names(solution_sources: list[str]) -> list[str]:
    """The top-level names the exercise's answer cells define: what the tests may call."""
    names: list[str] = []
    for source in solution_sources:
        try:
            tree = ast.parse(_python_only(source))
        except SyntaxError:
            continue
        for node in tree.body:
            targets = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                targets = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    targets += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
            for name in targets:
                if name not in names and not name.startswith("_"):
                    names.append(name)
    return names


def _python_only(source: str) -> str:
    """The cell as Python: IPython's magics and shell escapes become calls (as IPython does it)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


class _NoShell:
    """``get_ipython()`` in the judge's namespace: magics in instructor cells do nothing here."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _error_output(kind: str, message: str, traceback: str = "") -> dict:
    lines = traceback.splitlines()[-40:] if traceback else [f"{kind}: {message}"]
    return {"output_type": "error", "ename": kind, "evalue": message, "traceback": lines}


def _cell_outputs(reply: dict) -> list[dict]:
    outputs = []
    text = reply.get("output")
    if isinstance(text, str) and text:
        outputs.append(_stream(text))
    error = reply.get("error")
    if not reply.get("ok") and isinstance(error, dict):
        outputs.append(_error_output(str(error.get("type", "Error"))[:100], str(error.get("message", ""))[:2000]))
    return outputs


class Notebook:
    """Grades one notebook: runs its student and read-only cells in the sandbox, its tests here."""

    def __init__(self, zygote: Zygote, cells: list[Cell], names: list[str], cell_timeout: float,
                 notebook_timeout: float, data_dir: str | None) -> None:
        self.zygote, self.cells, self.names = zygote, cells, names
        self.cell_timeout, self.notebook_timeout = cell_timeout, notebook_timeout
        self.data_dir = data_dir
        self.outcome = Outcome()
        self.deadline = time.monotonic() + notebook_timeout

    def _spawn(self) -> Child | None:
        started = time.perf_counter()
        try:
            child = self.zygote.spawn()
        except SandboxStopped as exc:
            self.outcome.note("stopped", str(exc))
            return None
        finally:
            self.outcome.timing["startup"] += time.perf_counter() - started
        return child

    def _run_code_cells(self) -> Child | None:
        """Step 1: every student and read-only code cell, in order, in one child (replaced if lost)."""
        code_cells = [c for c in self.cells if c.kind in ("student", "readonly")]
        child, completed, position = self._spawn(), [], 0
        started = time.perf_counter()
        while child is not None and position < len(code_cells):
            cell = code_cells[position]
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.outcome.note("timeout", "the notebook ran past its time limit: later cells were not run")
                break
            try:
                reply = child.request({"op": "run", "code": cell.source}, min(self.cell_timeout, left))
            except (SandboxStopped, CellTimeout) as exc:
                where = f"cell {cell.grade_id or cell.index}"
                self.outcome.note("stopped", f"{where}: {exc} ({child.exit_status or 'no status'}); "
                                             "it and the cells after it were not run")
                self.outcome.outputs[cell.index] = [_error_output("GraderStopped", str(exc))]
                # A new process re-runs the cells that completed, so the tests see what they defined.
                child = self._spawn()
                for earlier in completed:
                    if child is None:
                        break
                    try:
                        child.request({"op": "run", "code": earlier.source}, self.cell_timeout)
                    except (SandboxStopped, CellTimeout):
                        self.outcome.note("stopped", "the cells before the one that stopped could not be re-run")
                        child = None
                for later in code_cells[position + 1:]:
                    self.outcome.outputs[later.index] = [_error_output(
                        "GraderStopped", f"not run: the process stopped at cell {cell.grade_id or cell.index}")]
                break
            if reply.get("timed_out"):
                self.outcome.note("timeout", f"cell {cell.grade_id or cell.index} ran past its "
                                             f"{self.cell_timeout:g} s time limit and was interrupted")
            self.outcome.outputs[cell.index] = _cell_outputs(reply)
            completed.append(cell)
            position += 1
        self.outcome.timing["student"] += time.perf_counter() - started
        return child

    def _run_tests(self, child: Child | None) -> None:
        """Step 2: read-only and test cells here, with the student's names as proxies."""
        started = time.perf_counter()
        calls = _Calls(child) if child is not None else None
        namespace: dict = {"__name__": "__main__", "get_ipython": lambda: _NoShell()}
        previous = os.getcwd()
        if self.data_dir:
            os.chdir(self.data_dir)
        try:
            for cell in self.cells:
                if cell.kind == "readonly":
                    ok, text, error = self._exec(cell, namespace, calls, time.monotonic() + self.cell_timeout)
                    if not ok:
                        self.outcome.notes.append(f"read-only cell {cell.grade_id or cell.index} failed in the "
                                                  f"judge: {error}")
                elif cell.kind == "test":
                    cell_started = time.perf_counter()
                    deadline = min(time.monotonic() + self.cell_timeout, self.deadline)
                    self._bind(namespace, calls)
                    ok, text, error = self._exec(cell, namespace, calls, deadline)
                    record = {"passed": ok, "seconds": round(time.perf_counter() - cell_started, 4)}
                    outputs = [_stream(text)] if text else []
                    if not ok:
                        record["message"] = error
                        kind, _, detail = error.partition(": ")
                        outputs.append(_error_output(kind, detail or error))
                    self.outcome.tests[cell.grade_id] = record
                    self.outcome.outputs[cell.index] = outputs
        finally:
            os.chdir(previous)
        self.outcome.timing["checks"] += time.perf_counter() - started

    def _bind(self, namespace: dict, calls: _Calls | None) -> None:
        """Before each test cell: each of the student's names as the child has it now."""
        for name in self.names:
            namespace.pop(name, None)
        if calls is None:
            return
        calls.deadline = min(time.monotonic() + self.cell_timeout, self.deadline)
        try:
            described = calls.ask({"op": "describe", "names": self.names})
        except Exception:  # noqa: BLE001 - the test cell then fails on a missing name, with the reason
            return
        if not isinstance(described, dict):
            return
        for name in self.names:
            entry = described.get(name)
            if not isinstance(entry, dict):
                continue
            if entry.get("kind") == "callable":
                namespace[name] = RemoteFunction(calls, name)
            elif entry.get("kind") == "value":
                namespace[name] = entry.get("value")

    @staticmethod
    def _exec(cell: Cell, namespace: dict, calls: _Calls | None, deadline: float) -> tuple[bool, str, str]:
        """Run instructor code here; (completed, printed text, error message)."""
        if calls is not None:
            calls.deadline = deadline
        buffer = io.StringIO()
        try:
            code = compile(_python_only(cell.source), f"<{cell.kind} cell {cell.grade_id or cell.index}>", "exec")
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                exec(code, namespace)  # noqa: S102 - the instructor's cell, in the judge
            error = ""
        except NameError as exc:
            name = getattr(exc, "name", None)
            error = f"NameError: {exc}" + (" (it is not defined in your notebook, or your notebook could not "
                                           "run it)" if name else "")
        except StudentCodeError as exc:
            error = f"your code raised {exc}"
        except (CellTimeout, SandboxStopped) as exc:
            error = f"{type(exc).__name__}: {exc}"
        except BaseException as exc:  # noqa: BLE001 - any failure of a test is that test's failure
            error = f"{type(exc).__name__}: {exc}"
        text = buffer.getvalue()
        if len(text) > MAX_TEST_OUTPUT:
            text = text[:MAX_TEST_OUTPUT] + "\n[output truncated by the grader]\n"
        return not error, text, error[:2000]

    def grade(self) -> Outcome:
        child = self._run_code_cells()
        try:
            self._run_tests(child)
        finally:
            if child is not None:
                child.close()
                if child.stopped:
                    self.outcome.note("stopped", child.stopped)
        for cell in self.cells:  # fail closed: a test cell that left no record did not pass
            if cell.kind == "test" and cell.grade_id not in self.outcome.tests:
                self.outcome.tests[cell.grade_id] = {"passed": False, "message": "the test did not run"}
        return self.outcome


def grade_notebook(zygote: Zygote, cells: list[Cell], names: list[str], *, cell_timeout: float,
                   notebook_timeout: float, data_dir: str | None) -> Outcome:
    return Notebook(zygote, cells, names, cell_timeout, notebook_timeout, data_dir).grade()


def needs_torch(sources: list[str]) -> bool:
    return any("torch" in source for source in sources)


def preload_for(sources: list[str]) -> list[str]:
    """The modules the zygote imports before forking (paid once per worker, not per notebook)."""
    modules = ["numpy", "IPython", "attention_course", "attention_course.testing.checks"]
    if needs_torch(sources):
        modules += ["torch", "attention_course.torch_track"]
    return modules


def job_cells(job: dict) -> list[Cell]:
    return [Cell(**cell) for cell in job["cells"]]


def read_job(path: Path) -> dict:
    return json.loads(Path(path).read_text())
