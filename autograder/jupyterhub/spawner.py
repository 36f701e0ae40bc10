"""The course hub's spawner: JupyterHub's local-process spawner, inside per-user limits.

Each user's server starts through ``enter.py`` (as root, then as the user): in the user's
cgroups (memory, processes, CPU), with a private, capped ``/tmp`` and ``/dev/shm``, in the user's
hub home (a filesystem of fixed size, ``limits.mount_home``). The limits come from the hub's
``state.json`` at each start, so a changed roster (``hub update``) holds for the next server.
When the server stops, whatever it left in its cgroups is killed.
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

from . import limits

ENTER = Path(__file__).resolve().parent / "enter.py"


def load_state(path: str) -> dict:
    return json.loads(Path(path).read_text())


def hub_home(state: dict, user: str) -> Path:
    return Path(state["hub_dir"]) / "homes" / user


class CourseSpawner(LocalProcessSpawner):
    state_path = Unicode(help="the hub's state.json (written by `python -m autograder hub start`)").tag(config=True)

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
            # without a pids cgroup, the per-user process limit of the kernel (all the user's processes)
            "nproc": None if "pids" in bases else cap.processes,
            "uid": account.pw_uid, "gid": account.pw_gid,
            "groups": os.getgrouplist(self.user.name, account.pw_gid),
            "home": str(home),
        }
        self.notebook_dir = str(home)
        self.environment = {**self.environment, "ATTENTION_HUB_ENTER": json.dumps(plan)}
        self.cmd = [sys.executable, "-I", str(ENTER), "--", *state["singleuser_cmd"]]
        return await super().start()

    async def stop(self, now=False):
        await super().stop(now=now)
        state = self._state()
        bases = {name: Path(path) for name, path in state.get("cgroups", {}).items()}
        limits.end_user_cgroups(bases, self.user.name)
