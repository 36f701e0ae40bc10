"""A course hub on one machine: JupyterHub for a class, started and stopped with one command each.

    sudo .venv/bin/python -m autograder hub start roster.yml [--dir /srv/attention-hub] [--port 8000]
    sudo .venv/bin/python -m autograder hub stop [--dir /srv/attention-hub]

The roster names the courses, and for each its instructors and students (Unix user names)::

    courses:
      attention101:
        instructors: [ada]
        students: [bo, cy]

What ``start`` sets up in ``--dir`` (then starts JupyterHub there, in the background, as root):

- real OS users (``--create-users`` makes the missing ones) log in (PAM, or ``--authenticator dummy``
  with one shared password, for tests) and get their own Jupyter server, started as themselves by
  JupyterHub's local-process spawner from this course's virtual environment (the course package,
  nbgrader's Assignments tab, nbgitpuller for the book's launch links, jupytext);
- per course, hub groups ``nbgrader-<course>`` (students) and ``formgrade-<course>`` (instructors),
  which nbgrader's JupyterHub authentication plugin reads: a student sees only the courses they
  are enrolled in;
- per course, a grader account ``grader-<course>`` that owns the course directory
  (``courses/<course>``: the gradebook, submissions, grades; no student can read it) and runs a
  Jupyter server as a hub service at ``/services/<course>/``, the formgrader included, open to the
  course's instructors only. Its environment names the course for ``python -m autograder``, so an
  instructor there runs ``release``, ``publish``, ``collect``, ``autograde`` (sandboxed),
  ``feedback``, ``return-feedback``;
- nbgrader's exchange (``exchange/``, one folder per course), through which students fetch,
  submit and fetch feedback; students' servers do not load the formgrader.

``stop`` stops the hub (which stops the proxy, the services and every user's server); with
``--remove-users`` it also removes the users ``start --create-users`` made.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from .course import REPO_ROOT, Course, check_id
from .errors import GradingError

HERE = Path(__file__).resolve().parent / "jupyterhub"
DEFAULT_DIR = Path("/srv/attention-hub")
# What the users must not reach in the checkout they import the course from: the solutions and
# hidden tests, and the default course directory (gradebook, submissions).
PRIVATE_IN_CHECKOUT = ("solutions", "grading")
PROXY = REPO_ROOT / "tools" / "hub-assets" / "node_modules" / ".bin" / "configurable-http-proxy"
AUTHENTICATORS = ("pam", "dummy")


# --- the roster ------------------------------------------------------------------------------------


def read_roster(path: Path) -> dict[str, dict[str, list[str]]]:
    """``{course: {"instructors": [...], "students": [...]}}`` from a YAML or JSON roster, checked."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise GradingError(f"roster: cannot read {path}: {exc.strerror}") from None
    try:
        if Path(path).suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - any parse error is the roster's, in one line
        raise GradingError(f"roster: {path} is not valid {'JSON' if Path(path).suffix == '.json' else 'YAML'}: "
                           f"{str(exc).splitlines()[0]}") from None
    courses = data.get("courses") if isinstance(data, dict) else None
    if not isinstance(courses, dict) or not courses:
        raise GradingError(f"roster: {path} needs a 'courses' mapping, each with 'instructors' and 'students'")
    roster = {}
    for course, members in courses.items():
        check_id("course", str(course), "the roster")
        if "-" in str(course) or "+" in str(course):
            raise GradingError(f"roster: course id {course!r}: use letters, digits and '_' (nbgrader's groups and "
                               "exchange folders split on '-' and '+')")
        if not isinstance(members, dict):
            raise GradingError(f"roster: course {course!r} needs 'instructors' and 'students' lists")
        entry = {}
        for role in ("instructors", "students"):
            names = members.get(role) or []
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise GradingError(f"roster: {course}.{role} must be a list of user names")
            for name in names:
                if not _unix_name(name):
                    raise GradingError(f"roster: {course}.{role}: {name!r} is not a valid Unix user name "
                                       "(lowercase letters, digits, '_' and '-', starting with a letter)")
            entry[role] = list(dict.fromkeys(names))
        if not entry["instructors"]:
            raise GradingError(f"roster: course {course!r} has no instructor")
        both = set(entry["instructors"]) & set(entry["students"])
        if both:
            raise GradingError(f"roster: {sorted(both)} are both instructors and students of {course!r}")
        roster[str(course)] = entry
    return roster


