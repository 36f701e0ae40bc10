"""The hub's fork server as the spawner meets it, without root: what it does when none listens, when
its child fails, and which processes count as the hub's. (Forking real servers as real users is
tested end to end in test_hub.py, as root.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from autograder import hub
from autograder.jupyterhub import forkserver, kernels


def test_no_fork_server_listening_means_a_server_starts_the_old_way(tmp_path):
    path = tmp_path / "forkserver.sock"
    with pytest.raises(forkserver.NotListening):
        forkserver.request_server(str(path), {}, {}, ["server"])
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)   # a socket file nobody listens on
    stale.bind(str(path))
    stale.close()
    with pytest.raises(forkserver.NotListening):
        forkserver.request_server(str(path), {}, {}, ["server"])


@pytest.mark.parametrize("answer, message", [
    (json.dumps({"error": "PermissionError: no cgroup"}).encode(), "PermissionError: no cgroup"),
    (b"", "ended before it answered"),
    (json.dumps({"pid": 123}).encode(), "no pidfd"),
])
def test_a_request_the_child_did_not_serve_fails_and_is_not_retried(tmp_path, answer, message):
    path = str(tmp_path / "forkserver.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(1)
    got = {}

    def child() -> None:
        conn, _ = listener.accept()
        with conn:
            data, ancillary, _flags, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(8))
            got["request"] = json.loads(data)
            got["descriptors"] = sum(len(payload) // 4 for *_, payload in ancillary)
            if answer:
                conn.send(answer)

    thread = threading.Thread(target=child)
    thread.start()
    try:
        with pytest.raises(forkserver.ForkError, match=message) as raised:
            forkserver.request_server(path, {"uid": 1000}, {"HOME": "/home/x"}, ["server", "--port=1"])
    finally:
        thread.join(10)
        listener.close()
    assert not isinstance(raised.value, OSError)   # the spawner falls back only on NotListening (an OSError)
    assert got["request"] == {"plan": {"uid": 1000}, "env": {"HOME": "/home/x"}, "argv": ["server", "--port=1"]}
    assert got["descriptors"] == 2   # the server's stdout and stderr, nothing else of the hub's


def test_only_this_interpreters_ipykernel_is_forked():
    assert kernels.forkable([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not kernels.forkable([sys.executable, "-m", "other_kernel", "-f", "k.json"])
    assert not kernels.forkable(["/usr/bin/python3.9-not-this", "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not kernels.forkable([sys.executable, "-c", "import ipykernel_launcher"])


def test_a_forked_process_starts_with_the_path_its_script_would_have(monkeypatch):
    monkeypatch.setattr(kernels, "BASE_PATH", ["/usr/lib/python3.11", "/env/site-packages"])
    assert kernels.python_path({"PYTHONPATH": "/a:/b"}) == ["/a", "/b", "/usr/lib/python3.11", "/env/site-packages"]
    assert kernels.python_path({}) == ["/usr/lib/python3.11", "/env/site-packages"]


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
