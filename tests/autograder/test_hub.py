"""The course hub end to end: real OS users, two courses, one assignment from release to feedback.

``python -m autograder hub start`` starts JupyterHub on 127.0.0.1 (a free port) for a roster of
two courses whose users this test creates (names unique to the run); everything after that goes
through HTTP only, as a browser or a student's JupyterLab would: the hub's login form and REST
API, each user's Jupyter server (contents API, kernels over their websocket), nbgrader's
assignment endpoints, a course's grader service (an instructor's kernel there runs the course's
`python -m autograder` commands) and its formgrader API. The module's fixture stops the hub and
removes the users, groups and files it made, also when a test fails midway, and then checks
that nothing of the hub is left running.

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest

from autograder import hub as course_hub
from autograder import leakscan
from attention_course import book

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exercises"))
import exercise_helpers  # noqa: E402

from grader_helpers import solution_answers, student_version  # noqa: E402
from hub_client import HubUser, Service  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "ch3a_multi_query_penalty"
WRONG = "the penalty sends no gradient"   # a row of WRONG_ANSWERS

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the course hub starts servers as other users: needs root")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def leftovers(state: dict) -> list[str]:
    """What the hub left behind: its processes, users, groups."""
    left = [f"process {pid}" for pid in course_hub._hub_processes(state)]
    for name in state.get("created_users", []):
        try:
            pwd.getpwnam(name)
            left.append(f"user {name}")
        except KeyError:
            pass
    return left


@pytest.fixture(scope="module")
def searchable_checkout():
    """The hub's users import the course from this checkout, which ``hub start`` refuses to serve
    unless they can reach it, and unless they cannot reach its solutions. CI clones wherever it
    likes (a private temporary folder, root's home) with solutions/ readable by all: for this
    module's duration, the folders above the checkout that others cannot search get search
    permission (o+x: reach a known name, not list), solutions/ (and grading/, if there) lose the
    others' permissions, and all get their modes back after."""
    changed = {}
    for folder in [*reversed((REPO / "attention_course").resolve().parents)]:
        mode = folder.stat().st_mode
        if not mode & 0o001:
            changed[folder] = mode
            os.chmod(folder, (mode & 0o7777) | 0o001)
    for name in course_hub.PRIVATE_IN_CHECKOUT:
        folder = REPO / name
        if folder.exists() and folder.stat().st_mode & 0o007:
            changed[folder] = folder.stat().st_mode
            os.chmod(folder, folder.stat().st_mode & 0o7770)
    try:
        yield
    finally:
        for folder, mode in changed.items():
            os.chmod(folder, mode & 0o7777)


@pytest.fixture(scope="module")
def hub(searchable_checkout):
    tag = secrets.token_hex(3)
    names = {"ada": f"ada{tag}", "bo": f"bo{tag}", "cy": f"cy{tag}", "di": f"di{tag}", "ed": f"ed{tag}"}
    course_a, course_b = f"a{tag}", f"b{tag}"
    folder = Path(tempfile.mkdtemp(prefix="attention-hub-test-", dir="/tmp"))
    os.chmod(folder, 0o755)   # the hub's folder: users traverse it to their course's exchange
    private = folder / "instructor"
    (private / "source").mkdir(parents=True)
    os.chmod(private, 0o700)   # solutions and hidden tests: root only
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, private / "source" / ASSIGNMENT)
    roster = private / "roster.json"
    roster.write_text(json.dumps({"courses": {
        course_a: {"instructors": [names["ada"]], "students": [names["bo"], names["cy"]]},
        course_b: {"instructors": [names["di"]], "students": [names["ed"]]},
    }}))
    password = secrets.token_hex(12)
    (private / "password").write_text(password)
    hub_dir, port = folder / "hub", free_port()
    try:
        started = subprocess.run(
            [sys.executable, "-m", "autograder", "hub", "start", str(roster), "--dir", str(hub_dir), "--port", str(port),
             "--authenticator", "dummy", "--password-file", str(private / "password"), "--create-users",
             "--source", str(private / "source")],
            cwd=REPO, capture_output=True, text=True, timeout=300)
        assert started.returncode == 0, started.stderr + course_hub._tail(hub_dir / "logs" / "jupyterhub.log", 20)
        yield {"url": f"http://127.0.0.1:{port}", "password": password, "names": names, "a": course_a,
               "b": course_b, "dir": hub_dir, "private": private, "folder": folder}
    finally:
        stopped = subprocess.run([sys.executable, "-m", "autograder", "hub", "stop", "--dir", str(hub_dir),
                                  "--remove-users"], cwd=REPO, capture_output=True, text=True, timeout=120)
        state = course_hub._load(hub_dir / "state.json")
        left = leftovers(state) if state else []
        shutil.rmtree(folder, ignore_errors=True)
        assert stopped.returncode == 0, stopped.stderr
        assert not left, f"the hub left {left}"