def _unix_name(name: str) -> bool:
    return bool(name) and len(name) <= 32 and name[0].isalpha() and name.islower() and \
        all(ch.isalnum() or ch in "_-" for ch in name) and not name.startswith("grader-")


# --- start -----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise GradingError(f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()}")


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def _chown_tree(folder: Path, user: str) -> None:
    account = pwd.getpwnam(user)
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, account.pw_uid, account.pw_gid, follow_symlinks=False)


def _course_dir_setup(course: str, folder: Path, grader: str, source: Path, exchange: Path) -> None:
    """The grader account's course directory (the source notebooks, nbgrader's config), and the
    course's folders in the exchange, made now and owned by the grader account: a student cannot
    claim a course's name in the exchange before its instructor first publishes."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "source"
    if not target.exists():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    Course(root=folder, source=target, course_id=course, exchange=str(exchange)).ensure()
    _chown_tree(folder, grader)
    os.chmod(folder, 0o700)
    # nbgrader's own modes for these folders (exchange/default/release_assignment.py, release_feedback.py),
    # inside a course folder that only the course's Unix group may enter.
    account = pwd.getpwnam(grader)
    group = grp.getgrnam(unix_group(course)).gr_gid
    for name, mode in (("", 0o750), ("outbound", 0o755), ("inbound", 0o2733), ("feedback", 0o711)):
        path = exchange / course / name
        path.mkdir(exist_ok=True)
        os.chown(path, account.pw_uid, group if name in ("", "inbound") else account.pw_gid)
        os.chmod(path, mode)


def unix_group(course: str) -> str:
    """The Unix group of a course's people (students, instructors): it alone may enter the course's
    folder in the exchange, so a student of another course cannot read its assignments even
    without nbgrader's (cooperative) check."""
    return f"course-{course}"


def _reachable_by_all(path: Path) -> bool:
    """Whether any user of the machine can reach ``path`` (every folder above it searchable by others)."""
    path = Path(path).resolve()
    try:
        return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in path.parents) and \
            bool(os.stat(path).st_mode & (stat.S_IXOTH | stat.S_IROTH))
    except OSError:
        return False


def _site_packages() -> list[str]:
    return [p for p in site.getsitepackages() if p.startswith(sys.prefix)]


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)   # the same file, no space: the installation is read-only to users anyway
    except OSError:
        shutil.copy2(source, target)


