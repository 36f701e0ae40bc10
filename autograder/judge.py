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

Expected values come from the judge alone: the test cells compute them from their own inputs, with
the course package and the exercise's own reference (``reference.py`` beside the source notebook,
bound to the name ``reference``), neither of which the sandbox holds.

Every wait has a deadline and every input a budget: a reply must arrive whole within the call's
time limit (a frame's length followed by nothing is a timeout, not a hang); a notebook's replies
and recorded output are bounded (``REPLY_BUDGET``, ``OUTPUT_BUDGET``): a reply over budget fails
its test cell with the reason, and the notebook goes on.

A record has two messages: ``message``, everything the instructor may want (the failing check, the
student's exception), and ``feedback``, what the student may see. For a check that failed in the
hidden part of a test cell, ``feedback`` never holds a value, message or traceback computed for or
returned from it: only that a hidden test failed and the instructor's reason (a ``# reason: ...``
comment above the check in the hidden part), or a fixed sentence.

This module never executes a line of the student's code, and never sends a test's source to the
sandbox.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import io
import json
import os
import re
import select
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import wire
from .references import NAME as REFERENCE_NAME, remembered_reference
from .sandbox import SandboxConfig, Staged, runner_argv

MAX_TEST_OUTPUT = 64 * 1024
INTERRUPT_GRACE = 2.0
OUTPUT_BUDGET = 2 * 1024 * 1024        # characters of the student's cells' output kept per notebook
REPLY_LIMIT = 128 * 1024 * 1024        # bytes of one reply from the sandbox
REPLY_BUDGET = 512 * 1024 * 1024       # bytes of all replies of one notebook
HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
HIDDEN_FAILED = "a hidden test of this cell failed"


class SandboxStopped(RuntimeError):
    """The child that ran the student's code is gone (it exited, was killed, or stopped answering)."""


class CellTimeout(RuntimeError):
    """A call into the student's code ran past the cell's time limit."""


class ReplyOverBudget(RuntimeError):
    """A reply of the student's code over the size limits (read and dropped; the process goes on)."""


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
        self.startup_total = 0.0  # every start of this zygote, restarts included
        self.replaced = 0     # how often a child's clean-up failed and the zygote was closed for it
        self.left = ""        # what the last failed clean-up left

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 180.0) -> None:
        started = time.perf_counter()
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        staged = Staged()  # the runner, the library and the data files, copied in by bubblewrap
        try:
            argv = runner_argv(self.config, uid=self.uid, work_dir=self.work_dir, data_dir=self.data_dir,
                               preload=self.preload, control_fd=theirs.fileno(), staged=staged)
            self.proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(), *staged.fds), stdin=subprocess.DEVNULL,
                                         stdout=self.log or subprocess.DEVNULL, stderr=self.log or subprocess.DEVNULL,
                                         start_new_session=True)
        finally:
            staged.close()
            theirs.close()
        self.control = ours
        message = self._read(timeout)
        if message is None or message.get("op") != "ready":
            self.close()
            raise SandboxStopped(f"the sandbox did not start ({message or 'no answer'})")
        self.startup_seconds = time.perf_counter() - started
        self.startup_total += self.startup_seconds

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

    def wait_exited(self, timeout: float = 30.0) -> str | None:
        """After a child's socket closed: the zygote's report that it is gone and all is cleaned.

        A zygote that does not answer, or could not clean up everything the child left, is closed:
        the next submission gets a new one (a new sandbox, with empty folders)."""
        deadline = time.monotonic() + timeout
        while self.child_alive:
            message = self._read(deadline - time.monotonic())
            if message is None:
                self.replaced += 1
                self.left = ""
                self.close()  # no answer: the zygote itself is in trouble; a new one next time
                return None
            if message.get("op") == "exited":
                self.child_alive = False
                if message.get("clean") is not True:
                    left = message.get("left")
                    self.left = ", ".join(map(str, left))[:300] if isinstance(left, list) else "unknown"
                    self.replaced += 1
                    self.close()
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
        self.reply_budget = REPLY_BUDGET  # bytes the rest of this notebook's replies may take

    def _take(self, size: int) -> None:
        """``wire.receive``'s size check: one reply within ``REPLY_LIMIT``, all within the budget."""
        limit = min(REPLY_LIMIT, self.reply_budget)
        if size > limit:
            self.reply_budget = max(0, self.reply_budget - size)
            which = "one reply's limit" if limit == REPLY_LIMIT else "this notebook's budget for replies"
            raise wire.OverBudget(f"your code's reply ({size / 2**20:.1f} MiB) is over {which} "
                                  f"({limit / 2**20:.0f} MiB)")
        self.reply_budget -= size

    def request(self, message: dict, timeout: float) -> dict:
        """Send one request and return the child's reply; SandboxStopped or CellTimeout otherwise.

        The whole reply must arrive within ``timeout`` (plus the interrupt's grace when it had to be
        interrupted): a reply that starts and stalls is a timeout, and its process is stopped."""
        if self.stopped:
            raise SandboxStopped(self.stopped)
        try:
            wire.send(self.sock, message)
        except wire.WireError:
            raise
        except OSError:
            self._stop("the process running your code has stopped")
            raise SandboxStopped(self.stopped) from None
        deadline = time.monotonic() + max(0.0, timeout)
        timed_out = False
        if not self._wait(deadline - time.monotonic()):
            timed_out = True
            self.zygote.signal("interrupt")
            deadline = time.monotonic() + INTERRUPT_GRACE
            if not self._wait(INTERRUPT_GRACE):
                self.zygote.signal("kill")
                self._stop("your code ran past its time limit and ignored the interrupt: its process was stopped")
                raise CellTimeout(self.stopped)
        try:
            reply = wire.receive(self.sock, deadline=deadline + INTERRUPT_GRACE, on_size=self._take)
        except wire.OverBudget as exc:
            return {"ok": False, "over_budget": str(exc), "output": ""}
        except wire.WireTimeout:
            self.zygote.signal("kill")
            self._stop("your code's reply did not arrive whole within the time limit: its process was stopped")
            raise CellTimeout(self.stopped) from None
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
            reply = self.child.request(dict(self.outgoing(message), max_output=0), self.remaining())
        except wire.WireError as exc:
            raise TypeError(f"the test cannot send this to your code: {exc}") from None
        if reply.get("timed_out"):
            raise CellTimeout("your code ran past the test cell's time limit and was interrupted")
        if reply.get("over_budget"):
            raise ReplyOverBudget(reply["over_budget"])
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


