"""Per-user limits of the course hub, enforced by the kernel: cgroups for memory, CPU and
processes; a home of fixed size (a filesystem image per user); private, capped ``/tmp`` and
``/dev/shm``, and an IPC namespace per server with its System V shared memory capped (``enter.py``).

The roster sets them (``limits:``), with these defaults::

    limits:
      memory: 1.5G      # RAM of all the user's processes together (their tmpfs pages included)
      cpu: 1            # CPUs' worth of time (a hard quota) and an equal share under contention
      processes: 256    # processes and threads together
      disk: 1G          # the size of the user's hub home
      shm: 64M          # /dev/shm, and System V shared memory apart (RAM, counted in memory too)
      tmp: 256M         # /tmp (RAM, counted in memory too)

Past its memory the kernel's OOM killer ends a process of that user only (the largest: a
kernel, typically); past its processes a fork fails in that user's tree only; past its disk a
write fails in that user's home only.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class LimitError(ValueError):
    pass


def parse_size(value, what: str) -> int:
    """Bytes from ``512M``, ``1.5G``, ``2GiB`` or a number of bytes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value)
    match = _SIZE.fullmatch(str(value))
    if not match or float(match[1]) <= 0:
        raise LimitError(f"limits.{what}: {value!r} is not a size (say 512M or 1.5G)")
    return int(float(match[1]) * _UNITS[match[2].upper()])


@dataclass(frozen=True)
class Limits:
    memory: int = 3 * 2**29         # 1.5 GiB
    cpu: float = 1.0
    processes: int = 256
    disk: int = 2**30
    shm: int = 64 * 2**20
    tmp: int = 256 * 2**20

    @classmethod
    def from_roster(cls, spec) -> Limits:
        if spec is None:
            return cls()
        if not isinstance(spec, dict):
            raise LimitError("limits must be a mapping (memory, cpu, processes, disk, shm, tmp)")
        unknown = set(spec) - set(cls.__dataclass_fields__)
        if unknown:
            raise LimitError(f"limits: unknown key(s) {sorted(unknown)} (known: memory, cpu, processes, disk, shm, tmp)")
        values = {}
        for key, value in spec.items():
            if key == "cpu":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                    raise LimitError(f"limits.cpu: {value!r} is not a positive number of CPUs")
                values[key] = float(value)
            elif key == "processes":
                if isinstance(value, bool) or not isinstance(value, int) or value < 32:
                    raise LimitError(f"limits.processes: {value!r}: a whole number, at least 32 (a Jupyter "
                                     "server and a kernel need about 30 threads)")
                values[key] = value
            else:
                values[key] = parse_size(value, key)
        limits = cls(**values)
        if limits.memory < 256 * 2**20:
            raise LimitError("limits.memory: at least 256M (a Jupyter server and a kernel need that much)")
        return limits

    def as_dict(self) -> dict:
        return asdict(self)


# --- cgroups ----------------------------------------------------------------------------------------


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller (``memory``, ``pids``, ``cpu``), and ``""`` for v2."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and not controllers:
            found[""] = path
        for name in controllers.split(","):
            if name in ("memory", "pids", "cpu"):
                found[name] = path
    return found


def cgroup_bases(hub_name: str) -> dict[str, Path]:
    """The folder under which each controller's per-user cgroups of this hub go (made here),
    for the controllers that can be used; v1 hierarchies first, else the unified (v2) one."""
    own = _own_cgroups()
    bases = {}
    for name in ("memory", "pids", "cpu"):
        if name in own and (CGROUP_ROOT / name).is_dir():
            folder = CGROUP_ROOT / name / own[name].lstrip("/") / hub_name
            try:
                folder.mkdir(exist_ok=True)
            except OSError:
                continue
            bases[name] = folder
    missing = {"memory", "pids", "cpu"} - set(bases)
    if missing and "" in own:
        unified = CGROUP_ROOT / "unified" if (CGROUP_ROOT / "unified" / "cgroup.controllers").exists() else CGROUP_ROOT
        parent = unified / own[""].lstrip("/")
        try:
            available = (parent / "cgroup.controllers").read_text().split()
            folder = parent / hub_name
            folder.mkdir(exist_ok=True)
            wanted = [c for c in ("memory", "pids", "cpu") if c in missing and c in available]
            (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
            for name in wanted:
                bases[name] = folder
        except OSError:
            pass
    return bases


def _v2(folder: Path) -> bool:
    return (folder / "cgroup.controllers").exists()


def make_user_cgroups(bases: dict[str, Path], user: str, limits: Limits) -> list[Path]:
    """Create (or update) the user's cgroups with their limits; returns their ``cgroup.procs`` files."""
    procs = []
    for name, base in bases.items():
        folder = base / user
        folder.mkdir(exist_ok=True)
        v2 = _v2(folder)
        if name == "memory":
            if v2:
                (folder / "memory.max").write_text(str(limits.memory))
                if (folder / "memory.swap.max").exists():
                    (folder / "memory.swap.max").write_text("0")
            else:
                (folder / "memory.limit_in_bytes").write_text(str(limits.memory))
                if (folder / "memory.memsw.limit_in_bytes").exists():
                    (folder / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))
        elif name == "pids":
            (folder / "pids.max").write_text(str(limits.processes))
        elif name == "cpu":
            period = 100_000
            if v2:
                (folder / "cpu.max").write_text(f"{int(limits.cpu * period)} {period}")
            else:
                (folder / "cpu.cfs_period_us").write_text(str(period))
                (folder / "cpu.cfs_quota_us").write_text(str(int(limits.cpu * period)))
        path = folder / "cgroup.procs"
        if path not in procs:
            procs.append(path)
    return procs


