"""Start a user's Jupyter server inside that user's limits, then as that user.

The course hub's spawner (``spawner.CourseSpawner``) runs this script as root, in isolated mode
(``python -I enter.py -- COMMAND...``), with what to do in the ``ATTENTION_HUB_ENTER`` variable
(JSON). In this one process, before anything of the user's runs:

1. it joins the user's cgroups (memory, pids, cpu: their limits hold for everything the server
   starts, kernels and terminals included);
2. it gives the server a mount namespace of its own, with a private ``/tmp`` and ``/dev/shm``
   (size-capped tmpfs, whose pages count against the user's memory cgroup), so that no student
   can fill the machine's RAM-backed shared memory or read another's temporary files (the
   course's environment, if it is installed under ``/tmp``, is bound back in, read-only); and an
   IPC namespace of its own (System V shared memory, semaphores and message queues, POSIX message
   queues), with shared memory capped like ``/dev/shm``: what the server's processes make there
   ends with the last of them, instead of outliving the server and its memory cgroup;
3. it sets the per-process limits (processes, where no pids cgroup exists; no core dumps), a
   private umask, and drops to the user (groups, gid, uid; for good);
4. it replaces itself with COMMAND (the Jupyter server), in the user's home.

Standard library only: it runs before any environment of the course is trusted.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
PR_SET_DUMPABLE = 4
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 0x1, 0x2, 0x4, 0x8, 0x20, 0x1000
MS_REC, MS_PRIVATE = 0x4000, 0x40000


def _libc_call(name: str, *args) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")


def private_mounts(tmpfs: dict[str, str], keep=()) -> None:
    """A mount namespace of this process's own, with a fresh size-capped tmpfs at each path.

    ``keep``: folders under those paths that the server must still reach (the course's environment,
    where the hub runs from a checkout under /tmp): each is bound back in, read-only, at its own
    path, below folders root makes (so no user can move or replace them).
    """
    _libc_call("unshare", CLONE_NEWNS)
    _libc_call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None)   # nothing leaks back out
    held = {}
    for path in keep:   # held open before a tmpfs hides them
        if any(path.startswith(top.rstrip("/") + "/") for top in tmpfs) and os.path.isdir(path):
            held[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
    for path, size in tmpfs.items():
        if os.path.isdir(path):
            _libc_call("mount", b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                       f"size={size},mode=1777".encode())
    for path, fd in held.items():
        made = []
        parent = path
        while not os.path.isdir(parent):
            made.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(made):
            os.mkdir(folder, 0o755)
            os.chmod(folder, 0o755)   # whatever the umask
        _libc_call("mount", f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND | MS_REC, None)
        _libc_call("mount", None, path.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                   None)
        os.close(fd)


def private_ipc(shm: int | None = None) -> None:
    """An IPC namespace of this process's own (after ``private_mounts``): the System V objects and
    POSIX message queues its processes make are theirs alone, and go when the last of them ends.
    ``shm``: the bytes of System V shared memory it may hold (one segment and all together); the
    machine's ``/dev/mqueue``, if mounted, is replaced by this namespace's."""
    _libc_call("unshare", CLONE_NEWIPC)
    if shm:
        pages = -(-int(shm) // os.sysconf("SC_PAGE_SIZE"))
        for name, value in (("shmmax", int(shm)), ("shmall", pages)):
            with open(f"/proc/sys/kernel/{name}", "w") as handle:
                handle.write(str(value))
    if os.path.ismount("/dev/mqueue"):
        _libc_call("mount", b"mqueue", b"/dev/mqueue", b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def drop_to(uid: int, gid: int, groups: list[int]) -> None:
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise SystemExit("enter.py: could not drop root")


def make_dumpable() -> None:
    """What exec does after a drop from root: the process's /proc files and ptrace become its user's
    (and root's), as for any process the user starts. A process that dropped root without exec
    (forkserver.py) stays undumpable until it calls this."""
    _libc_call("prctl", PR_SET_DUMPABLE, 1, 0, 0, 0)


def enter(plan: dict) -> None:
    """Steps 1-3 for this process, as root: the user's cgroups, private mounts and IPC, limits, the user."""
    for procs in plan.get("cgroups", []):
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    private_mounts(plan.get("tmpfs", {}), plan.get("keep", ()))
    private_ipc(plan.get("sysv_shm"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if plan.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (plan["nproc"], plan["nproc"]))
    os.umask(0o077)
    drop_to(plan["uid"], plan["gid"], plan["groups"])
    os.chdir(plan["home"])


def main(argv: list[str]) -> None:
    if "--" not in argv or os.geteuid() != 0:
        raise SystemExit("usage (as root): ATTENTION_HUB_ENTER=JSON python -I enter.py -- COMMAND ...")
    command = argv[argv.index("--") + 1:]
    enter(json.loads(os.environ.pop("ATTENTION_HUB_ENTER")))
    os.execvpe(command[0], command, os.environ)


if __name__ == "__main__":
    main(sys.argv[1:])