@pytest.fixture(scope="module")
def users(hub):
    """Everyone logged in through the hub's login form, with a server started by the hub's API."""
    people = {}
    for key, name in hub["names"].items():
        person = HubUser(hub["url"], name, hub["password"])
        if key != "ada" and key != "di":
            person.start_server()
        people[key] = person
    return people


def instructor_runs(users, hub, course_key: str, *commands: list[str]) -> str:
    """The instructor of course A, in a kernel of the course's grader service, runs autograder commands."""
    service = Service(users["ada"], hub[course_key])
    code = ("import subprocess, sys\n"
            f"for args in {commands!r}:\n"
            "    done = subprocess.run([sys.executable, '-m', 'autograder', *args], capture_output=True, text=True)\n"
            "    print(done.stdout + done.stderr)\n"
            "    assert done.returncode == 0, (args, done.returncode)\n")
    return service.run_code(code)


def answered(person: HubUser, path: str, wrong: str | None) -> dict:
    """The fetched notebook with answers typed in: the solutions, or one of them replaced by a wrong answer."""
    notebook = student_version(nbformat.from_dict(person.get_notebook(path)),
                               solution_answers(exercise_helpers.read(ASSIGNMENT)))
    if wrong:
        function, body = next((f, b) for n, f, what, b in exercise_helpers.WRONG_ANSWERS
                              if n == ASSIGNMENT and what == wrong)
        notebook = exercise_helpers.with_body(notebook, function, body)
    return json.loads(nbformat.writes(notebook))


def points(prefix: str = "") -> float:
    """Points of the assignment's test cells whose grade id starts with ``prefix``, from its source."""
    return sum(float(cell.metadata.nbgrader.get("points", 0)) for cell in exercise_helpers.read(ASSIGNMENT).cells
               if cell.metadata.get("nbgrader", {}).get("grade") and
               cell.metadata.nbgrader.get("grade_id", "").startswith(prefix))


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
    probe = f"import os\ntry:\n    os.listdir({str(hub['dir'] / 'exchange' / course_a / 'outbound')!r})\n" \
            "    print('READ')\nexcept PermissionError:\n    print('DENIED')\n"
    assert ed.run_code(probe).strip() == "DENIED"
    assert users["bo"].run_code(probe).strip() == "READ"


