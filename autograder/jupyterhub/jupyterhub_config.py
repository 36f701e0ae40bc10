"""JupyterHub's configuration for a course hub on one machine (started by ``python -m autograder hub start``).

Everything that varies (the address, the ports, the courses and their people, the limits, the
virtual environment) comes from the ``state.json`` that ``hub start`` writes next to the hub's
database (its path in ``ATTENTION_HUB_STATE``); this file only says how a course hub is put
together:

- real OS users log in (PAM; or, for tests, JupyterHub's dummy authenticator with one password;
  or, when the roster has an ``lti`` block, LTI 1.3 launches from the LMS: ``lti_auth.py``),
  throttled (``auth.py``); who may log in is read from the state at each login, so that
  ``hub update`` adds and removes people without a restart;
- each gets a Jupyter server started as themselves inside their limits (``spawner.py``) from the
  course's users' environment; idle servers are stopped by ``jupyterhub-idle-culler``;
- per course: a group of students ``nbgrader-<course>`` and of instructors ``formgrade-<course>``
  (the names nbgrader's JupyterHub plugin reads), and a hub service ``<course>``: a Jupyter server
  run as the course's grader account, holding the course directory and the formgrader (with
  ``formgrader_guard.py``), which only that course's instructors may open; those instructors
  may also see and stop (never open) the servers of their course's students on the admin page;
  and a check service ``checks-<course>`` (``check_service.py``, also as the grader account): a
  student's submission checked at once, her page hers alone;
- a user's server token may read the user's own name and groups (nbgrader lists the courses a
  student is enrolled in from them) and nothing else.
"""

import json
import os
from pathlib import Path

from sqlalchemy import event as _event
from sqlalchemy.engine import Engine as _Engine

c = get_config()  # noqa: F821 - JupyterHub's config loader provides it

