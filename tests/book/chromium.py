"""Headless Chromium driven through the DevTools protocol over a pipe (no extra packages).

``Browser`` starts Chromium with ``--remote-debugging-pipe`` (commands on file descriptor 3,
replies and events on 4, each message a JSON object ended by a NUL byte) and every host name
unresolvable, so a page can only use what the built book serves itself. ``Browser.open(url)``
loads a page in a fresh tab of a fixed window size, waits for its load event, MathJax's
typesetting and the widget manager, and returns a ``Page`` that can evaluate JavaScript and
holds what the page logged: console errors, uncaught exceptions, failed requests.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--mute-audio",
         "--host-resolver-rules=MAP * ~NOTFOUND"]
# The same, but a server on this machine's loopback address answers (a test that serves the book).
LOCAL_FLAGS = [*FLAGS[:-1], "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]

# Resolves once the page has settled: the load event, MathJax's first typesetting (MathJax 3's
# startup promise), and then a quiet moment for the widget manager, which renders after load.
SETTLED = """
new Promise(resolve => {
  const finish = () => setTimeout(() => resolve(true), %d);
  const afterLoad = () => {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) { mj.startup.promise.then(finish, finish); }
    else { finish(); }
  };
  if (document.readyState === "complete") { afterLoad(); }
  else { window.addEventListener("load", afterLoad); }
})
"""


class ProtocolError(RuntimeError):
    """Chromium answered a command with an error, or stopped answering."""


@dataclass
class Page:
    """One loaded page: ``evaluate`` runs JavaScript in it; ``problems`` is what it logged."""

    browser: "Browser"
    session: str
    url: str
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)

    def evaluate(self, expression: str, timeout: float = 30.0):
        reply = self.browser.command("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                          "awaitPromise": True}, self.session, timeout)
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            raise ProtocolError(f"{self.url}: JavaScript failed: "
                                f"{details.get('exception', {}).get('description') or details.get('text')}")
        return reply["result"].get("value")

    @property
    def problems(self) -> list[str]:
        return ([f"console error: {text}" for text in self.console_errors]
                + [f"uncaught exception: {text}" for text in self.exceptions]
                + [f"failed request: {text}" for text in self.failed_requests])

    def close(self) -> None:
        self.browser.command("Target.closeTarget", {"targetId": self.browser.targets.pop(self.session)})


class Browser:
    """A headless Chromium; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 900, local_server: bool = False) -> None:
        if CHROMIUM is None:
            raise FileNotFoundError("chromium is not installed")
        self.width, self.height = width, height
        self._profile = tempfile.TemporaryDirectory()
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def wire_pipes():  # in the child: the protocol's descriptors 3 (in) and 4 (out)
            # Copies above 9 first, in case a pipe end already is descriptor 3 or 4; os.dup2
            # makes the targets inheritable, so they survive the exec.
            inbound = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD, 10)
            outbound = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD, 10)
            os.dup2(inbound, 3)
            os.dup2(outbound, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, *(LOCAL_FLAGS if local_server else FLAGS), "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes, close_fds=False)  # Python's own descriptors close on exec
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self.pages: dict[str, Page] = {}
        self.targets: dict[str, str] = {}

    # --- the protocol ---------------------------------------------------------------------

    def _send(self, method: str, params: dict | None, session: str | None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._from_browser], [], [], remaining)[0]:
                raise ProtocolError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ProtocolError("chromium closed the protocol pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _dispatch(self, message: dict) -> None:
        page = self.pages.get(message.get("sessionId"))
        if page is None:
            if "sessionId" not in message and "method" in message:  # the browser's own events
                self._events.append(message)
            return
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            texts = [str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])]
            page.console_errors.append(" ".join(texts)[:500])
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            page.exceptions.append(str(details.get("exception", {}).get("description")
                                       or details.get("text"))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            page.console_errors.append(f"{entry.get('text', '')} {entry.get('url', '')}".strip()[:500])
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            page.failed_requests.append(f"{params.get('errorText')} ({params.get('type')})")
        elif method == "Network.responseReceived":
            response = params.get("response", {})
            if response.get("status", 200) >= 400:
                page.failed_requests.append(f"HTTP {response['status']}: {response.get('url')}")
        else:
            self._events.append(message)

    def command(self, method: str, params: dict | None = None, session: str | None = None,
                timeout: float = 60.0) -> dict:
        """Send a command and return its result; events that arrive meanwhile are recorded."""
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise ProtocolError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._dispatch(message)

    def wait_for_event(self, method: str, session: str | None, timeout: float = 60.0,
                       where=None) -> dict:
        """The next event ``method`` of ``session`` (``None``: the browser's own), for which
        ``where(params)`` holds if given (one already received counts)."""
        deadline = time.monotonic() + timeout
        while True:
            for index, event in enumerate(self._events):
                if (event.get("method") == method and event.get("sessionId") == session
                        and (where is None or where(event.get("params", {})))):
                    return self._events.pop(index)
            self._dispatch(self._receive(deadline))

    # --- pages ----------------------------------------------------------------------------

    def open(self, url: str, settle_ms: int = 1500, timeout: float = 90.0) -> Page:
        """Load ``url`` in a new tab and wait until it has settled (see ``SETTLED``)."""
        target = self.command("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session, url)
        self.pages[session], self.targets[session] = page, target
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.command(f"{domain}.enable", {}, session)
        self.command("Emulation.setDeviceMetricsOverride",
                     {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
                     session)
        self._events.clear()
        self.command("Page.navigate", {"url": url}, session)
        self.wait_for_event("Page.loadEventFired", session, timeout)
        page.evaluate(SETTLED % settle_ms, timeout=timeout)
        return page

    def download(self, page: "Page", click: str, folder: Path, timeout: float = 60.0) -> Path:
        """Click what the JavaScript expression ``click`` clicks, on ``page``, and wait for the
        download it starts to finish; the file it wrote into ``folder``."""
        self.command("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder),
                                                     "eventsEnabled": True})
        page.evaluate(click)
        begun = self.wait_for_event("Browser.downloadWillBegin", None, timeout)["params"]
        self.wait_for_event("Browser.downloadProgress", None, timeout,
                            where=lambda p: p.get("guid") == begun["guid"] and p.get("state") == "completed")
        return Path(folder) / begun["suggestedFilename"]

    def close(self) -> None:
        try:
            self.command("Browser.close", timeout=10)
        except (ProtocolError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for descriptor in (self._to_browser, self._from_browser):
            try:
                os.close(descriptor)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
