"""A student's processes on the course hub inherit nothing of the hub's: no open file (the hub's
log above all), no System V IPC object that outlives her server, and no wait on a fork server
that has stopped answering. Each is checked on a real hub (a course of its own, started here, real
users), from inside a real student kernel reached over HTTP, on both ways a server starts: forked
by the hub's fork server, and as a new process (``enter.py``, when no fork server listens).

Needs root (the hub starts each user's server as that user); CI runs as root.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder import hub as course_hub
from autograder.jupyterhub import forkserver
from hub_client import HubUser
from test_hub import ASSIGNMENT, free_port, leftovers, processes_of, searchable_checkout, status_fields  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
WAYS = ("forked", "new process")
KCMP_FILE = 0
KCMP = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the course hub starts servers as other users: needs root")


@pytest.fixture(scope="module")
def hub(searchable_checkout):   # noqa: F811 - test_hub's fixture, used here
    tag = secrets.token_hex(3)
    names = {key: f"{key}{tag}" for key in ("ida", "ann", "bea")}
    folder = Path(tempfile.mkdtemp(prefix="attention-hub-isolation-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    private = folder / "instructor"
    (private / "source").mkdir(parents=True)
    os.chmod(private, 0o700)
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, private / "source" / ASSIGNMENT)
    roster = {"courses": {f"i{tag}": {"instructors": [names["ida"]], "students": [names["ann"], names["bea"]]}},
              "limits": {"memory": "1G", "disk": "256M", "shm": "32M"}, "idle_timeout": 0}
    (private / "roster.json").write_text(json.dumps(roster))
    password = secrets.token_hex(12)
    (private / "password").write_text(password)
    hub_dir, port = folder / "hub", free_port()
    info = {"url": f"http://127.0.0.1:{port}", "password": password, "names": names, "dir": hub_dir}
    try:
        started = subprocess.run(
            [sys.executable, "-m", "autograder", "hub", "start", str(private / "roster.json"), "--dir", str(hub_dir),
             "--port", str(port), "--authenticator", "dummy", "--password-file", str(private / "password"),
             "--create-users", "--source", str(private / "source")],
            cwd=REPO, capture_output=True, text=True, timeout=600)
        assert started.returncode == 0, started.stderr + course_hub._tail(hub_dir / "logs" / "jupyterhub.log", 20)
        yield info
    finally:
        stopped = subprocess.run([sys.executable, "-m", "autograder", "hub", "stop", "--dir", str(hub_dir),
                                  "--remove-users"], cwd=REPO, capture_output=True, text=True, timeout=180)
        state = course_hub._load(hub_dir / "state.json")
        left = leftovers(state, hub_dir) if state else []
        shutil.rmtree(folder, ignore_errors=True)
        assert stopped.returncode == 0, stopped.stderr
        assert not left, f"the hub left {left}"


@pytest.fixture(scope="module")
def users(hub):
    return {key: HubUser(hub["url"], hub["names"][key], hub["password"]) for key in ("ann", "bea")}


# --- starting a server one way or the other --------------------------------------------------------


def stop_server(person: HubUser, timeout: float = 120) -> None:
    answer = person.hub_api("DELETE", f"/users/{person.name}/server")
    assert answer.status_code in (202, 204, 400), answer.text[:200]   # 400: not running
    deadline = time.monotonic() + timeout
    while person.server_running() or processes_of(person.name):
        assert time.monotonic() < deadline, f"{person.name}'s server did not stop"
        time.sleep(0.5)


def fork_server_pid(hub) -> int | None:
    """The hub's fork server's pid (None while it is being replaced)."""
    try:
        return int((hub["dir"] / "forkserver.pid").read_text())
    except (OSError, ValueError):
        return None


def server_process(name: str) -> int:
    """The root of the user's process tree: the server (its parent is not the user's)."""
    mine = processes_of(name)
    roots = [pid for pid in mine if int(status_fields(pid)["PPid"]) not in mine]
    assert len(roots) == 1, f"{name}: one server expected, found {roots}"
    return roots[0]


def restart(hub, person: HubUser, way: str) -> int:
    """Stop the person's server and start it again the given way; the server's pid."""
    stop_server(person)
    socket_path = hub["dir"] / "run" / "forkserver.sock"
    hidden = socket_path.with_name("forkserver.sock.hidden")
    if way == "new process":   # as when no fork server listens: the spawner starts it through enter.py
        os.rename(socket_path, hidden)
    try:
        person.start_server()
    finally:
        if way == "new process":
            os.rename(hidden, socket_path)
    server = server_process(person.name)
    forked = int(status_fields(server)["PPid"]) == fork_server_pid(hub)
    assert forked == (way == "forked"), f"{person.name}'s server was not started the {way} way"
    return server


# --- what a student's processes hold open ----------------------------------------------------------

# Run in the student's kernel: every descriptor of every process of hers (server, kernel zygote,
# kernel), and whether she could have opened each path herself with its access mode.
DESCRIPTORS = r"""
import json, os
me, table = os.getuid(), {}
for entry in os.listdir('/proc'):
    try:
        if not entry.isdigit() or int(open(f'/proc/{entry}/status').read().split('\nUid:')[1].split()[0]) != me:
            continue
        fds = {}
        for fd in os.listdir(f'/proc/{entry}/fd'):
            try:
                target = os.readlink(f'/proc/{entry}/fd/{fd}')
                info = os.stat(f'/proc/{entry}/fd/{fd}')
                flags = int(open(f'/proc/{entry}/fdinfo/{fd}').read().split('flags:')[1].split()[0], 8)
            except OSError:
                continue
            openable = None
            if target.startswith('/'):
                try:
                    os.close(os.open(target, (flags & 3) | os.O_NONBLOCK | os.O_NOCTTY))
                    openable = True
                except OSError:
                    openable = False
            fds[fd] = {'target': target, 'flags': flags, 'key': [info.st_dev, info.st_ino], 'uid': info.st_uid,
                       'openable': openable}
        table[entry] = {'cmdline': open(f'/proc/{entry}/cmdline', 'rb').read().replace(b'\0', b' ').decode()[:120],
                        'fds': fds}
    except (OSError, IndexError):
        continue
