"""A client of a course hub that speaks only HTTP: what a browser, or a student's JupyterLab, calls.

``HubUser`` logs in through the hub's login form (with its XSRF cookie), asks the hub's REST API
for a token and a server, and then talks to that server: the contents API, kernels (execute
requests over the kernel's websocket), nbgrader's assignment endpoints. ``service`` talks to a
course's grader service the same way. Nothing here reads the hub's files.
"""

from __future__ import annotations

import json
import time
import uuid
import requests
import websocket


class HubError(AssertionError):
    pass


class KernelDied(HubError):
    """The kernel stopped while it ran the code (the kernel's nanny says restarting, or dead)."""


class HubUser:
    def __init__(self, hub_url: str, name: str, password: str, ca: str | None = None) -> None:
        self.hub_url = hub_url.rstrip("/")
        self.name = name
        self.session = session(ca)   # the browser: cookies, redirects
        self.login(password)
        self.token = self._new_token()
        self.api = session(ca)       # a script with the user's token
        self.api.headers["Authorization"] = f"token {self.token}"

    # -- the hub ---------------------------------------------------------------------------------
    def login(self, password: str) -> None:
        if not try_login(self.session, self.hub_url, self.name, password):
            raise HubError(f"{self.name} could not log in")

    def _hub_xsrf(self) -> dict:
        return {"X-XSRFToken": self.session.cookies.get("_xsrf", path="/hub/")}

    def _new_token(self) -> str:
        answer = self.session.post(f"{self.hub_url}/hub/api/users/{self.name}/tokens", headers=self._hub_xsrf(),
                                   json={"note": "end-to-end test", "expires_in": 3600})
        if answer.status_code != 201:
            raise HubError(f"{self.name}: no token: {answer.status_code} {answer.text[:200]}")
        return answer.json()["token"]

    def hub_api(self, method: str, path: str, **kwargs) -> requests.Response:
        return self.api.request(method, f"{self.hub_url}/hub/api{path}", **kwargs)

    def server_running(self) -> bool:
        server = (self.hub_api("GET", f"/users/{self.name}").json().get("servers") or {}).get("")
        return bool(server and server.get("ready"))

    def start_server(self, timeout: float = 180) -> None:
        answer = self.hub_api("POST", f"/users/{self.name}/server")
        if answer.status_code not in (201, 202, 400):   # 400: already running
            raise HubError(f"{self.name}: the hub did not start a server: {answer.status_code} {answer.text[:200]}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            model = self.hub_api("GET", f"/users/{self.name}").json()
            server = (model.get("servers") or {}).get("")
            if server and server.get("ready"):
                return
            time.sleep(0.5)
        raise HubError(f"{self.name}: the server was not ready within {timeout:.0f} s")

    # -- the user's server -------------------------------------------------------------------------
    @property
    def server_url(self) -> str:
        return f"{self.hub_url}/user/{self.name}"

    def server(self, method: str, path: str, **kwargs) -> requests.Response:
        if not self.server_running():   # stopped by the idle culler, say: a browser would start it again
            self.start_server()
        return self.api.request(method, f"{self.server_url}{path}", **kwargs)

    def get_notebook(self, path: str) -> dict:
        answer = self.server("GET", f"/api/contents/{path}", params={"content": 1, "type": "notebook"})
        if answer.status_code != 200:
            raise HubError(f"{self.name}: cannot open {path}: {answer.status_code} {answer.text[:200]}")
        return answer.json()["content"]

    def put_notebook(self, path: str, notebook: dict) -> None:
        answer = self.server("PUT", f"/api/contents/{path}", json={"type": "notebook", "format": "json",
                                                                  "content": notebook})
        if answer.status_code not in (200, 201):
            raise HubError(f"{self.name}: cannot save {path}: {answer.status_code} {answer.text[:200]}")

    def nbgrader(self, action: str, course: str, assignment: str | None = None):
        """nbgrader's assignment list extension: list (GET) or fetch / submit / fetch_feedback (POST)."""
        if action == "list":
            answer = self.server("GET", "/assignments", params={"course_id": course})
        else:
            answer = self.server("POST", f"/assignments/{action}",
                                 data={"course_id": course, "assignment_id": assignment})
        if answer.status_code != 200:
            raise HubError(f"{self.name}: nbgrader {action}: {answer.status_code} {answer.text[:300]}")
        result = answer.json()
        if not result.get("success"):
            raise HubError(f"{self.name}: nbgrader {action} failed: {str(result.get('value'))[-600:]}")
        return result["value"]

    def run_code(self, code: str, timeout: float = 600) -> str:
        if not self.server_running():   # stopped by the idle culler, say: a browser would start it again
            self.start_server()
        return run_in_kernel(self.api, self.server_url, code, timeout)

    def kernel(self) -> Kernel:
        """A kernel of the user's server kept open, to run several cells in (and time them)."""
        if not self.server_running():
            self.start_server()
        return Kernel(self.api, self.server_url)


def session(ca: str | None = None) -> requests.Session:
    """A requests session that trusts ``ca`` (and only it) when given. Not the environment's
    settings: requests lets REQUESTS_CA_BUNDLE override a session's own ``verify``."""
    made = requests.Session()
    if ca:
        made.verify, made.trust_env = ca, False
    return made


def try_login(session: requests.Session, hub_url: str, name: str, password: str) -> bool:
    """The hub's login form, as a browser fills it in; whether the hub let the user in."""
    form = session.get(f"{hub_url}/hub/login")
    form.raise_for_status()
    xsrf = session.cookies.get("_xsrf", path="/hub/")
    answer = session.post(f"{hub_url}/hub/login?next=", allow_redirects=False,
                          data={"username": name, "password": password, "_xsrf": xsrf})
    return answer.status_code == 302


class Service:
    """A course's grader service (a Jupyter server at /services/<course>/), with an instructor's token."""

    def __init__(self, instructor: HubUser, course: str) -> None:
        self.url = f"{instructor.hub_url}/services/{course}"
        self.api = instructor.api

    def run_code(self, code: str, timeout: float = 600) -> str:
        return run_in_kernel(self.api, self.url, code, timeout)

    def run_in_terminal(self, command: str, timeout: float = 60) -> str:
        return run_in_terminal(self.api, self.url, command, timeout)


def _ws_url(http_url: str) -> str:
    return "wss://" + http_url[len("https://"):] if http_url.startswith("https://") else \
        "ws://" + http_url[len("http://"):]


def _ws_options(api: requests.Session) -> dict:
    return {"sslopt": {"ca_certs": api.verify}} if isinstance(api.verify, str) else {}


def run_in_terminal(api: requests.Session, server_url: str, command: str, timeout: float) -> str:
    """Open a terminal on the server (as JupyterLab's Terminal does), type ``command`` into its
    shell and return what it printed up to a marker echoed after it."""
    answer = api.post(f"{server_url}/api/terminals")
    if answer.status_code != 200:
        raise HubError(f"no terminal at {server_url}: {answer.status_code} {answer.text[:200]}")
    name = answer.json()["name"]
    marker = uuid.uuid4().hex
    try:
        socket = websocket.create_connection(f"{_ws_url(server_url)}/terminals/websocket/{name}", timeout=timeout,
                                             header=[f"Authorization: {api.headers['Authorization']}"],
                                             **_ws_options(api))
        try:
            socket.send(json.dumps(["stdin", f"{command}; echo {marker[:16]}-{marker[16:]}\r"]))
            output, deadline = "", time.monotonic() + timeout
            while f"{marker[:16]}-{marker[16:]}" not in output.replace(f"echo {marker[:16]}-{marker[16:]}", ""):
                if time.monotonic() > deadline:
                    raise HubError(f"the terminal did not finish within {timeout:.0f} s: {output[-500:]}")
                message = json.loads(socket.recv())
                if message[0] == "stdout":
                    output += message[1]
            return output
        finally:
            socket.close()
    finally:
        api.delete(f"{server_url}/api/terminals/{name}")


class Kernel:
    def __init__(self, api: requests.Session, server_url: str) -> None:
        answer = api.post(f"{server_url}/api/kernels", json={"name": "python3"})
        if answer.status_code != 201:
            raise HubError(f"no kernel at {server_url}: {answer.status_code} {answer.text[:200]}")
        self.api, self.url = api, f"{server_url}/api/kernels/{answer.json()['id']}"
        self.socket = websocket.create_connection(_ws_url(self.url) + "/channels", timeout=600,
                                                  header=[f"Authorization: {api.headers['Authorization']}"],
                                                  **_ws_options(api))

    def run(self, code: str, timeout: float = 600) -> str:
        return _execute(self.socket, code, timeout)

    def close(self) -> None:
        self.socket.close()
        self.api.delete(self.url)


def run_in_kernel(api: requests.Session, server_url: str, code: str, timeout: float) -> str:
    """Start a kernel on the server, run ``code`` over the kernel's websocket, return its output
    (stdout and stderr); an error in the code raises, with its traceback's last lines."""
    answer = api.post(f"{server_url}/api/kernels", json={"name": "python3"})
    if answer.status_code != 201:
        raise HubError(f"no kernel at {server_url}: {answer.status_code} {answer.text[:200]}")
    kernel = answer.json()["id"]
    ws_url = _ws_url(server_url) + f"/api/kernels/{kernel}/channels"
    try:
        socket = websocket.create_connection(ws_url, header=[f"Authorization: {api.headers['Authorization']}"],
                                             timeout=timeout, **_ws_options(api))
        try:
            return _execute(socket, code, timeout)
        finally:
            socket.close()
    finally:
        api.delete(f"{server_url}/api/kernels/{kernel}")


def _execute(socket, code: str, timeout: float) -> str:
    msg_id = uuid.uuid4().hex
    socket.send(json.dumps({
        "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    output, error, replied, idle = [], None, False, False
    deadline = time.monotonic() + timeout
    while not (replied and idle):
        if time.monotonic() > deadline:
            raise HubError(f"the kernel did not finish within {timeout:.0f} s; output so far: {''.join(output)[-500:]}")
        message = json.loads(socket.recv())
        state = message.get("content", {}).get("execution_state")
        if message["header"]["msg_type"] == "status" and state in ("restarting", "dead"):
            raise KernelDied(f"the kernel died ({state}); output so far: {''.join(output)[-500:]}")
        if (message.get("parent_header") or {}).get("msg_id") != msg_id:
            continue
        kind = message["header"]["msg_type"]
        content = message["content"]
        if kind == "stream":
            output.append(content["text"])
        elif kind == "error":
            error = "\n".join(content.get("traceback", [])[-3:]) or f"{content['ename']}: {content['evalue']}"
        elif kind == "execute_reply":
            replied = True
        elif kind == "status" and content.get("execution_state") == "idle":
            idle = True
    if error is not None:
        raise HubError(f"the code failed: {error}\noutput: {''.join(output)[-1000:]}")
    return "".join(output)
