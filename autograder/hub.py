"""A course hub on one machine: JupyterHub for a class, closed by default.

    sudo .venv/bin/python -m autograder hub start roster.yml [--dir /srv/attention-hub] [--port 8000]
                          [--ssl-cert C --ssl-key K] [--ip 0.0.0.0] [--create-users] [--source PRIVATE]
    sudo .venv/bin/python -m autograder hub update roster.yml     # people added or removed, while it runs
    sudo .venv/bin/python -m autograder hub stop                  # never deletes course data
    sudo .venv/bin/python -m autograder hub backup DIR | hub restore DIR

The roster names the courses, and for each its instructors and students (Unix user names), and
optionally the per-user limits, the idle timeout and due dates::

    courses:
      attention101:
        instructors: [ada]
        students: [bo, cy]
        due: {ch3a_multi_query_penalty: "2025-03-07 17:00 UTC"}
        checks:                 # check on submit (checks.py): off, visible, hidden or points
          default: {show: hidden, per_hour: 5, until_due: true}
    limits: {memory: 1.5G, cpu: 1, processes: 256, disk: 1G, shm: 64M, tmp: 256M}
    idle_timeout: 3600      # seconds without activity before a server is stopped (0: never)

What ``start`` sets up in ``--dir`` (then starts JupyterHub there, in the background, as root):

- the course package for the users from a wheel built from the checkout (never the solutions),
  installed into the users' environment ``env/``; the autograder's code copied into ``lib/``;
- real OS users (``--create-users`` makes the missing ones) log in (PAM, throttled; or
  ``--authenticator dummy`` with one shared password, for tests) and get their own Jupyter
  server (``jupyterhub/spawner.py``) inside their limits: cgroups for memory, CPU and processes,
  a home of fixed size (``homes/<user>``, an image in ``images/``), private capped ``/tmp`` and
  ``/dev/shm``, an IPC namespace of its own; it holds no descriptor of the hub's, and its output
  goes to the user's own log (``logs/users/<user>.log``). An idle server is stopped after the
  roster's ``idle_timeout``;
- per course, hub groups ``nbgrader-<course>`` (students) and ``formgrade-<course>``
  (instructors), which nbgrader's JupyterHub plugin reads; the course's instructors may see and
  stop its students' servers from the hub's admin page, nobody else's;
- per course, a grader account ``grader-<course>`` that owns the course directory
  (``courses/<course>``: the gradebook, submissions, grades; no student can read it) and runs a
  Jupyter server as a hub service at ``/services/<course>/``: the formgrader (sanitized views
  under a strict Content-Security-Policy; its buttons run the course's own commands), open to
  the course's instructors only, and a terminal where ``python -m autograder`` works;
- nbgrader's exchange (``exchange/``), where a submission is readable by its student and the
  course's grader only, and can be renamed or removed by its student only.

Before it starts anything, ``start`` runs the leak scan as a student of each course over what
students can read (the checkout and its git history, the hub's folder, the shared temporary
folders, /home, /srv, /mnt, /media) and refuses to start if a solution or hidden test is there.
The hub's database, state, logs and keys are readable by root only. Over anything but the
loopback it serves HTTPS only (``--ssl-cert``/``--ssl-key``), unless ``--insecure-http``.

``stop`` stops the hub (the proxy, the services and every user's server) and unmounts the homes;
with ``--remove-users`` it also removes the accounts ``start --create-users`` made. It never
deletes a file: course directories, submissions and homes stay in ``--dir``.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from . import leakscan, lti
from .checks import FILE_NAME as CHECKS_FILE, PEOPLE_FILE, read_policies
from .course import REPO_ROOT, Course, check_id, package_folder
from .errors import GradingError
from .jupyterhub import forkserver
from .jupyterhub import limits as user_limits

HERE = Path(__file__).resolve().parent / "jupyterhub"
LAB_EXTENSION = "attention-course-check"   # jupyterhub/labextension: "Check my work" in the students' JupyterLab
DEFAULT_DIR = Path("/srv/attention-hub")
# What must stay closed to the users in the checkout (the course's virtual environment, which the
# users' environment loads its third-party packages from, may sit in it): the solutions, the hidden
# tests and their answers, the default course directory, git's history of all of them.
PRIVATE_IN_CHECKOUT = ("solutions", "grading", "tests", ".git")
PROXY = REPO_ROOT / "tools" / "hub-assets" / "node_modules" / ".bin" / "configurable-http-proxy"
AUTHENTICATORS = ("pam", "dummy")
ROSTER_KEYS = {"courses", "limits", "idle_timeout", "lti"}
COURSE_KEYS = {"instructors", "students", "due", "checks", "lti_context"}
DEFAULT_IDLE_TIMEOUT = 3600
# Where stray copies of the course's secrets would be readable by students, besides the checkout
# and the hub's folder (hub start scans them as a student). Not /tmp and /dev/shm: every server of
# the hub has private ones (jupyterhub/enter.py), which is also why the hub's folder cannot be there
# (the course's own packages can: enter.py binds them back in, read-only).
SHARED_PLACES = ("/var/tmp", "/home", "/srv", "/mnt", "/media")
PRIVATE_PER_SERVER = ("/tmp", "/dev/shm")
_SCAN_SUFFIXES = leakscan._TEXT_SUFFIXES | {".whl", ".zip", ".ipynb"}
_SCAN_MAX_BYTES = 20 * 1024 * 1024
# Imports the users' environment refuses (see _attention_hub_env.py, written by users_environment).
SKIPPED_IMPORTS = ("rfc3987_syntax",)
SKIPPED_IMPORT_COST = "3.2 of the 5.2 CPU seconds a Jupyter server spent importing (measured here, loaded)"
# In the environment of the fork server, hence of every server and kernel forked from it: the hub's folder.
FORK_SERVER_MARK = forkserver.MARK
_SCAN_SKIP_DIRS = {"node_modules", "site-packages", "dist-packages", "__pycache__", ".jupyter_cache", "proc"}


# --- the roster ------------------------------------------------------------------------------------


def read_roster(path: Path) -> dict[str, dict[str, list[str]]]:
    """``{course: {"instructors": [...], "students": [...]}}`` from a YAML or JSON roster, checked."""
    courses = _roster_data(path)["courses"]
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
        if not entry["instructors"] and members.get("lti_context") is None:
            raise GradingError(f"roster: course {course!r} has no instructor (nor an lti_context: the LMS's)")
        both = set(entry["instructors"]) & set(entry["students"])
        if both:
            raise GradingError(f"roster: {sorted(both)} are both instructors and students of {course!r}")
        roster[str(course)] = entry
    return roster


def _unix_name(name: str) -> bool:
    return bool(name) and len(name) <= 32 and name[0].isalpha() and name.islower() and \
        all(ch.isalnum() or ch in "_-" for ch in name) and not name.startswith(("grader-", "lti-"))


def read_options(path: Path) -> dict:
    """The roster's settings besides the people: ``limits`` (``jupyterhub/limits.py``),
    ``idle_timeout`` (seconds, 0 for never) and, per course, ``due`` dates by assignment and the
    ``checks`` on submit it allows (``checks.py``)."""
    data = _roster_data(path)
    unknown = set(data) - ROSTER_KEYS
    if unknown:
        raise GradingError(f"roster: unknown key(s) {sorted(unknown)} in {path} (known: {sorted(ROSTER_KEYS)})")
    try:
        cap = user_limits.Limits.from_roster(data.get("limits"))
    except user_limits.LimitError as exc:
        raise GradingError(f"roster: {exc}") from None
    idle = data.get("idle_timeout", DEFAULT_IDLE_TIMEOUT)
    if isinstance(idle, bool) or not isinstance(idle, int) or (idle and idle < 30):
        raise GradingError(f"roster: idle_timeout must be a whole number of seconds, at least 30 (0: never), "
                           f"got {idle!r}")
    due, policies = {}, {}
    for course, members in data["courses"].items():
        unknown = set(members) - COURSE_KEYS
        if unknown:
            raise GradingError(f"roster: course {course!r}: unknown key(s) {sorted(unknown)} (known: "
                               f"{sorted(COURSE_KEYS)})")
        dates = members.get("due") or {}
        if not isinstance(dates, dict):
            raise GradingError(f"roster: {course}.due must map assignments to dates")
        for assignment, when in dates.items():
            check_id("assignment", str(assignment), f"the roster's {course}.due")
            try:
                from nbgrader.utils import parse_utc

                parse_utc(str(when))
            except Exception:  # noqa: BLE001 - any unparsable date, named
                raise GradingError(f"roster: {course}.due.{assignment}: {when!r} is not a date "
                                   "(say 2025-03-07 17:00 UTC)") from None
        due[str(course)] = {str(a): str(w) for a, w in dates.items()}
        policies[str(course)] = read_policies(members.get("checks"), str(course))
    return {"limits": cap, "idle_timeout": idle, "due": due, "checks": policies}


def _roster_data(path: Path) -> dict:
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
    if not isinstance(data, dict) or not isinstance(data.get("courses"), dict) or not data["courses"]:
        raise GradingError(f"roster: {path} needs a 'courses' mapping, each with 'instructors' and 'students'")
    return data


# --- small helpers ---------------------------------------------------------------------------------

def _private_per_server(path: Path) -> str | None:
    """Which of ``PRIVATE_PER_SERVER`` ``path`` is (or is in), if any."""
    return next((p for p in PRIVATE_PER_SERVER if path == Path(p) or Path(p) in path.parents), None)


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
    """Write ``path`` whole or not at all: a reader (the hub reading state.json while a launch from
    the LMS records an account in it) sees the old file or the new one, never a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(4)}")
    with open(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode), "w") as handle:
        handle.write(text)
        os.fchmod(handle.fileno(), mode)
    os.replace(staging, path)