@functools.lru_cache(maxsize=1024)
def _python_only(source: str) -> str:
    """The cell as Python: IPython's magics and shell escapes become calls (as IPython does it).
    (Remembered: a class's notebooks share their instructor cells, and IPython's transforms took
    a tenth of a notebook's checks.)"""
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
    if reply.get("over_budget"):
        outputs.append(_error_output("GraderLimit", str(reply["over_budget"])))
    return outputs


@dataclass
class Segment:
    """A run of a test cell's lines, visible or hidden, compiled on its own."""

    hidden: bool
    code: object          # a code object
    reasons: list[tuple[int, str]] = field(default_factory=list)   # (line, the instructor's reason)


_REASON = re.compile(r"^\s*#\s*reason:\s*(.+?)\s*$", re.IGNORECASE)


def test_segments(cell: Cell) -> tuple[Segment, ...]:
    """The cell's visible and hidden parts, in order, each compiled alone (the hidden markers split
    them). A cell whose parts do not compile alone (a marker inside a block) is one hidden segment:
    any failure in it is then reported as a hidden test's."""
    return _segments(cell.source, f"<test cell {cell.grade_id or cell.index}>")


@functools.lru_cache(maxsize=256)   # (the same test cells in every notebook of a batch; never changed)
def _segments(cell_source: str, where: str) -> tuple[Segment, ...]:
    source = _python_only(cell_source)
    lines = source.splitlines()
    hidden_any = any(HIDDEN_BEGIN in line for line in lines)
    parts: list[tuple[bool, list[str]]] = [(False, [])]
    for line in lines:
        if HIDDEN_BEGIN in line:
            parts.append((True, []))
        elif HIDDEN_END in line:
            parts.append((False, []))
        parts[-1][1].append(line)   # the marker lines stay (as comments), so line numbers match
    try:
        segments = []
        offset = 0
        for hidden, chunk in parts:
            text = "\n" * offset + "\n".join(chunk)
            reasons = [(offset + number + 1, match.group(1)) for number, line in enumerate(chunk)
                       if hidden and (match := _REASON.match(line))]
            segments.append(Segment(hidden, compile(text, where, "exec"), reasons))
            offset += len(chunk)
        return tuple(segments)
    except SyntaxError:
        if not hidden_any:
            raise
        reasons = [(number + 1, match.group(1)) for number, line in enumerate(lines) if (match := _REASON.match(line))]
        return (Segment(True, compile(source, where, "exec"), reasons),)


