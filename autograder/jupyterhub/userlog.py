"""A user's server's output: a pipe made for that server, which the hub copies into the user's own log.

Every process of a student's server (the server, its kernel zygote, its kernels and terminals)
writes its standard output and error into the write end of a pipe made for that server alone; the
hub keeps only the read end, and copies what comes out of it into ``logs/users/<user>.log``, root's
alone like the hub's own log. So a student writes into her own log only: never into the hub's (no
forged hub line, no truncation: a pipe cannot be truncated), and never past a cap: her log keeps
at most two files of ``CAP`` bytes (``<user>.log`` and the one before, ``<user>.log.1``), and the
hub reads at most ``RATE`` bytes a second from one server (past that her pipe fills and her own
writes wait: her processes slow down, nobody else's, and the hub spends little on her).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

CAP = 4 * 2**20          # bytes per file; the log keeps this file and the one before
RATE = 256 * 2**10       # bytes a second the hub copies from one server, on average ...
BURST = 2**20            # ... and at once, after a quiet while
CHUNK = 64 * 2**10


class UserLog:
    """The pipe of one server and the copy of its output into ``path``, in the hub's event loop.

    ``write_end`` goes to the server (as its stdout and stderr); whoever hands it over closes the
    hub's copy (``hand_over``), so that the pipe ends when the last of the user's processes is gone.
    """

    def __init__(self, path: Path, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.path = Path(path)
        self.loop = loop or asyncio.get_running_loop()
        self.read_end, self.write_end = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self.read_end, False)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.path.parent, 0o700)
            self.file = self._open()
        except OSError:   # no log (the hub's disk is full, say): the server starts all the same
            self.file = -1
        self.tokens, self.refilled = float(BURST), time.monotonic()
        self.paused: asyncio.TimerHandle | None = None
        self.loop.add_reader(self.read_end, self._copy)

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)
        return fd

    def hand_over(self) -> None:
        """The server holds its copy of the write end now (or never will): close the hub's."""
        if self.write_end >= 0:
            os.close(self.write_end)
            self.write_end = -1

    def _copy(self) -> None:
        now = time.monotonic()
        self.tokens = min(BURST, self.tokens + (now - self.refilled) * RATE)
        self.refilled = now
        try:
            data = os.read(self.read_end, max(1, min(CHUNK, int(self.tokens))))
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:   # every process of the server is gone
            self.close()
            return
        self._write(data)
        self.tokens -= len(data)
        if self.tokens < 1:   # read again once a chunk's worth is allowed
            self.loop.remove_reader(self.read_end)
            self.paused = self.loop.call_later(min(CHUNK, BURST) / RATE, self._resume)

    def _resume(self) -> None:
        self.paused = None
        if self.read_end >= 0:
            self.loop.add_reader(self.read_end, self._copy)

    def _write(self, data: bytes) -> None:
        try:
            if self.file >= 0 and os.fstat(self.file).st_size + len(data) > CAP:
                os.close(self.file)
                self.file = -1
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            if self.file < 0:
                self.file = self._open()
            os.write(self.file, data)
        except OSError:   # the hub's disk is full, say: this output is lost, the server goes on
            pass

    def close(self) -> None:
        """Copy what is left in the pipe (at most a pipe's worth), then close everything."""
        if self.read_end < 0:
            return
        if self.paused is not None:
            self.paused.cancel()
            self.paused = None
        self.loop.remove_reader(self.read_end)
        for _ in range(16):
            try:
                data = os.read(self.read_end, CHUNK)
            except OSError:
                break
            if not data:
                break
            self._write(data)
        os.close(self.read_end)
        self.read_end = -1
        self.hand_over()
        if self.file >= 0:
            os.close(self.file)
            self.file = -1
