"""The course hub as an LTI 1.3 tool: launches from a real platform (``lti_platform.py``, built on
``lti1p3platform``) on loopback, into a real hub (``hub start`` with a roster that has an ``lti``
block and a course mapped to the platform's context).

An instructor and two students launch from the LMS: each gets an account made on first launch
(closed: no password, home 0700), the course's hub group for the LMS role, a line in the course's
``lti/users.json``, and lands where the link says (the instructor in the formgrader, a student on
the assignment's notebook, or on the course's assignment list). Hostile launches (a wrong
signature, audience, deployment, an expired token, a replayed one, an unregistered issuer, a
context not in the roster, a Learner who calls herself the instructor, a user id with path
characters) are each refused with a page that says why, and make no account. The pure parts
(names, roles) are checked with hypothesis. Needs root, as test_hub.py does (whose helpers it uses).
"""

from __future__ import annotations

import base64
import grp
import html
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from autograder import hub as course_hub
from autograder import lti

from hub_client import HubUser, Service   # noqa: E402
from lti_platform import INSTRUCTOR, LEARNER, TEACHING_ASSISTANT, Platform   # noqa: E402
from test_hub import ASSIGNMENT, REPO, free_port, leftovers, searchable_checkout   # noqa: E402,F401

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the course hub starts servers as other users: needs root")
CLAIM = lti.CLAIM


# --- the pure parts -----------------------------------------------------------------------------------

@given(st.text(min_size=1, max_size=255), st.text(min_size=1, max_size=60))
def test_a_local_name_is_a_safe_unix_name_from_the_issuer_and_sub_only(sub, issuer):
    name = lti.local_name(issuer, sub)
    assert course_hub._unix_name(name.replace("lti-", "x", 1)) and len(name) <= 32
    assert name.startswith("lti-") and name == name.lower() and "/" not in name and "." not in name
    assert lti.local_name(issuer, sub) == name and lti.local_name(issuer, sub + "x") != name
    assert lti.local_name(issuer + "x", sub) != name
    assert not course_hub._unix_name(name)   # no roster name can be an LTI user's


@given(st.text(max_size=40))
def test_a_sub_with_path_characters_is_refused(text):
    sub = text + "/" if "/" not in text else text
    with pytest.raises(lti.LaunchRefused, match="characters"):
        lti.check_sub(sub)
    with pytest.raises(lti.LaunchRefused):
        lti.check_sub("../x")
    assert lti.check_sub("4dde05e8-ca19-73bc-ca9b-ffc1") and lti.check_sub("guid_123") and lti.check_sub("42")


@given(st.lists(st.sampled_from([LEARNER, INSTRUCTOR, TEACHING_ASSISTANT, "Learner", "Instructor", "Mentor",
                                 "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor",
                                 "http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"]), max_size=4))
def test_course_roles_come_from_the_context_roles_only(roles):
    role = lti.course_role(roles)
    instructor = {INSTRUCTOR, TEACHING_ASSISTANT, "Instructor"} & set(roles)
    learner = {LEARNER, "Learner"} & set(roles)
    assert role == ("instructor" if instructor else "student" if learner else None)


def _token(**claims) -> dict:
    token = {"sub": "42", CLAIM + "message_type": "LtiResourceLinkRequest", CLAIM + "version": "1.3.0",
             CLAIM + "deployment_id": "d1", CLAIM + "context": {"id": "ctx"}, CLAIM + "roles": [LEARNER],
             "name": "Bo", "email": "bo@example.edu"}
    return {**token, **claims}


def test_admit_names_what_does_not_fit(tmp_path):
    registration = lti.Registration("https://lms", ("tool",), ("d1",), "https://lms/a", "https://lms/j",
                                    "https://lms/t", tmp_path / "k.pem", {"ctx": "nlp101"})
    admitted = lti.admit(registration, _token(**{CLAIM + "custom": {"assignment": "ch3a"}}))
    assert admitted == {"name": lti.local_name("https://lms", "42"), "course": "nlp101", "role": "student",
                        "sub": "42", "assignment": "ch3a", "display_name": "Bo", "email": "bo@example.edu"}
    for claims, reason in (({CLAIM + "deployment_id": "d2"}, "deployment 'd2'"),
                           ({CLAIM + "context": {"id": "other"}}, "LMS course 'other'"),
                           ({CLAIM + "message_type": "LtiSubmissionReviewRequest"}, "deep linking requests only"),
                           ({CLAIM + "message_type": "LtiDeepLinkingRequest"}, "only the course's instructors"),
                           ({CLAIM + "roles": ["Mentor"]}, "neither Instructor"),
                           ({"sub": "../x"}, "characters")):
        with pytest.raises(lti.LaunchRefused, match=reason):
            lti.admit(registration, _token(**claims))
    # a deep linking request: an instructor's, with where to return and the LMS's data to send back
    settings = {"deep_link_return_url": "https://lms/dl/return", "accept_types": ["link", "ltiResourceLink"],
                "accept_multiple": True, "data": {"opaque": 1}}
    deep = {CLAIM + "message_type": "LtiDeepLinkingRequest", lti.DEEP_LINKING_SETTINGS: settings,
            CLAIM + "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"]}
    assert lti.admit(registration, _token(**deep))["deep_linking"] == {
        "return_url": "https://lms/dl/return", "data": {"opaque": 1}, "deployment_id": "d1", "accept_multiple": True,
        "title": ""}
    assert "deep_linking" not in admitted
    for changed, reason in (({"deep_link_return_url": "javascript:alert(1)"}, "not an http"),
                            ({"deep_link_return_url": None}, "not an http"),
                            ({"accept_types": ["link"]}, "does not take LTI resource links")):
        with pytest.raises(lti.LaunchRefused, match=reason):
            lti.admit(registration, _token(**{**deep, lti.DEEP_LINKING_SETTINGS: {**settings, **changed}}))
    with pytest.raises(lti.LaunchRefused, match="no deep_linking_settings"):
        lti.admit(registration, _token(**{**deep, lti.DEEP_LINKING_SETTINGS: None}))
    # the link's target names the assignment when no custom parameter does; a path is no assignment
    target = {CLAIM + "target_link_uri": "https://hub/hub/lti13/oauth_login?assignment=ch5_x"}
    assert lti.admit(registration, _token(**target))["assignment"] == "ch5_x"
    assert lti.admit(registration, _token(**{CLAIM + "custom": {"assignment": "../../etc"}}))["assignment"] is None
    assert lti.landing({**admitted, "role": "instructor"}) == "/services/nlp101/formgrader"
    assert lti.landing(admitted) == "/hub/user-redirect/attention/open?course=nlp101&assignment=ch3a"


