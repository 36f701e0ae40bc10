"""The course hub end to end, as an instructor and students meet it, and as a curious student
attacks it: real OS users, two courses, one assignment from release to feedback, over HTTPS.

``python -m autograder hub start`` starts JupyterHub on 127.0.0.1 (a free port, HTTPS with a
self-signed certificate made here) for a roster of two courses whose users this test creates
(names unique to the run), with small limits and a short idle timeout; everything after that
goes through HTTP only, as a browser or a student's JupyterLab would: the hub's login form and
REST API, each user's Jupyter server (contents API, kernels and terminals over their websockets),
nbgrader's assignment endpoints, a course's grader service (an instructor's kernel there runs the
course's `python -m autograder` commands) and its formgrader (pages and API). The probes a
student would try (the issue's S1-S8) each have a test here that they are refused. The module's
fixture stops the hub and removes the users and groups it made, also when a test fails midway,
then checks that the course data is still there and that nothing of the hub is left running or
mounted.

Needs root (the hub starts each user's server as that user); CI runs as root.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
import requests

from autograder import checks
from autograder import hub as course_hub
from autograder import leakscan
from attention_course import book

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exercises"))
import exercise_helpers  # noqa: E402

from grader_helpers import solution_answers, student_version  # noqa: E402
from hub_client import HubUser, KernelDied, Service, session, try_login  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "ch3a_multi_query_penalty"
WRONG = "the penalty sends no gradient"   # a row of WRONG_ANSWERS
# What a student writes into a markdown cell for the instructor's browser (S1).
PAYLOAD = ('<img src=x onerror="fetch(\'formgrader/api/grade/1\', {method: \'PUT\'})"> '
           '<script>document.title = "owned"</script> [open me](javascript:alert(1))')
IDLE_TIMEOUT = 60

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the course hub starts servers as other users: needs root")


# Check on submit in course A: with points, two an hour, and (for now) past the due date too.
CHECKS = {"show": "points", "per_hour": 2, "until_due": False}
PLANTED = "7777123.25"   # a value in a hidden test's message: no student's page may show it


def plant_in_a_hidden_test(path: Path) -> None:
    """The instructor's copy of the assignment: the penalty's hidden check says ``PLANTED`` in its
    message (the judge's message, the instructor's to read)."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_forward")
    marker = 'checks.assert_close(f"the penalty for N, T, H, r = {N, T, H, r}"'
    assert marker in cell.source
    cell.source = cell.source.replace(marker, marker[:-1] + f' {PLANTED}"')
    nbformat.write(nb, path)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def leftovers(state: dict, hub_dir: Path) -> list[str]:
    """What the hub left behind: its processes, users, mounts, cgroups."""
    left = [f"process {pid}" for pid in course_hub._hub_processes(state)]
    for name in state.get("created_users", []):
        try:
            pwd.getpwnam(name)
            left.append(f"user {name}")
        except KeyError:
            pass
    mounts = Path("/proc/mounts").read_text()
    left += [f"mount {line.split()[1]}" for line in mounts.splitlines() if str(hub_dir) in line]
    left += [f"cgroup {path}" for path in state.get("cgroups", {}).values() if Path(path).exists()]
    return left


def git_common_dir() -> Path | None:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                          capture_output=True, text=True)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


@pytest.fixture(scope="module")
def searchable_checkout():
    """The hub's users load the course's third-party packages from this checkout's environment,
    which ``hub start`` refuses to serve unless they can reach it, and unless they cannot reach its
    solutions, tests and git history. CI clones wherever it likes (a private temporary folder,
    root's home) with all of it readable by all: for this module's duration, the folders above
    the checkout that others cannot search get search permission (o+x: reach a known name, not
    list), the private places (and the git directory, wherever it is) lose the others'
    permissions, and all get their modes back after."""
    changed = {}
    for folder in [*reversed((REPO / "attention_course").resolve().parents)]:
        mode = folder.stat().st_mode
        if not mode & 0o001:
            changed[folder] = mode
            os.chmod(folder, (mode & 0o7777) | 0o001)
    common = git_common_dir()
    for path in [*(REPO / name for name in course_hub.PRIVATE_IN_CHECKOUT), *([common] if common else [])]:
        if path.exists() and path.stat().st_mode & 0o007:
            changed[path] = path.stat().st_mode
            os.chmod(path, path.stat().st_mode & 0o7770)
    try:
        yield
    finally:
        for folder, mode in changed.items():
            os.chmod(folder, mode & 0o7777)


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "hub.crt", folder / "hub.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    os.chmod(key, 0o600)
    return cert, key


