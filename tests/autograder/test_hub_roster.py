"""The course hub's roster and the checks `hub start` makes before it changes anything on the machine."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from autograder import hub
from autograder.errors import GradingError


def roster(tmp_path, courses, suffix=".json"):
    path = tmp_path / f"roster{suffix}"
    path.write_text(json.dumps({"courses": courses}))
    return path


def test_a_roster_in_yaml_or_json(tmp_path):
    (tmp_path / "r.yml").write_text("courses:\n  nlp101:\n    instructors: [ada]\n    students: [bo, cy, bo]\n")
    assert hub.read_roster(tmp_path / "r.yml") == {"nlp101": {"instructors": ["ada"], "students": ["bo", "cy"]}}
    assert hub.read_roster(roster(tmp_path, {"x1": {"instructors": ["ada"]}})) == \
        {"x1": {"instructors": ["ada"], "students": []}}


@pytest.mark.parametrize("courses, fragment", [
    ({}, "needs a 'courses' mapping"),
    ({"nlp-101": {"instructors": ["ada"]}}, "use letters, digits and '_'"),
    ({"nlp101": {"students": ["bo"]}}, "has no instructor"),
    ({"nlp101": {"instructors": ["ada"], "students": ["ada"]}}, "both instructors and students"),
    ({"nlp101": {"instructors": ["Ada"]}}, "not a valid Unix user name"),
    ({"nlp101": {"instructors": ["ada; rm -rf /"]}}, "not a valid Unix user name"),
    ({"nlp101": {"instructors": ["grader-x"]}}, "not a valid Unix user name"),
    ({"nlp101": {"instructors": "ada"}}, "must be a list of user names"),
    ({"nlp101": ["ada"]}, "needs 'instructors' and 'students'"),
])
def test_a_bad_roster_is_named(tmp_path, courses, fragment):
    with pytest.raises(GradingError) as error:
        hub.read_roster(roster(tmp_path, courses))
    assert fragment in str(error.value)


def test_unreadable_or_malformed_rosters(tmp_path):
    with pytest.raises(GradingError, match="cannot read"):
        hub.read_roster(tmp_path / "missing.yml")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(GradingError, match="is not valid JSON"):
        hub.read_roster(tmp_path / "bad.json")


def test_start_refuses_before_touching_the_machine(tmp_path, monkeypatch):
    good = roster(tmp_path, {"nlp101": {"instructors": ["ada"]}})
    nowhere = Path("/var/tmp") / f"attention-hub-never-{tmp_path.name}"   # not /tmp: the servers' /tmp is private
    monkeypatch.setattr(hub.os, "geteuid", lambda: 1000)
    with pytest.raises(GradingError, match="as root"):
        hub.start(good, nowhere)
    monkeypatch.setattr(hub.os, "geteuid", lambda: 0)
    with pytest.raises(GradingError, match="needs a shared password"):
        hub.start(good, nowhere, authenticator="dummy")
    # solutions that every user of the machine can read would be the students' too
    public = Path(tempfile.mkdtemp(prefix="attention-public-", dir="/tmp"))
    try:
        public.chmod(0o755)
        with pytest.raises(GradingError, match="can be read by every user"):
            hub.start(good, nowhere, source=public)
    finally:
        shutil.rmtree(public)
    assert not (nowhere).exists()


def test_processes_of_a_hub_are_found_by_its_address_only():
    # no hub on this port: nothing of this machine is taken for the hub's
    assert hub._hub_processes({"hub_port": 1, "created_users": []}) == []


def hub_config(tmp_path, courses: dict):
    """JupyterHub's configuration as the hub loads it, for a state like `hub start` writes."""
    from traitlets.config.loader import PyFileConfigLoader

    (tmp_path / "admin-token").write_text("0" * 64)
    state = {"hub_dir": str(tmp_path), "ip": "127.0.0.1", "port": 8000, "hub_port": 8081, "proxy_api_port": 8001,
             "authenticator": "pam", "venv": "/opt/course", "ld_library_path": "", "repo": "/opt/repo",
             "python_path": str(tmp_path / "lib"), "admin_token_file": str(tmp_path / "admin-token"),
             "limits": hub.user_limits.Limits().as_dict(), "idle_timeout": 1200, "cgroups": {},
             "proxy": "/opt/chp", "exchange": str(tmp_path / "exchange"),
             "courses": {name: {**people, "grader": f"grader-{name}", "dir": str(tmp_path / name),
                                "service_port": 9000 + i, "check_port": 9100 + i} for i, (name, people) in enumerate(courses.items())}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    import os

    os.environ["ATTENTION_HUB_STATE"] = str(tmp_path / "state.json")
    try:
        return PyFileConfigLoader("jupyterhub_config.py", path=str(hub.HERE)).load_config()
    finally:
        del os.environ["ATTENTION_HUB_STATE"]


def test_the_hub_configuration_gives_each_course_its_own_people(tmp_path):
    config = hub_config(tmp_path, {"nlp101": {"instructors": ["ada"], "students": ["bo"]},
                                   "cv202": {"instructors": ["di"], "students": ["ed", "bo"]}})
    assert config.Authenticator.allowed_users == {"ada", "bo", "di", "ed"}
    assert config.JupyterHub.load_groups == {
        "nbgrader-nlp101": {"users": ["bo"]}, "formgrade-nlp101": {"users": ["ada"]},
        "nbgrader-cv202": {"users": ["ed", "bo"]}, "formgrade-cv202": {"users": ["di"]}}
    access = {role["name"]: (role.get("groups"), role["scopes"]) for role in config.JupyterHub.load_roles}
    # an instructor opens the course's grader service, and sees and stops (never opens) the servers
    # of the course's students on the admin page: every other scope is limited to that group
    for course in ("nlp101", "cv202"):
        groups, scopes = access[f"instructors-{course}"]
        assert groups == [f"formgrade-{course}"] and f"access:services!service={course}" in scopes
        assert f"servers!group=nbgrader-{course}" in scopes and "admin-ui" in scopes
        assert all(scope in ("admin-ui", f"access:services!service={course}",
                             f"access:services!service=checks-{course}") or
                   scope.endswith(f"!group=nbgrader-{course}") for scope in scopes), scopes
        assert not any(scope.startswith("access:servers") for scope in scopes)
        # the course's students open the course's check service, and nothing else
        assert access[f"students-{course}"] == ([f"nbgrader-{course}"], [f"access:services!service=checks-{course}"])
    services = {s["name"]: s for s in config.JupyterHub.services}
    assert services["nlp101"]["user"] == "grader-nlp101" and services["nlp101"]["cwd"] == str(tmp_path / "nlp101")
    assert services["nlp101"]["environment"]["AUTOGRADER_COURSE_ID"] == "nlp101"
    # autograder comes from the hub's lib/ (a link), not from a listing of the whole checkout
    assert services["nlp101"]["environment"]["PYTHONPATH"] == str(tmp_path / "lib")
    # a student's server: nbgrader's student side only, inside the limits, and a token that reads
    # only the user's own groups
    assert config.JupyterHub.spawner_class == "autograder.jupyterhub.spawner.CourseSpawner"
    assert config.Spawner.environment["JUPYTER_CONFIG_PATH"] == str(tmp_path / "etc" / "student")
    assert not any(scope.startswith(("admin", "read:users!", "list:")) or scope in ("read:users", "read:groups")
                   for scope in config.Spawner.server_token_scopes)


def test_idle_servers_are_culled_after_the_rosters_timeout(tmp_path):
    config = hub_config(tmp_path, {"nlp101": {"instructors": ["ada"], "students": ["bo"]}})
    culler = next(s for s in config.JupyterHub.services if s["name"] == "idle-culler")
    assert "--timeout=1200" in culler["command"] and culler["user"] == "nobody"
    # activity reaches the hub often enough for that timeout (a quarter of it at most)
    assert config.JupyterHub.last_activity_interval <= 300
    assert int(config.Spawner.environment["JUPYTERHUB_ACTIVITY_INTERVAL"]) <= 300
    role = next(r for r in config.JupyterHub.load_roles if r["name"] == "idle-culler")
    assert "delete:servers" in role["scopes"] and not any(s.startswith("admin") for s in role["scopes"])


def test_roster_options_limits_timeout_and_due_dates(tmp_path):
    (tmp_path / "r.yml").write_text("courses:\n  nlp101:\n    instructors: [ada]\n    students: [bo]\n"
                                    "    due: {ch3a_multi_query_penalty: '2025-03-07 17:00 UTC'}\n"
                                    "limits: {memory: 2G, cpu: 0.5, processes: 64, disk: 512M}\nidle_timeout: 900\n")
    options = hub.read_options(tmp_path / "r.yml")
    assert options["limits"].memory == 2 * 2**30 and options["limits"].cpu == 0.5
    assert options["limits"].processes == 64 and options["limits"].disk == 512 * 2**20
    assert options["limits"].shm == 64 * 2**20   # a default
    assert options["idle_timeout"] == 900 and options["due"] == {"nlp101": {"ch3a_multi_query_penalty": "2025-03-07 17:00 UTC"}}


@pytest.mark.parametrize("extra, fragment", [
    ("limits: {memory: lots}\n", "is not a size"),
    ("limits: {memory: 10M}\n", "at least 256M"),
    ("limits: {processes: 5}\n", "at least 32"),
    ("limits: {cpu: -1}\n", "positive number of CPUs"),
    ("limits: {swap: 1G}\n", "unknown key"),
    ("idle_timeout: 5\n", "at least 30"),
    ("colour: blue\n", "unknown key"),
])
def test_bad_roster_options_are_named(tmp_path, extra, fragment):
    (tmp_path / "r.yml").write_text("courses:\n  nlp101:\n    instructors: [ada]\n" + extra)
    with pytest.raises(GradingError) as error:
        hub.read_options(tmp_path / "r.yml")
    assert fragment in str(error.value)


def test_a_due_date_must_be_a_date(tmp_path):
    (tmp_path / "r.yml").write_text("courses:\n  nlp101:\n    instructors: [ada]\n    due: {a1: someday}\n")
    with pytest.raises(GradingError, match="is not a date"):
        hub.read_options(tmp_path / "r.yml")


def test_start_refuses_plain_http_beyond_the_loopback(tmp_path, monkeypatch):
    good = roster(tmp_path, {"nlp101": {"instructors": ["ada"]}})
    nowhere = Path("/var/tmp") / f"attention-hub-never-{tmp_path.name}"
    monkeypatch.setattr(hub.os, "geteuid", lambda: 0)
    with pytest.raises(GradingError, match="plain HTTP"):
        hub.start(good, nowhere, ip="0.0.0.0")
    with pytest.raises(GradingError, match="both --ssl-cert and --ssl-key"):
        hub.start(good, nowhere, ssl_cert=tmp_path / "c.pem")
    (tmp_path / "k.pem").write_text("key")
    (tmp_path / "c.pem").write_text("cert")
    (tmp_path / "k.pem").chmod(0o644)
    with pytest.raises(GradingError, match="chmod 600"):
        hub.start(good, nowhere, ssl_cert=tmp_path / "c.pem", ssl_key=tmp_path / "k.pem")
    with pytest.raises(GradingError, match="private /tmp"):
        hub.start(good, Path("/tmp/somewhere"))
    assert not (nowhere).exists()


def test_the_kubernetes_values_match_the_one_machine_hub(tmp_path):
    import yaml

    values = yaml.safe_load((hub.HERE / "z2jh" / "values.yaml").read_text())
    config = hub_config(tmp_path, {"nlp101": {"instructors": ["ada"], "students": ["bo", "cy"]}})
    assert values["hub"]["config"]["Spawner"]["server_token_scopes"] == config.Spawner.server_token_scopes
    role = values["hub"]["loadRoles"]["instructors-nlp101"]
    one_machine = next(r for r in config.JupyterHub.load_roles if r["name"] == "instructors-nlp101")
    # (less the check service: on Kubernetes the exchange is ngshare's, which it does not read yet)
    assert (role["groups"], role["scopes"]) == (
        one_machine["groups"], [s for s in one_machine["scopes"] if not s.startswith("access:services!service=checks-")])
    assert "JupyterHubAuthPlugin" in values["singleuser"]["extraFiles"]["nbgrader"]["stringData"]
    # the same hardening: limits, a home of its own size, the culler, HTTPS, the student tools only
    assert values["cull"]["enabled"] and values["singleuser"]["storage"]["capacity"]
    assert values["singleuser"]["memory"]["limit"] and values["singleuser"]["cpu"]["limit"]
    assert values["proxy"]["https"]["enabled"] and values["singleuser"]["allowPrivilegeEscalation"] is False
    disabled = values["singleuser"]["extraFiles"]["labconfig"]["data"]["disabledExtensions"]
    hub._etc(tmp_path)   # the one-machine hub's students' JupyterLab settings
    student = json.loads((tmp_path / "etc" / "student" / "labconfig" / "page_config.json").read_text())
    assert disabled == student["disabledExtensions"] and "@jupyter/nbgrader:formgrader" in disabled
    # the image holds what students may see: the package from its wheel, built from what it is
    # made of; never the solutions, the tests or the whole repository
    copied, installs = set(), []
    for line in (hub.HERE / "z2jh" / "Dockerfile").read_text().splitlines():
        if line.startswith(("COPY", "ADD")) and "--from=" not in line:
            copied |= {word for word in line.split()[1:-1] if not word.startswith("--")}
        installs += [line] if "pip install" in line else []
    assert copied == {"pyproject.toml", "README.md", "attention_course", "autograder"}
    assert any("attention_course-*.whl" in line for line in installs)
    assert "PYTHONPATH=/opt/course" not in (hub.HERE / "z2jh" / "Dockerfile").read_text()


def test_the_leak_scan_leaves_out_an_exchanges_unlistable_feedback_only(tmp_path):
    """Returned feedback (a student's own answers, under a name only they know) is not scanned, in
    this hub's exchange or another's; a feedback folder others may list, or one that is not an
    exchange's, is."""
    course = tmp_path / "exchange" / "course"
    (course / "inbound").mkdir(parents=True)
    feedback = course / "feedback"
    feedback.mkdir()
    (feedback / "0123abcd.html").write_text("a student's own answers")
    stray = tmp_path / "notes" / "feedback"
    stray.mkdir(parents=True)
    (stray / "week3.ipynb").write_text("{}")
    feedback.chmod(0o711)
    stray.chmod(0o711)
    files, _ = hub._git_dirs_and_files([tmp_path], set())
    assert str(stray / "week3.ipynb") in files and str(feedback / "0123abcd.html") not in files
    feedback.chmod(0o755)   # listable by everyone: scanned
    files, _ = hub._git_dirs_and_files([tmp_path], set())
    assert str(feedback / "0123abcd.html") in files