def cgroup_pids(bases: dict[str, Path], user: str) -> set[int]:
    pids = set()
    for base in bases.values():
        try:
            pids |= {int(p) for p in (base / user / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            continue
    return pids


def end_user_cgroups(bases: dict[str, Path], user: str, timeout: float = 5.0) -> None:
    """Kill whatever is left in the user's cgroups (a kernel its server did not stop) and remove them."""
    deadline = time.monotonic() + timeout
    while True:
        pids = cgroup_pids(bases, user)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not pids or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for base in bases.values():
        try:
            (base / user).rmdir()
        except OSError:
            pass


def remove_hub_cgroups(hub_name: str) -> None:
    """Remove this hub's cgroup folders (after every user's cgroup is gone)."""
    own = _own_cgroups()
    candidates = [CGROUP_ROOT / name / own[name].lstrip("/") / hub_name for name in ("memory", "pids", "cpu")
                  if name in own]
    if "" in own:
        candidates += [root / own[""].lstrip("/") / hub_name for root in (CGROUP_ROOT / "unified", CGROUP_ROOT)]
    for folder in candidates:
        if folder.is_dir():
            for child in folder.iterdir():
                if child.is_dir():
                    for pid in (child / "cgroup.procs").read_text().split() if (child / "cgroup.procs").exists() else []:
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except (ProcessLookupError, ValueError):
                            pass
            for _ in range(50):
                children = [c for c in folder.iterdir() if c.is_dir()]
                for child in children:
                    try:
                        child.rmdir()
                    except OSError:
                        pass
                if not [c for c in folder.iterdir() if c.is_dir()]:
                    break
                time.sleep(0.1)
            try:
                folder.rmdir()
            except OSError:
                pass


# --- homes of a fixed size --------------------------------------------------------------------------


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise LimitError(f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()[:300]}")


def mount_home(image: Path, home: Path, size: int, uid: int, gid: int) -> None:
    """The user's hub home: an ext4 filesystem of ``size`` bytes in ``image`` (sparse: it takes
    the space its files take), mounted (nosuid, nodev) at ``home`` and owned by the user. An
    existing image is kept (the user's files) and grown if ``size`` grew; it never shrinks."""
    home.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(home):
        return
    if not image.exists():
        image.parent.mkdir(parents=True, exist_ok=True)
        fresh = image.with_name(f".{image.name}.new")
        with open(os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb") as handle:
            handle.truncate(size)
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", f"root_owner={uid}:{gid}", str(fresh)])
        os.replace(fresh, image)   # an image is there only once it holds a filesystem
    elif image.stat().st_size < size:
        with open(image, "r+b") as handle:
            handle.truncate(size)
        _run(["e2fsck", "-f", "-p", str(image)])
        _run(["resize2fs", str(image)])
    _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(home)])
    os.chown(home, uid, gid)
    os.chmod(home, 0o700)


def unmount_home(home: Path) -> bool:
    """Unmount the user's home (its image and files are kept); False if it was not mounted."""
    if not os.path.ismount(home):
        return False
    for _ in range(50):   # a process that is still exiting keeps it busy for a moment
        if subprocess.run(["umount", str(home)], capture_output=True).returncode == 0:
            return True
        time.sleep(0.1)
    subprocess.run(["umount", "--lazy", str(home)], capture_output=True)
    return True