def test_a_submission_goes_from_the_student_to_a_grade_and_back(hub, users):
    course_a, path = hub["a"], f"{hub['a']}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    for key, wrong in (("bo", None), ("cy", WRONG)):
        person = users[key]
        fetched = person.nbgrader("fetch", course_a, ASSIGNMENT)
        assert any(a["status"] == "fetched" and a["path"] == f"{course_a}/{ASSIGNMENT}" for a in fetched)
        person.put_notebook(path, answered(person, path, wrong))
        submitted = person.nbgrader("submit", course_a, ASSIGNMENT)
        assert any(a["status"] == "submitted" for a in submitted)

    output = instructor_runs(users, hub, "a", ["collect", ASSIGNMENT], ["autograde", ASSIGNMENT],
                             ["feedback", ASSIGNMENT], ["return-feedback", ASSIGNMENT])
    assert "imported" in output and "bubblewrap sandbox" in output and "returned the feedback" in output

    # The grades, as the formgrader shows them to the instructor.
    answer = users["ada"].api.get(f"{hub['url']}/services/{course_a}/formgrader/api/submissions/{ASSIGNMENT}")
    assert answer.status_code == 200, answer.text[:300]
    scores = {row["student"]: (row["score"], row["max_score"]) for row in answer.json()}
    total, forward = points(), points("test_forward")
    assert 0 < forward < total
    assert scores == {hub["names"]["bo"]: (total, total), hub["names"]["cy"]: (forward, total)}

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
        copy = hub["folder"] / f"feedback-{key}.html"
        copy.write_text(html)
        assert leakscan.scan([copy], secrets_, kinds=("hidden test",)) == []


def test_a_student_cannot_reach_what_is_not_theirs(hub, users):
    bo, course_a, names = users["bo"], hub["a"], hub["names"]
    # the course's formgrader (the grader service), with a token and through the browser's OAuth
    assert bo.api.get(f"{hub['url']}/services/{course_a}/formgrader").status_code == 403
    browser = bo.session.get(f"{hub['url']}/services/{course_a}/formgrader", allow_redirects=True)
    assert browser.status_code == 403 and "formgrader" not in browser.text.lower().split("</title>")[0]
    # ... and an instructor of another course is no instructor here
    assert users["di"].api.get(f"{hub['url']}/services/{course_a}/formgrader").status_code == 403
    # another student's server
    assert bo.api.get(f"{hub['url']}/user/{names['cy']}/api/contents").status_code in (403, 404)
    # another student's submission in the exchange, the instructor's files, another student's home
    places = [hub["dir"] / "exchange" / course_a / "inbound", hub["dir"] / "exchange" / course_a / "feedback",
              hub["dir"] / "courses" / course_a, Path(pwd.getpwnam(names["cy"]).pw_dir),
              Path(pwd.getpwnam(names["ada"]).pw_dir)]
    code = "import os\nfor place in %r:\n    try:\n        os.listdir(place)\n        print('READ', place)\n" \
           "    except PermissionError:\n        print('DENIED')\n" % [str(p) for p in places]
    assert bo.run_code(code).split() == ["DENIED"] * len(places)
    # the gradebook, and the solutions in the checkout the course's packages come from, by their names
    for secret in (hub["dir"] / "courses" / course_a / "gradebook.db",
                   REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"):
        assert "PermissionError" in bo.run_code(f"try:\n    open({str(secret)!r}, 'rb')\nexcept Exception as e:\n"
                                                "    print(type(e).__name__)\n"), secret


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


def test_hub_start_refuses_a_checkout_whose_solutions_every_user_can_read(hub, tmp_path):
    roster = tmp_path / "roster.yml"
    roster.write_text("courses:\n  x-y:\n    instructors: [nobody]\n")
    (tmp_path / "password").write_text("secret")
    source = hub["private"] / "source"   # private, so that only the checkout's solutions/ is at fault
    solutions = REPO / "solutions"
    mode = solutions.stat().st_mode
    os.chmod(solutions, (mode & 0o7777) | 0o005)
    try:
        done = subprocess.run([sys.executable, "-m", "autograder", "hub", "start", str(roster), "--dir",
                               str(tmp_path / "h"), "--authenticator", "dummy", "--password-file",
                               str(tmp_path / "password"), "--source", str(source)],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    finally:
        os.chmod(solutions, mode & 0o7777)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{solutions} can be read by every user" in done.stderr and f"chmod o-rwx {solutions}" in done.stderr
    assert not (tmp_path / "h").exists()   # refused before it set anything up
