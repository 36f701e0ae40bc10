"""The course hub's spawner: JupyterHub's local-process spawner, inside per-user limits.

Each user's server starts through ``enter.py`` (as root, then as the user): in the user's
cgroups (memory, processes, CPU), with a private, capped ``/tmp`` and ``/dev/shm``, in the user's
hub home (a filesystem of fixed size, ``limits.mount_home``). The limits come from the hub's
``state.json`` at each start, so a changed roster (``hub update``) holds for the next server.
When the server stops, whatever it left in its cgroups is killed.

Where the hub has a fork server (``forkserver.py``, started by ``hub start``), the server is
forked from it, which does the same steps in the child and then runs the server without
starting a new interpreter: the spawner holds a pidfd of that child (``ForkedServer``), so that
polling and signalling reach exactly it. Without one (or if none listens on its socket), the
server starts through ``enter.py`` as a new process, as before; if the fork server took the request
but its child failed, the start fails (a child might still be on its way: never two servers).
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import select
import signal
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import random_port
from traitlets import Any, Unicode

from . import forkserver, limits

ENTER = Path(__file__).resolve().parent / "enter.py"


def load_state(path: str) -> dict:
    return json.loads(Path(path).read_text())


def hub_home(state: dict, user: str) -> Path:
    return Path(state["hub_dir"]) / "homes" / user


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

    def _state(self) -> dict:
        return load_state(self.state_path)

    def make_preexec_fn(self, name):
        return None   # enter.py drops to the user, after it has set the limits up as root

    def user_env(self, env):
        env = super().user_env(env)
        env["HOME"] = str(hub_home(self._state(), self.user.name))
        return env

    async def start(self):
        state = self._state()
        account = pwd.getpwnam(self.user.name)
        cap = limits.Limits(**state["limits"])
        home = hub_home(state, self.user.name)
        limits.mount_home(Path(state["hub_dir"]) / "images" / f"{self.user.name}.img", home, cap.disk,
                          account.pw_uid, account.pw_gid)
        bases = {name: Path(path) for name, path in state.get("cgroups", {}).items()}
        limits.end_user_cgroups(bases, self.user.name)   # nothing of an earlier server is left
        procs = limits.make_user_cgroups(bases, self.user.name, cap)
        plan = {
            "cgroups": [str(p) for p in procs],
            "tmpfs": {"/tmp": str(cap.tmp), "/dev/shm": str(cap.shm)},
            "keep": state.get("keep_in_private", []),   # the course's environment, if under /tmp
            # without a pids cgroup, the per-user process limit of the kernel (all the user's processes)
            "nproc": None if "pids" in bases else cap.processes,
            "uid": account.pw_uid, "gid": account.pw_gid,
            "groups": os.getgrouplist(self.user.name, account.pw_gid),
            "home": str(home),
        }
        self.notebook_dir = str(home)
        if state.get("forkserver") and os.path.exists(state["forkserver"]):
            if self.port == 0:
                self.port = random_port()
            argv = [*state["singleuser_cmd"], *self.get_args()]
            try:
                pid, pidfd = await asyncio.to_thread(forkserver.request_server, state["forkserver"], plan,
                                                     self.get_env(), argv)
            except forkserver.NotListening as exc:   # no fork server: a new process, as without one
                self.log.warning("the fork server did not answer (%s): %s's server starts as a new process",
                                 exc, self.user.name)
            else:
                self.proc, self.pid = ForkedServer(pid, pidfd), pid
                self.log.info("Forked %s's server: pid %d", self.user.name, pid)
                return (self.ip or "127.0.0.1", self.port)
        self.environment = {**self.environment, "ATTENTION_HUB_ENTER": json.dumps(plan)}
        self.cmd = [sys.executable, "-I", str(ENTER), "--", *state["singleuser_cmd"]]
        return await super().start()

    async def _signal(self, sig):
        if isinstance(self.proc, ForkedServer) and self.proc.pid == self.pid:
            return self.proc.send_signal(sig)
        return await super()._signal(sig)

    async def stop(self, now=False):
        await super().stop(now=now)
        state = self._state()
        bases = {name: Path(path) for name, path in state.get("cgroups", {}).items()}
        limits.end_user_cgroups(bases, self.user.name)