@pytest.fixture(scope="module")
def hub(searchable_checkout):
    tag = secrets.token_hex(3)
    names = {key: f"{key}{tag}" for key in ("ada", "bo", "cy", "di", "ed", "fy", "gi")}
    course_a, course_b = f"a{tag}", f"b{tag}"
    # Not under /tmp: every server of the hub has a private /tmp, where the exchange would be out of reach.
    folder = Path(tempfile.mkdtemp(prefix="attention-hub-test-", dir="/var/tmp"))
    os.chmod(folder, 0o755)   # the hub's folder: users traverse it to their course's exchange
    private = folder / "instructor"
    (private / "source").mkdir(parents=True)
    os.chmod(private, 0o700)   # solutions and hidden tests: root only
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, private / "source" / ASSIGNMENT)
    plant_in_a_hidden_test(private / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    cert, key = self_signed(private)
    roster = {
        "courses": {
            course_a: {"instructors": [names["ada"]], "students": [names["bo"], names["cy"], names["fy"]],
                       "due": {ASSIGNMENT: "2000-01-01 00:00 UTC"},   # every submission is late
                       "checks": {"default": CHECKS}},
            course_b: {"instructors": [names["di"]], "students": [names["ed"]]},
        },
        "limits": {"memory": "1G", "disk": "256M", "shm": "32M"},
        "idle_timeout": IDLE_TIMEOUT,
    }
    (private / "roster.json").write_text(json.dumps(roster))
    password = secrets.token_hex(12)
    (private / "password").write_text(password)
    hub_dir, port = folder / "hub", free_port()
    info = {"url": f"https://127.0.0.1:{port}", "ca": str(cert), "password": password, "names": names,
            "a": course_a, "b": course_b, "dir": hub_dir, "private": private, "folder": folder, "roster": roster}
    try:
        started = subprocess.run(
            [sys.executable, "-m", "autograder", "hub", "start", str(private / "roster.json"), "--dir", str(hub_dir),
             "--port", str(port), "--authenticator", "dummy", "--password-file", str(private / "password"),
             "--create-users", "--source", str(private / "source"), "--ssl-cert", str(cert), "--ssl-key", str(key)],
            cwd=REPO, capture_output=True, text=True, timeout=600)
        assert started.returncode == 0, started.stderr + course_hub._tail(hub_dir / "logs" / "jupyterhub.log", 20)
        yield info
    finally:
        # Course data, less what exists only while something runs: SQLite's files while a database is
        # open, and a running Jupyter server's runtime files (a course's grader service may still be
        # up here, and its server deletes them as it stops).
        data = [p for place in ("courses", "exchange", "images") for p in (hub_dir / place).rglob("*")
                if not p.name.endswith(("-journal", "-wal", "-shm")) and "jupyter/runtime" not in p.as_posix()]
        stopped = subprocess.run([sys.executable, "-m", "autograder", "hub", "stop", "--dir", str(hub_dir),
                                  "--remove-users"], cwd=REPO, capture_output=True, text=True, timeout=180)
        state = course_hub._load(hub_dir / "state.json")
        left = leftovers(state, hub_dir) if state else []
        # S5: whatever the flags, stopping keeps the course's data (the grader's home is its course directory)
        lost = [str(p) for p in data if not p.exists()]
        shutil.rmtree(folder, ignore_errors=True)
        assert stopped.returncode == 0, stopped.stderr
        assert not left, f"the hub left {left}"
        assert data and not lost, f"hub stop --remove-users deleted course data: {lost[:5]}"


def login(hub, key: str) -> HubUser:
    return HubUser(hub["url"], hub["names"][key], hub["password"], ca=hub["ca"])


@pytest.fixture(scope="module")
def users(hub):
    """Everyone logged in through the hub's login form, students with a server started by the hub's
    API. The students but fy keep their JupyterLab open, as it were: their servers hear from them
    every few seconds, so the hub's short idle timeout (IDLE_TIMEOUT) stops only fy's."""
    people = {}
    for key in ("ada", "bo", "cy", "di", "ed", "fy"):
        person = login(hub, key)
        if key not in ("ada", "di"):
            person.start_server()
        people[key] = person
    done = threading.Event()

    def keep_alive() -> None:
        while not done.wait(5):
            for key in ("bo", "cy", "ed"):
                try:
                    people[key].api.get(f"{people[key].server_url}/api/status", timeout=10)
                except requests.RequestException:
                    pass

    thread = threading.Thread(target=keep_alive, daemon=True)
    thread.start()
    yield people
    done.set()
    thread.join()


def instructor_runs(users, hub, course_key: str, *commands: list[str], ok=(0,)) -> str:
    """The instructor of course A, in a kernel of the course's grader service, runs autograder commands."""
    service = Service(users["ada"], hub[course_key])
    code = ("import subprocess, sys\n"
            f"for args in {commands!r}:\n"
            "    done = subprocess.run([sys.executable, '-m', 'autograder', *args], capture_output=True, text=True)\n"
            "    print(done.stdout + done.stderr)\n"
            f"    assert done.returncode in {tuple(ok)!r}, (args, done.returncode)\n")
    return service.run_code(code)


def formgrader(users, hub, method: str, path: str, **kwargs) -> requests.Response:
    """The course A formgrader's API, as the instructor's browser calls it."""
    return users["ada"].api.request(method, f"{hub['url']}/services/{hub['a']}/formgrader{path}", timeout=600,
                                    **kwargs)


def answered(person: HubUser, path: str, wrong: str | None, markdown: str | None = None) -> dict:
    """The fetched notebook with answers typed in: the solutions, or one of them replaced by a
    wrong answer; and a markdown cell of the student's own at the end."""
    notebook = student_version(nbformat.from_dict(person.get_notebook(path)),
                               solution_answers(exercise_helpers.read(ASSIGNMENT)))
    if wrong:
        function, body = next((f, b) for n, f, what, b in exercise_helpers.WRONG_ANSWERS
                              if n == ASSIGNMENT and what == wrong)
        notebook = exercise_helpers.with_body(notebook, function, body)
    if markdown:
        notebook.cells.append(nbformat.v4.new_markdown_cell(markdown))
    return json.loads(nbformat.writes(notebook))


def points(prefix: str = "") -> float:
    """Points of the assignment's test cells whose grade id starts with ``prefix``, from its source."""
    return sum(float(cell.metadata.nbgrader.get("points", 0)) for cell in exercise_helpers.read(ASSIGNMENT).cells
               if cell.metadata.get("nbgrader", {}).get("grade") and
               cell.metadata.nbgrader.get("grade_id", "").startswith(prefix))


def scores(users, hub) -> dict:
    answer = formgrader(users, hub, "GET", f"/api/submissions/{ASSIGNMENT}")
    assert answer.status_code == 200, answer.text[:300]
    return {row["student"]: (row["score"], row["max_score"]) for row in answer.json()}


def expected_scores(hub) -> dict:
    total, forward = points(), points("test_forward")
    assert 0 < forward < total
    return {hub["names"]["bo"]: (total, total), hub["names"]["cy"]: (forward, total)}


def probe(person: HubUser, code: str) -> list[str]:
    """Run ``code`` (which prints one word per attempt) in the person's kernel; the words."""
    return person.run_code(code).split()


ATTEMPT = ("def attempt(what, action):\n"
           "    try:\n"
           "        action()\n"
           "        print('DONE:' + what)\n"
           "    except OSError:\n"
           "        print('REFUSED:' + what)\n")


def test_a_student_sees_only_the_assignments_of_their_courses(hub, users):
    output = instructor_runs(users, hub, "a", ["release", ASSIGNMENT], ["publish", ASSIGNMENT])
    assert f"published {ASSIGNMENT}" in output
    course_a = hub["a"]
    for key in ("bo", "cy"):
        listed = users[key].nbgrader("list", course_a)
        assert [(a["assignment_id"], a["status"]) for a in listed] == [(ASSIGNMENT, "released")]
        assert users[key].server("GET", "/courses").json()["value"] == [course_a]
    ed = users["ed"]
    assert ed.nbgrader("list", course_a) == []
    assert ed.nbgrader("fetch", course_a, ASSIGNMENT) == []
    # not even by going around nbgrader: only course A's Unix group may enter its exchange folder
    probe_code = f"import os\ntry:\n    os.listdir({str(hub['dir'] / 'exchange' / course_a / 'outbound')!r})\n" \
                 "    print('READ')\nexcept PermissionError:\n    print('DENIED')\n"
    assert ed.run_code(probe_code).strip() == "DENIED"
    assert users["bo"].run_code(probe_code).strip() == "READ"


def test_a_submission_goes_from_the_student_to_a_grade_and_back(hub, users):
    course_a, path = hub["a"], f"{hub['a']}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    for key, wrong, markdown in (("bo", None, None), ("cy", WRONG, PAYLOAD)):
        person = users[key]
        fetched = person.nbgrader("fetch", course_a, ASSIGNMENT)
        assert any(a["status"] == "fetched" and a["path"] == f"{course_a}/{ASSIGNMENT}" for a in fetched)
        person.put_notebook(path, answered(person, path, wrong, markdown))
        submitted = person.nbgrader("submit", course_a, ASSIGNMENT)
        assert any(a["status"] == "submitted" for a in submitted)

    output = instructor_runs(users, hub, "a", ["collect", ASSIGNMENT], ["autograde", ASSIGNMENT],
                             ["feedback", ASSIGNMENT], ["return-feedback", ASSIGNMENT])
    assert "imported" in output and "bubblewrap sandbox" in output and "returned the feedback" in output
    # the roster's due date (2000-01-01) reached the gradebook: collect names both submissions late
    assert all(f"LATE {hub['names'][key]}: submitted" in output for key in ("bo", "cy")), output

    # The grades, as the formgrader shows them to the instructor.
    assert scores(users, hub) == expected_scores(hub)
    total, forward = points(), points("test_forward")

    # Each student fetches their own feedback: their own score, and no hidden test.
    secrets_ = [s for s in leakscan.course_secrets(hub["private"] / "source", REPO / "attention_course")
                if s.kind == "hidden test"]
    assert secrets_, "the assignment has hidden tests to look for"
    for key, score in (("bo", total), ("cy", forward)):
        person = users[key]
        listed = person.nbgrader("fetch_feedback", course_a, ASSIGNMENT)
        submission = next(a for a in listed if a["status"] == "submitted")["submissions"][-1]
        assert submission["has_local_feedback"], submission
        page_path = f"{submission['local_feedback_path'].removeprefix('./')}/{ASSIGNMENT}.html"
        page = person.server("GET", f"/api/contents/{page_path}",
                             params={"content": 1, "type": "file", "format": "text"})
        assert page.status_code == 200, page.text[:300]
        html = page.json()["content"]
        first = re.search(r"Score: ([0-9.]+) / ([0-9.]+)", html)   # the page's heading: the notebook's total
        assert first and (float(first[1]), float(first[2])) == (score, total)
        copy = hub["private"] / f"feedback-{key}.html"   # (root only: it holds the student's code)
        copy.write_text(html)
        assert leakscan.scan([copy], secrets_, kinds=("hidden test",)) == []


def check_page(person: HubUser, hub, assignment: str = ASSIGNMENT, until=("checked", "not checked"),
               newer_than: str | None = None, timeout: float = 240) -> str:
    """The student's page of her newest check (of a submission other than ``newer_than``'s page's),
    once it says one of ``until`` (the page refreshes itself; a browser's session signs in to the
    service through the hub, as for any service)."""
    url = f"{hub['url']}/services/checks-{hub['a']}/assignments/{assignment}"
    deadline = time.monotonic() + timeout
    page = ""
    while time.monotonic() < deadline:
        answer = person.session.get(url, timeout=60)
        assert answer.status_code == 200, (answer.status_code, answer.text[:300], answer.url,
                                           [(c.name, c.path, len(c.value or "")) for c in person.session.cookies])
        page = answer.text
        which = re.search(r"Your submission of (.+?): <strong>", page)
        new = newer_than is None or (which and which[1] not in newer_than)
        if new and any(f"<strong>{word}</strong>" in page for word in until):
            return page
        time.sleep(1)
    # (what the service saw, for the failure's message: its queue, its log, the exchange's inbound folder)
    course_dir = hub["dir"] / "courses" / hub["a"]
    log = course_dir / "logs" / "checks.log"
    rows = sqlite3.connect(course_dir / "checks" / "checks.sqlite").execute(
        "SELECT id, student, submission, state, reason FROM checks").fetchall()
    inbound = sorted(os.listdir(hub["dir"] / "exchange" / hub["a"] / "inbound"))
    raise AssertionError(f"no check result within {timeout} s: {page[-300:]}\nqueue: {rows}\ninbound: {inbound}\n"
                         f"log: {log.read_text()[-2000:] if log.exists() else ''}")


def hub_update(hub) -> None:
    """``hub update`` with the roster as the instructor's copy now says."""
    updated = subprocess.run([sys.executable, "-m", "autograder", "hub", "update", str(hub["private"] / "roster.json"),
                              "--dir", str(hub["dir"])], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert updated.returncode == 0, updated.stderr


def submit_again(person: HubUser, hub, notebook: dict) -> None:
    path = f"{hub['a']}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    person.put_notebook(path, notebook)
    assert any(a["status"] == "submitted" for a in person.nbgrader("submit", hub["a"], ASSIGNMENT))


def test_s1_the_formgrader_shows_a_submission_without_running_what_the_student_wrote(hub, users):
    listed = formgrader(users, hub, "GET", f"/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}")
    assert listed.status_code == 200, listed.text[:300]
    cy = next(row for row in listed.json() if row["student"] == hub["names"]["cy"])
    page = formgrader(users, hub, "GET", f"/submissions/{cy['id']}/")
    assert page.status_code == 200, page.text[:300]
    html = page.text
    assert "owned" not in html.split("</title>")[0]
    # The page is served under a policy that runs no script but the formgrader's own: a fresh nonce,
    # no 'unsafe-inline' (an event handler or a javascript: URL would need it).
    policy = page.headers["Content-Security-Policy"]
    nonce = re.search(r"'nonce-([A-Za-z0-9_-]+)'", policy)
    assert nonce and "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";")[0]
    # the formgrader's own page, then the notebook
    template, body = re.split(r'<div\b[^>]*\bid="notebook"', html, maxsplit=1)
    assert template.count("<script") == template.count(f'<script nonce="{nonce[1]}"') > 0
    assert "<script" not in body
    # ... and what the student wrote is sanitized besides: no event handler, no script URL survives
    assert "fetch(" in body   # the payload is shown, as text
    assert not re.search(r"<[^>]+\sonerror\s*=", body) and "javascript:alert" not in body
    again = formgrader(users, hub, "GET", f"/submissions/{cy['id']}/")
    assert re.search(r"'nonce-([A-Za-z0-9_-]+)'", again.headers["Content-Security-Policy"])[1] != nonce[1]


def test_s4_s7_the_formgraders_buttons_run_the_courses_own_commands(hub, users):
    names, inbound = hub["names"], hub["dir"] / "exchange" / hub["a"] / "inbound"
    # cy drops a later submission named after bo into the exchange (S4): it must not count for bo
    forged = f"{names['bo']}+{ASSIGNMENT}+2099-01-01 00:00:00.000000 UTC+forged"
    notebook = json.dumps(answered(users["cy"], f"{hub['a']}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb", WRONG))
    users["cy"].run_code(f"import os\nos.mkdir({str(inbound / forged)!r})\n"
                         f"open({str(inbound / forged / (ASSIGNMENT + '.ipynb'))!r}, 'w').write({notebook!r})\n")
    collected = formgrader(users, hub, "POST", f"/api/assignment/{ASSIGNMENT}/collect")
    assert collected.status_code == 200
    result = collected.json()
    assert "python -m autograder collect" in result["log"]
    assert f"was submitted by '{names['cy']}', not '{names['bo']}'" in result["log"]
    graded = formgrader(users, hub, "POST", f"/api/submission/{ASSIGNMENT}/{names['bo']}/autograde")
    assert graded.json()["success"], graded.json()
    assert "python -m autograder autograde" in graded.json()["log"]
    assert scores(users, hub) == expected_scores(hub)   # bo's grade is still bo's own
    # Generate Feedback (S7) writes the course's own pages: no hidden test in any
    generated = formgrader(users, hub, "POST", f"/api/assignment/{ASSIGNMENT}/generate_feedback").json()
    assert generated["success"] and "python -m autograder feedback" in generated["log"], generated
    secrets_ = [s for s in leakscan.course_secrets(hub["private"] / "source", REPO / "attention_course")
                if s.kind == "hidden test"]
    pages = sorted((hub["dir"] / "courses" / hub["a"] / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    assert len(pages) == 2 and leakscan.scan(pages, secrets_, kinds=("hidden test",)) == []


def test_s3_a_submission_is_its_students_alone(hub, users):
    names, inbound = hub["names"], hub["dir"] / "exchange" / hub["a"] / "inbound"
    # cy knows the name of bo's submission folder (as if from a log) and tries everything on it
    bo_uid = pwd.getpwnam(names["bo"]).pw_uid   # bo's own, not the one cy forged under bo's name
    folder = next(p for p in inbound.iterdir() if p.name.startswith(f"{names['bo']}+{ASSIGNMENT}+")
                  and p.stat().st_uid == bo_uid)
    file = folder / f"{ASSIGNMENT}.ipynb"
    words = probe(users["cy"], ATTEMPT + f"import os\nfolder, file = {str(folder)!r}, {str(file)!r}\n"
                  "attempt('list', lambda: os.listdir(folder))\n"
                  "attempt('read', lambda: open(file).read())\n"
                  "attempt('write', lambda: open(file, 'a').write('x'))\n"
                  "attempt('add', lambda: open(folder + '/extra.ipynb', 'w'))\n"
                  "attempt('rename', lambda: os.rename(folder, folder + '-mine'))\n"
                  "attempt('delete', lambda: os.rmdir(folder))\n"
                  "attempt('unlink', lambda: os.unlink(file))\n")
    assert words == [f"REFUSED:{w}" for w in ("list", "read", "write", "add", "rename", "delete", "unlink")]
    assert oct(folder.stat().st_mode & 0o7777) == "0o750" and oct(file.stat().st_mode & 0o777) == "0o640"
    grader_group = pwd.getpwnam(f"grader-{hub['a']}").pw_gid
    assert {p.stat().st_gid for p in (folder, *folder.iterdir())} == {grader_group}
    # the inbound folder itself cannot be listed, and its submissions are the grader's group's only
    assert probe(users["cy"], ATTEMPT + f"import os\nattempt('list', lambda: os.listdir({str(inbound)!r}))\n") == \
        ["REFUSED:list"]


def test_s2_s8_a_student_cannot_reach_what_is_not_theirs(hub, users):
    bo, course_a, names = users["bo"], hub["a"], hub["names"]
    # the course's formgrader (the grader service), with a token and through the browser's OAuth
    assert bo.api.get(f"{hub['url']}/services/{course_a}/formgrader").status_code == 403
    browser = bo.session.get(f"{hub['url']}/services/{course_a}/formgrader", allow_redirects=True)
    assert browser.status_code == 403 and "formgrader" not in browser.text.lower().split("</title>")[0]
    # ... and an instructor of another course is no instructor here
    assert users["di"].api.get(f"{hub['url']}/services/{course_a}/formgrader").status_code == 403
    # another student's server
    assert bo.api.get(f"{hub['url']}/user/{names['cy']}/api/contents").status_code in (403, 404)
    # another student's submission in the exchange, the instructor's files, other homes
    places = [hub["dir"] / "exchange" / course_a / "inbound", hub["dir"] / "exchange" / course_a / "feedback",
              hub["dir"] / "courses" / course_a, Path(pwd.getpwnam(names["cy"]).pw_dir),
              Path(pwd.getpwnam(names["ada"]).pw_dir), hub["dir"] / "logs", hub["dir"] / "images"]
    code = ATTEMPT + f"import os\nfor place in {[str(p) for p in places]!r}:\n" \
                     "    attempt(place, lambda: os.listdir(place))\n"
    assert probe(bo, code) == [f"REFUSED:{p}" for p in places]
    # S8: the hub's database, state, log and keys; the gradebook; the checkout's solutions, hidden
    # tests and their answers (S2), each by its name
    hub_files = [hub["dir"] / name for name in ("jupyterhub.sqlite", "state.json", "jupyterhub_cookie_secret",
                                                "admin-token", "dummy-password")] + [hub["dir"] / "logs" / "jupyterhub.log"]
    for path in [*hub_files, *hub["dir"].glob("jupyterhub.sqlite-*")]:   # (and its write-ahead log)
        assert oct(path.stat().st_mode & 0o077) == "0o0", path   # root's alone, not merely out of reach
    secrets_ = [*hub_files, hub["dir"] / "courses" / course_a / "gradebook.db",
                REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                *sorted((REPO / "tests" / "exercises").glob("answers_*.py"))[:1]]
    assert all(path.exists() for path in secrets_)
    code = ATTEMPT + f"for path in {[str(p) for p in secrets_]!r}:\n    attempt(path, lambda: open(path, 'rb'))\n"
    assert probe(bo, code) == [f"REFUSED:{p}" for p in secrets_]
    # S2: git's history of the checkout, which holds every solution
    shown = bo.run_code("import subprocess\n"
                        f"done = subprocess.run(['git', '-c', 'safe.directory=*', '-C', {str(REPO)!r}, 'show', "
                        f"'HEAD:solutions/{ASSIGNMENT}/{ASSIGNMENT}.ipynb'], capture_output=True, text=True)\n"
                        "print(done.returncode, 'BEGIN SOLUTION' in done.stdout)\n")
    assert shown.split()[1] == "False" and shown.split()[0] != "0", shown
    # the course package comes from its wheel in the hub's environment, not from the checkout
    where = bo.run_code("import attention_course, sys\nprint(attention_course.__file__)\n").strip()
    assert where.startswith(str(hub["dir"] / "env")) and not where.startswith(str(REPO)), where


def test_s6_one_student_cannot_take_the_hub_down(hub, users):
    bo, cy = users["bo"], users["cy"]
    cy_kernel = cy.kernel()
    try:
        cy_kernel.run("import time\n")

        def answers_within(seconds: float) -> float:
            start = time.monotonic()
            assert cy_kernel.run("print(6 * 7)\n", timeout=30).strip() == "42"
            return time.monotonic() - start

        # 3 GiB in bo's kernel (the limit is 1 GiB): the kernel is stopped, and only it
        timings, errors = [], []

        def hog() -> None:
            try:
                bo.run_code("import numpy\nx = numpy.ones(3 * 2**30 // 8)\nprint('ALLOCATED')\n", timeout=120)
                errors.append("the 3 GiB allocation succeeded")
            except KernelDied:
                pass

        worker = threading.Thread(target=hog)
        worker.start()
        while worker.is_alive():
            timings.append(answers_within(2))
            time.sleep(0.2)
        worker.join()
        assert not errors, errors
        assert timings and max(timings) <= 2, timings
        # 300 processes in bo's kernel (the limit is 256 processes and threads): the 300th is refused
        forked = bo.run_code("import subprocess\nstarted = []\ntry:\n"
                             "    for _ in range(300):\n"
                             "        started.append(subprocess.Popen(['sleep', '60']))\n"
                             "except OSError as error:\n    print('REFUSED', len(started))\n"
                             "for p in started:\n    p.kill()\n    p.wait()\n", timeout=300)
        assert forked.split()[0] == "REFUSED" and 100 < int(forked.split()[1]) < 256, forked
        assert answers_within(2) <= 2
        # /dev/shm is bo's own and small (32 MiB); his home is 256 MiB whatever the machine's disk
        filled = bo.run_code(ATTEMPT + "import os\n"
                             "attempt('shm', lambda: open('/dev/shm/big', 'wb').write(b'1' * 48 * 2**20))\n"
                             "def fill():\n    with open(os.path.expanduser('~/big'), 'wb') as f:\n"
                             "        for _ in range(300):\n            f.write(b'1' * 2**20)\n"
                             "attempt('home', fill)\nos.remove(os.path.expanduser('~/big'))\n"
                             "open('/dev/shm/mine', 'w').write('bo')\n")
        assert filled.split() == ["REFUSED:shm", "REFUSED:home"], filled
        assert cy_kernel.run("import os\nprint(os.listdir('/dev/shm'))\n").strip() == "[]"
    finally:
        cy_kernel.close()


def processes_of(name: str) -> list[int]:
    uid = pwd.getpwnam(name).pw_uid
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/status").read_text().split("\nUid:")[1].split()[0] == str(uid):
                found.append(int(entry))
        except (OSError, IndexError):
            pass
    return found


def status_fields(pid: int) -> dict[str, str]:
    return dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            inodes.add(target)
    return inodes


def test_a_students_server_is_the_student_alone(hub, users):
    """The servers are forked from the hub's fork server (root, the servers' code imported once):
    each is then fully its student's, as a server exec'd by enter.py was, and no student's code can
    reach another's processes or the fork server."""
    names, cy = hub["names"], users["cy"]
    cy_kernel = cy.kernel()
    try:
        cy_kernel.run("print(1)\n")
        fork_server = int((hub["dir"] / "forkserver.pid").read_text())
        own_mounts = os.readlink("/proc/self/ns/mnt")
        root_sockets = set()
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and Path(f"/proc/{entry}/status").read_text().split("\nUid:")[1].split()[0] == "0":
                    root_sockets |= socket_inodes(int(entry))
            except (OSError, IndexError):
                pass
        for key in ("bo", "cy"):
            account = pwd.getpwnam(names[key])
            pids = processes_of(names[key])
            assert len(pids) >= (3 if key == "cy" else 2), f"{key}: server, kernel zygote (and kernel): {pids}"
            parents = {int(status_fields(pid)["PPid"]) for pid in pids}
            assert fork_server in parents, f"{key}'s server was not forked by the fork server"
            started = [pid for pid in pids if b"ipykernel_launcher" in Path(f"/proc/{pid}/cmdline").read_bytes()]
            assert not started, f"{key}'s kernel was started afresh, not forked from the kernel zygote"
            groups = sorted(os.getgrouplist(names[key], account.pw_gid))
            for pid in pids:
                fields = status_fields(pid)
                assert fields["Uid"].split() == [str(account.pw_uid)] * 4, (key, pid, fields["Uid"])
                assert fields["Gid"].split() == [str(account.pw_gid)] * 4, (key, pid, fields["Gid"])
                assert sorted(map(int, fields["Groups"].split())) == groups, (key, pid, fields["Groups"])
                for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
                    assert int(fields[cap], 16) == 0, (key, pid, cap, fields[cap])
                assert os.stat(f"/proc/{pid}").st_uid == account.pw_uid   # dumpable by its user, not root's
                memory = [line for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                          if ":memory:" in line or line.startswith("0::")]
                assert any(line.rstrip("/").endswith("/" + names[key]) for line in memory), (key, pid, memory)
                assert os.readlink(f"/proc/{pid}/ns/mnt") != own_mounts, (key, pid)   # its private /tmp
                # nothing a root process holds open (the fork server's socket, the hub's) was inherited
                assert not socket_inodes(pid) & root_sockets, (key, pid)
        # bo, in his kernel, at cy's processes and the fork server: no signal, no /proc file
        targets = [*processes_of(names["cy"]), fork_server]
        code = ATTEMPT + "import os, signal\n" + f"for pid in {targets!r}:\n" + \
            "    attempt(f'kill{pid}', lambda: os.kill(pid, signal.SIGTERM))\n" \
            "    attempt(f'environ{pid}', lambda: open(f'/proc/{pid}/environ', 'rb').read())\n" \
            "    attempt(f'mem{pid}', lambda: open(f'/proc/{pid}/mem', 'rb'))\n"
        assert probe(users["bo"], code) == [f"REFUSED:{what}{pid}" for pid in targets
                                             for what in ("kill", "environ", "mem")]
        assert cy_kernel.run("print(6 * 7)\n", timeout=30).strip() == "42"
    finally:
        cy_kernel.close()


def test_instructors_see_and_stop_the_servers_of_their_own_students_only(hub, users):
    names = hub["names"]
    ada, di = users["ada"], users["di"]
    listed = {user["name"] for user in ada.hub_api("GET", "/users").json()}
    assert listed == {names["bo"], names["cy"], names["fy"]}   # course A's students, nobody else
    assert ada.session.get(f"{hub['url']}/hub/admin").status_code == 200
    assert users["bo"].session.get(f"{hub['url']}/hub/admin").status_code == 403
    users["cy"].start_server()
    assert di.hub_api("DELETE", f"/users/{names['cy']}/server").status_code in (403, 404)
    assert ada.hub_api("DELETE", f"/users/{names['ed']}/server").status_code in (403, 404)
    assert users["cy"].server_running()
    assert ada.hub_api("DELETE", f"/users/{names['cy']}/server").status_code in (202, 204)
    deadline = time.monotonic() + 60
    while users["cy"].server_running() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not users["cy"].server_running()
    # ... and cannot open it: seeing is not reading
    users["cy"].start_server()
    assert ada.api.get(f"{hub['url']}/user/{names['cy']}/api/contents").status_code in (403, 404)


def page_config(response: requests.Response) -> dict:
    data = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', response.text, re.S)
    assert data, response.text[:300]
    return json.loads(data[1])


def test_students_see_the_student_tools_and_graders_the_instructor_tools(hub, users):
    bo = users["bo"]
    bo.server("GET", "/api/status")
    config = page_config(bo.session.get(f"{bo.server_url}/lab", allow_redirects=True))
    disabled = set(config.get("disabledExtensions", []))
    assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:course-list",
            "@jupyterlab/apputils-extension:announcements"} <= disabled
    assert "@jupyter/nbgrader:assignment-list" not in disabled
    service = Service(users["ada"], hub["a"])
    grader = page_config(users["ada"].api.get(f"{service.url}/lab"))
    assert "@jupyter/nbgrader:assignment-list" in grader.get("disabledExtensions", [])
    assert "@jupyter/nbgrader:formgrader" not in grader.get("disabledExtensions", [])
    # the grader's terminal has the course's Python on its PATH (not a login shell's PATH)
    shown = service.run_in_terminal("python -c 'import autograder, sys; print(\"AUTOGRADER\", sys.prefix)'")
    assert f"AUTOGRADER {hub['dir'] / 'env'}" in shown, shown


def test_s9_logins_are_throttled_and_served_over_https_only(hub, users):
    names = hub["names"]
    browser = session(hub["ca"])
    for _ in range(5):
        assert not try_login(browser, hub["url"], names["fy"], "wrong password")
    assert not try_login(browser, hub["url"], names["fy"], hub["password"])   # locked: even the right password
    assert try_login(_verified(hub), hub["url"], names["ed"], hub["password"])   # another user is not locked
    # the hub speaks TLS only: plain HTTP on its port gets no page, and a certificate nobody vouches for is refused
    with pytest.raises(requests.exceptions.ConnectionError):
        session().get(hub["url"].replace("https://", "http://") + "/hub/login", timeout=10)
    with pytest.raises(requests.exceptions.SSLError):
        session().get(f"{hub['url']}/hub/login", timeout=10, verify=True)


def _verified(hub) -> requests.Session:
    return session(hub["ca"])


def test_a_student_is_added_and_removed_while_the_hub_runs(hub, users):
    names, roster = hub["names"], json.loads(json.dumps(hub["roster"]))
    bo = users["bo"]
    bo.start_server()
    started = bo.hub_api("GET", f"/users/{names['bo']}").json()["servers"][""]["started"]
    roster["courses"][hub["a"]]["students"].append(names["gi"])
    roster["courses"][hub["b"]]["students"].remove(names["ed"])
    changed = hub["private"] / "roster-changed.json"
    changed.write_text(json.dumps(roster))
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "update", str(changed), "--dir", str(hub["dir"]),
                           "--create-users"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"added {names['gi']}" in done.stdout and f"removed {names['ed']}" in done.stdout
    gi = login(hub, "gi")
    gi.start_server()
    assert [a["assignment_id"] for a in gi.nbgrader("list", hub["a"])] == [ASSIGNMENT]
    assert not try_login(_verified(hub), hub["url"], names["ed"], hub["password"])
    # nobody else's server was touched
    assert bo.hub_api("GET", f"/users/{names['bo']}").json()["servers"][""]["started"] == started


def test_a_launch_link_from_the_book_opens_the_notebook(hub, users):
    # The student repository behind the book's launch links (the student versions in exercises/,
    # and a chapter page), served as GitHub serves one: git's smart protocol, which nbgitpuller's
    # shallow clone needs.
    work, git_root = hub["folder"] / "git-work", hub["folder"] / "git"
    (work / "exercises").mkdir(parents=True)
    student_version = exercise_helpers.released(exercise_helpers.read(ASSIGNMENT))
    nbformat.write(student_version, work / "exercises" / f"{ASSIGNMENT}.ipynb")
    shutil.copy(REPO / "book" / "05_attention_layer.md", work / "05_attention_layer.md")

    def git(*args, cwd=work):
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("-c", "user.name=course", "-c", "user.email=course@example.org", "commit", "-qm", "the exercises")
    git_root.mkdir()
    git("clone", "-q", "--bare", str(work), str(git_root / "student-exercises"), cwd=hub["folder"])
    subprocess.run(["chmod", "-R", "a+rX", str(git_root)], check=True)
    port = free_port()
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1", f"--port={port}",
                               f"--base-path={git_root}", str(git_root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline, "git daemon did not start"
            time.sleep(0.1)
        # The link the book builds (attention_course.book), for this hub and repository.
        settings = book.LaunchSettings(jupyterhub_url=hub["url"], branch="main",
                                       repository=f"git://127.0.0.1:{port}/student-exercises")
        links = dict(book.launch_links(ASSIGNMENT, settings))
        bo = users["bo"]
        if not bo.server_running():
            bo.start_server()
        landing = bo.session.get(links["launch in JupyterHub"], allow_redirects=True, timeout=60)
        assert landing.status_code == 200 and urlsplit(landing.url).path == f"/user/{bo.name}/git-pull"
        query = {key: values[0] for key, values in parse_qs(urlsplit(landing.url).query).items()}
        # what the page's script does next: pull (an event stream), then open the urlpath
        events = []
        with bo.session.get(f"{bo.server_url}/git-pull/api", stream=True, timeout=120,
                            params={"repo": query["repo"], "branch": query["branch"],
                                    "targetpath": query["targetpath"],
                                    "_xsrf": bo.session.cookies.get("_xsrf", path=f"/user/{bo.name}/")}) as stream:
            for line in stream.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    if events[-1].get("phase") in ("finished", "error"):
                        break
        assert events and events[-1]["phase"] == "finished", events[-3:]
        lab = bo.session.get(f"{bo.server_url}/{query['urlpath']}")
        assert lab.status_code == 200
        opened = bo.session.get(f"{bo.server_url}/api/contents/{query['urlpath'].removeprefix('lab/tree/')}",
                                params={"content": 1})
        assert opened.status_code == 200 and opened.json()["type"] == "notebook"
        title = exercise_helpers.read(ASSIGNMENT).cells[0].source.splitlines()[0]
        assert opened.json()["content"]["cells"][0]["source"].splitlines()[0] == title
        # A chapter page (MyST Markdown) opens as a notebook too (jupytext), not as text.
        page = bo.session.get(f"{bo.server_url}/api/contents/student-exercises/05_attention_layer.md",
                              params={"content": 1, "type": "notebook"})
        assert page.status_code == 200 and page.json()["type"] == "notebook"
        assert any(cell["cell_type"] == "code" for cell in page.json()["content"]["cells"])
    finally:
        daemon.kill()
        daemon.wait()




def test_an_idle_server_is_stopped(hub, users):
    fy = users["fy"]
    if not fy.server_running():
        fy.start_server()
    deadline = time.monotonic() + IDLE_TIMEOUT * 3 + 60
    while fy.server_running():
        assert time.monotonic() < deadline, f"fy's idle server ran past {IDLE_TIMEOUT} s idle and then some"
        time.sleep(5)


def test_backup_and_restore(hub, users):
    bo = users["bo"]
    bo.run_code("import os\nopen(os.path.expanduser('~/notes.txt'), 'w').write('my notes')\n")
    target = hub["folder"] / "backup"
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "backup", str(target), "--dir", str(hub["dir"])],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert oct(target.stat().st_mode & 0o777) == "0o700"
    # restored into another (stopped) hub's folder: the gradebook and bo's home as they were
    other = hub["folder"] / "restored"
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "restore", str(target), "--dir", str(other)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    gradebook = Path("courses") / hub["a"] / "gradebook.db"
    assert (other / gradebook).read_bytes() == (hub["dir"] / gradebook).read_bytes()
    assert (other / gradebook).stat().st_uid == (hub["dir"] / gradebook).stat().st_uid
    image = other / "images" / f"{hub['names']['bo']}.img"
    mount = other / "homes" / hub["names"]["bo"]
    subprocess.run(["mount", "-o", "loop,ro", str(image), str(mount)], check=True)
    try:
        assert (mount / "notes.txt").read_text() == "my notes"
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    # a second restore moves what it replaces aside, never deletes it
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "restore", str(target), "--dir", str(other)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "replaced" in done.stdout, done.stdout + done.stderr
    assert len(list(other.glob("replaced-*/courses"))) == 1
    # a running hub is not restored over
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "restore", str(target), "--dir", str(hub["dir"])],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is running" in done.stderr


def test_hub_errors_are_one_line(hub, tmp_path):
    roster = tmp_path / "roster.yml"
    roster.write_text("courses:\n  x-y:\n    instructors: [a]\n")
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "start", str(roster), "--dir",
                           str(tmp_path / "h"), "--authenticator", "dummy"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "stop", "--dir", str(tmp_path / "none")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no hub set up" in done.stderr
    # plain HTTP beyond the loopback: refused unless told (before anything is set up)
    (tmp_path / "password").write_text("secret")
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "start", str(hub["private"] / "roster.json"),
                           "--dir", "/var/tmp/never-made", "--ip", "0.0.0.0", "--authenticator", "dummy",
                           "--password-file", str(tmp_path / "password")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "plain HTTP" in done.stderr and "--ssl-cert" in done.stderr, done.stderr
    assert not Path("/var/tmp/never-made").exists()


@pytest.mark.parametrize("private", ["solutions", "tests", ".git"])
def test_hub_start_refuses_a_checkout_whose_secrets_every_user_can_read(hub, tmp_path, private):
    roster = tmp_path / "roster.yml"
    roster.write_text("courses:\n  x-y:\n    instructors: [nobody]\n")
    (tmp_path / "password").write_text("secret")
    source = hub["private"] / "source"   # private, so that only the checkout is at fault
    path = REPO / private
    nowhere = Path("/var/tmp") / f"attention-hub-never-{tmp_path.name}"   # not /tmp: the servers' /tmp is private
    mode = path.stat().st_mode
    os.chmod(path, (mode & 0o7777) | 0o004)
    try:
        done = subprocess.run([sys.executable, "-m", "autograder", "hub", "start", str(roster), "--dir",
                               str(nowhere), "--authenticator", "dummy", "--password-file",
                               str(tmp_path / "password"), "--source", str(source)],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    finally:
        os.chmod(path, mode & 0o7777)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{path} can be read by every user" in done.stderr and f"chmod o-rwx {path}" in done.stderr
    assert not nowhere.exists()   # refused before it set anything up


def test_hub_start_refuses_a_stray_copy_of_a_solution(hub):
    """A copy of a source notebook anywhere students can read (here /srv) is found by the leak
    scan that ``hub start`` runs as a student, and named."""
    stray = Path(tempfile.mkdtemp(prefix="old-course-", dir="/srv"))
    other = Path(tempfile.mkdtemp(prefix="attention-hub-refused-", dir="/var/tmp"))
    names = hub["names"]
    roster = hub["private"] / "roster-stray.json"   # a course of its own: the running hub's groups stay as they are
    roster.write_text(json.dumps({"courses": {f"c{names['bo'][2:]}": {"instructors": [names["ada"]],
                                                                      "students": [names["bo"]]}}}))
    try:
        os.chmod(other, 0o755)
        os.chmod(stray, 0o755)
        shutil.copy(hub["private"] / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", stray / "week3.ipynb")
        os.chmod(stray / "week3.ipynb", 0o644)
        done = subprocess.run([sys.executable, "-m", "autograder", "hub", "start", str(roster),
                               "--dir", str(other / "hub"), "--port", str(free_port()), "--authenticator", "dummy",
                               "--password-file", str(hub["private"] / "password"),
                               "--source", str(hub["private"] / "source")],
                              cwd=REPO, capture_output=True, text=True, timeout=600)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"{stray / 'week3.ipynb'}" in done.stderr and f"chmod o-rwx {stray}" in done.stderr, done.stderr
        assert not (other / "hub" / "jupyterhub.pid").exists()
        assert str(other) not in Path("/proc/mounts").read_text()
    finally:
        # the course's grader account and group that start made before its scan refused
        subprocess.run([sys.executable, "-m", "autograder", "hub", "stop", "--dir", str(other / "hub"),
                        "--remove-users"], cwd=REPO, capture_output=True, timeout=120)
        shutil.rmtree(stray, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


def test_a_check_on_submit_shows_the_student_where_she_stands_and_no_more(hub, users):
    """(Last of the module: it submits again, which would change what the tests above collect.)
    The submissions of the submission test were checked as they arrived: bo's has full marks, cy's
    says which test failed. A wrong answer that fails a hidden test only shows that test's
    reason, never its message (``PLANTED``). The rate refuses a third check in the hour, the due
    date refuses once the instructor says so (``hub update``), each with its reason; another
    course's student cannot open the page; and the checks agree with the instructor's batch."""
    total, forward = points(), points("test_forward")
    bo, cy = users["bo"], users["cy"]
    # Her JupyterLab has "Check my work" (the hub's own extension, in its page's federated extensions).
    lab = bo.api.get(f"{bo.server_url}/lab", timeout=60)
    assert lab.status_code == 200 and '"name": "attention-course-check"' in lab.text.replace('\\"', '"'), \
        re.findall(r"federated_extensions.{0,300}", lab.text)[:1]
    first = check_page(bo, hub)
    assert "<strong>checked</strong>" in first and f"Points: {total:g} of {total:g}" in first, first[-800:]
    # The folder cy forged under bo's name (the submission test) is not bo's check: the instructor's
    # log names it, and no page shows a folder of the hub's.
    log = (hub["dir"] / "courses" / hub["a"] / "logs" / "checks.log").read_text()
    assert "2099" not in first and "+forged" in log and hub["names"]["cy"] in log, log[-1000:]
    wrong = check_page(cy, hub)
    assert f"Points: {forward:g} of {total:g}" in wrong, wrong[-800:]   # the instructor's batch gave cy the same
    assert scores(users, hub) == expected_scores(hub)
    # A wrong answer that only the hidden checks can tell: the penalty off by 1% once N > 2.
    path = f"{hub['a']}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    notebook = answered(bo, path, None)
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "multi_weighted_sum_forward":
            cell["source"] = "".join(cell["source"]).replace(
                "return M, penalty,", "penalty = penalty * (1.01 if A.shape[0] > 2 else 1.0)\n    return M, penalty,")
    submit_again(bo, hub, notebook)
    page = check_page(bo, hub, newer_than=first)
    assert "a hidden test of this cell failed" in page and "failed" in page, page[-1500:]
    assert PLANTED not in page and "expected" not in page and "mismatch" not in page, page
    assert str(hub["dir"]) not in page
    secrets_ = [s for s in leakscan.course_secrets(hub["private"] / "source", REPO / "attention_course")
                if s.kind == "hidden test"]
    copy = hub["private"] / "check-page-bo.html"
    copy.write_text(page)
    assert leakscan.scan([copy], secrets_, kinds=("hidden test",)) == []
    # A third check within the hour: refused, with when the next is possible; it is not counted.
    submit_again(bo, hub, answered(bo, path, None))
    refused = check_page(bo, hub, until=("not checked",), newer_than=page)
    assert "you have had your 2 checks of this assignment in the last hour" in refused.lower(), refused[-800:]
    # The instructor stops checks at the due date (course A's is in the past): refused, with that reason.
    roster = json.loads((hub["private"] / "roster.json").read_text())
    roster["courses"][hub["a"]]["checks"]["default"]["until_due"] = True
    (hub["private"] / "roster.json").write_text(json.dumps(roster))
    hub_update(hub)
    submit_again(cy, hub, answered(cy, path, None))
    late = check_page(cy, hub, until=("not checked",), newer_than=wrong)
    assert "checks stopped at the due date" in late.lower(), late[-800:]
    roster["courses"][hub["a"]]["checks"]["default"].update(until_due=False, per_hour=20)
    (hub["private"] / "roster.json").write_text(json.dumps(roster))
    hub_update(hub)
    # A flood and a hostile notebook: cy hands in an answer that never returns (each call costs the
    # service's cell limit, 30 s), then three more at once; bo's check, handed in after them, is done
    # well within one cell limit, and cy's flood is one check running and one waiting.
    hostile = answered(cy, path, None)
    for cell in hostile["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "multi_weighted_sum_forward":
            cell["source"] = "".join(cell["source"]).replace(
                "return M, penalty,", "while True:\n        __import__('time').sleep(0.05)\n    return M, penalty,")
    submit_again(cy, hub, hostile)
    running = check_page(cy, hub, until=("being checked now",), newer_than=late, timeout=60)
    for _ in range(3):
        submit_again(cy, hub, hostile)
    submit_again(bo, hub, answered(bo, path, None))
    handed_in = time.monotonic()
    mine = check_page(bo, hub, newer_than=refused, timeout=60)
    waited = time.monotonic() - handed_in
    assert "<strong>checked</strong>" in mine and f"Points: {total:g} of {total:g}" in mine, mine[-800:]
    assert waited < 30, f"bo's check took {waited:.1f} s behind cy's hostile notebook"
    course_dir = hub["dir"] / "courses" / hub["a"]
    states = [row[0] for row in sqlite3.connect(course_dir / "checks" / "checks.sqlite").execute(
        "SELECT state FROM checks WHERE student = ? ORDER BY id", (hub["names"]["cy"],)).fetchall()][-4:]
    assert states[0] == checks.RUNNING and states[-1] == checks.QUEUED and \
        set(states[1:-1]) == {checks.SUPERSEDED}, (states, running[-300:])
    # A page is its student's: someone of another course (di, course B's instructor) is refused, and
    # no URL names another student.
    outsider = users["di"].session.get(f"{hub['url']}/services/checks-{hub['a']}/assignments/{ASSIGNMENT}", timeout=60)
    assert outsider.status_code == 403 or "not on this course" in outsider.text, \
        (outsider.status_code, outsider.url, re.sub(r"\s+", " ", re.sub(r"<script.*?</script>|<[^>]+>", " ", outsider.text, flags=re.S))[:1500])
    assert bo.session.get(f"{hub['url']}/services/checks-{hub['a']}/instructor/{ASSIGNMENT}",
                          timeout=60).status_code == 403
    overview = users["ada"].session.get(f"{hub['url']}/services/checks-{hub['a']}/instructor/{ASSIGNMENT}", timeout=60)
    assert overview.status_code == 200 and hub["names"]["bo"] in overview.text and hub["names"]["cy"] in overview.text
