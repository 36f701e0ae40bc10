"""Login throttling for the course hub's authenticators (PAM; the dummy one of the tests).

After ``max_failures`` failed logins for one user name from one address within ``window``
seconds, that name is locked for that address (every further try refused unchecked, the right
password too) for ``lockout`` seconds, doubling with each further lock up to ``max_lockout``.
Keyed by name *and* address, so a classmate who types someone's name wrongly on purpose does not
lock the owner out from elsewhere; an address that fails for many names is locked as a whole.

Who may log in at all is read from the hub's state at each login (the roster's people), so that
``hub update`` adds and removes people while the hub runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from jupyterhub.auth import Authenticator, DummyAuthenticator, PAMAuthenticator
from traitlets import Float, Integer, Unicode


class Throttle:
    def __init__(self, max_failures: int, window: float, lockout: float, max_lockout: float,
                 max_failures_per_address: int) -> None:
        self.max_failures, self.window = max_failures, window
        self.lockout, self.max_lockout = lockout, max_lockout
        self.max_failures_per_address = max_failures_per_address
        self.failures: dict[tuple, list[float]] = {}
        self.locked: dict[tuple, tuple[float, int]] = {}   # key -> (until, how many locks so far)

    def _recent(self, key: tuple, now: float) -> list[float]:
        times = [t for t in self.failures.get(key, []) if now - t < self.window]
        self.failures[key] = times
        return times

    def refused(self, name: str, address: str, now: float | None = None) -> float:
        """Seconds left of a lock on (name, address) or on the address; 0 if none."""
        now = time.monotonic() if now is None else now
        left = [until - now for key in ((name, address), ("*", address))
                for until, _ in [self.locked.get(key, (0.0, 0))] if until > now]
        return max(left, default=0.0)

    def failed(self, name: str, address: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for key, limit in (((name, address), self.max_failures), (("*", address), self.max_failures_per_address)):
            self.failures.setdefault(key, []).append(now)
            if len(self._recent(key, now)) >= limit:
                _, count = self.locked.get(key, (0.0, 0))
                self.locked[key] = (now + min(self.lockout * 2 ** count, self.max_lockout), count + 1)
                self.failures[key] = []

    def succeeded(self, name: str, address: str) -> None:
        self.failures.pop((name, address), None)


class ThrottleMixin(Authenticator):
    max_failures = Integer(5, help="failed logins of one name from one address before a lock").tag(config=True)
    failure_window = Float(900.0, help="seconds in which the failures are counted").tag(config=True)
    lockout = Float(60.0, help="seconds of the first lock (doubling with each further one)").tag(config=True)
    max_lockout = Float(3600.0, help="the longest lock, seconds").tag(config=True)
    max_failures_per_address = Integer(50, help="failed logins of any names from one address before a lock "
                                                "of that address").tag(config=True)

    state_path = Unicode("", help="the hub's state.json: its courses' people may log in").tag(config=True)

    _throttle: Throttle | None = None

    def check_allowed(self, username, authentication=None):
        if not self.state_path:
            return super().check_allowed(username, authentication)
        courses = json.loads(Path(self.state_path).read_text())["courses"]
        return any(username in course[role] for course in courses.values() for role in ("instructors", "students"))

    @property
    def throttle(self) -> Throttle:
        if self._throttle is None:
            self._throttle = Throttle(self.max_failures, self.failure_window, self.lockout, self.max_lockout,
                                      self.max_failures_per_address)
        return self._throttle

    async def authenticate(self, handler, data):
        name = str((data or {}).get("username", "")).strip().lower()
        address = handler.request.remote_ip if handler is not None else ""
        left = self.throttle.refused(name, address)
        if left:
            self.log.warning("login refused for %r from %s: locked for %.0f s more after failed logins",
                             name, address, left)
            return None
        user = await super().authenticate(handler, data)
        if user:
            self.throttle.succeeded(name, address)
        else:
            self.throttle.failed(name, address)
        return user


class ThrottledPAMAuthenticator(ThrottleMixin, PAMAuthenticator):
    pass


class ThrottledDummyAuthenticator(ThrottleMixin, DummyAuthenticator):
    pass
