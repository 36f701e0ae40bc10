"""A user's server's output, as the hub keeps it (``jupyterhub/userlog.py``): her own log, capped,
copied at a bounded rate, closed when her processes are gone."""

from __future__ import annotations

import asyncio
import os
import threading
import time

from autograder.jupyterhub import userlog


def run_with(log_path, body):
    """Run ``body(log)`` (a coroutine function) in an event loop with a fresh UserLog."""
    async def main():
        log = userlog.UserLog(log_path)
        try:
            return await body(log)
        finally:
            log.close()

    return asyncio.run(main())


async def until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


def test_the_output_reaches_the_users_log_root_only_and_ends_with_the_writers(tmp_path):
    path = tmp_path / "logs" / "users" / "bo.log"

    async def body(log):
        server = os.dup(log.write_end)   # the server's copy
        log.hand_over()
        assert log.write_end == -1
        os.write(server, b"[I server] started\n")
        await until(lambda: path.read_bytes() == b"[I server] started\n")
        os.close(server)   # the last writer gone: the hub closes its end
        await until(lambda: log.read_end == -1)

    run_with(path, body)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"


def test_a_log_keeps_two_files_of_the_cap_at_most(tmp_path, monkeypatch):
    monkeypatch.setattr(userlog, "CAP", 100_000)
    monkeypatch.setattr(userlog, "RATE", 10 * 2**20)
    monkeypatch.setattr(userlog, "BURST", 10 * 2**20)
    path = tmp_path / "bo.log"
    line = b"x" * 999 + b"\n"

    async def body(log):
        server = log.write_end
        log.write_end = -1
        def write() -> None:
            for _ in range(1000):
                os.write(server, line)
            os.close(server)

        writer = threading.Thread(target=write)
        writer.start()
        await until(lambda: log.read_end == -1, 30)
        writer.join()

    run_with(path, body)
    kept = [path, path.with_name("bo.log.1")]
    assert all(p.stat().st_size <= 100_000 for p in kept) and kept[1].stat().st_size > 50_000
    assert path.read_bytes().endswith(line)


def test_the_hub_copies_at_most_its_rate_from_one_server(tmp_path, monkeypatch):
    """A server that writes as fast as it can: the hub reads a burst, then its rate; the writer waits."""
    monkeypatch.setattr(userlog, "RATE", 64 * 2**10)
    monkeypatch.setattr(userlog, "BURST", 128 * 2**10)
    monkeypatch.setattr(userlog, "CHUNK", 16 * 2**10)
    path = tmp_path / "bo.log"
    written = []

    async def body(log):
        server = log.write_end
        log.write_end = -1
        os.set_blocking(server, False)

        def flood() -> None:
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                try:
                    written.append(os.write(server, b"y" * 4096))
                except BlockingIOError:
                    time.sleep(0.005)
            os.close(server)

        writer = threading.Thread(target=flood)
        started = time.monotonic()
        writer.start()
        await asyncio.sleep(1.5)
        copied, elapsed = path.stat().st_size, time.monotonic() - started
        writer.join()
        return copied, elapsed

    copied, elapsed = run_with(path, body)
    assert sum(written) > copied   # the writer wrote more than was read: it waited on its full pipe
    assert 64 * 2**10 <= copied <= 128 * 2**10 + 64 * 2**10 * elapsed + 16 * 2**10, (copied, elapsed)