def users_environment(hub_dir: Path) -> tuple[Path, str]:
    """The Python environment the users' servers and the graders' services run from: its prefix,
    and the LD_LIBRARY_PATH it needs ("" if none).

    This environment, if every user can run its interpreter. Otherwise (a Python installed under
    root's home, say) the interpreter and its standard library are linked (or copied) into
    ``hub_dir/python``, the very same version, and ``hub_dir/env`` is a virtual environment of that
    copy which loads this environment's packages (a ``.pth``), with the console scripts re-pointed
    at it. The copy finds its libpython through LD_LIBRARY_PATH.
    """
    if _reachable_by_all(Path(sys.executable)) and all(_reachable_by_all(Path(p)) for p in _site_packages()):
        return Path(sys.prefix), ""
    unreachable = [p for p in _site_packages() if not _reachable_by_all(Path(p))]
    if unreachable:
        raise GradingError(f"the course's packages ({', '.join(unreachable)}) cannot be read by the hub's users: "
                           "install the course in a virtual environment every user can read (e.g. /opt/attention-course)")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    home, copy, env = Path(sys.base_prefix), hub_dir / "python", hub_dir / "env"
    interpreter = copy / "bin" / version
    if not interpreter.exists():
        (copy / "bin").mkdir(parents=True, exist_ok=True)
        (copy / "lib").mkdir(exist_ok=True)
        _link_or_copy(str(Path(sys.executable).resolve()), str(interpreter))
        for library in (home / "lib").glob("libpython*.so*"):
            target = copy / "lib" / library.name
            if library.is_symlink():
                target.symlink_to(os.readlink(library))
            else:
                _link_or_copy(str(library), str(target))
        shutil.copytree(home / "lib" / version, copy / "lib" / version, symlinks=True, copy_function=_link_or_copy,
                        ignore=lambda folder, names: [n for n in names if n in ("site-packages", "test")
                                                      and Path(folder) == home / "lib" / version])
        (copy / "lib" / version / "site-packages").mkdir(exist_ok=True)
    library_path = str(copy / "lib") if any((copy / "lib").glob("libpython*.so*")) else ""
    made_from = env / "pyvenv.cfg"
    if not made_from.exists() or f"home = {interpreter.parent}\n" not in made_from.read_text():
        shutil.rmtree(env, ignore_errors=True)
        done = subprocess.run([str(interpreter), "-m", "venv", "--without-pip", str(env)], capture_output=True,
                              text=True, env={**os.environ, "LD_LIBRARY_PATH": library_path})
        if done.returncode != 0:
            raise GradingError(f"could not make the users' environment in {env}: {done.stderr.strip()[-300:]}")
    for name in ("share", "etc"):   # Jupyter's data and config paths follow sys.prefix: the extensions'
        link = env / name
        if not link.is_symlink() and (Path(sys.prefix) / name).is_dir():
            link.symlink_to(Path(sys.prefix) / name)
    packages = env / "lib" / version / "site-packages"
    _write(packages / "attention-course.pth",
           "".join(f"import site; site.addsitedir({p!r})\n" for p in _site_packages()))
    shebang = f"#!{Path(sys.prefix) / 'bin' / 'python'}"
    for script in (Path(sys.prefix) / "bin").iterdir():
        target = env / "bin" / script.name
        if not script.is_file() or target.exists() or script.name.startswith(("python", "activate", "pip")):
            continue
        try:
            lines = script.read_text().split("\n", 1)
        except (UnicodeDecodeError, OSError):
            continue
        if len(lines) == 2 and lines[0].strip() in (shebang, f"#!{sys.executable}"):
            _write(target, f"#!{env / 'bin' / 'python'}\n{lines[1]}", 0o755)
    return env, library_path


def _autograder_path(hub_dir: Path) -> Path:
    """A folder for the graders' PYTHONPATH holding only a link to this checkout's ``autograder``.

    Not the checkout itself: Python finds a module by listing the folders of its path, and the
    checkout need not be listable by others (only searchable, so that nothing else in it can be
    found by listing)."""
    folder = hub_dir / "lib"
    folder.mkdir(exist_ok=True)
    os.chmod(folder, 0o755)
    link = folder / "autograder"
    if link.is_symlink() and os.readlink(link) != str(REPO_ROOT / "autograder"):
        link.unlink()
    if not link.is_symlink():
        link.symlink_to(REPO_ROOT / "autograder")
    return folder


