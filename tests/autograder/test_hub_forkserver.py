"""The hub's fork server as the spawner meets it, without root: what it does when none listens, when
its child fails, and which processes count as the hub's. (Forking real servers as real users is
tested end to end in test_hub.py, as root.)"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder import hub
from autograder.jupyterhub import forkserver, kernels


def test_no_fork_server_listening_means_a_server_starts_the_old_way(tmp_path):
    path = tmp_path / "forkserver.sock"
    with pytest.raises(forkserver.NotListening) as raised:
        forkserver.request_server(str(path), {}, {}, ["server"])
    assert not isinstance(raised.value, forkserver.Unresponsive)   # none there: nothing to replace
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)   # a socket file nobody listens on: it died
    stale.bind(str(path))
    stale.close()
    with pytest.raises(forkserver.Unresponsive):
        forkserver.request_server(str(path), {}, {}, ["server"])


def fake_fork_server(path: str, answer: bytes | None, child: subprocess.Popen, got: dict) -> threading.Thread:
    """A fork server (this thread) whose child (``child``, a process that does nothing) says it is
    there, takes the request and answers ``answer`` (None: never)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            pidfd = os.pidfd_open(child.pid)
            conn.sendmsg([json.dumps({"pid": child.pid}).encode()],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))])
            os.close(pidfd)
            data, ancillary, _flags, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(8))
            got["request"] = json.loads(data)
            got["descriptors"] = [fd for *_, payload in ancillary for fd in array.array("i", payload)]
            if answer is not None:
                conn.send(answer)
            else:
                conn.recv(1)   # until the other side gives up

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


@pytest.mark.parametrize("answer, message", [
    (json.dumps({"error": "PermissionError: no cgroup"}).encode(), "PermissionError: no cgroup"),
    (b"", "ended before it answered"),
    (b"<html>", "not JSON"),
    (None, "gave no server within 1 s; it was stopped"),
])
def test_a_request_the_child_did_not_serve_fails_is_not_retried_and_the_child_is_stopped(tmp_path, answer, message):
    path = str(tmp_path / "forkserver.sock")
    child = subprocess.Popen(["sleep", "60"])
    got = {}
    read_end, write_end = os.pipe()
    thread = fake_fork_server(path, answer, child, got)
    try:
        with pytest.raises(forkserver.ForkError, match=message) as raised:
            forkserver.request_server(path, {"uid": 1000}, {"HOME": "/home/x"}, ["server", "--port=1"], write_end,
                                      timeout=1)
        assert child.wait(10) == -signal.SIGKILL   # never two servers: the child is gone before the error
        thread.join(10)
        assert not isinstance(raised.value, OSError)   # the spawner falls back only on NotListening (an OSError)
        assert got["request"] == {"plan": {"uid": 1000}, "env": {"HOME": "/home/x"}, "argv": ["server", "--port=1"]}
        # one descriptor went with the request: the server's output, nothing else of the hub's
        assert len(got["descriptors"]) == 1 and os.fstat(got["descriptors"][0]).st_ino == os.fstat(write_end).st_ino
    finally:
        thread.join(10)
        child.kill()
        child.wait()
        for fd in (read_end, write_end, *got.get("descriptors", [])):
            os.close(fd)