print(json.dumps({'kernel': os.getpid(), 'processes': table}))
"""


def same_open_file(pid_a: int, fd_a: int, pid_b: int, fd_b: int) -> bool:
    """Whether the two descriptors are one open file (kcmp(2): one ``open``, passed on or inherited),
    not merely the same inode (the two ends of a pipe share theirs)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(KCMP, pid_a, pid_b, KCMP_FILE, fd_a, fd_b) == 0


def shared_with_others(table: dict, uid: int) -> list[str]:
    """Every descriptor in ``table`` (the student's processes) that is an open file some process
    not hers holds too."""
    mine = {}
    for pid, process in table.items():
        for fd, held in process["fds"].items():
            mine.setdefault(tuple(held["key"]), []).append((int(pid), int(fd), held["target"]))
    shared = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry in table:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                continue
            descriptors = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                info = os.stat(f"/proc/{entry}/fd/{fd}")
            except OSError:
                continue
            for pid, own_fd, target in mine.get((info.st_dev, info.st_ino), []):
                if same_open_file(pid, own_fd, int(entry), int(fd)):
                    command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")[:80].decode()
                    shared.append(f"{table[str(pid)]['cmdline'][:60]!r} fd {own_fd} ({target}) is open in "
                                  f"process {entry} ({command!r}, fd {fd})")
    return shared


@pytest.mark.skipif(KCMP is None, reason="kcmp's number is known here for x86_64 and aarch64 only")
@pytest.mark.parametrize("way", WAYS)
def test_a_students_processes_hold_no_descriptor_of_the_hubs(hub, users, way):
    """Her server, kernel zygote and kernel hold no open file of any process but hers, and no path
    she could not have opened herself; their output goes to her own log, which only root reads, and
    what she writes there never reaches the hub's log."""
    ann = users["ann"]
    uid = pwd.getpwnam(ann.name).pw_uid
    server = restart(hub, ann, way)
    kernel = ann.kernel()
    try:
        seen = json.loads(kernel.run(DESCRIPTORS))
        table, kernel_pid = seen["processes"], str(seen["kernel"])
        assert str(server) in table and kernel_pid in table, table.keys()
        # a file of hers that is deleted (a temporary file) cannot be opened again, and is hers
        cannot_open = [f"{process['cmdline'][:60]!r} fd {fd}: {held['target']}"
                       for process in table.values() for fd, held in process["fds"].items()
                       if held["openable"] is False and not (held["target"].endswith(" (deleted)")
                                                             and held["uid"] == uid)]
        assert not cannot_open, f"descriptors she could not have opened herself: {cannot_open}"
        assert not shared_with_others(table, uid)
        # her server's output: a pipe to her own log (not the hub's), which her kernel holds too
        output = table[str(server)]["fds"]["2"]
        assert output["target"].startswith("pipe:") and output["flags"] & 3 == os.O_WRONLY, output
        held = next(int(fd) for fd, h in table[kernel_pid]["fds"].items() if h["key"] == output["key"])
        forged = f"[E {time.strftime('%Y-%m-%d %H:%M:%S')}.000 JupyterHub app:1] forged-{secrets.token_hex(4)}"
        assert kernel.run(f"import os\nos.write({held}, {(forged + chr(10)).encode()!r})\n"
                          f"try:\n    os.ftruncate({held}, 0)\n    print('TRUNCATED')\n"
                          "except OSError:\n    print('REFUSED')\n").strip() == "REFUSED"
        own_log = hub["dir"] / "logs" / "users" / f"{ann.name}.log"
        deadline = time.monotonic() + 10
        while forged not in (own_log.read_text(errors="replace") if own_log.exists() else ""):
            assert time.monotonic() < deadline, f"{forged} did not reach {own_log}"
            time.sleep(0.2)
        assert forged not in (hub["dir"] / "logs" / "jupyterhub.log").read_text(errors="replace")
        assert oct(own_log.stat().st_mode & 0o777) == "0o600" and own_log.stat().st_uid == 0
        assert oct(own_log.parent.stat().st_mode & 0o777) == "0o700"
    finally:
        kernel.close()


