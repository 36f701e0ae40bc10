"""The course hub's login when the roster has an ``lti`` block: LTI 1.3 launches from the LMS.

``jupyterhub-ltiauthenticator`` does the protocol: the OIDC login initiation
(``/hub/lti13/oauth_login``), the redirect to the platform, and on the way back
(``/hub/lti13/oauth_callback``) the id_token's signature (the platform's JWKS), issuer, audience
(and ``azp``), expiry and age, its nonce against the browser's cookie, the OAuth state, the LTI
version and message type. ``CourseLTIAuthenticator`` adds what a course hub needs besides
(``autograder/lti.py``'s ``admit``): the deployment must be one the roster registers, the LMS
course (context) one the roster maps to a course, the message a resource link launch; a nonce is
accepted once (a replayed launch is refused even with the cookies that went with it); the user's
name here derives from the LMS's stable user id only; the LMS role gives the course role.

A launch it accepts makes the account on first launch exactly as ``hub start --create-users``
makes a roster user's (no password, the hub's home of fixed size, mode 0700, its limits), adds it
to the course's Unix group, records the person in the course's ``lti/users.json`` (for grades
back to the LMS) and the hub's ``lti/members.json`` (``hub update`` keeps them), and puts the user
in the course's hub group for the role (``formgrade-<course>`` or ``nbgrader-<course>``), taken
out of the other: the LMS says at each launch. A refused launch makes nothing and shows a page
that says why. The tool's public keys are served at ``/hub/lti13/jwks``.

A class launching at once is provisioned in batches (``provision``): the launches that arrive
while one batch is made form the next, so that each record file is written once per batch. An
instructor's launch also has the hub read the course's class list from the LMS (NRPS) in the
background (``sync_class``) and make the accounts and homes of its people ahead of their first
launch, as ``hub start`` does for a roster's.
"""

from __future__ import annotations

import asyncio
import fcntl
import grp
import json
import os
import pwd
import threading
import time
from pathlib import Path

import jwt
from jupyterhub import orm
from jupyterhub.handlers import BaseHandler
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.error import InvalidAudienceError, TokenError, ValidationError
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler, LTI13LoginInitHandler
from ltiauthenticator.lti13.validator import LTI13LaunchValidator
from tornado import web
from traitlets import Unicode

from autograder import hub as course_hub
from autograder import lms, lti
from autograder.course import Course
from autograder.errors import GradingError
from autograder.jupyterhub import deep_link
from autograder.jupyterhub import limits as user_limits
from autograder.jupyterhub.lms_page import PATH as LMS_PAGE_PATH
from autograder.jupyterhub.lms_page import LmsPushHandler

REFUSED = "The launch from your LMS was refused"
_provision_lock = threading.Lock()


def hub_file(hub_dir: Path) -> Path:
    """The LTI people of each course, by role: ``{course: {"instructors": [...], "students": [...]}}``."""
    return Path(hub_dir) / "lti" / "members.json"


def nonces_file(hub_dir: Path) -> Path:
    """The nonces of the launches accepted in the last hour, each with when it may be forgotten."""
    return Path(hub_dir) / "lti" / "nonces.json"


def lti_members(hub_dir: Path) -> dict:
    try:
        return json.loads(hub_file(hub_dir).read_text())
    except (OSError, ValueError):
        return {}


def _place(people: dict, name: str, role: str, other: str) -> bool:
    """Put ``name`` among ``people[role]`` and out of ``people[other]``; whether that changed them."""
    if name in people.get(role, []) and name not in people.get(other, []):
        return False
    people[role] = sorted(set(people.get(role, [])) | {name})
    people[other] = sorted(set(people.get(other, [])) - {name})
    return True