def start(roster_path: Path, hub_dir: Path = DEFAULT_DIR, *, port: int = 8000, ip: str = "127.0.0.1",
          authenticator: str = "pam", password: str | None = None, create_users: bool = False,
          source: Path = REPO_ROOT / "solutions", timeout: float = 90.0) -> dict:
    """Set up ``hub_dir`` for the roster and start JupyterHub there; returns the hub's state."""
    if os.geteuid() != 0:
        raise GradingError("run it as root (sudo): the hub starts each user's server as that user")
    if authenticator not in AUTHENTICATORS:
        raise GradingError(f"--authenticator must be one of {AUTHENTICATORS}, got {authenticator!r}")
    if authenticator == "dummy" and not password:
        raise GradingError("the dummy authenticator needs a shared password (--password-file)")
    if not PROXY.exists():
        raise GradingError(f"configurable-http-proxy is missing ({PROXY}): run "
                           "`npm ci --prefix tools/hub-assets` (make setup does)")
    if not Path(source).is_dir():
        raise GradingError(f"no source notebooks at {source}")
    if _reachable_by_all(Path(source)):
        raise GradingError(f"the source notebooks in {source} (solutions and hidden tests) can be read by every user "
                           f"of this machine, students included: `chmod o-rwx {source}`, or pass --source with a "
                           "private copy")
    for package, why in (("attention_course", "their notebooks import it"),
                         ("autograder", "the graders' servers run it")):
        if not _reachable_by_all(REPO_ROOT / package):
            raise GradingError(f"the course package ({REPO_ROOT / package}) must be readable by the hub's users: "
                               f"{why}")
    # The users reach the packages by name in this checkout, so they reach anything else in it whose
    # name they guess: the solutions and a course directory must be closed to them.
    exposed = [str(REPO_ROOT / name) for name in PRIVATE_IN_CHECKOUT
               if (REPO_ROOT / name).exists() and _reachable_by_all(REPO_ROOT / name)]
    if exposed:
        raise GradingError(f"{' and '.join(exposed)} can be read by every user of this machine, students included, "
                           f"who reach the course's packages in that checkout: `chmod o-rwx {' '.join(exposed)}`")
    roster = read_roster(roster_path)
    hub_dir = Path(hub_dir).resolve()
    state_path = hub_dir / "state.json"
    if (hub_dir / "jupyterhub.pid").exists() and _alive(_read_pid(hub_dir / "jupyterhub.pid")):
        raise GradingError(f"a hub is already running from {hub_dir} (hub stop --dir {hub_dir})")
    hub_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(hub_dir, 0o755)

    users = sorted({u for c in roster.values() for role in c.values() for u in role})
    graders = {course: f"grader-{course}" for course in roster}
    created = []
    for name in users + sorted(graders.values()):
        if _user_exists(name):
            continue
        if not create_users and not name.startswith("grader-"):
            raise GradingError(f"no Unix user {name!r}: create it, or pass --create-users")
        _run(["useradd", "--create-home", "--shell", "/bin/bash", name] if not name.startswith("grader-") else
             ["useradd", "--system", "--no-create-home", "--home-dir", str(hub_dir / "courses" / name[7:]),
              "--shell", "/bin/bash", name])
        created.append(name)
        if not name.startswith("grader-"):
            os.chmod(pwd.getpwnam(name).pw_dir, 0o700)   # useradd's default leaves homes readable by all
        _remember(state_path, hub_dir, created_users=created)

    created_groups = []
    for course, members in roster.items():
        group = unix_group(course)
        try:
            grp.getgrnam(group)
        except KeyError:
            _run(["groupadd", "--system", group])
            created_groups.append(group)
            _remember(state_path, hub_dir, created_groups=created_groups)
        for name in members["instructors"] + members["students"]:
            _run(["usermod", "--append", "--groups", group, name])

    exchange = hub_dir / "exchange"
    exchange.mkdir(exist_ok=True)
    # nbgrader checks for 777; the sticky bit keeps anyone from removing or renaming what others made.
    os.chmod(exchange, 0o1777)
    courses = {}
    for course, members in roster.items():
        folder = hub_dir / "courses" / course
        (hub_dir / "courses").mkdir(exist_ok=True)
        os.chmod(hub_dir / "courses", 0o755)
        _course_dir_setup(course, folder, graders[course], Path(source), exchange)
        courses[course] = {**members, "grader": graders[course], "dir": str(folder), "service_port": _free_port()}

    for role in ("student", "grader"):
        for name in ("nbgrader_config.py", "jupyter_server_config.py"):
            _write(hub_dir / "etc" / role / name, (HERE / role / name).read_text())
    if authenticator == "dummy":
        _write(hub_dir / "dummy-password", password, 0o600)
    environment, library_path = users_environment(hub_dir)
    python_path = _autograder_path(hub_dir)
    state = {
        "hub_dir": str(hub_dir), "ip": ip, "port": port, "hub_port": _free_port(), "proxy_api_port": _free_port(),
        "authenticator": authenticator, "venv": str(environment), "ld_library_path": library_path,
        "repo": str(REPO_ROOT), "python_path": str(python_path),
        "proxy": str(PROXY), "exchange": str(exchange), "courses": courses,
    }
    for key in ("created_users", "created_groups"):
        state[key] = _load(state_path).get(key, [])
    _write(state_path, json.dumps(state, indent=1))
    (hub_dir / "logs").mkdir(exist_ok=True)
    log = open(hub_dir / "logs" / "jupyterhub.log", "ab")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(hub_dir),
           "LANG": "C.UTF-8", "ATTENTION_HUB_STATE": str(state_path)}
    hub = subprocess.Popen([str(Path(sys.executable).parent / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")],
                           cwd=hub_dir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                           start_new_session=True)
    _write(hub_dir / "jupyterhub.pid", str(hub.pid))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.poll() is not None:
            raise GradingError(f"JupyterHub exited ({hub.returncode}); see {hub_dir / 'logs'}: "
                               + _tail(hub_dir / "logs" / "jupyterhub.log"))
        if _answers(f"http://{ip}:{port}/hub/api/"):
            return state
        time.sleep(0.3)
    stop(hub_dir)
    raise GradingError(f"JupyterHub did not answer within {timeout:.0f} s; see {hub_dir / 'logs'}")


def _remember(state_path: Path, hub_dir: Path, **made: list[str]) -> None:
    """Record users and groups the moment they are made, so that `hub stop --remove-users` finds
    them even when a later step of `start` fails."""
    state = {"hub_dir": str(hub_dir), "courses": {}, **_load(state_path)}
    for key, names in made.items():
        state[key] = sorted(set(state.get(key, [])) | set(names))
    _write(state_path, json.dumps(state, indent=1))


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# --- stop ------------------------------------------------------------------------------------------


def _hub_processes(state: dict) -> list[int]:
    """Processes this hub started that are still running: servers, kernels and services carry the
    hub's API address in their environment; users the hub created own nothing else."""
    marker = f"JUPYTERHUB_API_URL=http://127.0.0.1:{state.get('hub_port')}/hub/api".encode()
    created = set()
    for name in state.get("created_users", []):
        try:
            created.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid in created:
                found.append(int(entry))
                continue
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def stop(hub_dir: Path = DEFAULT_DIR, remove_users: bool = False, timeout: float = 30.0) -> list[str]:
    """Stop the hub started from ``hub_dir`` (it stops the proxy, services and servers); returns what it did."""
    hub_dir = Path(hub_dir).resolve()
    state = _load(hub_dir / "state.json")
    if not state:
        raise GradingError(f"no hub set up in {hub_dir} (no state.json)")
    done = []
    pid = _read_pid(hub_dir / "jupyterhub.pid")
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)  # JupyterHub stops the proxy, its services and the users' servers
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.2)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
        done.append(f"stopped JupyterHub (pid {pid})")
    proxy = _read_pid(hub_dir / "proxy.pid")
    if _alive(proxy):
        os.kill(proxy, signal.SIGKILL)
        done.append(f"stopped the proxy (pid {proxy})")
    # Anything still running from this hub (a server or kernel that did not stop with it):
    leftover = _hub_processes(state)
    for process in leftover:
        try:
            os.kill(process, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if leftover:
        done.append(f"stopped {len(leftover)} leftover process(es) of the hub's users")
    for name in ("jupyterhub.pid",):
        (hub_dir / name).unlink(missing_ok=True)
    if remove_users:
        for name in state.get("created_users", []):
            if _user_exists(name):
                for _ in range(20):  # a process that is still exiting keeps userdel from removing the user
                    if subprocess.run(["userdel", "--remove", name], capture_output=True).returncode in (0, 12):
                        break
                    time.sleep(0.2)
                done.append(f"removed user {name}")
        for name in state.get("created_groups", []):
            if subprocess.run(["groupdel", name], capture_output=True).returncode == 0:
                done.append(f"removed group {name}")
    return done