def _failing_line(exc: BaseException, where: str) -> int | None:
    """The line of the test cell (``where``) in which ``exc`` was raised, from its traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == where:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _reason_for(segment: Segment, line: int | None) -> str | None:
    """The instructor's reason written closest above ``line`` in a hidden segment."""
    if line is None:
        return None
    before = [text for number, text in segment.reasons if number < line]
    return before[-1][:300] if before else None


def hidden_feedback(reason: str | None, detail: str | None = None) -> str:
    """What a student reads about a hidden test that failed: never a value or a message of the test."""
    text = HIDDEN_FAILED + (f": {reason}" if reason else "")
    return text + (f" ({detail})" if detail else "")


class Notebook:
    """Grades one notebook: runs its student and read-only cells in the sandbox, its tests here."""

    def __init__(self, zygote: Zygote, cells: list[Cell], names: list[str], cell_timeout: float,
                 notebook_timeout: float, data_dir: str | None, reference: str | None = None) -> None:
        self.zygote, self.cells, self.names = zygote, cells, names
        self.cell_timeout, self.notebook_timeout = cell_timeout, notebook_timeout
        self.data_dir = data_dir
        self.reference = reference
        self.outcome = Outcome()
        self.deadline = time.monotonic() + notebook_timeout
        self.output_left = OUTPUT_BUDGET

    def _spawn(self) -> Child | None:
        """A fresh child; a spawn that fails is retried once on a fresh zygote."""
        started = time.perf_counter()
        try:
            for attempt in (1, 2):
                try:
                    return self.zygote.spawn()
                except SandboxStopped as exc:
                    self.zygote.close()
                    if attempt == 2:
                        self.outcome.note("stopped", str(exc))
            return None
        finally:
            self.outcome.timing["startup"] += time.perf_counter() - started

    def _run(self, child: Child, source: str, timeout: float) -> dict:
        """Run one cell in the child; its output counts against the notebook's output budget."""
        reply = child.request({"op": "run", "code": source, "max_output": self.output_left}, timeout)
        text = reply.get("output")
        if isinstance(text, str):
            if self.output_left and len(text) >= self.output_left:
                self.outcome.notes.append(f"this notebook's output budget ({OUTPUT_BUDGET // 2**20} MiB) "
                                          "is spent: the output of later cells was dropped")
            self.output_left = max(0, self.output_left - len(text))
        return reply

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
                reply = self._run(child, cell.source, min(self.cell_timeout, left))
            except (SandboxStopped, CellTimeout) as exc:
                where = f"cell {cell.grade_id or cell.index}"
                self.outcome.note("stopped", f"{where}: {exc} ({child.exit_status or 'no status'}); "
                                             "it and the cells after it were not run")
                self.outcome.outputs[cell.index] = [_error_output("GraderStopped", str(exc))]
                # A new process re-runs the cells that completed, so the tests see what they defined.
                child = self._spawn()
                for earlier in completed:
                    left = self.deadline - time.monotonic()
                    if child is None or left <= 0:
                        break
                    try:
                        child.request({"op": "run", "code": earlier.source, "max_output": 0},
                                      min(self.cell_timeout, left))
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

    def _namespace(self) -> dict:
        namespace: dict = {"__name__": "__main__", "get_ipython": lambda: _NoShell()}
        if self.reference:
            namespace[REFERENCE_NAME] = remembered_reference(self.reference)
        return namespace

    def _run_tests(self, child: Child | None) -> None:
        """Step 2: read-only and test cells here, with the student's names as proxies.

        In two passes, so that nothing a hidden test sends into the student's code can come back in
        what the student reads: first, in notebook order, the read-only cells and each test cell's
        visible part (what precedes its first hidden part); a failure there is reported with its own
        message. Then each test cell's hidden part (and whatever follows it in the cell), in the
        namespace its visible part left: no visible check runs after any hidden input was sent, and
        a failure there is reported as a hidden test's (the instructor's reason, never a message)."""
        started = time.perf_counter()
        calls = _Calls(child) if child is not None else None
        namespace = self._namespace()
        previous = os.getcwd()
        if self.data_dir:
            os.chdir(self.data_dir)
        deferred = []   # (cell, its hidden segments, its namespace, seconds spent, printed text)
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
                    try:
                        segments = test_segments(cell)
                    except (SyntaxError, ValueError) as exc:
                        message = f"the test cell does not compile: {type(exc).__name__}: {exc}"[:2000]
                        self._record(cell, {"passed": False, "message": message,
                                            "feedback": "the test cell could not run"}, "", cell_started)
                        continue
                    first_hidden = next((i for i, s in enumerate(segments) if s.hidden), len(segments))
                    record, text = self._test(cell, segments[:first_hidden], namespace, calls, deadline)
                    if record["passed"] and first_hidden < len(segments):
                        deferred.append((cell, segments[first_hidden:], dict(namespace),
                                         time.perf_counter() - cell_started, text))
                    else:
                        record["visible_passed"] = record["passed"]
                        self._record(cell, record, text, cell_started)
            for cell, segments, cell_namespace, spent, before in deferred:
                cell_started = time.perf_counter() - spent
                deadline = min(time.monotonic() + max(0.0, self.cell_timeout - spent), self.deadline)
                self._bind(cell_namespace, calls)
                record, text = self._test(cell, segments, cell_namespace, calls, deadline)
                record["visible_passed"] = True   # (what a check that shows visible tests only reports)
                self._record(cell, record, before + text, cell_started)
        finally:
            os.chdir(previous)
        self.outcome.timing["checks"] += time.perf_counter() - started

    def _record(self, cell: Cell, record: dict, text: str, cell_started: float) -> None:
        record["seconds"] = round(time.perf_counter() - cell_started, 4)
        outputs = [_stream(text)] if text else []
        if not record["passed"]:
            kind, _, detail = record["message"].partition(": ")
            outputs.append(_error_output(kind, detail or record["message"]))
        self.outcome.tests[cell.grade_id] = record
        self.outcome.outputs[cell.index] = outputs

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

    def _test(self, cell: Cell, segments, namespace: dict, calls: _Calls | None,
              deadline: float) -> tuple[dict, str]:
        """Run some of a test cell's parts here, in order; their record (``passed``, ``message``,
        ``feedback``) and what they printed. A failure in a hidden part, or in any part after one,
        gives the student only ``hidden_feedback``."""
        if calls is not None:
            calls.deadline = deadline
        where = f"<test cell {cell.grade_id or cell.index}>"
        buffer = io.StringIO()
        after_hidden = False   # what runs after a hidden part may use its values: treated as hidden
        for segment in segments:
            after_hidden = after_hidden or segment.hidden
            error, exc = self._run_code(segment.code, namespace, buffer)
            if not error:
                continue
            text = self._printed(buffer)
            if not after_hidden:
                return {"passed": False, "message": error, "feedback": error.splitlines()[0][:300]}, text
            detail = str(exc) if isinstance(exc, (CellTimeout, SandboxStopped)) else None
            reason = _reason_for(segment, _failing_line(exc, where)) if segment.hidden else None
            return {"passed": False, "message": error, "feedback": hidden_feedback(reason, detail)}, text
        return {"passed": True}, self._printed(buffer)

    @staticmethod
    def _printed(buffer: io.StringIO) -> str:
        text = buffer.getvalue()
        if len(text) > MAX_TEST_OUTPUT:
            text = text[:MAX_TEST_OUTPUT] + "\n[output truncated by the grader]\n"
        return text

    @staticmethod
    def _run_code(code, namespace: dict, buffer: io.StringIO) -> tuple[str, BaseException | None]:
        """Run compiled instructor code here; ("", None) when it completed, else the error message
        (for the instructor) and the exception."""
        try:
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                exec(code, namespace)  # noqa: S102 - the instructor's cell, in the judge
            return "", None
        except BaseException as exc:  # noqa: BLE001 - any failure of a test is that test's failure
            caught = exc
        if isinstance(caught, NameError):
            error = f"NameError: {caught}" + (" (it is not defined in your notebook, or your notebook could not "
                                              "run it)" if getattr(caught, "name", None) else "")
        elif isinstance(caught, StudentCodeError):
            error = f"your code raised {caught}"
        else:
            error = f"{type(caught).__name__}: {caught}"
        return error[:2000], caught

    def _exec(self, cell: Cell, namespace: dict, calls: _Calls | None, deadline: float) -> tuple[bool, str, str]:
        """Run a read-only cell here; (completed, printed text, error message)."""
        if calls is not None:
            calls.deadline = deadline
        buffer = io.StringIO()
        try:
            code = compile(_python_only(cell.source), f"<{cell.kind} cell {cell.grade_id or cell.index}>", "exec")
        except (SyntaxError, ValueError) as exc:
            return False, "", f"{type(exc).__name__}: {exc}"[:2000]
        error, _ = self._run_code(code, namespace, buffer)
        return not error, self._printed(buffer), error

    def grade(self) -> Outcome:
        replaced = self.zygote.replaced
        child = self._run_code_cells()
        try:
            self._run_tests(child)
        finally:
            if child is not None:
                child.close()
                if child.stopped:
                    self.outcome.note("stopped", child.stopped)
        if self.zygote.replaced > replaced:
            left = self.zygote.left or "no answer from it"
            self.outcome.notes.append(f"the sandbox could not be emptied after this notebook ({left}): it was "
                                      "replaced before the next one")
        for cell in self.cells:  # fail closed: a test cell that left no record did not pass
            if cell.kind == "test" and cell.grade_id not in self.outcome.tests:
                self.outcome.tests[cell.grade_id] = {"passed": False, "message": "the test did not run",
                                                     "feedback": "the test did not run"}
        return self.outcome