def provision(state: dict, launches: list[tuple[dict, dict]]) -> list[BaseException | None]:
    """The accounts, the courses' Unix groups and the records of admitted launches (``(admitted,
    claims)`` each); idempotent, one batch at a time, safe beside ``hub update``. A class launching
    at once is one batch, or a few: each account made once, and each record file written once per
    batch, not once per student (each launch after the first waited for all before it). Returns
    each launch's failure, or None."""
    hub_dir = Path(state["hub_dir"])
    folder = hub_dir / "lti"
    folder.mkdir(mode=0o700, exist_ok=True)
    outcomes: list[BaseException | None] = []
    with _provision_lock, open(os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = []
        for admitted, _ in launches:   # the accounts: one at a time (useradd locks /etc/passwd)
            try:
                name, group = admitted["name"], course_hub.unix_group(admitted["course"])
                if course_hub._make_user(name, hub_dir, create=True, groups=(group,)):
                    made.append(name)
                elif name not in grp.getgrnam(group).gr_mem:
                    course_hub._run(["usermod", "--append", "--groups", group, name])
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - her launch fails with it, the others go on
                outcomes.append(exc)
        if made:
            course_hub._remember(hub_dir / "state.json", hub_dir, created_users=made)
        by_course: dict[str, list[int]] = {}
        for index, ((admitted, _), outcome) in enumerate(zip(launches, outcomes)):
            if outcome is None:
                by_course.setdefault(admitted["course"], []).append(index)
        members, changed = lti_members(hub_dir), False
        for course, indices in by_course.items():
            entry = members.setdefault(course, {"instructors": [], "students": []})
            for admitted, _ in (launches[i] for i in indices):
                changed = _place(entry, admitted["name"], *_roles(admitted)) or changed
        if changed:
            course_hub._write(hub_file(hub_dir), json.dumps(members, indent=1), 0o600)
        for course, indices in by_course.items():
            try:
                _course_records(state, hub_dir, course, [launches[i] for i in indices])
            except Exception as exc:  # noqa: BLE001 - this course's launches fail with it
                for i in indices:
                    outcomes[i] = exc
    return outcomes


def _roles(admitted: dict) -> tuple[str, str]:
    """Her role among a course's people, and the one she is to be out of."""
    return ("instructors", "students") if admitted["role"] == "instructor" else ("students", "instructors")


def _course_records(state: dict, hub_dir: Path, course: str, launches: list[tuple[dict, dict]]) -> None:
    spec = state["courses"][course]
    grader = pwd.getpwnam(spec["grader"])
    course_dir = Path(spec["dir"])
    users_dir = course_dir / "lti"
    users_dir.mkdir(mode=0o700, exist_ok=True)
    os.chown(users_dir, grader.pw_uid, grader.pw_gid)
    # who they are in the LMS and the context's grade and class-list services: what lms push reads
    lms.remember_launches(Course(root=course_dir, source=course_dir, course_id=course),
                          [(admitted["name"], {**claims, "name": admitted["display_name"], "email": admitted["email"]})
                           for admitted, claims in launches], owner=(grader.pw_uid, grader.pw_gid))
    os.chown(users_dir / ".lock", grader.pw_uid, grader.pw_gid)
    named = [services for services in (lms.launch_services(claims) for _, claims in launches)
             if services.get("lineitems")]
    kept = lms.hub_services(hub_dir)
    if named and kept.get(course) != named[-1]:   # the hub's own record (root's)
        course_hub._write(lms.hub_services_file(hub_dir), json.dumps({**kept, course: named[-1]}, indent=1), 0o600)
    # the check service's list of the course's people (hub.py's _course_settings), with them in it
    people_file = course_dir / course_hub.PEOPLE_FILE
    try:
        people = json.loads(people_file.read_text())
    except (OSError, ValueError):
        people = {"instructors": [], "students": []}
    changed = False
    for admitted, _ in launches:
        changed = _place(people, admitted["name"], *_roles(admitted)) or changed
    if changed:
        course_hub._write(people_file, json.dumps(people, indent=1), 0o600)
        os.chown(people_file, grader.pw_uid, grader.pw_gid)


SYNC_EVERY = 600   # seconds: an instructor's launch reads the course's class list at most this often


def class_list(state: dict, course: str) -> list[tuple[dict, dict]]:
    """The LMS's class list of ``course`` (Names and Role Provisioning Services, with the tool's key:
    root's, as the hub is), as the launches of its people would be admitted: ``(admitted, claims)``
    each, the active members with a course role only (a Mentor, someone dropped, an id with path
    characters: left out, as their launches would be refused)."""
    spec = state["courses"][course]
    folder = Path(spec["dir"])
    services = lms.hub_services(Path(state["hub_dir"])).get(course) or {}
    if not services.get("context_memberships_url"):
        raise GradingError(f"no launch into {course} has named the LMS's class list service (NRPS)")
    registration = lti.Registration.from_state(state["lti"])   # the hub's, which names its users
    connection = lms.connect(Course(root=folder, source=folder, course_id=course), Path(state["roster"]), services,
                             started_with=registration)
    launches = []
    for member in connection.members():
        role = lti.course_role(member.get("roles"))
        if member.get("status", "Active") != "Active" or role is None:
            continue
        try:
            sub = lti.check_sub(member.get("user_id"))
        except lti.LaunchRefused:
            continue
        admitted = {"name": lti.local_name(registration.issuer, sub), "course": course, "role": role,
                    "sub": sub, "assignment": None, "display_name": str(member.get("name") or ""),
                    "email": str(member.get("email") or "")}
        launches.append((admitted, {"sub": sub}))
    return launches


def sync_class(state: dict, course: str) -> str:
    """Make the accounts of the course's class list ahead of their first launch (as ``hub start``
    makes a roster's), and the hub's users and groups with them: a class's first launches then find
    their accounts, as PAM logins do. What it did, in one line."""
    launches = class_list(state, course)
    fresh = sorted({admitted["name"] for admitted, _ in launches if not course_hub._user_exists(admitted["name"])})
    outcomes = provision(state, launches)
    made = [name for name in fresh if course_hub._user_exists(name)]
    failed = {admitted["name"]: str(outcome) for (admitted, _), outcome in zip(launches, outcomes) if outcome is not None}
    course_hub.sync_people(state)
    # their homes too, as hub start mounts a roster's (a first server then makes no filesystem)
    course_hub.mount_homes({course: {"instructors": [], "students": made}}, Path(state["hub_dir"]),
                           user_limits.Limits(**state["limits"]))
    return (f"the LMS's class list of {course}: {len(launches)} with a course role, {len(made)} accounts made"
            + "".join(f"; {name} not made: {reason}" for name, reason in sorted(failed.items())[:5]))


_jwks_clients: dict[str, jwt.PyJWKClient] = {}


def jwks_client(url: str) -> jwt.PyJWKClient:
    """The LMS's public keys, kept for five minutes (a token whose key id is not among them fetches
    them again: the LMS rotated its keys). ltiauthenticator fetches them afresh for every launch,
    in the hub's event loop: with a class launching at once, each launch waited for all before it."""
    if url not in _jwks_clients:
        _jwks_clients[url] = jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=10)
    return _jwks_clients[url]