# --- a real hub, launched into from a real platform ---------------------------------------------------------

class Recording(requests.Session):
    """A browser that remembers its cookies as they were when it posted the launch (the id_token
    and state) to the tool: what an attacker who copied all of it would send again."""

    def post(self, url, *args, **kwargs):
        if url.endswith("/hub/lti13/oauth_callback"):
            self.launch_cookies = self.cookies.copy()
            self.launch_form = kwargs.get("data")
        return super().post(url, *args, **kwargs)


@pytest.fixture(scope="module")
def lti_hub(searchable_checkout):
    if os.geteuid() != 0:
        pytest.skip("the course hub starts servers as other users: needs root")
    tag = secrets.token_hex(3)
    course, context = f"l{tag}", f"ctx-{tag}"
    folder = Path(tempfile.mkdtemp(prefix="attention-hub-lti-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    private = folder / "instructor"
    (private / "source").mkdir(parents=True)
    os.chmod(private, 0o700)
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, private / "source" / ASSIGNMENT)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    platform = Platform(client_id=f"tool-{tag}", deployment_id=f"dep-{tag}",
                        tool_login_url=f"{url}/hub/lti13/oauth_login", tool_redirect_url=f"{url}/hub/lti13/oauth_callback",
                        tool_jwks=f"{url}/hub/lti13/jwks").start()
    platform.add_context(context, "Attention 101")
    platform.add_context(f"ctx-other-{tag}", "Another course")
    roster = {
        "lti": {"issuer": platform.issuer, "client_id": platform.client_id, "deployment_ids": [platform.deployment_id],
                "authorize_url": platform.authorize_url, "jwks_url": platform.jwks_url,
                "token_url": platform.token_url, "key": "tool-key.pem"},
        "courses": {course: {"instructors": [], "students": [], "lti_context": context}},
        "limits": {"memory": "1G", "disk": "256M", "shm": "32M"},
        "idle_timeout": 3600,
    }
    (private / "roster.json").write_text(json.dumps(roster))
    hub_dir = folder / "hub"
    people = {key: {"sub": f"{key}-{tag}", "name": f"{key.title()} {tag}", "email": f"{key}{tag}@example.edu",
                    "roles": [INSTRUCTOR if key == "ada" else LEARNER]} for key in ("ada", "bo", "cy", "eve")}
    people["ta"] = {"sub": f"ta-{tag}", "name": "Tad", "email": "ta@example.edu", "roles": [TEACHING_ASSISTANT]}
    for person in people.values():
        platform.add_member(context, person)
    info = {"url": url, "course": course, "context": context, "platform": platform, "dir": hub_dir,
            "people": people, "tag": tag, "folder": folder}
    started = None
    try:
        started = subprocess.run(
            [sys.executable, "-m", "autograder", "hub", "start", str(private / "roster.json"), "--dir", str(hub_dir),
             "--port", str(port), "--source", str(private / "source")],
            cwd=REPO, capture_output=True, text=True, timeout=600)
        assert started.returncode == 0, started.stderr + course_hub._tail(hub_dir / "logs" / "jupyterhub.log", 20)
        info["printed"] = started.stdout
        yield info
    finally:
        stopped = subprocess.run([sys.executable, "-m", "autograder", "hub", "stop", "--dir", str(hub_dir),
                                  "--remove-users"], cwd=REPO, capture_output=True, text=True, timeout=180)
        state = course_hub._load(hub_dir / "state.json")
        left = leftovers(state, hub_dir) if state else []
        platform.stop()
        shutil.rmtree(folder, ignore_errors=True)
        assert stopped.returncode == 0, stopped.stderr
        assert not left, f"the hub left {left}"


def name_of(hub, key: str) -> str:
    return lti.local_name(hub["platform"].issuer, hub["people"][key]["sub"])


def launch(hub, key: str | dict, custom: dict | None = None, tamper: dict | None = None, context: str | None = None,
           session: requests.Session | None = None, target: str | None = None) -> tuple[requests.Session, requests.Response]:
    """The person's browser launches the course's link in the LMS; the browser and the last answer."""
    person = hub["people"][key] if isinstance(key, str) else key
    browser = session or requests.Session()
    answer = hub["platform"].launch(browser, person, context or hub["context"], "link-1",
                                    target or f"{hub['url']}/hub/lti13/oauth_login", custom=custom, tamper=tamper)
    return browser, answer


class LaunchedUser(HubUser):
    """A HubUser whose browser signed in by an LTI launch (no password)."""

    def __init__(self, hub_url: str, name: str, browser: requests.Session) -> None:
        self.hub_url, self.name, self.session = hub_url.rstrip("/"), name, browser
        self.token = self._new_token()
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"token {self.token}"


def admin(hub, method: str, path: str):
    return course_hub.hub_api(course_hub._load(hub["dir"] / "state.json"), method, path)


exists = course_hub._user_exists   # whether the machine has the account


def hub_users(hub) -> set[str]:
    return {user["name"] for user in admin(hub, "GET", "/users?limit=10000")}


def groups_of(hub, name: str) -> set[str]:
    return set(admin(hub, "GET", f"/users/{name}")["groups"])


@needs_root
def test_hub_start_prints_what_to_paste_into_the_lms(lti_hub):
    printed = lti_hub["printed"]
    for what in ("/hub/lti13/oauth_login", "/hub/lti13/oauth_callback", "/hub/lti13/jwks"):
        assert f"{lti_hub['url']}{what}" in printed
    jwks = requests.get(f"{lti_hub['url']}/hub/lti13/jwks", timeout=30).json()
    key = lti_hub["folder"] / "instructor" / "tool-key.pem"
    assert key.stat().st_mode & 0o777 == 0o600 and jwks == {"keys": [lti.public_jwk(key.read_text())]}
    assert "BEGIN" not in json.dumps(jwks)
    # no password login on an LTI hub
    form = requests.get(f"{lti_hub['url']}/hub/login", timeout=30)
    assert 'name="password"' not in form.text
    direct = requests.get(f"{lti_hub['url']}/hub/lti13/oauth_login", timeout=30)
    assert direct.status_code == 400 and "signs you in through your LMS" in html.unescape(direct.text)


@needs_root
def test_the_instructor_lands_in_the_formgrader_and_releases(lti_hub):
    hub, name = lti_hub, name_of(lti_hub, "ada")
    assert not exists(name)
    browser, answer = launch(hub, "ada")
    assert answer.status_code == 200, answer.text[:500]
    assert urlsplit(answer.url).path.startswith(f"/services/{hub['course']}/formgrader"), answer.url
    account = pwd.getpwnam(name)
    assert account.pw_dir == str(hub["dir"] / "homes" / name)
    shadow = next(line for line in Path("/etc/shadow").read_text().splitlines() if line.startswith(f"{name}:"))
    assert shadow.split(":")[1] in ("!", "!!", "*")   # locked: no password
    assert groups_of(hub, name) == {f"formgrade-{hub['course']}"}
    users = json.loads((hub["dir"] / "courses" / hub["course"] / "lti" / "users.json").read_text())
    assert users[name] == {"sub": hub["people"]["ada"]["sub"], "name": hub["people"]["ada"]["name"],
                           "email": hub["people"]["ada"]["email"]}
    users_file = hub["dir"] / "courses" / hub["course"] / "lti" / "users.json"
    assert users_file.stat().st_mode & 0o777 == 0o600
    assert users_file.stat().st_uid == pwd.getpwnam(f"grader-{hub['course']}").pw_uid
    # and what the grade push needs of the LMS: the context's line items and class list, as her launch named them
    services_file = users_file.with_name("services.json")
    services = json.loads(services_file.read_text())
    assert services["lineitems"].startswith(hub["platform"].issuer) and services["context_memberships_url"]
    assert services_file.stat().st_mode & 0o777 == 0o600 and services_file.stat().st_uid == users_file.stat().st_uid
    # the instructor's session works the course's grader service: release and publish the assignment
    ada = LaunchedUser(hub["url"], name, browser)
    code = ("import subprocess, sys\n"
            f"for args in [['release', {ASSIGNMENT!r}], ['publish', {ASSIGNMENT!r}]]:\n"
            "    done = subprocess.run([sys.executable, '-m', 'autograder', *args], capture_output=True, text=True)\n"
            "    print(done.stdout + done.stderr)\n"
            "    assert done.returncode == 0, args\n")
    assert f"published {ASSIGNMENT}" in Service(ada, hub["course"]).run_code(code)
    # a teaching assistant is an instructor of the course too
    _, answer = launch(hub, "ta")
    assert urlsplit(answer.url).path.startswith(f"/services/{hub['course']}/formgrader")
    assert groups_of(hub, name_of(hub, "ta")) == {f"formgrade-{hub['course']}"}


def _landed(hub, name: str, browser: requests.Session, answer: requests.Response) -> requests.Response:
    """The page a student's browser shows once her server is up (the hub's spawn page waits for it
    with a script; here: wait, then ask again)."""
    if urlsplit(answer.url).path.startswith(f"/hub/spawn-pending/{name}") or answer.url.endswith("/hub/home"):
        deadline = time.monotonic() + 240
        while not (admin(hub, "GET", f"/users/{name}")["servers"].get("") or {}).get("ready"):
            assert time.monotonic() < deadline, "the student's server did not start"
            time.sleep(1)
        query = parse_qs(urlsplit(answer.url).query)
        answer = browser.get(urljoin(answer.url, query["next"][0]) if "next" in query else answer.url, timeout=120)
    return answer


@needs_root
def test_students_land_on_the_assignment_the_link_names_or_the_course_list(lti_hub):
    hub = lti_hub
    bo_name, cy_name = name_of(hub, "bo"), name_of(hub, "cy")
    browser, answer = launch(hub, "bo", custom={"assignment": ASSIGNMENT})
    answer = _landed(hub, bo_name, browser, answer)
    assert answer.status_code == 200, (answer.url, answer.text[:300])
    notebook = f"{hub['course']}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    assert urlsplit(answer.url).path == f"/user/{bo_name}/lab/tree/{notebook}", answer.url
    bo = LaunchedUser(hub["url"], bo_name, browser)
    assert bo.get_notebook(notebook)["cells"]   # fetched into her server, opened
    assert groups_of(hub, bo_name) == {f"nbgrader-{hub['course']}"}
    home = hub["dir"] / "homes" / bo_name
    assert home.stat().st_mode & 0o777 == 0o700 and home.stat().st_uid == pwd.getpwnam(bo_name).pw_uid
    # a course link (no assignment): the course's assignment list, each a link that opens it
    browser, answer = launch(hub, "cy")
    answer = _landed(hub, cy_name, browser, answer)
    assert urlsplit(answer.url).path == f"/user/{cy_name}/attention/open", answer.url
    assert ASSIGNMENT in answer.text and f"assignment={ASSIGNMENT}" in answer.text
    users = json.loads((hub["dir"] / "courses" / hub["course"] / "lti" / "users.json").read_text())
    assert {bo_name, cy_name} <= set(users) and users[cy_name]["sub"] == hub["people"]["cy"]["sub"]
    # neither student may open the formgrader
    cy = LaunchedUser(hub["url"], cy_name, browser)
    assert cy.session.get(f"{hub['url']}/services/{hub['course']}/formgrader", allow_redirects=True,
                          timeout=60).status_code == 403
    # a second launch changes nothing but what the LMS says: same account, same groups
    _, again = launch(hub, "cy")
    assert groups_of(hub, cy_name) == {f"nbgrader-{hub['course']}"}
    assert list(users) == sorted(users) and len(json.loads(
        (hub["dir"] / "courses" / hub["course"] / "lti" / "users.json").read_text())) == len(users)


def test_the_lms_services_work_from_what_the_launches_recorded(lti_hub):
    """After the launches above, the instructor's ``lms`` commands (as root, beside the hub) reach the
    LMS with the tool's key, whose public half the platform fetched from the hub's JWKS URL: the
    class list matches everyone who launched, and a dry run of the grade push reads the LMS's line
    items (through a token the platform granted) and changes nothing."""
    hub = lti_hub
    course_dir = hub["dir"] / "courses" / hub["course"]
    command = [sys.executable, "-m", "autograder", "--course-dir", str(course_dir), "--course-id", hub["course"],
               "lms"]
    roster = ["--roster", str(hub["folder"] / "instructor" / "roster.json")]
    members = subprocess.run([*command, "members", *roster], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert members.returncode == 0, members.stderr
    launched = json.loads((course_dir / "lti" / "users.json").read_text())
    assert f"{len(hub['people'])} in the LMS course {hub['context']}" in members.stdout, members.stdout
    assert "in the roster, not in the LMS" not in members.stdout and \
        members.stdout.count("in the LMS, not in the roster") == len(hub["people"]) - len(launched), members.stdout
    pushed = subprocess.run([*command, "push", ASSIGNMENT, "--dry-run", *roster], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    # (nobody has handed anything in: the line item is all there is to make)
    assert f"line item '{ASSIGNMENT}'" in pushed.stdout and "would be created" in pushed.stdout, pushed.stdout
    assert hub["platform"].line_items(hub["context"]) == []   # a dry run makes nothing in the LMS


def _xsrf(page: str) -> str:
    return html.unescape(re.search(r'name="_xsrf" value="([^"]+)"', page).group(1))


@needs_root
def test_the_instructor_previews_and_pushes_grades_from_the_hubs_lms_page(lti_hub):
    """The hub's own page (``lms_page.py``, in the hub: the one process that may read the tool's key)
    lists the gradebook's assignments, each with Preview and Push to the LMS as plain forms; it runs
    no script. Preview changes nothing in the LMS; Push makes the line item, worth the gradebook's
    points; a post without the hub's xsrf token is refused."""
    from autograder import lms
    from autograder.course import Course
    from autograder.jupyterhub.lms_page import CSP

    hub = lti_hub
    url = f"{hub['url']}/hub/lms/{hub['course']}"
    assert url in hub["printed"]   # hub start says where it is
    browser, _ = launch(hub, "ada")
    home = browser.get(f"{hub['url']}/hub/home", timeout=60)   # and her home page links to it
    assert home.status_code == 200 and f'href="/hub/lms/{hub["course"]}"' in home.text
    page = browser.get(url, timeout=60)
    assert page.status_code == 200, page.text[:500]
    assert page.headers["Content-Security-Policy"] == CSP and "<script" not in page.text.lower()
    assert f"value='{ASSIGNMENT}'" in page.text and "Preview" in page.text and "Push to the LMS" in page.text
    form = {"assignment": ASSIGNMENT, "_xsrf": _xsrf(page.text)}
    forged = browser.post(url, data={"assignment": ASSIGNMENT, "action": "push"}, timeout=60)
    assert forged.status_code == 403 and hub["platform"].line_items(hub["context"]) == []
    preview = browser.post(url, data={**form, "action": "preview"}, timeout=120)
    shown = html.unescape(preview.text)
    assert preview.status_code == 200 and "Preview done: nothing was sent" in shown, shown[-1500:]
    assert f"line item '{ASSIGNMENT}'" in shown and "would be created" in shown and "<script" not in shown
    assert hub["platform"].line_items(hub["context"]) == []
    # the page sends the tool's token only where the hub's own record of the launches says, never where the
    # course's services.json (the grader account's, so its instructors' to write) would send it
    kept = hub["dir"] / "lti" / "services.json"
    assert kept.stat().st_uid == 0 and kept.stat().st_mode & 0o777 == 0o600
    theirs = hub["dir"] / "courses" / hub["course"] / "lti" / "services.json"
    recorded = theirs.read_text()
    try:
        theirs.write_text(json.dumps({**json.loads(recorded), "lineitems": "http://127.0.0.1:9/stolen",
                                      "context_memberships_url": "http://127.0.0.1:9/stolen"}))
        pushed = browser.post(url, data={**form, "action": "push"}, timeout=120)
        # (and so does `lms push` in a terminal, as root, on the hub's course)
        again = subprocess.run([sys.executable, "-m", "autograder", "--course-dir", str(theirs.parents[1]),
                                "--course-id", hub["course"], "lms", "push", ASSIGNMENT, "--dry-run", "--roster",
                                str(hub["folder"] / "instructor" / "roster.json")],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        theirs.write_text(recorded)
    assert again.returncode == 0 and "dry run: nothing to change" in again.stdout, again.stdout + again.stderr
    shown = html.unescape(pushed.text)
    assert pushed.status_code == 200 and "Done:" in shown and "created" in shown, shown[-1500:]
    course_dir = hub["dir"] / "courses" / hub["course"]
    maximum, _ = lms.records_of(Course(root=course_dir, source=course_dir, course_id=hub["course"]), ASSIGNMENT)
    items = hub["platform"].line_items(hub["context"])
    assert [(item["resourceId"], item["scoreMaximum"]) for item in items] == [(ASSIGNMENT, maximum)]
    # a name that is no assignment: one line that says so, nothing sent
    odd = browser.post(url, data={**form, "assignment": "<b>../x", "action": "push"}, timeout=60)
    assert odd.status_code == 200 and "Not done: bad assignment id" in html.unescape(odd.text)
    assert "<b>../x" not in odd.text and len(hub["platform"].line_items(hub["context"])) == 1


@needs_root
def test_one_push_of_a_course_at_a_time_from_its_lms_page(lti_hub):
    """A second click while a push of the course runs (the LMS slow to answer) says one is running."""
    from concurrent.futures import ThreadPoolExecutor

    hub = lti_hub
    url = f"{hub['url']}/hub/lms/{hub['course']}"
    browser, _ = launch(hub, "ada")
    form = {"assignment": ASSIGNMENT, "action": "preview", "_xsrf": _xsrf(browser.get(url, timeout=60).text)}
    hub["platform"].latency = 1.0
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(browser.post, url, data=form, timeout=120)
            time.sleep(0.5)
            second = browser.post(url, data=form, timeout=60)
            first = first.result()
    finally:
        hub["platform"].latency = 0.0
    assert second.status_code == 409 and "A push of this course's grades is running" in html.unescape(second.text)
    assert first.status_code == 200 and "Preview done" in html.unescape(first.text)
    again = browser.post(url, data=form, timeout=60)   # and once it is done, the next one runs
    assert again.status_code == 200 and "Preview done" in html.unescape(again.text)


@needs_root
def test_only_the_courses_instructors_open_its_lms_page(lti_hub):
    hub = lti_hub
    url = f"{hub['url']}/hub/lms/{hub['course']}"
    anonymous = requests.get(url, allow_redirects=False, timeout=60)
    assert anonymous.status_code == 302 and "/hub/login" in anonymous.headers["Location"]
    student, _ = launch(hub, "cy")
    assert student.get(url, timeout=60).status_code == 403
    home = student.get(f"{hub['url']}/hub/home", timeout=60)
    assert home.status_code == 200 and "/hub/lms/" not in home.text
    instructor, _ = launch(hub, "ada")
    assert instructor.get(f"{hub['url']}/hub/lms/nosuchcourse", timeout=60).status_code == 404


HOSTILE = [
    ("wrong signature", {"key": "other"}, "Signature verification failed"),
    ("wrong audience", {"aud": "someone-else"}, "not for this tool"),
    ("wrong deployment", {"deployment_id": "dep-unknown"}, "deployment 'dep-unknown'"),
    ("expired", {"exp": -120}, "expired"),
    ("unregistered issuer", {"issuer": "http://127.0.0.1:9/"}, "issuer"),
]


@needs_root
@pytest.mark.parametrize("what, tamper, reason", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_launch_is_refused_with_its_reason_and_makes_no_account(lti_hub, what, tamper, reason):
    hub = lti_hub
    person = {"sub": f"mallory-{secrets.token_hex(3)}", "name": "Mallory", "email": "m@example.edu", "roles": [LEARNER]}
    name = lti.local_name(hub["platform"].issuer, person["sub"])
    before = hub_users(hub)
    _, answer = launch(hub, person, tamper=tamper)
    assert answer.status_code in (400, 401, 403), (what, answer.status_code, answer.url)
    page = html.unescape(answer.text)
    assert reason.lower() in page.lower(), (what, page[-800:])
    assert "the launch from your lms was refused" in page.lower()
    assert not exists(name) and hub_users(hub) == before


@needs_root
def test_a_context_not_in_the_roster_is_refused(lti_hub):
    hub = lti_hub
    person = {"sub": f"zed-{hub['tag']}", "name": "Zed", "email": "z@example.edu", "roles": [LEARNER]}
    before = hub_users(hub)
    _, answer = launch(hub, person, context=f"ctx-other-{hub['tag']}")
    assert answer.status_code == 403 and "has no course on this hub" in answer.text
    assert not exists(lti.local_name(hub["platform"].issuer, person["sub"])) and hub_users(hub) == before


@needs_root
def test_a_replayed_launch_is_refused_even_with_its_cookies(lti_hub):
    hub = lti_hub
    person = {"sub": f"rex-{hub['tag']}", "name": "Rex", "email": "r@example.edu", "roles": [LEARNER]}
    # the platform's replay: the same id_token and state again, from the same browser
    _, answer = launch(hub, person, tamper={"replay": True})
    assert answer.status_code == 400 and "state missing" in answer.text
    # an attacker who copied the whole launch (the form and the browser's cookies) and sends it again
    browser = Recording()
    _, first = launch(hub, person, session=browser)
    assert first.status_code in (200, 302) or first.history
    thief = requests.Session()
    thief.cookies.update(browser.launch_cookies)
    again = thief.post(f"{hub['url']}/hub/lti13/oauth_callback", data=browser.launch_form, allow_redirects=False,
                       timeout=60)
    assert again.status_code == 403 and "used before" in again.text
    assert "jupyterhub-session-id" not in thief.cookies and not any(c.name.startswith("jupyterhub-hub-login")
                                                                     for c in thief.cookies)


@needs_root
def test_a_learner_claiming_the_instructors_name_stays_a_student_of_her_own(lti_hub):
    hub = lti_hub
    ada = name_of(hub, "ada")
    launch(hub, "ada")   # the instructor exists
    # Eve is a Learner; her name, email, preferred username and a custom "username" all say the
    # instructor's: she gets her own account, a student's.
    eve = {**hub["people"]["eve"], "name": ada, "email": hub["people"]["ada"]["email"], "preferred_username": ada}
    browser, answer = launch(hub, eve, custom={"username": ada, "user": "../x"})
    eve_name = name_of(hub, "eve")
    assert eve_name != ada and groups_of(hub, eve_name) == {f"nbgrader-{hub['course']}"}
    assert f"formgrade-{hub['course']}" in groups_of(hub, ada) and eve_name not in admin(
        hub, "GET", f"/groups/formgrade-{hub['course']}")["users"]
    assert not exists("x") and not exists("../x")
    # a user id with path characters: refused, no account
    before = hub_users(hub)
    _, answer = launch(hub, {"sub": "../x", "name": "x", "email": "x@example.edu", "roles": [LEARNER]})
    assert answer.status_code == 403 and "(sub) has characters" in answer.text
    assert not exists(lti.local_name(hub["platform"].issuer, "../x")) and hub_users(hub) == before


@needs_root
def test_hub_update_keeps_the_people_the_lms_launched(lti_hub, tmp_path):
    hub = lti_hub
    launch(hub, "bo")
    roster = hub["folder"] / "instructor" / "roster.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "update", str(roster), "--dir", str(hub["dir"])],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert name_of(hub, "bo") in hub_users(hub)
    assert groups_of(hub, name_of(hub, "bo")) == {f"nbgrader-{hub['course']}"}
    assert name_of(hub, "bo") in grp.getgrnam(course_hub.unix_group(hub["course"])).gr_mem   # the exchange's
    people = json.loads((hub["dir"] / "courses" / hub["course"] / "people.json").read_text())
    assert name_of(hub, "bo") in people["students"] and name_of(hub, "ada") in people["instructors"]


@needs_root
def test_a_deployment_added_by_hub_update_is_admitted_at_once(lti_hub):
    hub = lti_hub
    person = {"sub": f"dee-{hub['tag']}", "name": "Dee", "email": "d@example.edu", "roles": [LEARNER]}
    second = f"dep-2-{hub['tag']}"
    _, answer = launch(hub, person, tamper={"deployment_id": second})
    assert answer.status_code == 403 and not exists(lti.local_name(hub["platform"].issuer, person["sub"]))
    roster_file = hub["folder"] / "instructor" / "roster.json"
    roster = json.loads(roster_file.read_text())
    roster["lti"]["deployment_ids"].append(second)
    roster_file.write_text(json.dumps(roster))
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "update", str(roster_file), "--dir",
                           str(hub["dir"])], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _, answer = launch(hub, person, tamper={"deployment_id": second})
    assert answer.status_code == 200 and exists(lti.local_name(hub["platform"].issuer, person["sub"]))
    # a changed platform is refused by update (it needs a restart), in one line
    roster["lti"]["issuer"] = "https://lms.example.edu"
    roster_file.write_text(json.dumps(roster))
    done = subprocess.run([sys.executable, "-m", "autograder", "hub", "update", str(roster_file), "--dir",
                           str(hub["dir"])], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "hub stop" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    # and the hub's class list refuses to name anyone by the changed roster (names come from the issuer)
    from autograder.errors import GradingError
    from autograder.jupyterhub import lti_auth

    state = course_hub._load(hub["dir"] / "state.json")
    with pytest.raises(GradingError, match="another LMS"):
        lti_auth.class_list(state, hub["course"])
    # nor does the hub's push page send grades by it (what it runs: lms.push with the hub's registration)
    from autograder import lms
    from autograder.course import Course

    folder = hub["dir"] / "courses" / hub["course"]
    with pytest.raises(GradingError, match="another LMS"):
        lms.push(Course(root=folder, source=folder, course_id=hub["course"]), ASSIGNMENT, roster_file, dry_run=True,
                 echo=lambda line: None, started_with=lti.Registration.from_state(state["lti"]))
    roster["lti"]["issuer"] = hub["platform"].issuer
    roster_file.write_text(json.dumps(roster))


def test_the_hub_configuration_signs_in_through_the_lms_with_its_people(tmp_path, monkeypatch):
    """jupyterhub_config.py with an LTI registration in the state: the LTI authenticator, set from
    the registration, and the people earlier launches admitted in the courses' groups."""
    from traitlets.config.loader import PyFileConfigLoader

    from test_hub_roster import hub_config

    pam = hub_config(tmp_path, {"nlp101": {"instructors": ["ada"], "students": ["bo"]}})
    assert pam.JupyterHub.authenticator_class.endswith("ThrottledPAMAuthenticator")
    registration = lti.Registration("https://lms", ("tool-1", "tool-2"), ("d1",), "https://lms/auth",
                                    "https://lms/jwks", "https://lms/token", tmp_path / "k.pem", {"ctx": "nlp101"})
    state = json.loads((tmp_path / "state.json").read_text())
    (tmp_path / "state.json").write_text(json.dumps({**state, "lti": registration.as_state()}))
    (tmp_path / "lti").mkdir()
    (tmp_path / "lti" / "members.json").write_text(json.dumps(
        {"nlp101": {"instructors": ["lti-aaaa"], "students": ["lti-bbbb"]}}))
    monkeypatch.setenv("ATTENTION_HUB_STATE", str(tmp_path / "state.json"))
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(course_hub.HERE)).load_config()
    assert config.JupyterHub.authenticator_class == "autograder.jupyterhub.lti_auth.CourseLTIAuthenticator"
    assert config.LTI13Authenticator.issuer == "https://lms" and config.LTI13Authenticator.client_id == {"tool-1",
                                                                                                         "tool-2"}
    assert config.LTI13Authenticator.authorize_url == "https://lms/auth"
    assert config.LTI13Authenticator.jwks_endpoint == "https://lms/jwks"
    assert config.Authenticator.allowed_users == {"ada", "bo", "lti-aaaa", "lti-bbbb"}
    assert config.JupyterHub.load_groups["formgrade-nlp101"] == {"users": ["ada", "lti-aaaa"]}
    assert config.JupyterHub.load_groups["nbgrader-nlp101"] == {"users": ["bo", "lti-bbbb"]}
    assert lti.Registration.from_state(registration.as_state()) == registration


# --- a class launching at once ------------------------------------------------------------------------------

@needs_root
def test_a_batch_of_launches_makes_each_account_once_and_a_failure_stays_its_own(tmp_path):
    """``provision`` takes the launches that arrived together: each account made once (one
    student twice in the batch), each record file written once with all of them, and one launch
    whose account cannot be made (its course's group is gone) fails alone."""
    from autograder.jupyterhub import lti_auth

    tag = secrets.token_hex(3)
    course = f"b{tag}"
    group = course_hub.unix_group(course)
    subprocess.run(["groupadd", "--system", group], check=True)
    course_dir = tmp_path / "courses" / course
    course_dir.mkdir(parents=True)
    state = {"hub_dir": str(tmp_path), "courses": {course: {"grader": "root", "dir": str(course_dir)}}}
    lineitems = "https://lms.example/ctx/lineitems"

    def arrived(i: int, role: str = "student", of: str = course) -> tuple[dict, dict]:
        admitted = {"name": f"lti-t{tag}{i}", "course": of, "role": role, "display_name": f"Student {i}",
                    "email": f"s{i}@example.edu", "sub": f"sub-{i}"}
        claims = {"sub": f"sub-{i}", "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
            "lineitems": lineitems, "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/score"]}}
        return admitted, claims

    launches = [arrived(0), arrived(1), arrived(1), arrived(2, of=f"gone{tag}"), arrived(3, role="instructor")]
    names = [f"lti-t{tag}{i}" for i in range(4)]
    try:
        outcomes = lti_auth.provision(state, launches)
        assert [outcome is None for outcome in outcomes] == [True, True, True, False, True], outcomes
        assert "gone" in str(outcomes[3]) and not exists(names[2])
        made = [names[0], names[1], names[3]]
        assert all(exists(name) for name in made)
        assert set(grp.getgrnam(group).gr_mem) == set(made)
        users = json.loads((course_dir / "lti" / "users.json").read_text())
        assert {name: users[name]["sub"] for name in users} == {names[0]: "sub-0", names[1]: "sub-1",
                                                               names[3]: "sub-3"}
        people = json.loads((course_dir / course_hub.PEOPLE_FILE).read_text())
        assert people == {"instructors": [names[3]], "students": sorted([names[0], names[1]])}
        assert lti_auth.lti_members(tmp_path)[course] == people
        assert set(course_hub._load(tmp_path / "state.json")["created_users"]) == set(made)
        assert json.loads((tmp_path / "lti" / "services.json").read_text())[course]["lineitems"] == lineitems
        # the same launches again change nothing: no account twice, the same records
        assert lti_auth.provision(state, [launches[0], launches[4]]) == [None, None]
        assert json.loads((course_dir / "lti" / "users.json").read_text()) == users
    finally:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)


@needs_root
def test_a_class_launching_at_once_gets_its_accounts_and_lands(lti_hub):
    """Eight students of the LMS launch at the same moment (their first launch): each gets her own
    account in the course's group, her line in the records, and lands in her own server."""
    from concurrent.futures import ThreadPoolExecutor

    hub = lti_hub
    crowd = {f"k{i}": {"sub": f"k{i}-{hub['tag']}", "name": f"K {i}", "email": f"k{i}@example.edu",
                       "roles": [LEARNER]} for i in range(8)}
    for person in crowd.values():
        hub["platform"].add_member(hub["context"], person)
    names = {key: lti.local_name(hub["platform"].issuer, person["sub"]) for key, person in crowd.items()}
    assert not any(exists(name) for name in names.values())

    def one(key: str):
        browser, answer = launch(hub, crowd[key])
        return key, browser, _landed(hub, names[key], browser, answer)

    with ThreadPoolExecutor(len(crowd)) as pool:
        landed = list(pool.map(one, crowd))
    for key, _, answer in landed:
        assert answer.status_code == 200 and urlsplit(answer.url).path == f"/user/{names[key]}/attention/open", \
            (key, answer.status_code, answer.url)
    course_group = grp.getgrnam(course_hub.unix_group(hub["course"])).gr_mem
    assert all(exists(name) and name in course_group for name in names.values())
    users = json.loads((hub["dir"] / "courses" / hub["course"] / "lti" / "users.json").read_text())
    assert all(users[names[key]]["sub"] == crowd[key]["sub"] for key in crowd)
    people = json.loads((hub["dir"] / "courses" / hub["course"] / course_hub.PEOPLE_FILE).read_text())
    assert set(names.values()) <= set(people["students"])
    # each reached her own server (a server answers only under its own user's address), and the hub
    # gave no two of them one port (random_port alone once did, in a class's login)
    routed = dict(re.findall(r"Adding user (\S+) to proxy \S+ => https?://[^:\s]+:(\d+)",
                             (hub["dir"] / "logs" / "jupyterhub.log").read_text()))
    ports = [routed[name] for name in names.values()]
    assert len(set(ports)) == len(crowd), ports


@needs_root
def test_the_class_list_gives_each_student_her_account_before_her_first_launch(lti_hub):
    """An instructor's launch has the hub read the course's class list (NRPS) in the background; what
    it does (``lti_auth.sync_class``, run here as the hub runs it, against the real platform and the
    hub's API) makes each active Learner's account, hub user, groups and home, and leaves out a
    Mentor, a dropped student and a user id with path characters. Her first launch then finds it."""
    from autograder.jupyterhub import lti_auth

    hub = lti_hub
    launch(hub, "ada")
    log = hub["dir"] / "logs" / "jupyterhub.log"
    deadline = time.monotonic() + 90
    while f"the LMS's class list of {hub['course']}:" not in log.read_text():
        assert time.monotonic() < deadline, course_hub._tail(log, 30)
        time.sleep(0.5)
    tag = hub["tag"]
    joined = {key: {"sub": f"{key}-{tag}", "name": key.title(), "email": f"{key}@example.edu", "roles": [LEARNER]}
              for key in ("nia", "omar")}
    others = [{"sub": f"mentor-{tag}", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"]},
              {"sub": f"dropped-{tag}", "roles": [LEARNER], "status": "Inactive"},
              {"sub": "../y", "roles": [LEARNER]}]
    for person in [*joined.values(), *others]:
        hub["platform"].add_member(hub["context"], person)
    names = {key: lti.local_name(hub["platform"].issuer, person["sub"]) for key, person in joined.items()}
    assert not any(exists(name) for name in names.values())
    said = lti_auth.sync_class(course_hub._load(hub["dir"] / "state.json"), hub["course"])
    assert said.startswith(f"the LMS's class list of {hub['course']}:") and "2 accounts made" in said, said
    users = json.loads((hub["dir"] / "courses" / hub["course"] / "lti" / "users.json").read_text())
    for key, name in names.items():
        assert exists(name) and name in grp.getgrnam(course_hub.unix_group(hub["course"])).gr_mem
        assert groups_of(hub, name) == {f"nbgrader-{hub['course']}"}
        assert users[name] == {"sub": joined[key]["sub"], "name": joined[key]["name"], "email": joined[key]["email"]}
        home = hub["dir"] / "homes" / name
        assert os.path.ismount(home) and home.stat().st_uid == pwd.getpwnam(name).pw_uid
    for person in others:
        assert not exists(lti.local_name(hub["platform"].issuer, person["sub"]))
    # a second read changes nothing
    assert "0 accounts made" in lti_auth.sync_class(course_hub._load(hub["dir"] / "state.json"), hub["course"])
    # her first launch: the account was there, she lands in her server
    browser, answer = launch(hub, joined["nia"])
    answer = _landed(hub, names["nia"], browser, answer)
    assert answer.status_code == 200 and urlsplit(answer.url).path == f"/user/{names['nia']}/attention/open"


def test_a_launch_seen_before_a_restart_of_the_hub_is_refused_after_it(tmp_path):
    """The nonces of accepted launches outlive the hub's process (``lti/nonces.json``, root's): a
    launch copied before a restart is a replay after it; one older than an hour is forgotten."""
    pytest.importorskip("ltiauthenticator")
    from autograder.jupyterhub import lti_auth

    (tmp_path / "state.json").write_text(json.dumps({"hub_dir": str(tmp_path)}))

    def hub_process():
        return lti_auth.CourseLTIAuthenticator(state_path=str(tmp_path / "state.json"))

    first = hub_process()
    assert first._first_use("n-1") and not first._first_use("n-1")
    assert not first._first_use("") and not first._first_use(None) and not first._first_use(["n-2"])
    kept = lti_auth.nonces_file(tmp_path)
    assert kept.stat().st_mode & 0o777 == 0o600 and kept.parent.stat().st_mode & 0o777 == 0o700
    restarted = hub_process()
    assert not restarted._first_use("n-1")          # the replay, after the restart
    assert restarted._first_use("n-2")
    # an hour later the first is forgotten (no token that old is accepted anyway)
    kept.write_text(json.dumps({"n-1": time.time() - 1, "n-2": time.time() + 60}))
    later = hub_process()
    assert later._first_use("n-1") and not later._first_use("n-2")
    assert "n-1" in json.loads(kept.read_text())
    # a damaged file is no reason to refuse everyone: it starts afresh
    kept.write_text("[not json")
    assert hub_process()._first_use("n-3")


# --- deep linking: the instructor picks what a link opens ------------------------------------------------------

def _forms(page: str) -> list[dict]:
    """Each form of a page: its action and its hidden fields (single-quoted, as the hub writes them)."""
    found = []
    for match in re.finditer(r"<form([^>]*)>(.*?)</form>", page, re.S):
        action = re.search(r"action='([^']*)'", match.group(1))
        fields = {html.unescape(n): html.unescape(v)
                  for n, v in re.findall(r"<input type=['\"]hidden['\"] name=['\"]([^'\"]+)['\"] value=['\"]([^'\"]*)['\"]",
                                         match.group(2))}
        found.append({"action": html.unescape(action.group(1)) if action else None, "fields": fields,
                      "text": match.group(2)})
    return found


@needs_root
def test_an_instructor_deep_links_an_assignment_and_a_student_lands_on_it(lti_hub):
    """A deep linking request from the instructor: she is signed in, chooses the assignment on the
    hub's page (no script; hers alone; used once), the hub signs an LtiDeepLinkingResponse with the
    tool's key, her browser sends it to the platform, which checks it (signature by the hub's JWKS,
    audience, deployment, its own data back) and keeps the link: a resource link whose custom
    parameter names the assignment and whose line item is the one ``lms push`` writes. A student's
    launch from that link lands on the assignment."""
    hub = lti_hub
    launch(hub, "ada")   # (the module's earlier test released ASSIGNMENT: the gradebook has it)
    browser = requests.Session()
    picker = hub["platform"].launch(browser, hub["people"]["ada"], hub["context"], "link-dl",
                                    f"{hub['url']}/hub/lti13/oauth_login", deep_link=True)
    assert picker.status_code == 200 and "/hub/lti13/links/" in picker.url, (picker.status_code, picker.url, re.findall(r"<p>.*?</p>|error[^<]{0,300}", picker.text, re.S)[:5])
    policy = picker.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script" not in policy and "<script" not in picker.text
    choices = {form["fields"].get("assignment"): form for form in _forms(picker.text)}
    assert ASSIGNMENT in choices and "" in choices, picker.text[:800]   # and the course's assignment list
    # the choice is hers alone: the TA, another instructor of the course, is refused it
    ta_browser, _ = launch(hub, "ta")
    assert ta_browser.get(picker.url, timeout=60).status_code == 403
    answer = browser.post(picker.url, data=choices[ASSIGNMENT]["fields"], timeout=60)
    assert answer.status_code == 200, answer.text[:300]
    back = _forms(answer.text)[0]
    assert back["action"] == hub["platform"].deep_link_return_url and set(back["fields"]) == {"JWT"}
    assert browser.get(picker.url, timeout=60).status_code == 404          # used once
    # the platform checks the hub's signature: a response changed on the way is refused
    header, payload, signature = back["fields"]["JWT"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"][0]["custom"] = {"assignment": "ch9_other"}
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    assert browser.post(back["action"], data={"JWT": f"{header}.{forged}.{signature}"}, timeout=60).status_code == 400
    added = browser.post(back["action"], data=back["fields"], timeout=60)
    assert added.status_code == 200, added.text
    assert browser.post(back["action"], data=back["fields"], timeout=60).status_code == 400   # the platform: once
    context, item = hub["platform"].deep_links[-1]
    assert context == hub["context"] and item["type"] == "ltiResourceLink"
    assert item["custom"] == {"assignment": ASSIGNMENT} and item["url"] == f"{hub['url']}/hub/lti13/oauth_login"
    maximum = float(_gradebook_maximum(hub, ASSIGNMENT))
    assert item["lineItem"] == {"scoreMaximum": maximum, "label": ASSIGNMENT, "resourceId": ASSIGNMENT}
    # a student opens the link the LMS made of it: its custom parameter and target
    bo_name = name_of(hub, "bo")
    student, answer = launch(hub, "bo", custom=item["custom"], target=item["url"])
    answer = _landed(hub, bo_name, student, answer)
    assert urlsplit(answer.url).path == f"/user/{bo_name}/lab/tree/{hub['course']}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    # a Learner cannot add links
    refused = hub["platform"].launch(requests.Session(), hub["people"]["cy"], hub["context"], "link-dl",
                                     f"{hub['url']}/hub/lti13/oauth_login", deep_link=True)
    assert refused.status_code == 403 and "only the course's instructors" in html.unescape(refused.text)


def _gradebook_maximum(hub, assignment: str) -> float:
    from nbgrader.api import Gradebook

    course_dir = hub["dir"] / "courses" / hub["course"]
    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", hub["course"]) as gb:
        return gb.find_assignment(assignment).max_score