def _chown_tree(folder: Path, user: str) -> None:
    account = pwd.getpwnam(user)
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, account.pw_uid, account.pw_gid, follow_symlinks=False)


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


# --- the users' environment: the course package from a wheel ---------------------------------------


def build_wheel(hub_dir: Path) -> Path:
    """A wheel of the course package, built from a copy of what it is made of (never the
    checkout's other folders), checked for leaks; one per content, kept in ``wheels/``."""
    parts = [REPO_ROOT / "pyproject.toml", REPO_ROOT / "README.md", REPO_ROOT / "attention_course"]
    digest = hashlib.sha256()
    for part in parts:
        for file in sorted([part] if part.is_file() else part.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(REPO_ROOT)).encode() + b"\0" + file.read_bytes())
    folder = hub_dir / "wheels" / digest.hexdigest()[:16]
    built = sorted(folder.glob("attention_course-*.whl"))
    if built:
        return built[-1]
    with tempfile.TemporaryDirectory(prefix="attention-wheel-") as work:
        source = Path(work) / "src"
        source.mkdir()
        for part in parts:
            if part.is_dir():
                shutil.copytree(part, source / part.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(part, source / part.name)
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                               "--no-index", "--wheel-dir", str(Path(work) / "out"), str(source)],
                              capture_output=True, text=True)
        wheels = sorted((Path(work) / "out").glob("attention_course-*.whl"))
        if done.returncode != 0 or not wheels:
            raise GradingError(f"could not build the course package's wheel: {(done.stderr or done.stdout).strip()[-300:]}")
        folder.mkdir(parents=True, exist_ok=True)
        wheel = Path(shutil.copy2(wheels[0], folder / wheels[0].name))
    return wheel