def kept_key(client: jwt.PyJWKClient, token: str) -> bool:
    """Whether the key that signed ``token`` (by its kid) is among the kept keys: then nothing is
    fetched, and the launch need not wait for a thread (a class's launches queue for the few the hub
    has, behind the servers' starts)."""
    kept = client.jwk_set_cache.get() if client.jwk_set_cache is not None else None
    if kept is None:
        return False
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError:
        return False
    return any(key.key_id == kid for key in kept.keys)


class KeptKeysValidator(LTI13LaunchValidator):
    """ltiauthenticator's validator, the signature checked with the kept keys (``jwks_client``);
    the rest of its checks as they are."""

    def verify_and_decode_jwt(self, encoded_jwt, issuer, audience, jwks_endpoint, jwks_algorithms, **kwargs):
        try:
            key = jwks_client(jwks_endpoint).get_signing_key_from_jwt(encoded_jwt).key
            return jwt.decode(encoded_jwt, key, algorithms=jwks_algorithms, audience=audience, issuer=issuer,
                              leeway=self.time_leeway)
        except jwt.InvalidAudienceError as exc:
            raise InvalidAudienceError(str(exc)) from None
        except jwt.PyJWTError as exc:
            raise TokenError(str(exc)) from None


class LoginInitHandler(LTI13LoginInitHandler):
    """ltiauthenticator's login initiation; opened without the LMS's parameters (someone who typed
    the hub's address, or the login page's button), a page saying where to sign in."""

    def post(self):
        if not self.get_argument("iss", "") and not self.get_argument("login_hint", ""):
            raise web.HTTPError(400, "This hub signs you in through your LMS: open the course (or the assignment) "
                                     "from the LMS's course page")
        return super().post()

    get = post