def grade_notebook(zygote: Zygote, cells: list[Cell], names: list[str], *, cell_timeout: float,
                   notebook_timeout: float, data_dir: str | None, reference: str | None = None) -> Outcome:
    return Notebook(zygote, cells, names, cell_timeout, notebook_timeout, data_dir, reference).grade()


def needs_torch(sources: list[str]) -> bool:
    return any("torch" in source for source in sources)


def course_imports(sources: list[str]) -> list[str]:
    """The ``attention_course`` modules these cells import (what the sandbox library must offer)."""
    found: list[str] = []
    for source in sources:
        try:
            tree = ast.parse(_python_only(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            found += [name for name in names if name.split(".")[0] == "attention_course" and name not in found]
    return found


def preload_for(sources: list[str], course_modules: list[str] = ()) -> list[str]:
    """The modules the zygote imports before forking (paid once per worker, not per notebook):
    numpy, IPython, the course modules the sandbox offers, and torch when the notebook uses it."""
    modules = ["numpy", "IPython", "attention_course", *course_modules]
    if needs_torch(sources):
        modules.append("torch")
    return list(dict.fromkeys(modules))


def job_cells(job: dict) -> list[Cell]:
    return [Cell(**cell) for cell in job["cells"]]


def read_job(path: Path) -> dict:
    return json.loads(Path(path).read_text())