def test_a_child_that_says_it_is_there_without_a_pidfd_is_an_error(tmp_path):
    path = str(tmp_path / "forkserver.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            conn.send(json.dumps({"pid": 123}).encode())
            conn.recv(1)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with pytest.raises(forkserver.ForkError, match="without its pid and a pidfd"):
            forkserver.request_server(path, {}, {}, ["server"])
    finally:
        thread.join(10)


# A fork server that listens and takes no connection until told (a line on its input), then says
# how many bytes of request it was sent.
SILENT = """
import socket, sys
listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
listener.bind(sys.argv[1])
listener.listen(4)
print("listening", flush=True)
sys.stdin.readline()
conn, _ = listener.accept()
conn.settimeout(5)
print("sent", len(conn.recv(1 << 20)), flush=True)
"""


@pytest.mark.parametrize("how, why", [("stopped", "stopped"), ("stuck", "running no code")])
def test_a_fork_server_that_forks_nobody_costs_a_few_seconds_and_is_sent_nothing(tmp_path, how, why):
    """Stopped (SIGSTOP) or stuck (alive, spending no CPU): the start gives up within the answer's
    time, to go the other way, and the request, with the user's token, was never sent."""
    path = str(tmp_path / "forkserver.sock")
    server = subprocess.Popen([sys.executable, "-c", SILENT, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        if how == "stopped":
            os.kill(server.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(forkserver.Unresponsive) as raised:
            forkserver.request_server(path, {}, {"JUPYTERHUB_API_TOKEN": "secret"}, ["server"], answer_within=0.5)
        assert time.monotonic() - started < 3
        assert raised.value.pid == server.pid and f"(pid {server.pid}) gave no answer within" in str(raised.value)
        assert str(raised.value).endswith(f"({why})")
        assert isinstance(raised.value, forkserver.NotListening)   # the spawner falls back
        os.kill(server.pid, signal.SIGCONT)
        server.stdin.write("go\n")
        server.stdin.flush()
        assert server.stdout.readline().split() == ["sent", "0"]
    finally:
        server.kill()
        server.wait()


# A fork server busy for a while (its CPU time grows), then its own child: it says it is there,
# takes the request and gives a server.
BUSY = """
import array, json, os, socket, sys, time
listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
listener.bind(sys.argv[1])
listener.listen(4)
print("listening", flush=True)
until = time.monotonic() + float(sys.argv[2])
while time.monotonic() < until:
    pass
conn, _ = listener.accept()
pidfd = os.pidfd_open(os.getpid())
conn.sendmsg([json.dumps({"pid": os.getpid()}).encode()],
             [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))])
conn.recv(1 << 20)
conn.send(json.dumps({"ready": True}).encode())
time.sleep(60)
"""


def test_a_busy_fork_server_is_waited_for(tmp_path):
    path = str(tmp_path / "forkserver.sock")
    server = subprocess.Popen([sys.executable, "-c", BUSY, path, "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        pid, pidfd = forkserver.request_server(path, {}, {}, ["server"], answer_within=0.5, patience=20)
        os.close(pidfd)
        assert pid == server.pid
    finally:
        server.kill()
        server.wait()


def test_only_this_interpreters_ipykernel_is_forked():
    assert kernels.forkable([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not kernels.forkable([sys.executable, "-m", "other_kernel", "-f", "k.json"])
    assert not kernels.forkable(["/usr/bin/python3.9-not-this", "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not kernels.forkable([sys.executable, "-c", "import ipykernel_launcher"])


def test_a_forked_process_starts_with_the_path_its_script_would_have(monkeypatch):
    monkeypatch.setattr(kernels, "BASE_PATH", ["/usr/lib/python3.11", "/env/site-packages"])
    assert kernels.python_path({"PYTHONPATH": "/a:/b"}) == ["/a", "/b", "/usr/lib/python3.11", "/env/site-packages"]
    assert kernels.python_path({}) == ["/usr/lib/python3.11", "/env/site-packages"]


def test_a_forked_server_keeps_jupyterlabs_folders_in_its_users_home(monkeypatch, tmp_path):
    from jupyterlab import labapp   # (imported as the fork server imports it: here, with this HOME)

    for name in ("JUPYTER_CONFIG_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))   # the user's, once the child has her environment
    lab = tmp_path / ".jupyter" / "lab"
    assert forkserver.lab_folders() == [f"--LabApp.user_settings_dir={lab / 'user-settings'}",
                                        f"--LabApp.workspaces_dir={lab / 'workspaces'}"]
    # what the import left as the defaults is not her home: without the options, her server used it
    assert not labapp.LabApp.class_traits()["workspaces_dir"].default_value.startswith(str(tmp_path))


def test_the_fork_server_and_its_children_count_as_their_hubs_only(tmp_path):
    mine, other = tmp_path / "hub", tmp_path / "other-hub"
    marked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, hub.FORK_SERVER_MARK: str(mine)})
    try:
        assert marked.pid in hub._hub_processes({"hub_port": 1, "hub_dir": str(mine), "created_users": []})
        assert marked.pid not in hub._hub_processes({"hub_port": 1, "hub_dir": str(other), "created_users": []})
        # stopping a fork server checks its mark: a reused pid is never killed
        (other).mkdir()
        (other / "forkserver.pid").write_text(str(marked.pid))
        assert hub.stop_fork_server(other) is False and marked.poll() is None
        # its own hub's stops it, and removes its socket: servers start the other way, and no one
        # takes it for a fork server that died (which the hub would replace)
        (mine / "run").mkdir(parents=True)
        (mine / "forkserver.pid").write_text(str(marked.pid))
        (mine / "run" / "forkserver.sock").touch()
        assert hub.stop_fork_server(mine) is True and not os.path.exists(f"/proc/{marked.pid}")
        assert not (mine / "run" / "forkserver.sock").exists() and not (mine / "forkserver.pid").exists()
    finally:
        marked.kill()
        marked.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace of one's own needs root")
def test_a_servers_private_tmp_keeps_the_course_packages_read_only_and_nothing_else(tmp_path):
    """A hub run from a checkout under /tmp: every server gets a fresh /tmp, with the course's
    packages (the checkout's environment) bound back in read-only, and nothing else of the real /tmp."""
    if not str(tmp_path).startswith("/tmp/"):
        pytest.skip("the temporary folder is not under /tmp")
    packages = tmp_path / "checkout" / ".venv" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "module.py").write_text("VALUE = 1\n")
    (tmp_path / "checkout" / "solutions").mkdir()
    (tmp_path / "secret").write_text("not for the server")
    script = f"""
import json, os, sys
sys.path.insert(0, {str(hub.REPO_ROOT / "autograder" / "jupyterhub")!r})
import enter
enter.private_mounts({{"/tmp": "16M"}}, [{str(packages)!r}])
try:
    open({str(packages / "planted")!r}, "w")
    writable = True
except OSError:
    writable = False
print(json.dumps({{"read": open({str(packages / "module.py")!r}).read(), "writable": writable,
                  "tmp": os.listdir("/tmp"), "secret": os.path.exists({str(tmp_path / "secret")!r}),
                  "siblings": os.listdir({str(tmp_path / "checkout")!r}),
                  "mode": oct(os.stat({str(tmp_path / "checkout")!r}).st_mode & 0o7777)}}))
"""
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["read"] == "VALUE = 1\n" and seen["writable"] is False
    assert seen["tmp"] == [tmp_path.relative_to("/tmp").parts[0]] and seen["secret"] is False
    assert seen["siblings"] == [".venv"] and seen["mode"] == "0o755"
    assert not (packages / "planted").exists() and (tmp_path / "secret").exists()  # the real /tmp as it was


@pytest.mark.skipif(os.geteuid() != 0, reason="an IPC namespace of one's own needs root")
def test_a_servers_ipc_namespace_is_its_own_capped_and_ends_with_it():
    """What enter.py gives a server: System V objects made after it are invisible to the machine,
    shared memory past the cap is refused, and all of it is gone when the last process ends."""
    script = f"""
import ctypes, json, os, sys
sys.path.insert(0, {str(hub.REPO_ROOT / "autograder" / "jupyterhub")!r})
import enter
enter.private_mounts({{"/tmp": "16M"}})
enter.private_ipc(2**20)
libc = ctypes.CDLL(None, use_errno=True)
made = libc.shmget(0, 2**19, 0o1000 | 0o600)
too_big = libc.shmget(0, 2 * 2**20, 0o1000 | 0o600)
queue = libc.msgget(0, 0o1000 | 0o600)
print(json.dumps({{"made": made, "too_big": too_big, "queue": queue, "namespace": os.readlink("/proc/self/ns/ipc"),
                  "seen": open("/proc/sysvipc/shm").read().count(chr(10)) - 1}}), flush=True)
sys.stdin.readline()
"""
    before = {kind: Path(f"/proc/sysvipc/{kind}").read_text() for kind in ("shm", "msg")}
    process = subprocess.Popen([sys.executable, "-I", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    try:
        seen = json.loads(process.stdout.readline())
        assert seen["made"] >= 0 and seen["queue"] >= 0 and seen["too_big"] == -1 and seen["seen"] == 1, seen
        assert seen["namespace"] != os.readlink("/proc/self/ns/ipc")
        # the machine's namespace shows nothing of it, while it runs
        assert {kind: Path(f"/proc/sysvipc/{kind}").read_text() for kind in ("shm", "msg")} == before
    finally:
        process.communicate("\n", timeout=30)
    assert not any(os.readlink(f"/proc/{p}/ns/ipc") == seen["namespace"] for p in os.listdir("/proc")
                   if p.isdigit() and os.path.exists(f"/proc/{p}/ns/ipc"))


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount and IPC namespace of one's own needs root")
def test_a_servers_posix_message_queues_are_its_own_where_dev_mqueue_is_mounted():
    """Where the machine mounts its message queues at /dev/mqueue (systemd does), a server's
    /dev/mqueue is its IPC namespace's: a queue it makes there is not the machine's. (All of it in a
    mount namespace of the test's own, with a tmpfs over /dev: nothing of the machine's changes.)"""
    script = f"""
import json, os, sys
sys.path.insert(0, {str(hub.REPO_ROOT / "autograder" / "jupyterhub")!r})
import enter
enter.private_mounts({{"/tmp": "16M"}})
enter._libc_call("mount", b"tmpfs", b"/dev", b"tmpfs", 0, b"size=1M")
for folder in ("/dev/mqueue", "/dev/machine-mqueue"):
    os.mkdir(folder)
    enter._libc_call("mount", b"mqueue", folder.encode(), b"mqueue", 0, None)   # the machine's queues
enter.private_ipc()
os.close(os.open("/dev/mqueue/probe", os.O_CREAT | os.O_RDWR, 0o600))
print(json.dumps({{"server": os.listdir("/dev/mqueue"), "machine": os.listdir("/dev/machine-mqueue")}}))
os.unlink("/dev/mqueue/probe")   # wherever it went
"""
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["server"] == ["probe"] and "probe" not in seen["machine"], seen