class LaunchCallbackHandler(LTI13CallbackHandler):
    """ltiauthenticator's callback, its refusals on a page that says why, and the landing the link names."""

    async def post(self):
        encoded = self.get_argument("id_token", "")
        client = jwks_client(self.authenticator.jwks_endpoint)
        if encoded and not kept_key(client, encoded):   # the LMS's keys fetched off the event loop
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, client.get_signing_key_from_jwt, encoded)
            except jwt.PyJWTError:
                pass   # said again, as the launch's reason, by the check below
        try:
            id_token = self.decode_and_validate_launch_request()
        except InvalidAudienceError as exc:
            raise web.HTTPError(401, f"{REFUSED}: the id_token is not for this tool ({exc})") from None
        except ValidationError as exc:
            raise web.HTTPError(400, f"{REFUSED}: {exc}") from None
        except web.HTTPError as exc:
            raise web.HTTPError(exc.status_code, f"{REFUSED}: {exc.log_message}") from None
        user = await self.login_user(id_token)
        if user is None:
            raise web.HTTPError(403, f"{REFUSED}: this hub does not admit you")
        admitted = self._lti_admitted
        self._set_course_groups(user, admitted["course"], admitted["role"])
        if admitted.get("deep_linking"):   # an instructor adding a link: the choice of what it opens
            self.redirect(f"{self.hub.base_url}lti13/links/{deep_link.remember(user.name, admitted)}")
            return
        self.redirect(lti.landing(admitted, self.base_url))

    def decode_and_validate_launch_request(self):
        """ltiauthenticator's checks in its order (``LTI13CallbackHandler``), with ``KeptKeysValidator``."""
        from ltiauthenticator.utils import convert_request_to_dict

        validator = KeptKeysValidator(parent=self.app)
        args = convert_request_to_dict(self.request.arguments)
        validator.validate_auth_response(args)
        self.check_state()
        id_token = validator.verify_and_decode_jwt(
            encoded_jwt=args.get("id_token"), issuer=self.authenticator.issuer, audience=self.authenticator.client_id,
            jwks_endpoint=self.authenticator.jwks_endpoint, jwks_algorithms=self.authenticator.jwks_algorithms)
        validator.validate_id_token(id_token)
        validator.validate_azp_claim(id_token, self.authenticator.client_id)
        self.check_nonce(id_token)
        return id_token

    def _set_course_groups(self, user, course: str, role: str) -> None:
        wanted, other = ((f"formgrade-{course}", f"nbgrader-{course}") if role == "instructor"
                         else (f"nbgrader-{course}", f"formgrade-{course}"))
        for name, member in ((wanted, True), (other, False)):
            group = orm.Group.find(self.db, name)
            if group is None:
                group = orm.Group(name=name)
                self.db.add(group)
            if member and user.orm_user not in group.users:
                group.users.append(user.orm_user)
            elif not member and user.orm_user in group.users:
                group.users.remove(user.orm_user)
        self.db.commit()


class JWKSHandler(BaseHandler):
    """The tool's public keys, for the LMS's Advantage services (grades back) to check its requests."""

    def check_xsrf_cookie(self):
        return

    async def get(self):
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(self.authenticator.registration.public_jwks()))


