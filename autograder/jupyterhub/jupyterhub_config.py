"""JupyterHub's configuration for a course hub on one machine (started by ``python -m autograder hub start``).

Everything that varies (the address, the ports, the courses and their people, the virtual
environment) comes from the ``state.json`` that ``hub start`` writes next to the hub's database
(its path in ``ATTENTION_HUB_STATE``); this file only says how a course hub is put together:

- real OS users log in (PAM; or, for tests, JupyterHub's dummy authenticator with one password),
  and each gets a Jupyter server started as themselves (``LocalProcessSpawner``) from the
  course's virtual environment;
- per course: a group of students ``nbgrader-<course>`` and of instructors ``formgrade-<course>``
  (the names nbgrader's JupyterHub plugin reads), and a hub service ``<course>``: a Jupyter server
  run as the course's grader account, holding the course directory and the formgrader, which only
  that course's instructors may open;
- a user's server token may read the user's own name and groups (nbgrader lists the courses a
  student is enrolled in from them) and nothing else.
"""

import json
import os
from pathlib import Path

c = get_config()  # noqa: F821 - JupyterHub's config loader provides it

state = json.loads(Path(os.environ["ATTENTION_HUB_STATE"]).read_text())
hub_dir = Path(state["hub_dir"])
venv_bin = Path(state["venv"]) / "bin"
courses = state["courses"]
path = f"{venv_bin}:/usr/local/bin:/usr/bin:/bin"
# A copied interpreter (hub.users_environment) finds its libpython here:
library_path = {"LD_LIBRARY_PATH": state["ld_library_path"]} if state.get("ld_library_path") else {}

# -- where it listens, and its own files -------------------------------------------------------------
c.JupyterHub.bind_url = f"http://{state['ip']}:{state['port']}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = state["hub_port"]
c.JupyterHub.db_url = f"sqlite:///{hub_dir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(hub_dir / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(hub_dir / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True   # stopping the hub stops every user's server
c.JupyterHub.cleanup_proxy = True
c.ConfigurableHTTPProxy.command = [state["proxy"]]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{state['proxy_api_port']}"
c.ConfigurableHTTPProxy.pid_file = str(hub_dir / "proxy.pid")
c.ConfigurableHTTPProxy.debug = False

# -- who logs in ---------------------------------------------------------------------------------
people = sorted({name for course in courses.values() for role in ("instructors", "students")
                 for name in course[role]})
if state["authenticator"] == "dummy":
    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = (hub_dir / "dummy-password").read_text()
else:
    c.JupyterHub.authenticator_class = "pam"
    c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = set(people)
c.Authenticator.admin_users = set()
c.Authenticator.manage_groups = False   # the groups come from the roster (load_groups) only

# -- each user's server --------------------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(venv_bin / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
c.Spawner.environment = {
    "PATH": path,
    "JUPYTER_CONFIG_PATH": str(hub_dir / "etc" / "student"),   # nbgrader's student side only
    "NBGRADER_EXCHANGE_ROOT": state["exchange"],
    "PYTHONNOUSERSITE": "1",
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
roles = []
services = []
for course, spec in courses.items():
    c.JupyterHub.load_groups[f"nbgrader-{course}"] = {"users": spec["students"]}
    c.JupyterHub.load_groups[f"formgrade-{course}"] = {"users": spec["instructors"]}
    roles.append({"name": f"instructors-{course}", "groups": [f"formgrade-{course}"],
                  "scopes": [f"access:services!service={course}"]})
    roles.append({"name": f"service-{course}", "services": [course],
                  "scopes": [f"read:users:name!group=nbgrader-{course}",
                             f"read:users:groups!group=nbgrader-{course}",
                             f"read:groups!group=nbgrader-{course}"]})
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
            "PYTHONPATH": state["python_path"],   # the autograder package (a link to it)
            **library_path,
            # `python -m autograder ...` in this server works on this course:
            "AUTOGRADER_COURSE_ID": course,
            "AUTOGRADER_COURSE_DIR": spec["dir"],
            "AUTOGRADER_SOURCE": str(Path(spec["dir"]) / "source"),
            "AUTOGRADER_EXCHANGE": state["exchange"],
        },
        "oauth_client_allowed_scopes": [f"access:services!service={course}"],
    })
c.JupyterHub.load_roles = roles
c.JupyterHub.services = services