def install_wheel(wheel: Path, site_packages: Path) -> None:
    """Unpack the (pure Python) wheel into the users' site-packages, replacing an earlier one."""
    for old in [site_packages / "attention_course", *site_packages.glob("attention_course-*.dist-info")]:
        if old.exists():
            shutil.rmtree(old)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            target = (site_packages / member.filename).resolve()
            if site_packages.resolve() not in target.parents:
                raise GradingError(f"{wheel}: {member.filename} would land outside site-packages")
        archive.extractall(site_packages)
    installed = [site_packages / "attention_course", *site_packages.glob("attention_course-*.dist-info")]
    for path in [*installed, *(p for folder in installed for p in folder.rglob("*"))]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def users_environment(hub_dir: Path) -> tuple[Path, str]:
    """The Python environment the users' servers and the graders' services run from: its prefix,
    and the LD_LIBRARY_PATH it needs ("" if none).

    ``hub_dir/env`` is a virtual environment of this interpreter (linked or copied into
    ``hub_dir/python`` when users cannot run it where it is, as under /root) which loads this
    environment's third-party packages (a ``.pth``; never this environment's editable install of
    the course, which would read the checkout) and holds the course package from its wheel.
    Console scripts are re-pointed at it. A copied interpreter finds its libpython through
    LD_LIBRARY_PATH.
    """
    unreachable = [p for p in _site_packages() if not _reachable_by_all(Path(p))]
    if unreachable:
        raise GradingError(f"the course's packages ({', '.join(unreachable)}) cannot be read by the hub's users: "
                           "install the course in a virtual environment every user can read (e.g. /opt/attention-course)")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    env, library_path = hub_dir / "env", ""
    base = Path(sys._base_executable if hasattr(sys, "_base_executable") else sys.executable).resolve()
    if _reachable_by_all(base) and _reachable_by_all(Path(sys.base_prefix) / "lib" / version):
        interpreter = base
    else:
        home, copy = Path(sys.base_prefix), hub_dir / "python"
        interpreter = copy / "bin" / version
        if not interpreter.exists():
            (copy / "bin").mkdir(parents=True, exist_ok=True)
            (copy / "lib").mkdir(exist_ok=True)
            _link_or_copy(str(base), str(interpreter))
            for library in (home / "lib").glob("libpython*.so*"):
                target = copy / "lib" / library.name
                if library.is_symlink():
                    target.symlink_to(os.readlink(library))
                else:
                    _link_or_copy(str(library), str(target))
            shutil.copytree(home / "lib" / version, copy / "lib" / version, symlinks=True,
                            copy_function=_link_or_copy,
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
    # The course environment's packages, and their .pth files except the editable install's.
    _write(packages / "_attention_hub_env.py", f"""\"\"\"The course environment's packages for the hub's users
(written by autograder/hub.py): its site-packages, and the .pth files there except the editable
install's, which would load the course package from the checkout instead of its wheel.\"\"\"
import os
import site
import sys

for folder in {_site_packages()!r}:
    sys.path.append(folder)
    for name in sorted(os.listdir(folder)):
        if name.endswith(".pth") and not name.startswith("__editable__"):
            site.addpackage(folder, name, None)


class _Skipped:
    \"\"\"Modules that are not loaded here: rfc3987_syntax builds a parser for RFC 3987 when it is
    imported, {SKIPPED_IMPORT_COST}; jsonschema imports it, when present, only for
    its "iri" format checks, and every Jupyter server imports jsonschema (jupyter_events, nbformat).
    Without it, jsonschema leaves those checks out, as it does where the module is not installed.\"\"\"

    names = {SKIPPED_IMPORTS!r}

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in cls.names:
            raise ImportError(f"{{name}} is not loaded on the course hub (autograder/hub.py)")
        return None


sys.meta_path.insert(0, _Skipped)
""")
    _write(packages / "attention-course.pth", "import _attention_hub_env\n")
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
    install_wheel(build_wheel(hub_dir), packages)
    return env, library_path


def _autograder_copy(hub_dir: Path) -> Path:
    """``lib/autograder``: a copy of the autograder's code (no secret in it) for the graders'
    services and the hub's own modules, so that nothing of the hub runs from the checkout."""
    folder = hub_dir / "lib"
    folder.mkdir(exist_ok=True)
    os.chmod(folder, 0o755)
    target = folder / "autograder"
    staging = folder / f".autograder-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(REPO_ROOT / "autograder", staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in [staging, *staging.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    return folder


# --- what the students can read: the leak scan, run as one of them ---------------------------------


def _returned_feedback(folder: Path) -> bool:
    """Whether ``folder`` is the feedback folder of an nbgrader exchange's course (``inbound`` beside
    it) that no one else may list: each page in it holds its student's own answers (a correct one
    shares lines with the solution) and the visible part of the tests (autograder.feedback refuses a
    page whose instructor part holds a hidden-test line), under a name only that student knows
    (nbgrader's hash of the submission). Scanned, it would make every hub that has returned feedback
    (this one, or another course's on the machine) refuse to start again. A listable one is scanned."""
    try:
        return (folder.name == "feedback" and (folder.parent / "inbound").is_dir()
                and not folder.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


def _git_dirs_and_files(roots: list[Path], skip: set[Path]) -> tuple[list[str], list[str]]:
    """Files worth scanning under ``roots`` (listed as root: a student who cannot list a folder may
    still open what is in it by name), and git repositories (a ``.git`` folder, a worktree's
    ``.git`` file leading to one, a bare repository)."""
    files, git_dirs = [], set()

    def add_git(folder: Path) -> None:
        common = folder / "commondir"
        if common.is_file():
            folder = (folder / common.read_text().strip()).resolve()
        git_dirs.add(str(folder))

    for root in roots:
        if not root.exists():
            continue
        for folder, dirs, names in os.walk(root):
            here = Path(folder)
            if here in skip:
                dirs[:] = []
                continue
            if "HEAD" in names and "objects" in dirs and "refs" in dirs:
                add_git(here)
                dirs[:] = []
                continue
            dirs[:] = [d for d in dirs if d not in _SCAN_SKIP_DIRS and here / d not in skip
                       and not _returned_feedback(here / d)]
            if ".git" in dirs:
                add_git(here / ".git")
                dirs.remove(".git")
            for name in names:
                path = here / name
                if name == ".git":
                    try:
                        line = path.read_text(errors="replace").strip()
                    except OSError:
                        continue
                    if line.startswith("gitdir:"):
                        add_git((here / line[7:].strip()).resolve())
                    continue
                if Path(name).suffix.lower() not in _SCAN_SUFFIXES:
                    continue
                try:
                    info = path.lstat()
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_size <= _SCAN_MAX_BYTES:
                    files.append(str(path))
    return files, sorted(git_dirs)


def scan_as_students(roster: dict, hub_dir: Path, environment: Path, library_path: str, source: Path) -> None:
    """Refuse to go on if a student of any course can read a solution or hidden test: the
    project's leak scan, run as one student per course, over the checkout (its git history
    included), the hub's folder and the places shared by everyone."""
    # The book publishes the student version of every exercise in the checkout's solutions/: what
    # those show is public, whichever assignments this hub's source holds (a generic line of one
    # exercise's reference.py may be printed in another's released notebook).
    secrets_ = leakscan.course_secrets(source, package_folder(), public_sources=(REPO_ROOT / "solutions",))
    roots = [REPO_ROOT, hub_dir, *map(Path, SHARED_PLACES)]
    # Not scanned: what students cannot reach anyway (the course directories, homes, images), the
    # third-party packages, and the course package and the autograder's code, in which no secret
    # line can be (course_secrets leaves out every line the package has).
    skip = {hub_dir / "courses", hub_dir / "images", hub_dir / "homes", hub_dir / "python", hub_dir / "wheels",
            hub_dir / "env", hub_dir / "lib", Path(source).resolve(), REPO_ROOT / ".venv",
            REPO_ROOT / "attention_course", REPO_ROOT / "autograder"}
    files, git_dirs = _git_dirs_and_files(roots, skip)
    request = json.dumps({"paths": files, "git_dirs": git_dirs,
                          "secrets": [vars(s) for s in secrets_]})
    scanned = set()
    for course, members in sorted(roster.items()):
        student = next(iter(members["students"]), None)
        if student is None:
            # A course whose students all come from the LMS (lti_context) has none yet: scanned as
            # one would be, an account of no one's ("nobody") in the course's group.
            student = "nobody"
            groups = [pwd.getpwnam(student).pw_gid, grp.getgrnam(unix_group(course)).gr_gid]
        elif not _user_exists(student) or student in scanned:
            continue
        else:
            groups = os.getgrouplist(student, pwd.getpwnam(student).pw_gid)
        scanned.add(student)
        account = pwd.getpwnam(student)
        done = subprocess.run(
            [str(environment / "bin" / "python"), "-m", "autograder.leakscan"], input=request, capture_output=True,
            text=True, cwd="/", user=account.pw_uid, group=account.pw_gid,
            extra_groups=groups, timeout=600,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(hub_dir / "lib"), "HOME": "/",
                 **({"LD_LIBRARY_PATH": library_path} if library_path else {})})
        if done.returncode != 0:
            raise GradingError(f"the leak scan as {student} failed: {done.stderr.strip()[-300:]}")
        leaks = json.loads(done.stdout)
        if leaks:
            first = leaks[0]
            where = first["where"].split("!")[0].removesuffix(" (git objects)")
            place = _closable(Path(where), roots)
            raise GradingError(f"{student} (a student of {course}) can read a {first['kind']} ({first['origin']}) "
                               f"in {first['where']}{f' and {len(leaks) - 1} more' if len(leaks) > 1 else ''}: "
                               f"`chmod o-rwx {place}` (and take away the group's rights if {student} shares its "
                               "group), or move it where students cannot reach")


def _closable(path: Path, roots: list[Path]) -> Path:
    """The folder to close for a leak at ``path``: the top folder of it under the scanned place
    that holds it (the checkout's ``solutions``, ``/srv/old-course``), or the path itself."""
    for root in sorted(roots, key=lambda r: -len(r.parts)):
        try:
            relative = path.relative_to(root)
        except ValueError:
            continue
        return root / relative.parts[0] if relative.parts else path
    return path


# --- start -----------------------------------------------------------------------------------------


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
    account = pwd.getpwnam(grader)
    people = grp.getgrnam(unix_group(course)).gr_gid
    # The course's folder: its people only. outbound: released assignments, read by all of them.
    # inbound: anyone of the course may create a submission folder in it (w+x, no listing), and
    # it takes the grader's own group (setgid), of which no student is a member, so a submission
    # (made private by the students' nbgrader config: rwxr-x---) is readable by its student and
    # the grader only; sticky: only its owner may rename or remove it. feedback: files named by
    # a hash only their student knows.
    for name, mode, group in (("", 0o750, people), ("outbound", 0o755, account.pw_gid),
                              ("inbound", 0o3733, account.pw_gid), ("feedback", 0o711, account.pw_gid)):
        path = exchange / course / name
        path.mkdir(exist_ok=True)
        os.chown(path, account.pw_uid, group)
        os.chmod(path, mode)


def _make_user(name: str, hub_dir: Path, create: bool, groups: tuple[str, ...] = ()) -> bool:
    """Make the Unix user ``name`` if missing (when ``create``), a member of ``groups`` too; True if
    it was made."""
    if _user_exists(name):
        return False
    if name.startswith("grader-"):
        _run(["useradd", "--system", "--no-create-home", "--home-dir", str(hub_dir / "courses" / name[7:]),
              "--shell", "/bin/bash", name])
        return True
    if not create:
        raise GradingError(f"no Unix user {name!r}: create it, or pass --create-users")
    # The home is the user's hub home: a filesystem of its own, mounted when the user's server starts.
    _run(["useradd", "--no-create-home", "--home-dir", str(hub_dir / "homes" / name), "--shell", "/bin/bash",
          "--user-group", *(["--groups", ",".join(groups)] if groups else []), name])
    return True


def _setup_people(roster: dict, hub_dir: Path, state_path: Path, create: bool) -> None:
    users = sorted({u for c in roster.values() for role in ("instructors", "students") for u in c[role]})
    for name in users + sorted(f"grader-{course}" for course in roster):
        if _make_user(name, hub_dir, create):
            _remember(state_path, hub_dir, created_users=[name])
    for course, members in roster.items():
        group = unix_group(course)
        try:
            grp.getgrnam(group)
        except KeyError:
            _run(["groupadd", "--system", group])
            _remember(state_path, hub_dir, created_groups=[group])
        lms = _lti_members({"hub_dir": str(hub_dir), "lti": True}).get(course, {})   # launched from the LMS: kept
        wanted = set(members["instructors"]) | set(members["students"]) | \
            set(lms.get("instructors", [])) | set(lms.get("students", []))
        for name in sorted(wanted - set(grp.getgrnam(group).gr_mem)):
            _run(["usermod", "--append", "--groups", group, name])
        for name in sorted(set(grp.getgrnam(group).gr_mem) - wanted):
            _run(["gpasswd", "--delete", name, group])


def mount_homes(roster: dict, hub_dir: Path, cap: user_limits.Limits) -> None:
    """Every user's hub home, mounted now (made the first time: a few tenths of a second each,
    which the hub's event loop should not spend while a class logs in)."""
    from concurrent.futures import ThreadPoolExecutor

    users = sorted({u for c in roster.values() for role in ("instructors", "students") for u in c[role]})

    def mount(name: str) -> None:
        account = pwd.getpwnam(name)
        user_limits.mount_home(hub_dir / "images" / f"{name}.img", hub_dir / "homes" / name, cap.disk,
                               account.pw_uid, account.pw_gid)

    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(mount, users))
    except user_limits.LimitError as exc:
        raise GradingError(f"the users' homes (a filesystem of limits.disk each): {exc}") from None