# --- System V IPC ----------------------------------------------------------------------------------

# Run in the student's kernel: what of hers the kernel's IPC namespace shows, then a shared memory
# segment (its pages touched), a semaphore set and a message queue, none removed.
IPC = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype, libc.shmat.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
IPC_PRIVATE, IPC_CREAT, SIZE = 0, 0o1000, 16 * 2**20

def of_mine():
    found = {}
    for kind in ('shm', 'sem', 'msg'):
        header, *rows = open(f'/proc/sysvipc/{kind}').read().splitlines()
        column = header.split().index('uid')
        found[kind] = [row.split()[1] for row in rows if int(row.split()[column]) == os.getuid()]
    return found

before = of_mine()
made = {'shm': libc.shmget(IPC_PRIVATE, SIZE, IPC_CREAT | 0o600),
        'sem': libc.semget(IPC_PRIVATE, 4, IPC_CREAT | 0o600),
        'msg': libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)}
assert min(made.values()) >= 0, (made, os.strerror(ctypes.get_errno()))
address = libc.shmat(made['shm'], None, 0)
ctypes.memset(address, 1, SIZE)
libc.shmdt(ctypes.c_void_p(address))
print(json.dumps({'before': before, 'made': made, 'namespace': os.readlink('/proc/self/ns/ipc')}))
"""


def ipc_objects_of(uid: int) -> dict[str, list[str]]:
    """The System V IPC objects of ``uid`` that this process's IPC namespace (the machine's) holds."""
    found = {}
    for kind in ("shm", "sem", "msg"):
        header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        column = header.split().index("uid")
        found[kind] = [row.split()[1] for row in rows if int(row.split()[column]) == uid]
    return found


def processes_in(namespace: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.readlink(f"/proc/{entry}/ns/ipc") == namespace:
                found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("way", WAYS)
def test_no_ipc_object_of_a_student_outlives_her_server(hub, users, way):
    """Shared memory, semaphores and message queues made in her kernel live in an IPC namespace of
    her server's own, which ends with it: none is left once it stops, and the next server starts
    with none (a stop and start does not add another limit's worth)."""
    bea = users["bea"]
    uid = pwd.getpwnam(bea.name).pw_uid
    host = os.readlink("/proc/self/ns/ipc")
    for round_ in (1, 2):
        restart(hub, bea, way)
        seen = json.loads(bea.run_code(IPC))
        assert seen["before"] == {"shm": [], "sem": [], "msg": []}, f"round {round_}: left from before: {seen}"
        assert seen["namespace"] != host, f"round {round_}: her kernel shares the machine's IPC namespace"
        stop_server(bea)
        assert ipc_objects_of(uid) == {"shm": [], "sem": [], "msg": []}
        deadline = time.monotonic() + 10
        while left := processes_in(seen["namespace"]):   # the namespace ends with its last process
            assert time.monotonic() < deadline, f"processes left in her IPC namespace: {left}"
            time.sleep(0.2)


# --- a fork server that stops answering ------------------------------------------------------------


def fork_server_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_a_stopped_fork_server_costs_one_start_a_few_seconds_and_is_replaced(hub, users):
    """A fork server that hangs (SIGSTOP: there, not dead) makes the start that finds it so wait
    a few seconds, then go through enter.py; the hub starts another fork server, and the starts
    after it neither wait nor fail."""
    ann, bea = users["ann"], users["bea"]
    stop_server(ann)
    stop_server(bea)
    old = fork_server_pid(hub)
    os.kill(old, signal.SIGSTOP)
    try:
        started = time.monotonic()
        bea.start_server(timeout=120)
        took = time.monotonic() - started
        assert int(status_fields(server_process(bea.name))["PPid"]) != old
        log = (hub["dir"] / "logs" / "jupyterhub.log").read_text(errors="replace")
        waits = [float(w) for w in re.findall(rf"the fork server \(pid {old}\) gave no answer within ([0-9.]+) s", log)]
        assert waits and max(waits) <= 2 * forkserver.ANSWER_WITHIN, (waits, took)
        # the hub replaces it: the stopped one is gone, a new one listens
        deadline = time.monotonic() + 300
        while True:
            new = fork_server_pid(hub)
            listening = (hub["dir"] / "run" / "forkserver.sock").exists()
            if new not in (None, old) and fork_server_state(new) in ("S", "R") and listening:
                break
            assert time.monotonic() < deadline, "the stopped fork server was not replaced"
            time.sleep(0.5)
        assert fork_server_state(old) in (None, "Z")
        # ann's start after it waits for nobody; the next ones are forked again, by the new one
        ann.start_server()
        assert len(re.findall(rf"the fork server \(pid {old}\) gave no answer",
                              (hub["dir"] / "logs" / "jupyterhub.log").read_text(errors="replace"))) == len(waits)
        server = restart(hub, bea, "forked")
        assert int(status_fields(server)["PPid"]) == new
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(old, signal.SIGCONT)