state_path = os.environ["ATTENTION_HUB_STATE"]
state = json.loads(Path(state_path).read_text())
hub_dir = Path(state["hub_dir"])
venv_bin = Path(state["venv"]) / "bin"
courses = state["courses"]
path = f"{venv_bin}:/usr/local/bin:/usr/bin:/bin"
# A copied interpreter (hub.users_environment) finds its libpython here:
library_path = {"LD_LIBRARY_PATH": state["ld_library_path"]} if state.get("ld_library_path") else {}
# How often activity reaches the hub: often enough for the idle timeout to be kept to within a quarter.
idle_timeout = state.get("idle_timeout", 3600)
activity_interval = max(10, min(300, idle_timeout // 4)) if idle_timeout else 300

# -- where it listens, and its own files -------------------------------------------------------------
c.JupyterHub.bind_url = f"http{'s' if state.get('ssl_cert') else ''}://{state['ip']}:{state['port']}"
if state.get("ssl_cert"):
    c.JupyterHub.ssl_cert = state["ssl_cert"]
    c.JupyterHub.ssl_key = state["ssl_key"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = state["hub_port"]
c.JupyterHub.db_url = f"sqlite:///{hub_dir / 'jupyterhub.sqlite'}"


def _write_ahead(connection, _record) -> None:
    """The hub's SQLite database with a write-ahead log, synced at checkpoints rather than at every
    commit. A class logging in at once is some hundreds of commits in the hub's one event loop, each
    a journal made, synced twice and deleted (with the 2 CPUs busy starting servers, the hub spent
    more than two fifths of its time in commits: py-spy, 30 LTI launches). A crash of the machine may
    lose the last commits (logins, activity), never the database; the roster and the accounts are
    not kept there."""
    if type(connection).__module__.startswith("sqlite3"):
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


_event.listen(_Engine, "connect", _write_ahead)
c.JupyterHub.cookie_secret_file = str(hub_dir / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(hub_dir / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True   # stopping the hub stops every user's server
c.JupyterHub.cleanup_proxy = True
c.JupyterHub.last_activity_interval = activity_interval
c.ConfigurableHTTPProxy.command = [state["proxy"]]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{state['proxy_api_port']}"
c.ConfigurableHTTPProxy.pid_file = str(hub_dir / "proxy.pid")
c.ConfigurableHTTPProxy.debug = False

# -- who logs in ---------------------------------------------------------------------------------
people = sorted({name for course in courses.values() for role in ("instructors", "students")
                 for name in course[role]})
lti_members = {}
if state.get("lti"):
    # The LMS signs people in (LTI 1.3, lti_auth.py): no passwords on this hub.
    from autograder.jupyterhub.lti_auth import lti_members as _read_lti_members

    lti_members = _read_lti_members(hub_dir)
    people = sorted(set(people) | {name for course in lti_members.values() for role in ("instructors", "students")
                                   for name in course.get(role, [])})
    c.JupyterHub.authenticator_class = "autograder.jupyterhub.lti_auth.CourseLTIAuthenticator"
    c.CourseLTIAuthenticator.state_path = state_path
    c.LTI13Authenticator.issuer = state["lti"]["issuer"]
    c.LTI13Authenticator.client_id = set(state["lti"]["client_ids"])
    c.LTI13Authenticator.authorize_url = state["lti"]["authorize_url"]
    c.LTI13Authenticator.jwks_endpoint = state["lti"]["jwks_url"]
    c.LTI13Authenticator.username_key = "sub"   # not used: lti.local_name derives the name from sub
    c.LTI13Authenticator.tool_name = "Attention, from scratch"
    # the home page links each LMS course's instructors to its "Push grades to the LMS" page (lms_page.py)
    from autograder.jupyterhub.lms_page import lms_courses

    c.JupyterHub.template_paths = [str(Path(state["python_path"]) / "autograder" / "jupyterhub" / "templates")]
    c.JupyterHub.template_vars = {"lms_courses": lms_courses(state_path)}
elif state["authenticator"] == "dummy":
    c.JupyterHub.authenticator_class = "autograder.jupyterhub.auth.ThrottledDummyAuthenticator"
    c.DummyAuthenticator.password = (hub_dir / "dummy-password").read_text()
else:
    c.JupyterHub.authenticator_class = "autograder.jupyterhub.auth.ThrottledPAMAuthenticator"
    c.PAMAuthenticator.open_sessions = False
if not state.get("lti"):
    c.ThrottleMixin.state_path = state_path
c.Authenticator.allowed_users = set(people)
c.Authenticator.admin_users = set()
c.Authenticator.manage_groups = False   # the groups come from the roster (load_groups, hub update) only

# -- each user's server --------------------------------------------------------------------------
c.JupyterHub.spawner_class = "autograder.jupyterhub.spawner.CourseSpawner"
c.CourseSpawner.state_path = state_path
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 300   # a class logging in at once on a small machine: slow, not failed
c.Spawner.http_timeout = 300
c.Spawner.environment = {
    "PATH": path,
    "JUPYTER_CONFIG_PATH": str(hub_dir / "etc" / "student"),   # nbgrader's student side only
    "JUPYTER_PATH": str(hub_dir / "share" / "jupyter"),   # "Check my work" (labextension/)
    # the server's private /tmp (limits.py): kernels' sockets (a short path, as unix sockets need)
    "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime",
    "NBGRADER_EXCHANGE_ROOT": state["exchange"],
    "PYTHONNOUSERSITE": "1",
    "JUPYTERHUB_ACTIVITY_INTERVAL": str(activity_interval),
    **library_path,
}
c.Spawner.server_token_scopes = [
    "users:activity!user",
    "access:servers!user",
    "read:users:name!user",     # nbgrader's assignment list asks the hub for the user's groups
    "read:users:groups!user",
]

# -- the courses: groups, the grader service, and who may open it --------------------------------
c.JupyterHub.load_groups = {}
roles = [
    # `hub update` and `hub stop` talk to the hub with this service's token (root's file)
    {"name": "course-admin", "services": ["course-admin"],
     "scopes": ["admin:users", "admin:groups", "admin:servers", "list:users", "list:groups"]},
]
services = [{"name": "course-admin", "api_token": Path(state["admin_token_file"]).read_text().strip()}]
for course, spec in courses.items():
    students = f"nbgrader-{course}"
    from_lms = lti_members.get(course, {})
    c.JupyterHub.load_groups[students] = {"users": list(dict.fromkeys([*spec["students"],
                                                                      *from_lms.get("students", [])]))}
    c.JupyterHub.load_groups[f"formgrade-{course}"] = {"users": list(dict.fromkeys([*spec["instructors"],
                                                                                   *from_lms.get("instructors", [])]))}
    checker = f"checks-{course}"
    roles.append({"name": f"students-{course}", "groups": [students],
                  "scopes": [f"access:services!service={checker}"]})
    roles.append({"name": f"instructors-{course}", "groups": [f"formgrade-{course}"],
                  "scopes": [f"access:services!service={course}", f"access:services!service={checker}",
                             # the admin page, with this course's students only: see and stop their servers
                             "admin-ui", f"list:users!group={students}", f"read:users!group={students}",
                             f"read:servers!group={students}", f"servers!group={students}",
                             f"read:groups!group={students}"]})
    roles.append({"name": f"service-{course}", "services": [course],
                  "scopes": [f"read:users:name!group={students}",
                             f"read:users:groups!group={students}",
                             f"read:groups!group={students}"]})
    services.append({
        "name": course,
        "url": f"http://127.0.0.1:{spec['service_port']}",
        "user": spec["grader"],
        "cwd": spec["dir"],
        "command": [str(venv_bin / "jupyterhub-singleuser"), f"--ServerApp.root_dir={spec['dir']}"],
        "environment": {
            "PATH": path,
            "HOME": spec["dir"],
            "JUPYTER_CONFIG_PATH": str(hub_dir / "etc" / "grader"),
            "JUPYTERHUB_DEFAULT_URL": "/lab",
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": state["python_path"],   # the autograder package (the hub's copy of it)
            **library_path,
            # `python -m autograder ...` in this server works on this course:
            "AUTOGRADER_COURSE_ID": course,
            "AUTOGRADER_COURSE_DIR": spec["dir"],
            "AUTOGRADER_SOURCE": str(Path(spec["dir"]) / "source"),
            "AUTOGRADER_EXCHANGE": state["exchange"],
        },
        "oauth_client_allowed_scopes": [f"access:services!service={course}"],
        # The hub's own service asking only who she is: an instructor launched from the LMS lands in
        # the formgrader, not on an "Authorize access" page first.
        "oauth_no_confirm": True,
    })
    # Check on submit (checks.py): the course's queue of checks, run as its grader account, each
    # student's page hers alone (check_service.py); the course's students and instructors may open it.
    services.append({
        "name": checker,
        "url": f"http://127.0.0.1:{spec['check_port']}",
        "user": spec["grader"],
        "cwd": spec["dir"],
        "command": [str(venv_bin / "python"), "-m", "autograder.jupyterhub.check_service"],
        "environment": {
            "PATH": path,
            "HOME": spec["dir"],
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": state["python_path"],
            **library_path,
            "AUTOGRADER_COURSE_ID": course,
            "AUTOGRADER_COURSE_DIR": spec["dir"],
            "AUTOGRADER_SOURCE": str(Path(spec["dir"]) / "source"),
            "AUTOGRADER_EXCHANGE": state["exchange"],
            **{name: os.environ[name] for name in ("OPENBLAS_CORETYPE",) if name in os.environ},
        },
        "oauth_client_allowed_scopes": [f"access:services!service={checker}"],
        # The hub's own service asking only to know who she is: no "Authorize access" page between
        # her Check my work button and her check (it opens in a frame beside her notebook).
        "oauth_no_confirm": True,
    })

# -- idle servers are stopped ---------------------------------------------------------------------
if idle_timeout:
    roles.append({"name": "idle-culler", "services": ["idle-culler"],
                  "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]})
    services.append({
        "name": "idle-culler",
        "user": "nobody",
        "cwd": "/",
        "command": [str(venv_bin / "python"), "-m", "jupyterhub_idle_culler", f"--timeout={idle_timeout}",
                    f"--cull-every={max(10, min(300, idle_timeout // 4))}",
                    f"--url=http://127.0.0.1:{state['hub_port']}/hub/api"],
        "environment": {"PATH": path, "HOME": "/", **library_path},
    })
c.JupyterHub.load_roles = roles
c.JupyterHub.services = services
