"""Execute one notebook in one fresh (sandboxed) kernel, cell by cell, with time limits.

Every way a run can end has a defined result, written into the notebook itself so that
nbgrader's scoring (an error output scores 0) sees it:

- a cell over its time limit is interrupted (``interrupt_mode: message``); it gets a
  ``CellTimeoutError`` output and the notebook goes on;
- a kernel that ignores the interrupt, dies (``os._exit``, a segfault, SIGKILL, a resource limit)
  or runs past the notebook's time limit is killed; the cell it was running and every code cell
  after it get a ``GraderStopped`` error output naming the reason;
- output beyond a size cap is dropped (with a note), so a printing loop cannot exhaust the grader.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import asdict, dataclass, field

import nbformat
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from traitlets import Instance, Integer

from .sandbox import SandboxConfig, kernel_argv, kernel_env

STOPPED = "GraderStopped"
TIMEOUT = "CellTimeoutError"


@dataclass
class Outcome:
    """How the execution of one notebook ended."""

    status: str = "ok"            # ok | timeout (a cell was interrupted) | stopped (the kernel was lost)
    reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cells_run: int = 0

    def note(self, status: str, reason: str) -> None:
        if status == "stopped" or self.status == "ok":
            self.status = status
        self.reasons.append(reason)


class _OneSpec(KernelSpecManager):
    """Hands out the one kernelspec built for this kernel."""

    spec = Instance(KernelSpec)

    def find_kernel_specs(self):
        return {"python3": ""}

    def get_kernel_spec(self, kernel_name, *args, **kwargs):
        return self.spec


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose connection file is readable by the sandbox uid."""

    owner_uid = Integer(None, allow_none=True)

    def write_connection_file(self, **kwargs):
        super().write_connection_file(**kwargs)
        if self.owner_uid is not None and os.path.exists(self.connection_file):
            os.chown(self.connection_file, self.owner_uid, self.owner_uid)


