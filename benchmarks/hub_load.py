"""A class logging in at once: N students against a course hub on this machine, through HTTP only.

    sudo .venv/bin/python benchmarks/hub_load.py [--students 30] [--port 8790] [--without-fork-server] [--lti]
        [--class-list | --returning] [--requests]

Starts a hub (``python -m autograder hub start``, real users made for the run and removed
after, the default limits) and then, for every student at the same moment, as a browser and
JupyterLab would: the login form, the server's start (the hub's REST API, until ready), a kernel
(its websocket), and a cell that imports numpy and the course package and runs an attention
forward. Prints, per stage, p50 and p95 over the students and the failures; then the CPU
seconds each student's processes took (server, kernel and what they ran: the start, the kernel
and the cell) and, once every student is idle with that kernel still open, the memory per idle
student (their memory cgroups). With the hub's fork server (``jupyterhub/forkserver.py``), what
it spent importing once and its resident memory, which the servers forked from it share, are
printed apart: pages a student shares with it are charged to it, not to the student.

It also says whether the hub routed two users to one port (from its log): the goal includes none.
``--requests`` prints each request of the login stage apart (its time, and when it was answered).

The baselines, measured in the same run: one student alone, before the class (the ratio
``class p95 / alone`` says what the crowd costs), and the CPU a server's start spends importing
with the course hub's environment against the course's own virtual environment (the untuned
import, ``rfc3987_syntax`` and all). ``--without-fork-server`` stops the fork server once the hub
has started, so that every server starts as a new process (``enter.py``), as before it: run it
back to back with a run without the flag to compare. Goal (issue 20): 30 students, 0 failures,
p95 login -> first result <= 30 s. Wall times depend on what else the machine runs: say what it ran.

``--lti``: the students come from an LMS instead (issue 32): a real LTI 1.3 platform on loopback
(``tests/autograder/lti_platform.py``, on ``lti1p3platform``) and a roster with its ``lti`` block;
the login stage is each student's whole launch (the OIDC login initiation, the platform's
authorization, the signed id_token checked by the hub, the account made on first launch), the
rest as above. Run it back to back with a run without the flag: the issue asks for the same p95.
``--lti --class-list``: the LMS's class list (NRPS) names every student, and their instructor
launches first (not timed): the hub reads the class list and makes the accounts and homes ahead,
as ``hub start`` does a roster's (its time is printed), so that the timed launches are first
launches with accounts made, as the PAM run's logins are.
``--lti --returning``: every student launched once before (one after another, not timed: their
accounts exist, as the PAM run's do), so that the timed launch is the protocol alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from statistics import quantiles

import requests
import websocket

REPO = Path(__file__).resolve().parents[1]
CELL = ("import numpy as np\n"
        "from attention_course.numpy_track.attention import Attention\n"
        "rng = np.random.default_rng(0)\n"
        "layer = Attention('general', 16, 16, rng=rng)\n"
        "context = layer.forward(rng.normal(size=(8, 12, 16)), rng.normal(size=(8, 16)))\n"
        "print('RESULT', context.shape)\n")
STAGES = ("login", "spawn", "kernel", "cell", "total")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values: list[float], q: int) -> float:
    if len(values) == 1:
        return values[0]
    return quantiles(values, n=100, method="inclusive")[q - 1]


def execute(ws, code: str, timeout: float) -> str:
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({"header": {"msg_id": msg_id, "username": "", "session": uuid.uuid4().hex,
                                   "msg_type": "execute_request", "version": "5.3", "date": ""},
                        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                        "content": {"code": code, "silent": False, "store_history": False,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    # done when both the reply (shell) and the kernel's idle status (iopub, after all the cell's
    # output) have come: the two channels reach the websocket in either order
    output, replied, idle, deadline = [], False, False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = json.loads(ws.recv())
        if (message.get("parent_header") or {}).get("msg_id") != msg_id:
            continue
        kind = message["header"]["msg_type"]
        if kind == "stream":
            output.append(message["content"]["text"])
        elif kind == "error":
            raise RuntimeError(f"{message['content']['ename']}: {message['content']['evalue']}")
        elif kind == "execute_reply":
            replied = True
        elif kind == "status" and message["content"].get("execution_state") == "idle":
            idle = True
        if replied and idle:
            return "".join(output)
    raise TimeoutError(f"no reply within {timeout:.0f} s")


class Student(threading.Thread):
    def __init__(self, url: str, name: str, password: str, go: threading.Event, timeout: float, lms=None) -> None:
        super().__init__(daemon=True)
        self.url, self.name, self.password, self.go, self.timeout = url, name, password, go, timeout
        self.lms = lms   # (platform, person, context) for an LTI launch instead of the login form
        self.times: dict[str, float] = {}
        self.error: str | None = None
        self.kernel_socket = None
        self.requests: list[tuple[str, str, float, float]] = []   # the login's: method, URL, seconds, done at

    def run(self) -> None:
        self.go.wait()
        start = mark = time.monotonic()

        def lap(stage: str) -> None:
            nonlocal mark
            now = time.monotonic()
            self.times[stage] = now - mark
            mark = now

        try:
            session = requests.Session()
            session.hooks["response"].append(lambda r, *a, **k: self.requests.append(
                (r.request.method, r.url.split("?")[0], r.elapsed.total_seconds(), time.monotonic() - start)))
            if self.lms:
                platform, person, context = self.lms
                answer = platform.launch(session, person, context, "link-1", f"{self.url}/hub/lti13/oauth_login",
                                         follow=False)
                if answer.status_code != 302:
                    raise RuntimeError(f"launch: {answer.status_code} {answer.text[-300:]}")
                session.get(f"{self.url}/hub/home", timeout=self.timeout)   # the hub's _xsrf cookie
            else:
                session.get(f"{self.url}/hub/login", timeout=self.timeout).raise_for_status()
                answer = session.post(f"{self.url}/hub/login?next=", allow_redirects=False, timeout=self.timeout,
                                      data={"username": self.name, "password": self.password,
                                            "_xsrf": session.cookies.get("_xsrf", path="/hub/")})
                if answer.status_code != 302:
                    raise RuntimeError(f"login: {answer.status_code}")
            token = _json(session.post(f"{self.url}/hub/api/users/{self.name}/tokens", json={"expires_in": 3600},
                                       headers={"X-XSRFToken": session.cookies.get("_xsrf", path="/hub/")},
                                       timeout=self.timeout), "token")["token"]
            api = requests.Session()
            api.headers["Authorization"] = f"token {token}"
            lap("login")
            answer = api.post(f"{self.url}/hub/api/users/{self.name}/server", timeout=self.timeout)
            if answer.status_code not in (201, 202):
                raise RuntimeError(f"spawn: {answer.status_code} {answer.text[:200]}")
            if answer.status_code == 202:   # pending: follow its progress, as the hub's spawn page does
                wait_for_server(api, self.url, self.name, self.timeout)
            lap("spawn")
            base = f"{self.url}/user/{self.name}"
            kernel = _json(api.post(f"{base}/api/kernels", json={"name": "python3"}, timeout=self.timeout), "kernel")["id"]
            self.kernel_socket = websocket.create_connection(
                f"{base.replace('http://', 'ws://')}/api/kernels/{kernel}/channels", timeout=self.timeout,
                header=[f"Authorization: token {token}"])
            lap("kernel")
            output = execute(self.kernel_socket, CELL, self.timeout)
            if "RESULT (8, 16)" not in output:
                raise RuntimeError(f"the cell printed {output!r}")
            lap("cell")
            self.times["total"] = time.monotonic() - start
        except Exception as exc:  # noqa: BLE001 - a student's failure is counted, with its reason
            self.error = f"{type(exc).__name__}: {exc}"


def _json(response: requests.Response, what: str) -> dict:
    """The JSON of an answer, or an error that says which request got what instead."""
    try:
        return response.json()
    except ValueError:
        raise RuntimeError(f"{what}: HTTP {response.status_code}, not JSON: {response.text[:200]!r}") from None


def wait_for_server(api: requests.Session, url: str, name: str, timeout: float) -> None:
    """Until the user's server is ready: the progress event stream that the hub's spawn page
    follows (an EventSource), not a poll of the REST API, which would load the hub as no browser does."""
    deadline = time.monotonic() + timeout
    with api.get(f"{url}/hub/api/users/{name}/server/progress", stream=True, timeout=timeout,
                 headers={"Accept": "text/event-stream"}) as events:
        events.raise_for_status()
        for line in events.iter_lines(decode_unicode=True):
            if line and line.startswith("data:"):
                event = json.loads(line[len("data:"):])
                if event.get("ready"):
                    return
                if event.get("failed"):
                    raise RuntimeError(f"the server did not start: {event.get('message')}"[:300])
            if time.monotonic() > deadline:
                break
    model = _json(api.get(f"{url}/hub/api/users/{name}", timeout=timeout), "server model")
    if not ((model.get("servers") or {}).get("") or {}).get("ready"):
        raise RuntimeError(f"spawn timed out: {model.get('pending')!r}")


def class_run(url: str, names: list[str], password: str, timeout: float, lms=None) -> list[Student]:
    """``lms``: (platform, {name: person}, context) when the students launch from the LMS."""
    go = threading.Event()
    students = [Student(url, name, password, go, timeout, (lms[0], lms[1][name], lms[2]) if lms else None)
                for name in names]
    for student in students:
        student.start()
    go.set()
    for student in students:
        student.join(timeout * 3)
    return students


def report(title: str, students: list[Student]) -> dict[str, float]:
    done = [s for s in students if not s.error]
    print(f"\n{title}: {len(students)} student(s), {len(students) - len(done)} failure(s)")
    for student in students:
        if student.error:
            print(f"  FAILED {student.name}: {student.error}")
    p95 = {}
    for stage in STAGES:
        values = [s.times[stage] for s in done if stage in s.times]
        if values:
            p95[stage] = percentile(values, 95)
            print(f"  {stage:7s} p50 {percentile(values, 50):6.1f} s   p95 {p95[stage]:6.1f} s   "
                  f"max {max(values):6.1f} s")
    return p95


def cgroup_memory(state: dict, user: str) -> int | None:
    folder = state.get("cgroups", {}).get("memory")
    if not folder:
        return None
    for name in ("memory.usage_in_bytes", "memory.current"):
        path = Path(folder) / user / name
        if path.exists():
            return int(path.read_text())
    return None


def user_cpu_seconds(user: str) -> tuple[float, float] | None:
    """CPU seconds of everything running as ``user``: their server (and what it waited for, e.g.
    JupyterLab's ``node`` when not preloaded), and their kernels (with the kernel zygote, if any):
    the start, the kernel and the cell. The same measure whether the server was forked or started
    afresh; what the fork server spent importing once is reported apart (``process_cpu_seconds``)."""
    uid, seconds, parents = pwd.getpwnam(user).pw_uid, {}, {}
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                seconds[int(entry)] = process_cpu_seconds(int(entry), children=True)
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    if not seconds:
        return None
    server = sum(cpu for pid, cpu in seconds.items() if parents[pid] not in seconds)
    return server, sum(seconds.values()) - server


def process_cpu_seconds(pid: int, children: bool = False) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def import_cpu(python: str) -> float:
    code = ("import time\nt = time.process_time()\nfrom jupyterhub.singleuser import main\n"
            "import nbgrader.apps, jupyterlab.labapp\nprint(time.process_time() - t)\n")
    runs = [float(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout)
            for _ in range(3)]
    return sorted(runs)[1]


def _pid(path: Path) -> int | None:
    """The pid in ``path`` if that process runs."""
    try:
        pid = int(path.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=180, help="seconds per stage before a student fails")
    parser.add_argument("--without-fork-server", action="store_true",
                        help="the baseline: stop the hub's fork server after start, so that every server starts "
                             "as a new process (enter.py), as before the fork server")
    parser.add_argument("--requests", action="store_true",
                        help="also each request of the login stage: its time and when it was answered")
    parser.add_argument("--lti", action="store_true", help="the students launch from an LTI 1.3 platform on loopback")
    parser.add_argument("--class-list", action="store_true",
                        help="with --lti: the instructor launches first, and the hub makes the class list's accounts")
    parser.add_argument("--returning", action="store_true",
                        help="with --lti: each student launched once before the timed run (accounts made)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("run it as root: the hub starts each student's server as that student", file=sys.stderr)
        return 2
    tag = secrets.token_hex(2)
    names = [f"ld{tag}s{i:02d}" for i in range(args.students + 1)]
    alone, crowd = names[0], names[1:]
    folder = Path(tempfile.mkdtemp(prefix="attention-hub-load-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    private = folder / "private"
    (private / "source").mkdir(parents=True)
    os.chmod(private, 0o700)
    shutil.copytree(REPO / "solutions" / "ch3a_multi_query_penalty", private / "source" / "ch3a_multi_query_penalty")
    hub_dir, port = folder / "hub", args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    roster = {"courses": {f"load{tag}": {"instructors": [f"ld{tag}teacher"], "students": names}}, "idle_timeout": 0}
    lms, platform = None, None
    if args.lti:
        platform = _lti_platform().Platform(
            client_id=f"tool-{tag}", deployment_id=f"dep-{tag}", tool_login_url=f"{url}/hub/lti13/oauth_login",
            tool_redirect_url=f"{url}/hub/lti13/oauth_callback", tool_jwks=f"{url}/hub/lti13/jwks").start()
        context = f"ctx-{tag}"
        platform.add_context(context, "hub load")
        people = {f"s{i:02d}-{tag}": {"sub": f"s{i:02d}-{tag}", "name": f"Student {i}", "email": f"s{i}@example.edu",
                                      "roles": [_lti_platform().LEARNER]} for i in range(args.students + 1)}
        names = _lti_names(platform.issuer, list(people))
        lms = (platform, dict(zip(names, people.values())), context)
        if args.class_list:   # the LMS's class list (NRPS) has them all, and their instructor
            for person in people.values():
                platform.add_member(context, person)
            teacher = {"sub": f"teacher-{tag}", "name": "Teacher", "roles": [_lti_platform().INSTRUCTOR]}
            platform.add_member(context, teacher)
        alone, crowd = names[0], names[1:]
        roster = {"lti": {"issuer": platform.issuer, "client_id": platform.client_id,
                          "deployment_ids": [platform.deployment_id], "authorize_url": platform.authorize_url,
                          "jwks_url": platform.jwks_url, "token_url": platform.token_url, "key": "tool-key.pem"},
                  "courses": {f"load{tag}": {"instructors": [f"ld{tag}teacher"], "students": [],
                                             "lti_context": context}}, "idle_timeout": 0}
    (private / "roster.json").write_text(json.dumps(roster))
    password = secrets.token_hex(8)
    (private / "password").write_text(password)
    print(f"hub_load: {args.students} students{' launching from an LMS (LTI 1.3)' if args.lti else ''} on "
          f"{os.cpu_count()} CPUs; load average before: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    try:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "autograder", "hub", "start", str(private / "roster.json"),
                               "--dir", str(hub_dir), "--port", str(port), "--authenticator", "dummy",
                               "--password-file", str(private / "password"), "--create-users",
                               "--source", str(private / "source")], cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        print(f"hub start (users, homes, wheel, leak scan): {time.monotonic() - started:.1f} s")
        state = json.loads((hub_dir / "state.json").read_text())
        fork_server = _pid(hub_dir / "forkserver.pid")
        if args.without_fork_server and fork_server:
            subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from autograder import hub; "
                            "hub.stop_fork_server(Path(sys.argv[1]))", str(hub_dir)], cwd=REPO, check=True)
            fork_server = None
        if fork_server:
            print(f"the fork server (pid {fork_server}): {process_cpu_seconds(fork_server):.2f} CPU s to import "
                  f"once, {resident_mib(fork_server):.0f} MiB resident (shared by every server forked from it)")
        else:
            print("no fork server: every server starts as a new process")
        tuned = import_cpu(str(Path(state["venv"]) / "bin" / "python"))
        untuned = import_cpu(sys.executable)
        print(f"a server's imports: {tuned:.2f} CPU s in the hub's environment, {untuned:.2f} CPU s in the "
              f"course's own (ratio {tuned / untuned:.2f})")
        if lms and args.class_list:
            started = time.monotonic()
            answer = platform.launch(requests.Session(), teacher, lms[2], "link-1", f"{url}/hub/lti13/oauth_login",
                                     follow=False)
            if answer.status_code != 302:
                print(f"the instructor's launch failed: {answer.status_code}", file=sys.stderr)
                return 1
            homes = [hub_dir / "homes" / name for name in names]
            while not all(os.path.ismount(home) for home in homes):
                if time.monotonic() - started > 300:
                    print("the class list's accounts were not all made within 300 s", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            print(f"the instructor launched; the hub read the class list and made its {len(names)} accounts and homes "
                  f"in {time.monotonic() - started:.1f} s")
        if lms and args.returning:
            started = time.monotonic()
            for name in crowd:
                answer = platform.launch(requests.Session(), lms[1][name], lms[2], "link-1",
                                         f"{url}/hub/lti13/oauth_login", follow=False)
                if answer.status_code != 302:
                    print(f"an earlier launch of {name} failed: {answer.status_code}", file=sys.stderr)
                    return 1
            print(f"each student launched once before (accounts made, one after another): "
                  f"{time.monotonic() - started:.1f} s")
        single = report("alone (baseline)", class_run(url, [alone], password, args.timeout, lms))
        hub_pids = {"JupyterHub": _pid(hub_dir / "jupyterhub.pid"), "the proxy": _pid(hub_dir / "proxy.pid")}
        before = {name: process_cpu_seconds(pid) for name, pid in hub_pids.items() if pid}
        fork_cpu = process_cpu_seconds(fork_server) if fork_server else 0.0
        own_cpu = time.process_time()
        students = class_run(url, crowd, password, args.timeout, lms)
        own_cpu = time.process_time() - own_cpu
        fork_cpu = process_cpu_seconds(fork_server) - fork_cpu if fork_server else 0.0
        hub_cpu = {name: process_cpu_seconds(pid) - before[name] for name, pid in hub_pids.items() if pid}
        load = os.getloadavg()
        p95 = report(f"the class at once (load average after: {load[0]:.1f})", students)
        if args.requests:
            requests_report(students)
        if "total" in single and "total" in p95:
            print(f"  ratio class p95 / alone, login -> first result: {p95['total'] / single['total']:.1f}")
        parts = [c for c in (user_cpu_seconds(s.name) for s in students if not s.error) if c is not None]
        cpu = [server + kernels for server, kernels in parts]
        if cpu:
            print(f"CPU seconds per student (all their processes: server start, kernel, cell): "
                  f"p50 {percentile(cpu, 50):.2f} (server {percentile([p[0] for p in parts], 50):.2f}, "
                  f"kernel {percentile([p[1] for p in parts], 50):.2f}), max {max(cpu):.2f}"
                  + (f"; the fork server's own for the class: {fork_cpu:.2f}" if fork_server else ""))
        print("CPU seconds for the class in the hub's own processes: "
              + ", ".join(f"{name} {seconds:.1f}" for name, seconds in hub_cpu.items())
              + f"; this benchmark's browsers, on the same CPUs: {own_cpu:.1f}")
        time.sleep(10)   # idle: the cell has run, the kernel stays open
        memory = [m for m in (cgroup_memory(state, s.name) for s in students if not s.error) if m]
        if memory:
            print(f"memory per idle student (server + kernel with numpy and the package, their cgroup): "
                  f"p50 {percentile(memory, 50) / 2**20:.0f} MiB, max {max(memory) / 2**20:.0f} MiB"
                  + (f"; plus the fork server's {resident_mib(fork_server):.0f} MiB once (pages the students "
                     "share with it are charged to it)" if fork_server else ""))
        shared = shared_ports(hub_dir / "logs" / "jupyterhub.log")
        print("servers given a port another server was given: "
              + (", ".join(f"{port} ({' and '.join(users)})" for port, users in shared.items()) or "none"))
        failures = sum(1 for s in students if s.error)
        goal = failures == 0 and p95.get("total", 1e9) <= 30 and not shared
        print(f"goal (0 failures, p95 login -> first result <= 30 s): {'met' if goal else 'NOT met'}")
        for student in students:
            if student.kernel_socket is not None:
                student.kernel_socket.close()
        return 0
    finally:
        subprocess.run([sys.executable, "-m", "autograder", "hub", "stop", "--dir", str(hub_dir), "--remove-users"],
                       cwd=REPO, capture_output=True)
        log = hub_dir / "logs" / "jupyterhub.log"
        if log.exists():
            shutil.copy(log, "/var/tmp/hub_load-last.log")
            print("the hub's log: /var/tmp/hub_load-last.log")
        for name in names + [f"ld{tag}teacher"]:
            try:
                pwd.getpwnam(name)
                print(f"warning: user {name} is left", file=sys.stderr)
            except KeyError:
                pass
        shutil.rmtree(folder, ignore_errors=True)
        if platform is not None:
            platform.stop()


def requests_report(students: list[Student]) -> None:
    """Each request of the login stage: how long it took (until its answer's headers) and when,
    after the student's start, it was answered (p50 and p95 over the students)."""
    import re

    by: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for student in students:
        for method, url, took, at in student.requests:
            path = re.sub(r"/users/[^/]+/", "/users/NAME/", url.replace(student.url, ""))
            by.setdefault((method, path), []).append((took, at))
    for (method, path), values in by.items():
        took, at = [v[0] for v in values], [v[1] for v in values]
        print(f"    {method} {path}: took p50 {percentile(took, 50):.2f} s, p95 {percentile(took, 95):.2f} s; "
              f"answered at p50 {percentile(at, 50):.2f} s, p95 {percentile(at, 95):.2f} s")


def shared_ports(log: Path) -> dict[int, list[str]]:
    """The ports the hub routed two users' servers to (its log's "Adding user NAME to proxy ... =>
    http://127.0.0.1:PORT"): the second could not listen, and its user reached the first's server."""
    import re

    routed: dict[int, set[str]] = {}
    for match in re.finditer(r"Adding user (\S+) to proxy \S+ => https?://[^:\s]+:(\d+)", log.read_text()):
        routed.setdefault(int(match.group(2)), set()).add(match.group(1))
    return {port: sorted(users) for port, users in routed.items() if len(users) > 1}


def _lti_names(issuer: str, subs: list[str]) -> list[str]:
    """The hub's names for these LMS users (``autograder.lti.local_name``, asked of the checkout's
    autograder as the hub's commands are: ``python -m`` from the checkout)."""
    code = ("import json, sys\nfrom autograder.lti import local_name\n"
            "print(json.dumps([local_name(sys.argv[1], sub) for sub in sys.argv[2:]]))")
    done = subprocess.run([sys.executable, "-c", code, issuer, *subs], cwd=REPO, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def _lti_platform():
    """The tests' LTI 1.3 platform (``tests/autograder/lti_platform.py``), loaded from its file."""
    import sys as _sys

    if "lti_platform" not in _sys.modules:
        spec = importlib.util.spec_from_file_location("lti_platform", REPO / "tests" / "autograder" / "lti_platform.py")
        module = importlib.util.module_from_spec(spec)
        _sys.modules["lti_platform"] = module
        spec.loader.exec_module(module)
    return _sys.modules["lti_platform"]


if __name__ == "__main__":
    sys.exit(main())