class CourseLTIAuthenticator(LTI13Authenticator):
    login_service = "your LMS"
    login_handler = LoginInitHandler
    callback_handler = LaunchCallbackHandler
    state_path = Unicode("", help="the hub's state.json: its LTI registration and courses").tag(config=True)

    _seen_nonces: dict | None = None
    _nonces_path: Path | None = None
    _waiting: list | None = None   # launches admitted, their accounts and records not yet made
    _provisioning: asyncio.Future | None = None
    _synced: dict | None = None   # course -> when an instructor's launch last had its class list read

    @property
    def registration(self) -> lti.Registration:
        """Read at each launch: ``hub update`` changes the deployments and courses (lti_context) at once."""
        return lti.Registration.from_state(self._state()["lti"])

    def _state(self) -> dict:
        return json.loads(Path(self.state_path).read_text())

    def jwks_url(self, base_url):
        return f"{base_url.rstrip('/')}/lti13/jwks"

    def get_handlers(self, app):
        # the instructors' "Push grades to the LMS" page: in the hub, the one process that may read the tool's key
        return [*super().get_handlers(app), (self.jwks_url(""), JWKSHandler), (LMS_PAGE_PATH, LmsPushHandler),
                (deep_link.PATH, deep_link.DeepLinkHandler)]

    async def _provisioned(self, admitted: dict, claims: dict) -> tuple[float, float, int]:
        """``provision`` for this launch, together with the launches that arrived while the batch
        before was made; the seconds it waited, the seconds its batch took, and the batch's size."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self._waiting is None:
            self._waiting = []
        self._waiting.append((admitted, claims, future, time.monotonic()))
        if self._provisioning is None or self._provisioning.done():
            self._provisioning = asyncio.ensure_future(self._provision_waiting())
        return await future

    async def _provision_waiting(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            batch, self._waiting = self._waiting, []
            started = time.monotonic()
            try:
                outcomes = await loop.run_in_executor(None, provision, self._state(),
                                                      [(admitted, claims) for admitted, claims, _, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every launch of the batch fails with it
                outcomes = [exc] * len(batch)
            took = time.monotonic() - started
            for (_, _, future, asked), outcome in zip(batch, outcomes):
                if future.done():   # her request was given up (the browser went away): made all the same
                    continue
                if outcome is None:
                    future.set_result((started - asked, took, len(batch)))
                else:
                    future.set_exception(outcome)

    def _sync_soon(self, course: str) -> None:
        """The course's class list read in the background after an instructor's launch (at most
        every ``SYNC_EVERY`` seconds): its students' accounts are there before their first launch."""
        now = time.monotonic()
        if self._synced is None:
            self._synced = {}
        if now - self._synced.get(course, -SYNC_EVERY) < SYNC_EVERY:
            return
        self._synced[course] = now

        def done(future: asyncio.Future) -> None:
            if future.exception() is not None:
                self.log.warning("the LMS's class list of %s was not read: %s", course,
                                 lms.lms_reason(future.exception()))
            else:
                self.log.info("%s", future.result())

        asyncio.get_running_loop().run_in_executor(None, sync_class, self._state(), course).add_done_callback(done)

    def _first_use(self, nonce) -> bool:
        """Whether ``nonce`` is seen for the first time (kept as long as a token may be accepted:
        an hour, beyond ltiauthenticator's ten minutes of age). Kept in ``<hub>/lti/nonces.json`` too
        (root's), so that a launch copied before a restart of the hub is refused after it."""
        now = time.time()
        if self._seen_nonces is None:   # (the hub's folder is fixed for its life: read once, with the file)
            self._nonces_path = nonces_file(Path(self._state()["hub_dir"]))
            try:
                kept = json.loads(self._nonces_path.read_text())
            except (OSError, ValueError):
                kept = {}
            self._seen_nonces = {n: float(until) for n, until in kept.items()
                                 if isinstance(n, str) and isinstance(until, (int, float))} if isinstance(kept, dict) else {}
        for old in [n for n, until in self._seen_nonces.items() if until < now]:
            del self._seen_nonces[old]
        if not isinstance(nonce, str) or not nonce or nonce in self._seen_nonces:
            return False
        self._seen_nonces[nonce] = now + 3600
        self._nonces_path.parent.mkdir(mode=0o700, exist_ok=True)
        course_hub._write(self._nonces_path, json.dumps(self._seen_nonces), 0o600)
        return True

    async def authenticate(self, handler, data=None):
        data = data or {}
        if not self._first_use(data.get("nonce")):
            self.log.warning("LTI launch refused: nonce %r used before", data.get("nonce"))
            raise web.HTTPError(403, f"{REFUSED}: it was used before (a replayed launch); open the link in the LMS "
                                     "again")
        try:
            admitted = lti.admit(self.registration, data)
        except lti.LaunchRefused as exc:
            self.log.warning("LTI launch refused (sub %r): %s", data.get("sub"), exc)
            raise web.HTTPError(403, f"{REFUSED}: {exc}") from None
        waited, took, batch = await self._provisioned(admitted, data)
        if admitted["role"] == "instructor":
            self._sync_soon(admitted["course"])
        if handler is not None:
            handler._lti_admitted = admitted
        self.log.info("LTI launch: %s (sub %r) as %s of %s (account and records: %.0f ms, %d launch(es) at once, "
                      "after %.0f ms waiting)", admitted["name"], admitted["sub"], admitted["role"], admitted["course"],
                      1000 * took, batch, 1000 * waited)
        return {"name": admitted["name"], "auth_state": {"lti": admitted}}

    def check_allowed(self, username, authentication=None):
        """An admitted launch is allowed (it was checked above); otherwise a roster's person or one the
        LMS launched before."""
        if authentication and (authentication.get("auth_state") or {}).get("lti", {}).get("name") == username:
            return True
        state = self._state()
        people = [state["courses"].values(), lti_members(state["hub_dir"]).values()]
        return any(username in course.get(role, []) for courses in people for course in courses
                   for role in ("instructors", "students"))