class GradingClient(NotebookClient):
    """nbclient with a cap on output size per cell."""

    max_cell_output_bytes = Integer(2_000_000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._output_bytes: dict[int, int] = {}
        self._truncated: set[tuple[int, str]] = set()

    def output(self, outs, msg, display_id, cell_index):
        content = msg["content"]
        size = len(json.dumps(content, default=str))
        used = self._output_bytes.get(cell_index, 0)
        if used + size <= self.max_cell_output_bytes:
            self._output_bytes[cell_index] = used + size
            return super().output(outs, msg, display_id, cell_index)
        msg_type = msg["msg_type"]
        if msg_type == "error":
            # Keep the error (it is what fails the cell), trimmed.
            outs.append(new_output("error", ename=str(content.get("ename", "Error"))[:200],
                                   evalue=str(content.get("evalue", ""))[:2000],
                                   traceback=[str(line)[:2000] for line in content.get("traceback", [])[:20]]))
            return None
        name = content.get("name", "stdout") if msg_type == "stream" else "stdout"
        if (cell_index, name) not in self._truncated:
            self._truncated.add((cell_index, name))
            # A stderr note keeps the meaning of stderr output (nbgrader scores it 0).
            outs.append(new_output("stream", name=name, text="\n... output truncated by the grader ...\n"))
        return None


def _error_output(ename: str, reason: str):
    return new_output("error", ename=ename, evalue=reason, traceback=[f"{ename}: {reason}"])


async def _execute(nb, *, config: SandboxConfig, workdir: str, runtime_dir: str, uid: int | None,
                   cell_timeout: int, notebook_timeout: int, outcome: Outcome, files: list[str]) -> None:
    spec = KernelSpec(argv=kernel_argv(config, workdir=workdir, runtime_dir=runtime_dir, uid=uid, files=files),
                      display_name="Python 3 (grading sandbox)", language="python",
                      interrupt_mode="message")
    km = SandboxKernelManager(kernel_name="python3", kernel_spec_manager=_OneSpec(spec=spec),
                              transport="ipc", ip=os.path.join(runtime_dir, "k"),
                              connection_file=os.path.join(runtime_dir, "kernel.json"), owner_uid=uid)
    start = time.monotonic()
    deadline = start + notebook_timeout

    def executed(cell, cell_index, execute_reply):
        content = execute_reply["content"]
        if content.get("status") == "error" and content.get("ename") == TIMEOUT:
            outcome.note("timeout", f"cell {cell_index} ran past its {client.timeout} s time limit and was interrupted")
            if not any(o.get("output_type") == "error" and o.get("ename") == TIMEOUT for o in cell.outputs):
                cell.outputs.append(_error_output(TIMEOUT, f"no result within {client.timeout} s"))

    client = GradingClient(
        nb, km=km, kernel_name="python3", timeout=cell_timeout,
        startup_timeout=max(5, min(60, notebook_timeout)),
        interrupt_on_timeout=True, allow_errors=True, raise_on_iopub_timeout=True, iopub_timeout=5,
        error_on_timeout={"ename": TIMEOUT, "evalue": "", "traceback": [f"{TIMEOUT}: no result before the time limit"]},
        record_timing=False, store_widget_state=False, shutdown_kernel="immediate",
        resources={"metadata": {"path": workdir}}, on_cell_executed=executed,
    )
    stop_reason: str | None = None
    try:
        try:
            # An explicit env: otherwise jupyter_client hands the grader's whole environment to the kernel.
            await asyncio.wait_for(client.async_start_new_kernel(cwd=workdir, env=kernel_env(config)),
                                   timeout=max(5, notebook_timeout))
            await client.async_start_new_kernel_client()
        except Exception as exc:  # noqa: BLE001 - any failure to start is an outcome, not a crash
            stop_reason = f"the kernel did not start: {type(exc).__name__}: {exc}".strip()
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            cell.outputs = []
            if stop_reason is None and time.monotonic() >= deadline - 0.5:
                stop_reason = f"the notebook ran past its {notebook_timeout} s time limit"
            if stop_reason is not None:
                if cell.source.strip():
                    cell.outputs = [_error_output(STOPPED, f"not run: {stop_reason}")]
                continue
            client.timeout = max(1, int(min(cell_timeout, deadline - time.monotonic())))
            try:
                await client.async_execute_cell(cell, index)
                outcome.cells_run += 1
            except CellTimeoutError:
                stop_reason = f"cell {index} ignored the interrupt after its time limit; the kernel was killed"
            except DeadKernelError:
                stop_reason = (f"the kernel died in cell {index} (a crash, os._exit, or a memory, "
                               "CPU-time or process limit)")
            except Exception as exc:  # noqa: BLE001
                stop_reason = f"execution failed in cell {index}: {type(exc).__name__}: {exc}"
            if stop_reason is not None:
                cell.outputs.append(_error_output(STOPPED, stop_reason))
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
        try:
            if km.has_kernel:
                await asyncio.wait_for(km.shutdown_kernel(now=True), timeout=15)
        except Exception:  # noqa: BLE001 - a kernel that will not shut down is killed
            try:
                if km.provisioner is not None:
                    await km.provisioner.kill()
                await km.cleanup_resources()
            except Exception:  # noqa: BLE001
                pass
    if stop_reason is not None:
        outcome.note("stopped", stop_reason)
    outcome.seconds = round(time.monotonic() - start, 3)


def execute_notebook(nb, *, config: SandboxConfig, workdir: str, runtime_dir: str, uid: int | None,
                     cell_timeout: int, notebook_timeout: int, files: list[str] | None = None) -> Outcome:
    """Execute ``nb`` in place; returns how it ended (never raises for anything the student did).

    ``files`` (the assignment's data files) appear read-only in the sandbox's working folder.
    """
    outcome = Outcome()
    asyncio.run(_execute(nb, config=config, workdir=workdir, runtime_dir=runtime_dir, uid=uid,
                         cell_timeout=cell_timeout, notebook_timeout=notebook_timeout, outcome=outcome,
                         files=list(files or [])))
    return outcome


def limit_output(nb, max_lines: int = 1000, max_traceback: int = 100) -> None:
    """Trim long outputs as nbgrader's LimitOutput does (without importing nbgrader in the worker)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        length, kept = 0, []
        for output in cell.outputs:
            if output.output_type == "stream":
                if length >= max_lines:
                    continue
                lines = output.text.split("\n")
                if len(lines) + length > max_lines:
                    lines = lines[: max_lines - length - 1] + ["... Output truncated ..."]
                length += len(lines)
                output.text = "\n".join(lines)
            elif output.output_type == "error" and len(output.traceback) > max_traceback:
                start = max_traceback // 2
                output.traceback = (output.traceback[:start] + ["... Traceback truncated ..."]
                                    + output.traceback[-(max_traceback - start - 1):])
            kept.append(output)
        cell.outputs = kept


def outcome_json(outcome: Outcome) -> dict:
    return asdict(outcome)


def read_notebook(path: str):
    return nbformat.read(path, as_version=4)