def _etc(hub_dir: Path) -> None:
    """The Jupyter configuration of the students' servers and the graders' services."""
    for role, names in (("student", ("nbgrader_config.py", "jupyter_server_config.py", "landing.py")),
                        ("grader", ("nbgrader_config.py", "jupyter_server_config.py"))):
        for name in names:
            _write(hub_dir / "etc" / role / name, (HERE / role / name).read_text())
    # JupyterLab: the students see the student side of nbgrader only, the graders the instructor
    # side only; nobody gets JupyterLab's news pop-up (it would reach out to the internet).
    hidden = {"student": ["formgrader", "create-assignment", "course-list"],
              "grader": ["assignment-list", "course-list"]}
    for role, plugins in hidden.items():
        disabled = {f"@jupyter/nbgrader:{p}": True for p in plugins}
        disabled["@jupyterlab/apputils-extension:announcements"] = True
        _write(hub_dir / "etc" / role / "labconfig" / "page_config.json",
               json.dumps({"disabledExtensions": disabled}, indent=1))
    # The students' JupyterLab gets "Check my work" (jupyterhub/labextension, this course's own, no
    # build step) from the hub's data folder (JUPYTER_PATH of their servers).
    target = hub_dir / "share" / "jupyter" / "labextensions" / LAB_EXTENSION
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(HERE / "labextension", target)
    for path in [target.parents[2], target.parents[1], target.parents[0], target, *target.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _check_tls(ip: str, ssl_cert: Path | None, ssl_key: Path | None, insecure_http: bool) -> None:
    if bool(ssl_cert) != bool(ssl_key):
        raise GradingError("HTTPS needs both --ssl-cert and --ssl-key")
    if ssl_cert:
        for path in (ssl_cert, ssl_key):
            if not Path(path).is_file():
                raise GradingError(f"no such file: {path}")
        if Path(ssl_key).stat().st_mode & 0o077:
            raise GradingError(f"the private key {ssl_key} can be read by others than its owner: `chmod 600 {ssl_key}`")
        return
    loopback = ip in ("127.0.0.1", "::1", "localhost") or ip.startswith("127.")
    if not loopback and not insecure_http:
        raise GradingError(f"--ip {ip} would serve passwords and notebooks over plain HTTP: pass --ssl-cert and "
                           "--ssl-key (your certificate), or --insecure-http if a TLS proxy sits in front")


def _course_settings(folder: Path, grader: pwd.struct_passwd, course: str, members: dict, options: dict) -> None:
    """What the course's services read from its directory, written at start and at each update: the
    due dates (``due.json``), the checks on submit allowed (``checks.json``), who is on the roster
    (``people.json``: the check service answers only them). The grader account's, no one else's."""
    files = {"due.json": options["due"].get(course, {}), CHECKS_FILE: options["checks"].get(course, {}),
             PEOPLE_FILE: _with_lti_people(folder, course, members)}
    for name, content in files.items():
        _write(folder / name, json.dumps(content, indent=1), 0o600)
        os.chown(folder / name, grader.pw_uid, grader.pw_gid)


def _with_lti_people(folder: Path, course: str, members: dict) -> dict:
    """The roster's people of the course and those its LTI launches admitted (``lti/members.json``)."""
    try:
        lms = json.loads((folder.parents[1] / "lti" / "members.json").read_text()).get(course, {})
    except (OSError, ValueError):
        lms = {}
    return {role: sorted({*members[role], *lms.get(role, [])}) for role in ("instructors", "students")}


def start(roster_path: Path, hub_dir: Path = DEFAULT_DIR, *, port: int = 8000, ip: str = "127.0.0.1",
          authenticator: str = "pam", password: str | None = None, create_users: bool = False,
          source: Path = REPO_ROOT / "solutions", ssl_cert: Path | None = None, ssl_key: Path | None = None,
          insecure_http: bool = False, timeout: float = 120.0) -> dict:
    """Set up ``hub_dir`` for the roster and start JupyterHub there; returns the hub's state."""
    if os.geteuid() != 0:
        raise GradingError("run it as root (sudo): the hub starts each user's server as that user")
    if authenticator not in AUTHENTICATORS:
        raise GradingError(f"--authenticator must be one of {AUTHENTICATORS}, got {authenticator!r}")
    if authenticator == "dummy" and not password:
        raise GradingError("the dummy authenticator needs a shared password (--password-file)")
    _check_tls(ip, ssl_cert, ssl_key, insecure_http)
    hub_dir = Path(hub_dir).resolve()
    private = _private_per_server(hub_dir)
    if private:
        raise GradingError(f"--dir {hub_dir}: every user's server has a private {private}, where the hub's "
                           f"exchange would be out of its reach: use another folder (the default is {DEFAULT_DIR})")
    if not PROXY.exists():
        raise GradingError(f"configurable-http-proxy is missing ({PROXY}): run "
                           "`npm ci --prefix tools/hub-assets` (make setup does)")
    if not Path(source).is_dir():
        raise GradingError(f"no source notebooks at {source}")
    if _reachable_by_all(Path(source)):
        raise GradingError(f"the source notebooks in {source} (solutions and hidden tests) can be read by every user "
                           f"of this machine, students included: `chmod o-rwx {source}`, or pass --source with a "
                           "private copy")
    # The checkout's usual private places, checked before anything is made (the scan below finds any other).
    exposed = [str(REPO_ROOT / name) for name in PRIVATE_IN_CHECKOUT
               if (REPO_ROOT / name).exists() and _reachable_by_all(REPO_ROOT / name)]
    if exposed:
        raise GradingError(f"{' and '.join(exposed)} can be read by every user of this machine, students included, "
                           f"who reach the course's environment in that checkout: `chmod o-rwx {' '.join(exposed)}`")
    roster = read_roster(roster_path)
    options = read_options(roster_path)
    registration = lti.read_registration(_roster_data(roster_path), roster_path)
    if registration is not None:
        registration.private_key_pem()   # made now if absent (mode 600), refused if others may read it
        unknown = sorted(set(registration.contexts.values()) - set(roster))
        if unknown:
            raise GradingError(f"roster: lti_context of unknown course(s) {unknown}")
    hub_dir = Path(hub_dir).resolve()
    state_path = hub_dir / "state.json"
    if (hub_dir / "jupyterhub.pid").exists() and _alive(_read_pid(hub_dir / "jupyterhub.pid")):
        raise GradingError(f"a hub is already running from {hub_dir} (hub stop --dir {hub_dir})")
    hub_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(hub_dir, 0o755)
    if not _reachable_by_all(hub_dir):
        raise GradingError(f"the hub's folder {hub_dir} must be reachable by its users (their environment and the "
                           "exchange are in it): give the folders above it search permission (chmod o+x)")
    for name in ("homes", "images", "logs", "ssl"):
        (hub_dir / name).mkdir(exist_ok=True)
        os.chmod(hub_dir / name, 0o755 if name == "homes" else 0o700)

    _setup_people(roster, hub_dir, state_path, create_users)
    exchange = hub_dir / "exchange"
    exchange.mkdir(exist_ok=True)
    os.chown(exchange, 0, 0)
    # nbgrader insists on 777 here; the sticky bit keeps anyone from removing or renaming what
    # others made (each course's folder, made below, belongs to its grader).
    os.chmod(exchange, 0o1777)
    courses = {}
    (hub_dir / "courses").mkdir(exist_ok=True)
    os.chmod(hub_dir / "courses", 0o755)
    for course, members in roster.items():
        folder = hub_dir / "courses" / course
        grader = f"grader-{course}"
        _course_dir_setup(course, folder, grader, Path(source), exchange)
        _course_settings(folder, pwd.getpwnam(grader), course, members, options)
        courses[course] = {**members, "grader": grader, "dir": str(folder), "service_port": _free_port(),
                           "check_port": _free_port()}

    _etc(hub_dir)
    if authenticator == "dummy":
        _write(hub_dir / "dummy-password", password, 0o600)
    python_path = _autograder_copy(hub_dir)
    environment, library_path = users_environment(hub_dir)
    scan_as_students(roster, hub_dir, environment, library_path, Path(source))
    mount_homes(roster, hub_dir, options["limits"])
    admin_token = hub_dir / "admin-token"
    if not admin_token.exists():
        _write(admin_token, secrets.token_hex(32), 0o600)
    bases = user_limits.cgroup_bases(_hub_cgroup_name(hub_dir))
    scheme = "https" if ssl_cert else "http"
    prefix = Path(sys.prefix).resolve()
    state = {
        "hub_dir": str(hub_dir), "ip": ip, "port": port, "hub_port": _free_port(), "proxy_api_port": _free_port(),
        "url": f"{scheme}://{ip}:{port}", "ssl_cert": str(ssl_cert or ""), "ssl_key": str(ssl_key or ""),
        "authenticator": authenticator, "venv": str(environment), "ld_library_path": library_path,
        "repo": str(REPO_ROOT), "python_path": str(python_path), "proxy": str(PROXY), "exchange": str(exchange),
        "courses": courses, "limits": options["limits"].as_dict(), "idle_timeout": options["idle_timeout"],
        "cgroups": {name: str(path) for name, path in bases.items()},
        "singleuser_cmd": [str(environment / "bin" / "jupyterhub-singleuser")],
        "admin_token_file": str(admin_token),
        # the course's environment (its packages, and Jupyter's data and config that env/ links to),
        # if it lies where every server has a private folder (a checkout under /tmp): enter.py
        # binds it back in, read-only
        "keep_in_private": [str(prefix)] if _private_per_server(prefix) else [],
        # the LMS's registration (lti.py): the hub signs people in by LTI 1.3 launches (lti_auth.py)
        **({"lti": registration.as_state()} if registration else {}),
        # the roster: the hub's "Push grades to the LMS" page reads its lti block as `lms push --roster` does
        "roster": str(Path(roster_path).resolve()),
    }
    for key in ("created_users", "created_groups"):
        state[key] = _load(state_path).get(key, [])
    state["forkserver"] = start_fork_server(hub_dir, environment, library_path, python_path)
    _write(state_path, json.dumps(state, indent=1), 0o600)
    for name in ("jupyterhub.sqlite", "jupyterhub_cookie_secret", "jupyterhub-proxy.pid"):
        if (hub_dir / name).exists():
            os.chmod(hub_dir / name, 0o600)
    log = open(os.open(hub_dir / "logs" / "jupyterhub.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": str(hub_dir),
           "LANG": "C.UTF-8", "ATTENTION_HUB_STATE": str(state_path), "PYTHONPATH": str(python_path),
           # what the fork server's environment takes from this one, when the hub starts another
           **{name: os.environ[name] for name in ("OPENBLAS_CORETYPE",) if name in os.environ}}
    # umask 077: the hub's database, its logs and everything else it writes are root's alone.
    hub = subprocess.Popen([str(Path(sys.executable).parent / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")],
                           cwd=hub_dir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                           start_new_session=True, umask=0o077)
    _write(hub_dir / "jupyterhub.pid", str(hub.pid), 0o600)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.poll() is not None:
            stop_fork_server(hub_dir)
            raise GradingError(f"JupyterHub exited ({hub.returncode}); see {hub_dir / 'logs'}: "
                               + _tail(hub_dir / "logs" / "jupyterhub.log"))
        if _answers(f"http://127.0.0.1:{state['hub_port']}/hub/api/") and _answers(f"{state['url']}/hub/api/",
                                                                                  ssl_cert):
            sync_people(state)
            return state
        time.sleep(0.3)
    stop(hub_dir)
    raise GradingError(f"JupyterHub did not answer within {timeout:.0f} s; see {hub_dir / 'logs'}")


def start_fork_server(hub_dir: Path, environment: Path, library_path: str, python_path: Path,
                      timeout: float = 180.0) -> str:
    """Start the users' servers' fork server (``jupyterhub/forkserver.py``), as root, from the users'
    environment, with none of the hub's secrets; returns its socket's path once it listens (after
    its imports). Its socket is in ``run/``, root's alone; its log in ``logs/forkserver.log``. The hub
    starts another the same way if this one dies or stops answering (``spawner.py``)."""
    try:
        return forkserver.launch(hub_dir, environment, library_path, python_path, timeout)
    except RuntimeError as exc:
        raise GradingError(str(exc)) from None


def stop_fork_server(hub_dir: Path) -> bool:
    """Stop the fork server and remove its socket (the servers it forked are the hub's to stop);
    False if none ran."""
    return forkserver.stop(hub_dir)


def _hub_cgroup_name(hub_dir: Path) -> str:
    return "attention-hub-" + hashlib.sha256(str(hub_dir).encode()).hexdigest()[:10]


def _remember(state_path: Path, hub_dir: Path, **made: list[str]) -> None:
    """Record users and groups the moment they are made, so that `hub stop --remove-users` finds
    them even when a later step of `start` fails."""
    with _state_lock(hub_dir):
        state = {"hub_dir": str(hub_dir), "courses": {}, **_load(state_path)}
        for key, names in made.items():
            state[key] = sorted(set(state.get(key, [])) | set(names))
        _write(state_path, json.dumps(state, indent=1), 0o600)


@contextlib.contextmanager
def _state_lock(hub_dir: Path):
    """One writer of state.json at a time: ``hub update`` and the launches from the LMS (which
    record the accounts they make) read, change and write it."""
    Path(hub_dir).mkdir(parents=True, exist_ok=True)
    with open(os.open(Path(hub_dir) / "state.lock", os.O_RDWR | os.O_CREAT, 0o600)) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _answers(url: str, ssl_cert: Path | None = None) -> bool:
    import ssl

    context = ssl.create_default_context(cafile=str(ssl_cert)) if ssl_cert else None
    if context is not None:
        context.check_hostname = False   # asked by address; the certificate names the hub's host
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
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


# --- the running hub: its REST API, with the hub's own admin token ---------------------------------


def hub_api(state: dict, method: str, path: str, body: dict | None = None) -> dict | list | None:
    """Call the hub's REST API (on its own loopback port) as the hub's admin service."""
    token = Path(state["admin_token_file"]).read_text().strip()
    request = urllib.request.Request(f"http://127.0.0.1:{state['hub_port']}/hub/api{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404 and method == "DELETE":
            return None
        raise GradingError(f"the hub refused {method} {path}: {exc.code} {exc.read()[:200]!r}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise GradingError(f"the hub does not answer at 127.0.0.1:{state['hub_port']}: {exc}") from None
    return json.loads(text) if text else None


def sync_people(state: dict) -> list[str]:
    """Make the running hub's users and groups those of ``state`` (the roster): add the new
    people, remove those no longer on it (their servers stop; their files stay). Returns what changed."""
    done = []
    from_lms = _lti_members(state)
    wanted = {name for course in [*state["courses"].values(), *from_lms.values()] for role in ("instructors", "students")
              for name in course.get(role, [])}
    present = {user["name"] for user in hub_api(state, "GET", "/users?limit=10000") or []}
    if wanted - present:
        hub_api(state, "POST", "/users", {"usernames": sorted(wanted - present)})
        done.append(f"added {', '.join(sorted(wanted - present))}")
    for name in sorted(present - wanted):
        hub_api(state, "DELETE", f"/users/{name}")
        done.append(f"removed {name} (their server stopped; their files are kept)")
    groups = {group["name"]: set(group["users"]) for group in hub_api(state, "GET", "/groups?limit=10000") or []}
    for course, spec in state["courses"].items():
        lms = from_lms.get(course, {})
        for group, members in ((f"nbgrader-{course}", [*spec["students"], *lms.get("students", [])]),
                               (f"formgrade-{course}", [*spec["instructors"], *lms.get("instructors", [])])):
            current = groups.get(group)
            if current is None:
                hub_api(state, "POST", f"/groups/{group}", {"users": sorted(members)})
                continue
            if set(members) - current:
                hub_api(state, "POST", f"/groups/{group}/users", {"users": sorted(set(members) - current)})
            if current - set(members):
                hub_api(state, "DELETE", f"/groups/{group}/users", {"users": sorted(current - set(members))})
    return done


def _lti_members(state: dict) -> dict:
    """The people LTI launches admitted, by course and role (``jupyterhub/lti_auth.py`` keeps them in
    ``lti/members.json``); the hub keeps them as it keeps the roster's people."""
    try:
        return json.loads((Path(state["hub_dir"]) / "lti" / "members.json").read_text()) if state.get("lti") else {}
    except (OSError, ValueError):
        return {}


def lti_setup(state: dict) -> list[str]:
    """The values to paste into the LMS when the tool is registered there (the instructor's guide
    says where)."""
    base = state["url"]
    return [f"tool login initiation URL (OpenID Connect initiation URL): {base}/hub/lti13/oauth_login",
            f"redirect URI:                                           {base}/hub/lti13/oauth_callback",
            f"public keyset (JWKS) URL:                               {base}/hub/lti13/jwks",
            f"target link URI:                                        {base}/hub/lti13/oauth_login",
            "a link to one assignment: custom parameter assignment=<assignment id>"]


def lms_pages(state: dict) -> list[str]:
    """Where each LMS course's instructors push its grades (``jupyterhub/lms_page.py``)."""
    courses = sorted(set((state.get("lti") or {}).get("contexts", {}).values()))
    return [f"{course}: {state['url']}/hub/lms/{course}" for course in courses]


def update(roster_path: Path, hub_dir: Path = DEFAULT_DIR, create_users: bool = False) -> list[str]:
    """Apply a changed roster to the running hub: people added or removed (Unix accounts, course
    groups, hub users and groups), limits for servers started from now on, due dates. No one's
    server stops but the servers of those removed. A new course needs a restart."""
    if os.geteuid() != 0:
        raise GradingError("run it as root (sudo)")
    hub_dir = Path(hub_dir).resolve()
    state = _load(hub_dir / "state.json")
    if not state or not _alive(_read_pid(hub_dir / "jupyterhub.pid")):
        raise GradingError(f"no hub is running from {hub_dir} (hub start)")
    roster, options = read_roster(roster_path), read_options(roster_path)
    new_courses = sorted(set(roster) - set(state["courses"]))
    if new_courses:
        raise GradingError(f"course(s) {', '.join(new_courses)} are not on the running hub: a new course needs "
                           f"`hub stop` and `hub start` (the other courses keep their data)")
    kept = {c: roster.get(c, {"instructors": [], "students": []}) for c in state["courses"]}
    _setup_people(kept, hub_dir, hub_dir / "state.json", create_users)
    mount_homes(kept, hub_dir, options["limits"])
    with _state_lock(hub_dir):
        state = _update_state(roster_path, hub_dir, roster, options)
    return sync_people(state) or ["no change of people"]


def _update_state(roster_path: Path, hub_dir: Path, roster: dict, options: dict) -> dict:
    state = {**_load(hub_dir / "state.json"), "limits": options["limits"].as_dict()}
    registration = lti.read_registration(_roster_data(roster_path), roster_path)
    if bool(registration) != bool(state.get("lti")) or (registration and (
            (registration.issuer, list(registration.client_ids), registration.authorize_url, registration.jwks_url)
            != (state["lti"]["issuer"], state["lti"]["client_ids"], state["lti"]["authorize_url"],
                state["lti"]["jwks_url"]))):
        raise GradingError("the roster's lti block changed its platform (issuer, client_id, authorize_url, jwks_url) "
                           "or was added or removed: that needs `hub stop` and `hub start`")
    if registration:
        state["lti"] = registration.as_state()   # deployments and lti_context: applied at once
    state["roster"] = str(Path(roster_path).resolve())
    for course in state["courses"]:
        members = roster.get(course, {"instructors": [], "students": []})
        state["courses"][course].update(instructors=members["instructors"], students=members["students"])
        _course_settings(Path(state["courses"][course]["dir"]), pwd.getpwnam(state["courses"][course]["grader"]),
                         course, members, options)
    _write(hub_dir / "state.json", json.dumps(state, indent=1), 0o600)
    return state


# --- stop ------------------------------------------------------------------------------------------


def _hub_processes(state: dict) -> list[int]:
    """Processes this hub started that are still running: servers, kernels and services carry the
    hub's API address in their environment, or the fork server's mark (in the fork server and
    everything forked from it); users the hub created own nothing else."""
    markers = {f"JUPYTERHUB_API_URL=http://127.0.0.1:{state.get('hub_port')}/hub/api".encode(),
               f"{FORK_SERVER_MARK}={state.get('hub_dir')}".encode()}
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
                if markers & set(handle.read().split(b"\0")):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def stop(hub_dir: Path = DEFAULT_DIR, remove_users: bool = False, timeout: float = 30.0) -> list[str]:
    """Stop the hub started from ``hub_dir`` (it stops the proxy, services and servers); returns
    what it did. Nothing is deleted: the course directories, the exchange and the homes stay."""
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
    if stop_fork_server(hub_dir):
        done.append("stopped the users' servers' fork server")
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
    user_limits.remove_hub_cgroups(_hub_cgroup_name(hub_dir))
    unmounted = [home.name for home in sorted((hub_dir / "homes").glob("*")) if user_limits.unmount_home(home)]
    if unmounted:
        done.append(f"unmounted the homes of {', '.join(unmounted)} (their files stay in {hub_dir / 'images'})")
    (hub_dir / "jupyterhub.pid").unlink(missing_ok=True)
    if remove_users:
        for name in state.get("created_users", []):
            if _user_exists(name):
                for _ in range(20):  # a process that is still exiting keeps userdel from removing the user
                    # never --remove: a grader's home is its course directory, a student's is their work
                    if subprocess.run(["userdel", name], capture_output=True).returncode == 0:
                        break
                    time.sleep(0.2)
                done.append(f"removed user {name} (their files stay in {hub_dir})")
        for name in state.get("created_groups", []):
            if subprocess.run(["groupdel", name], capture_output=True).returncode == 0:
                done.append(f"removed group {name}")
    return done


# --- backup and restore ----------------------------------------------------------------------------

BACKED_UP = ("courses", "exchange", "homes", "state.json")


def backup(hub_dir: Path, target: Path) -> str:
    """Copy the hub's data (course directories, the exchange, the users' homes, the state) into a
    tar archive in ``target`` (a new folder, root's only); the hub may be running."""
    hub_dir = Path(hub_dir).resolve()
    if not (hub_dir / "state.json").is_file():
        raise GradingError(f"no hub set up in {hub_dir} (no state.json)")
    target = Path(target).resolve()
    if target.exists() and any(target.iterdir()):
        raise GradingError(f"{target} is not empty: back up into a new folder")
    if hub_dir in target.parents or target == hub_dir:
        raise GradingError(f"{target} is inside the hub's folder: back up elsewhere")
    target.mkdir(parents=True, exist_ok=True)
    os.chmod(target, 0o700)
    state = _load(hub_dir / "state.json")
    unmounted = [home for home in sorted((hub_dir / "homes").glob("*"))
                 if (hub_dir / "images" / f"{home.name}.img").exists() and not os.path.ismount(home)]
    for home in unmounted:   # a stopped hub's homes: read them from their images
        subprocess.run(["mount", "-o", "loop,ro,nosuid,nodev", str(hub_dir / "images" / f"{home.name}.img"),
                        str(home)], capture_output=True)
    try:
        archive = target / "hub.tar"
        present = [name for name in BACKED_UP if (hub_dir / name).exists()]
        done = subprocess.run(["tar", "--create", "--file", str(archive), "--numeric-owner", "--acls", "--xattrs",
                               "--directory", str(hub_dir), *present], capture_output=True, text=True)
        if done.returncode not in (0, 1):   # 1: a file changed as it was read (a running hub)
            raise GradingError(f"tar failed: {done.stderr.strip()[-300:]}")
    finally:
        for home in unmounted:
            user_limits.unmount_home(home)
    os.chmod(archive, 0o600)
    _write(target / "manifest.json", json.dumps({"hub_dir": str(hub_dir), "made": time.strftime("%Y-%m-%d %H:%M:%S"),
                                                 "courses": sorted(state.get("courses", {})),
                                                 "contents": present}, indent=1), 0o600)
    size = archive.stat().st_size / 2**20
    return f"backed up {', '.join(present)} of {hub_dir} into {archive} ({size:.1f} MiB)"


def restore(source: Path, hub_dir: Path = DEFAULT_DIR) -> str:
    """Put a backup back into a stopped hub's folder. What it replaces is moved aside to
    ``replaced-<time>/``, never deleted; the users' homes are restored into their images."""
    hub_dir = Path(hub_dir).resolve()
    archive = Path(source).resolve() / "hub.tar"
    if not archive.is_file():
        raise GradingError(f"no backup in {source} (no hub.tar)")
    if (hub_dir / "jupyterhub.pid").exists() and _alive(_read_pid(hub_dir / "jupyterhub.pid")):
        raise GradingError(f"the hub in {hub_dir} is running: `hub stop --dir {hub_dir}` first")
    hub_dir.mkdir(parents=True, exist_ok=True)
    aside = hub_dir / f"replaced-{time.strftime('%Y%m%d-%H%M%S')}"
    with tempfile.TemporaryDirectory(prefix="restore-", dir=hub_dir) as work:
        os.chmod(work, 0o700)
        done = subprocess.run(["tar", "--extract", "--file", str(archive), "--numeric-owner", "--acls", "--xattrs",
                               "--same-permissions", "--directory", work], capture_output=True, text=True)
        if done.returncode != 0:
            raise GradingError(f"cannot read the backup {archive}: {done.stderr.strip()[-300:]}")
        restored = []
        for name in sorted(os.listdir(work)):
            if name == "homes":
                continue
            if (hub_dir / name).exists():
                aside.mkdir(exist_ok=True, mode=0o700)
                os.replace(hub_dir / name, aside / name)
            os.replace(Path(work) / name, hub_dir / name)
            restored.append(name)
        homes = Path(work) / "homes"
        state = _load(hub_dir / "state.json")
        cap = user_limits.Limits(**state["limits"]) if state.get("limits") else user_limits.Limits()
        for saved in sorted(homes.iterdir()) if homes.is_dir() else []:
            home, image = hub_dir / "homes" / saved.name, hub_dir / "images" / f"{saved.name}.img"
            info = saved.stat()
            if image.exists():
                aside.mkdir(exist_ok=True, mode=0o700)
                (aside / "images").mkdir(exist_ok=True)
                os.replace(image, aside / "images" / image.name)
            (hub_dir / "images").mkdir(exist_ok=True, mode=0o700)
            user_limits.mount_home(image, home, cap.disk, info.st_uid, info.st_gid)
            try:
                _run(["cp", "-a", f"{saved}/.", str(home)])
            finally:
                user_limits.unmount_home(home)
            restored.append(f"homes/{saved.name}")
    moved = f"; what they replaced is in {aside}" if aside.exists() else ""
    return f"restored {', '.join(restored)} into {hub_dir}{moved}"
