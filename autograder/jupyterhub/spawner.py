"""The course hub's spawner: JupyterHub's local-process spawner, inside per-user limits.

Each user's server starts through ``enter.py`` (as root, then as the user): in the user's
cgroups (memory, processes, CPU), with a private, capped ``/tmp`` and ``/dev/shm`` and an IPC
namespace of its own, in the user's hub home (a filesystem of fixed size, ``limits.mount_home``).
The limits come from the hub's ``state.json`` at each start, so a changed roster (``hub update``)
holds for the next server. When the server stops, whatever it left in its cgroups is killed.

The server inherits no descriptor of the hub's: its input is ``/dev/null`` and its output (and
that of everything it starts) a pipe made for it, which the hub copies into the user's own log,
``logs/users/<user>.log`` (``userlog.py``).

Where the hub has a fork server (``forkserver.py``, started by ``hub start``), the server is
forked from it, which does the same steps in the child and then runs the server without
starting a new interpreter: the spawner holds a pidfd of that child (``ForkedServer``), so that
polling and signalling reach exactly it. Without one listening (no socket), the server starts
through ``enter.py`` as a new process, as before; so it does when the fork server's socket is there
but it died or gives no answer within a few seconds (stopped, hung), and then the hub replaces it
(``replace_fork_server``). If the fork server's child took the request but gave no server, the
start fails (the child is stopped: never two servers).
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import select
import signal
import subprocess
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import random_port
from traitlets import Any, Unicode

from . import forkserver, limits, userlog

ENTER = Path(__file__).resolve().parent / "enter.py"


def load_state(path: str) -> dict:
    return json.loads(Path(path).read_text())


def hub_home(state: dict, user: str) -> Path:
    return Path(state["hub_dir"]) / "homes" / user


def user_log(state: dict, user: str) -> Path:
    return Path(state["hub_dir"]) / "logs" / "users" / f"{user}.log"


# The ports this hub has given its users' servers (held until the server stops).
_ports_given: set[int] = set()


def take_port(previous: int = 0) -> int:
    """A port for a server about to start: free now (JupyterHub's ``random_port``: bound, then let
    go) and given to no other server of this hub. ``random_port`` alone let two servers starting at
    the same moment get the same port (seen: 1 of 30 in a class's login): the second could not
    listen, its user's address led to the first one's server, and her server answered 404."""
    _ports_given.discard(previous)
    for _ in range(1000):
        port = random_port()
        if port not in _ports_given:
            _ports_given.add(port)
            return port
    raise RuntimeError(f"no free port for a server: the {len(_ports_given)} ports this hub's servers hold come back")


def give_back_port(port: int) -> None:
    _ports_given.discard(port)


# The hub's replacement of a fork server that died or stopped answering: one at a time.
_replacing: asyncio.Future | None = None


def replace_fork_server(state: dict, unresponsive: int | None, log) -> None:
    """Start another fork server in the background (unless one is being started already); until it
    listens, servers start as new processes (its socket is gone meanwhile)."""
    global _replacing
    if _replacing is not None and not _replacing.done():
        return

    def done(future: asyncio.Future) -> None:
        if future.cancelled():   # the hub is stopping
            return
        if future.exception() is not None:
            log.error("the fork server could not be replaced (servers start as new processes): %s",
                      future.exception())
        else:
            log.warning("%s", future.result())

    _replacing = asyncio.ensure_future(asyncio.to_thread(
        forkserver.replace, Path(state["hub_dir"]), Path(state["venv"]), state.get("ld_library_path", ""),
        Path(state["python_path"]), unresponsive))
    _replacing.add_done_callback(done)


class ForkedServer:
    """What LocalProcessSpawner uses of a ``Popen``, for a server forked by the fork server (not the
    hub's child: the fork server reaps it). Its pidfd says when it has ended and takes signals for it
    alone; its exit status is the fork server's to know (reported as 0)."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid, self.pidfd = pid, pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self.pidfd >= 0 and select.select([self.pidfd], [], [], 0)[0]:
            self.returncode = 0
        return self.returncode

    def send_signal(self, signum: int) -> bool:
        """Whether the server was there to take it."""
        if self.poll() is not None:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, signum)
        except ProcessLookupError:
            return False
        return True

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
            self.returncode = 0 if self.returncode is None else self.returncode

    def __enter__(self) -> ForkedServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CourseSpawner(LocalProcessSpawner):
    state_path = Unicode(help="the hub's state.json (written by `python -m autograder hub start`)").tag(config=True)
    proc = Any(allow_none=True, help="the server's Popen, or its ForkedServer")
    output = Any(allow_none=True, help="the server's output, copied into the user's log (a userlog.UserLog)")

    def _state(self) -> dict:
        return load_state(self.state_path)

    def make_preexec_fn(self, name):
        return None   # enter.py drops to the user, after it has set the limits up as root

    def user_env(self, env):
        env = super().user_env(env)
        env["HOME"] = str(hub_home(self._state(), self.user.name))
        return env

    async def start(self):
        # a port of its own each time (LocalProcessSpawner keeps the last one, and asks random_port
        # only for the first start): nothing may be listening there now
        self.port = take_port(self.port)
        try:
            return await self._start()
        except BaseException:
            give_back_port(self.port)
            raise

    async def _start(self):
        state = self._state()
        account = pwd.getpwnam(self.user.name)
        cap = limits.Limits(**state["limits"])
        home = hub_home(state, self.user.name)
        # off the event loop: the first start of a user from the LMS makes her home's filesystem
        await asyncio.to_thread(limits.mount_home, Path(state["hub_dir"]) / "images" / f"{self.user.name}.img", home,
                                cap.disk, account.pw_uid, account.pw_gid)
        bases = {name: Path(path) for name, path in state.get("cgroups", {}).items()}
        limits.end_user_cgroups(bases, self.user.name)   # nothing of an earlier server is left
        procs = limits.make_user_cgroups(bases, self.user.name, cap)
        plan = {
            "cgroups": [str(p) for p in procs],
            "tmpfs": {"/tmp": str(cap.tmp), "/dev/shm": str(cap.shm)},
            "sysv_shm": cap.shm,   # System V shared memory in the server's IPC namespace, capped like /dev/shm
            "keep": state.get("keep_in_private", []),   # the course's environment, if under /tmp
            # without a pids cgroup, the per-user process limit of the kernel (all the user's processes)
            "nproc": None if "pids" in bases else cap.processes,
            "uid": account.pw_uid, "gid": account.pw_gid,
            "groups": os.getgrouplist(self.user.name, account.pw_gid),
            "home": str(home),
        }
        self.notebook_dir = str(home)
        if self.output is not None:   # an earlier server's (its processes are gone: see end_user_cgroups)
            self.output.close()
        self.output = userlog.UserLog(user_log(state, self.user.name))
        try:
            if state.get("forkserver") and os.path.exists(state["forkserver"]):
                started = await self._fork(state, plan)
                if started:
                    return started
            self.environment = {**self.environment, "ATTENTION_HUB_ENTER": json.dumps(plan)}
            self.cmd = [sys.executable, "-I", str(ENTER), "--", *state["singleuser_cmd"]]
            # Popen closes every other descriptor (close_fds): the server gets these three alone
            self.popen_kwargs = {**self.popen_kwargs, "stdin": subprocess.DEVNULL, "stdout": self.output.write_end,
                                 "stderr": self.output.write_end}
            return await super().start()
        except BaseException:
            self.output.close()
            self.output = None
            raise
        finally:
            if self.output is not None:
                self.output.hand_over()

    async def _fork(self, state: dict, plan: dict) -> tuple[str, int] | None:
        """Ask the fork server for the server; None if the server is to start as a new process."""
        argv = [*state["singleuser_cmd"], *self.get_args()]
        # The thread owns its copy of the server's output, and closes it: a start given up here
        # (cancelled) cannot close a descriptor the thread is about to send.
        output = os.dup(self.output.write_end)

        def ask() -> tuple[int, int]:
            try:
                return forkserver.request_server(state["forkserver"], plan, self.get_env(), argv, output)
            finally:
                os.close(output)

        try:
            pid, pidfd = await asyncio.to_thread(ask)
        except forkserver.Unresponsive as exc:   # there, but dead or stuck: the other way, and a new one
            self.log.warning("%s: %s's server starts as a new process, and the hub replaces the fork server",
                             exc, self.user.name)
            replace_fork_server(state, exc.pid, self.log)
            return None
        except forkserver.NotListening as exc:   # no fork server: a new process, as without one
            self.log.warning("the fork server did not answer (%s): %s's server starts as a new process",
                             exc, self.user.name)
            return None
        self.proc, self.pid = ForkedServer(pid, pidfd), pid
        self.log.info("Forked %s's server: pid %d", self.user.name, pid)
        return (self.ip or "127.0.0.1", self.port)

    async def _signal(self, sig):
        if isinstance(self.proc, ForkedServer) and self.proc.pid == self.pid:
            return self.proc.send_signal(sig)
        return await super()._signal(sig)

    async def stop(self, now=False):
        await super().stop(now=now)
        give_back_port(self.port)
        state = self._state()
        bases = {name: Path(path) for name, path in state.get("cgroups", {}).items()}
        limits.end_user_cgroups(bases, self.user.name)
        if self.output is not None:   # what her processes wrote last, then the pipe is closed
            self.output.close()
            self.output = None
