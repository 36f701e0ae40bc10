"""A real LTI 1.3 platform (the LMS's side) on loopback, for the tests of the course hub as a tool.

Built on ``lti1p3platform`` (the platform's registration and keys, the OIDC launch message and
its signature, the OAuth2 access tokens of LTI Advantage and their validation, the AGS and NRPS
service handlers) and served by ``http.server`` in a background thread on 127.0.0.1. Line
items, scores and memberships are kept in memory, but every request is checked as a platform
checks it: the tool's signed client assertion at the token endpoint (its key from the tool's
JWKS, audience the token URL, a fresh ``jti``), only the registered scopes granted, a bearer
token of this platform with the scope each operation needs, the media type of every body.

    platform = Platform(client_id="tool-1", deployment_id="d1",
                        tool_login_url="http://127.0.0.1:8000/hub/lti13/oauth_login",
                        tool_redirect_url="http://127.0.0.1:8000/hub/lti13/oauth_callback",
                        tool_jwks=registration.public_jwks())      # a JWKS dict, or the tool's JWKS URL
    with platform:                              # or platform.start() ... platform.stop()
        platform.issuer, platform.authorize_url, platform.jwks_url, platform.token_url  # the roster's lti
        platform.add_context("ctx-42", "Attention 101")
        platform.add_member("ctx-42", {"sub": "u-ada", "name": "Ada L", "email": "ada@example.edu",
                                       "roles": [LEARNER]})
        response = platform.launch(requests.Session(), user, "ctx-42", "link-1", target_link_uri)
        platform.line_items("ctx-42"); platform.scores(line_item_id)   # what the tool wrote
        platform.results(line_item_id)               # the current result per LMS user id
        platform.set_result(line_item_id, "u-ada", 3.0); platform.remove_member("ctx-42", "u-ada")  # the LMS's hand
        platform.fail_next("network")   # the next score POST: the connection dropped, no answer

``launch`` is the browser's whole flow: OIDC login initiation at the tool's login URL (``iss``,
``login_hint``, ``target_link_uri``, ``lti_message_hint``, ``lti_deployment_id``, ``client_id``),
the tool's redirect followed to ``authorize_url`` (which checks ``response_type``, ``scope``,
``client_id``, the registered ``redirect_uri``, ``login_hint``, ``nonce``, ``state``,
``response_mode``, ``prompt``), the id_token built and signed there by ``lti1p3platform``
(message type LtiResourceLinkRequest, version 1.3.0, deployment, target link, resource link,
context, roles, name and email, the AGS endpoint claim with its line items URL and scopes, the
NRPS claim with the context's memberships URL, custom parameters), its auto-submitting form
POSTed to the tool's redirect URI with the session, redirects followed; it returns the last
response (``follow=False``: the tool's answer to the POST itself). A refusal on the way (the
tool's login initiation, or the authorization request) is returned as it came.

``tamper`` makes a hostile launch: ``{"key": "other"}`` signs with a key not in the JWKS (under
the platform's kid, so only the signature is wrong); ``{"aud": "x"}`` (``aud`` and ``azp``);
``{"deployment_id": "x"}`` (in the login initiation and the claim); ``{"exp": -60}`` (seconds
from now); ``{"issuer": URL}`` (an unregistered issuer, in the login initiation and ``iss``);
``{"claims": {...}}`` overrides any claim (``None`` removes it); ``{"replay": True}`` POSTs the
same id_token and state a second time and returns that second response.

``fail_next(kind, endpoint="scores")``: the next request to ``endpoint`` (``"scores"``,
``"results"``, ``"lineitems"``, ``"memberships"`` or ``"token"``) fails: ``"network"`` drops the
connection unanswered, ``"401"`` refuses its token (``"token"``: refuses the client). ``requests``
lists every (method, path) the platform answered, for counting. ``latency=`` (seconds) delays
every token and service answer, as an LMS across the internet would; ``page_size=`` pages every
container (line items, results, members) even when the tool asks no ``limit``, as Canvas does.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import secrets
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from lti1p3platform.exceptions import LineItemNotFoundException, LtiServiceException
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.membership import Context
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request, TRequest
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import AssignmentsGradesService, NamesRoleProvisioningService

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_LINEITEM_READ = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
SCOPE_RESULT_READ = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_MEMBERSHIP = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
ALL_SCOPES = (SCOPE_LINEITEM, SCOPE_LINEITEM_READ, SCOPE_RESULT_READ, SCOPE_SCORE, SCOPE_MEMBERSHIP)

LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
RESULTS_TYPE = "application/vnd.ims.lis.v2.resultcontainer+json"
MEMBERS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
MESSAGE_TYPE_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/message_type"
ACTIVITY = {"Initialized", "Started", "InProgress", "Submitted", "Completed"}
GRADING = {"FullyGraded", "Pending", "PendingManual", "Failed", "NotReady"}


def _new_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _public_pem(private_pem: str) -> str:
    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


class Refused(Exception):
    """A request the platform answers with ``status`` and an error body (RFC 6749 style)."""

    def __init__(self, status: int, error: str, description: str = "") -> None:
        super().__init__(description or error)
        self.status, self.error, self.description = status, error, description


# --- lti1p3platform's abstract parts, made concrete ---------------------------------------------------


class _PlatformConf(LTI1P3PlatformConfAbstract):
    """The platform's one registration (this tool), and the checks of the tool's client assertion
    that the library leaves to its user: audience, issuer and subject, a fresh jti."""

    def init_platform_config(self, registration: Registration, token_url: str) -> None:
        self._registration = registration
        self._token_url = token_url
        self._seen_jti: set[str] = set()

    def get_registration_by_params(self, **kwargs) -> Registration:
        return self._registration

    def tool_validate_and_decode(self, jwt_token_string: str) -> dict:
        claims = super().tool_validate_and_decode(jwt_token_string)   # signature by the tool's JWKS
        client_id = self._registration.get_client_id()
        audience = claims.get("aud")
        if self._token_url not in (audience if isinstance(audience, list) else [audience]):
            raise Refused(400, "invalid_client", f"client assertion audience {audience!r} is not the token URL")
        if claims.get("iss") != client_id or claims.get("sub") != client_id:
            raise Refused(400, "invalid_client", "client assertion iss/sub is not the registered client id")
        if "exp" not in claims:
            raise Refused(400, "invalid_client", "client assertion has no exp")
        jti = claims.get("jti")
        if not jti or jti in self._seen_jti:
            raise Refused(400, "invalid_client", "client assertion jti missing or used before")
        self._seen_jti.add(jti)
        return claims


class _Request(Request):
    def build_metadata(self, request: dict) -> TRequest:
        get_data = dict(request["get_data"])
        for key in ("page", "limit"):   # the library pages with integers
            if key in get_data:
                try:
                    get_data[key] = int(get_data[key])
                except ValueError:
                    raise Refused(400, "invalid_request", f"{key} must be a whole number") from None
        return {**request, "get_data": get_data}


class _Launch(LTIAdvantageMessageLaunchAbstract):
    """The id_token of one launch, signed by the platform's key (or, tampered, not)."""

    def __init__(self, request, platform_config, tamper: dict, other_key, signing_key, kid: str) -> None:
        super().__init__(request, platform_config)
        self._tamper = tamper
        self._other_key = other_key
        self._signing_key, self._kid = signing_key, kid

    def generate_launch_request(self):
        message, state = self.get_launch_data()
        tamper = self._tamper
        if "aud" in tamper:
            message["aud"] = message["azp"] = tamper["aud"]
        if "deployment_id" in tamper:
            message[DEPLOYMENT_CLAIM] = tamper["deployment_id"]
        if "issuer" in tamper:
            message["iss"] = tamper["issuer"]
        for claim, value in (tamper.get("claims") or {}).items():
            if value is None:
                message.pop(claim, None)
            else:
                message[claim] = value
        if self._deep_linking_launch_data:   # a deep linking request, as the library's own launch makes it
            message.update(self._deep_linking_launch_data)
            message["https://purl.imsglobal.org/spec/lti/claim/message_type"] = "LtiDeepLinkingRequest"
        registration = self._registration
        key = self._other_key() if tamper.get("key") == "other" else self._signing_key
        token = Registration.encode_and_sign(message, key, headers={"kid": self._kid},
                                             expiration=int(tamper.get("exp", self.id_token_expiration)))
        return {"state": state, "id_token": token}

    def render_launch_form(self, launch_data: dict, **kwargs) -> str:
        fields = "".join(f'<input type="hidden" name="{name}" value="{html.escape(launch_data[name])}">'
                         for name in ("id_token", "state"))
        return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>LTI launch</title></head><body>'
                f'<form id="lti" method="post" action="{html.escape(launch_data["launch_url"])}">{fields}</form>'
                '<script>document.getElementById("lti").submit()</script></body></html>')


class _Ags(AssignmentsGradesService):
    """Assignment and Grade Services of one context, over the platform's dicts."""

    def __init__(self, request, platform: "Platform", context_id: str) -> None:
        self.platform, self.context_id = platform, context_id
        lineitems_url = platform.lineitems_url(context_id)
        super().__init__(request, platform.conf, lineitems_url)

    def _items(self) -> list[dict]:
        return [item for item in self.platform._line_items.values() if item["_context"] == self.context_id]

    def _item(self, line_item_id: str) -> dict:
        item = self.platform._line_items.get(self.platform.lineitem_url(self.context_id, line_item_id))
        if item is None:
            raise LineItemNotFoundException(line_item_id)
        return item

    def find_lineitems(self, page=1, limit=None, line_item_id=None, resource_link_id=None, resource_id=None,
                       tag=None):
        found = [_public(item) for item in self._items()
                 if (resource_link_id is None or item.get("resourceLinkId") == resource_link_id)
                 and (resource_id is None or item.get("resourceId") == resource_id)
                 and (tag is None or item.get("tag") == tag)]
        return _paged(found, page, limit or self.platform.page_size)

    def find_lineitem(self, line_item_id):
        return _public(self._item(line_item_id))

    def create_lineitem(self, creation_data):
        _check_lineitem(creation_data)
        number = str(next(self.platform._numbers))
        url = self.platform.lineitem_url(self.context_id, number)
        item = {**{k: v for k, v in creation_data.items() if k != "id"}, "id": url, "_context": self.context_id}
        self.platform._line_items[url] = item
        self.platform._results[url] = {}
        self.platform._scores[url] = []
        return _public(item)

    def update_lineitem(self, update_data):
        item = self._item(update_data["id"])
        _check_lineitem(update_data)
        item.update({k: v for k, v in update_data.items() if k != "id"})
        return _public(item)

    def delete_lineitem(self, line_item_id):
        url = self._item(line_item_id)["id"]
        del self.platform._line_items[url]

    def update_score(self, line_item_id, score):
        item = self._item(line_item_id)
        user = _check_score(score, item)
        if user not in self.platform._contexts[self.context_id]["members"]:
            raise LtiServiceException(f"user {user!r} is not a member of context {self.context_id!r}", 422)
        results = self.platform._results[item["id"]]
        previous = results.get(user)
        stamp = _timestamp(score["timestamp"])
        if previous is not None and stamp < previous["_timestamp"]:
            return UpdateScoreStatus.OLD_TIMESTAMP
        self.platform._scores[item["id"]].append(dict(score))
        result = {"id": f"{item['id']}/results/{user}", "scoreOf": item["id"], "userId": user,
                  "resultMaximum": item["scoreMaximum"], "_timestamp": stamp}
        if "scoreGiven" in score:
            result["resultScore"] = score["scoreGiven"] * item["scoreMaximum"] / score["scoreMaximum"]
        if score.get("comment"):
            result["comment"] = score["comment"]
        results[user] = result
        return UpdateScoreStatus.SUCCESS if previous else UpdateScoreStatus.CREATED

    def get_results(self, line_item_id, page=1, limit=None, user_id=None):
        item = self._item(line_item_id)
        found = [_public(r) for user, r in sorted(self.platform._results[item["id"]].items())
                 if user_id is None or user == user_id]
        return _paged(found, page, limit or self.platform.page_size)


class _Nrps(NamesRoleProvisioningService):
    def __init__(self, request, platform: "Platform", context_id: str) -> None:
        self.platform, self.context_id = platform, context_id
        super().__init__(request, platform.conf, platform.memberships_url(context_id))

    def get_context_by_id(self) -> Context:
        context = self.platform._contexts[self.context_id]
        return Context(id=self.context_id, label=context["label"], title=context["title"])

    def get_member_data_page(self, page=1, limit=None, role=None, since=None, **ignored):
        members = [dict(m) for m in self.platform._contexts[self.context_id]["members"].values()
                   if role is None or role in m["roles"]]
        found = _paged(members, page, limit or self.platform.page_size)
        self.has_next = found["has_next"]   # (the library links the next page only when a limit was asked)
        return found

    def is_resource_link_valid(self, context_id, resource_link_id):
        return resource_link_id in self.platform._contexts[context_id]["links"]


def _paged(content: list, page: int, limit: int | None) -> dict:
    """One page of a container (the library's TPage); everything when there is no limit."""
    if not limit:
        return {"content": content, "has_next": False}
    start = (max(page, 1) - 1) * limit
    return {"content": content[start:start + limit], "has_next": start + limit < len(content)}


def _public(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.startswith("_")}


def _check_lineitem(data: dict) -> None:
    if not isinstance(data, dict):
        raise LtiServiceException("a line item must be a JSON object", 400)
    maximum = data.get("scoreMaximum")
    if isinstance(maximum, bool) or not isinstance(maximum, (int, float)) or maximum <= 0:
        raise LtiServiceException("scoreMaximum must be a number above 0", 400)
    if not isinstance(data.get("label"), str) or not data["label"].strip():
        raise LtiServiceException("label is required", 400)


def _timestamp(text) -> datetime:
    try:
        stamp = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise LtiServiceException(f"timestamp {text!r} is not ISO 8601", 400) from None
    if stamp.tzinfo is None:
        raise LtiServiceException(f"timestamp {text!r} has no time zone", 400)
    return stamp


def _check_score(score, item: dict) -> str:
    """The score's user, after the checks of the AGS score media type."""
    if not isinstance(score, dict):
        raise LtiServiceException("a score must be a JSON object", 400)
    for key in ("userId", "timestamp", "activityProgress", "gradingProgress"):
        if not score.get(key):
            raise LtiServiceException(f"score: {key} is required", 400)
    if score["activityProgress"] not in ACTIVITY or score["gradingProgress"] not in GRADING:
        raise LtiServiceException("score: unknown activityProgress or gradingProgress", 400)
    if "scoreGiven" in score:
        given, maximum = score["scoreGiven"], score.get("scoreMaximum")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (given, maximum)):
            raise LtiServiceException("score: scoreGiven needs a numeric scoreMaximum", 400)
        if given < 0 or maximum <= 0:
            raise LtiServiceException("score: scoreGiven must be >= 0 and scoreMaximum > 0", 400)
    _timestamp(score["timestamp"])
    return str(score["userId"])


# --- the platform ------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a class's 30 launches at once overflowed it, and the
    # connections dropped waited a second for TCP to try again (an LMS's server keeps a long queue)
    request_queue_size = 128


class Platform:
    """One LTI 1.3 platform with one tool registered (see the module's docstring)."""

    def __init__(self, client_id: str, deployment_id: str, tool_login_url: str, tool_redirect_url,
                 tool_jwks, scopes=ALL_SCOPES, latency: float = 0.0, page_size: int | None = None) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.platform = self
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.client_id, self.deployment_id = client_id, deployment_id
        self.tool_login_url = tool_login_url
        self.tool_redirect_urls = [tool_redirect_url] if isinstance(tool_redirect_url, str) else list(tool_redirect_url)
        self.scopes = tuple(scopes)
        self.latency = latency   # seconds each token and service request waits, as across the internet
        self.page_size = page_size   # containers paged even when the tool asks no limit (as Canvas does)
        self._key = _new_key()
        # loaded once, as a platform keeps its key: lti1p3platform loads the PEM twice for each
        # id_token (its signature, its kid), 28 ms each here (the key's checks), on the CPUs that the hub
        # under test shares with it
        self._signing_key = serialization.load_pem_private_key(self._key.encode(), password=None)
        self._other = None
        registration = (Registration().set_iss(self.issuer).set_client_id(client_id)
                        .set_deployment_id(deployment_id).set_oidc_login_url(tool_login_url)
                        .set_platform_private_key(self._key).set_platform_public_key(_public_pem(self._key)))
        if isinstance(tool_jwks, str):
            registration.set_tool_key_set_url(tool_jwks)
        else:
            registration.set_tool_key_set(tool_jwks)
        self.registration = registration
        self._kid = registration.get_kid()
        self.conf = _PlatformConf(registration=registration, token_url=self.token_url)
        self.conf.get_registration()
        self.lock = threading.Lock()
        self._contexts: dict[str, dict] = {}
        self._line_items: dict[str, dict] = {}
        self._numbers = itertools.count(1)
        self._scores: dict[str, list] = {}
        self._results: dict[str, dict] = {}
        self._messages: dict[str, dict] = {}
        self._deep_link_requests: dict[str, dict] = {}
        self.deep_links: list[tuple[str, dict]] = []   # (context, content item) the tool returned, accepted
        self._failures: dict[str, list[str]] = {}
        self.requests: list[tuple[str, str]] = []
        self._thread = None

    # -- addresses (the roster's lti block) --
    @property
    def issuer(self) -> str:
        return self.base_url

    @property
    def authorize_url(self) -> str:
        return f"{self.base_url}/authorize"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    def lineitems_url(self, context_id: str) -> str:
        return f"{self.base_url}/contexts/{context_id}/lineitems"

    def lineitem_url(self, context_id: str, line_item_id: str) -> str:
        if str(line_item_id).startswith(self.base_url):
            return str(line_item_id)
        return f"{self.lineitems_url(context_id)}/{line_item_id}"

    @property
    def deep_link_return_url(self) -> str:
        return f"{self.base_url}/deep_links/return"

    def memberships_url(self, context_id: str) -> str:
        return f"{self.base_url}/contexts/{context_id}/memberships"

    def jwks(self) -> dict:
        return self.conf.get_jwks()

    # -- life --
    def start(self) -> "Platform":
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="lti-platform",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> "Platform":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the LMS's course and people --
    def add_context(self, context_id: str, title: str, label: str | None = None) -> None:
        with self.lock:
            self._contexts.setdefault(context_id, {"title": title, "label": label or title, "members": {},
                                                   "links": set()})

    def add_member(self, context_id: str, user: dict) -> None:
        """``user``: sub, roles (LTI role URIs), and optionally name, email, given_name,
        family_name, lis_person_sourcedid, status (Active, Inactive, Deleted)."""
        member = {"user_id": str(user["sub"]), "roles": list(user.get("roles") or [LEARNER]),
                  "status": user.get("status", "Active")}
        for key in ("name", "email", "given_name", "family_name", "lis_person_sourcedid"):
            if user.get(key):
                member[key] = user[key]
        with self.lock:
            self._contexts[context_id]["members"][member["user_id"]] = member

    def remove_member(self, context_id: str, sub: str) -> None:
        with self.lock:
            self._contexts[context_id]["members"].pop(str(sub), None)

    # -- what the tool wrote --
    def line_items(self, context_id: str) -> list[dict]:
        with self.lock:
            return [_public(item) for item in self._line_items.values() if item["_context"] == context_id]

    def scores(self, line_item_id: str) -> list[dict]:
        """Every score POSTed to the line item (an id URL), in the order received."""
        with self.lock:
            return [dict(s) for s in self._scores.get(line_item_id, [])]

    def results(self, line_item_id: str) -> dict[str, dict]:
        """The line item's current result per LMS user id."""
        with self.lock:
            return {user: _public(r) for user, r in self._results.get(line_item_id, {}).items()}

    def set_result(self, line_item_id: str, user_id: str, score: float) -> None:
        """A grade typed into the LMS's gradebook by hand (not through the tool)."""
        with self.lock:
            item = self._line_items[line_item_id]
            self._results[line_item_id][user_id] = {
                "id": f"{line_item_id}/results/{user_id}", "scoreOf": line_item_id, "userId": user_id,
                "resultScore": score, "resultMaximum": item["scoreMaximum"],
                "_timestamp": datetime.now().astimezone()}

    def fail_next(self, kind: str, endpoint: str = "scores") -> None:
        if kind not in ("network", "401"):
            raise ValueError(f"fail_next: kind is 'network' or '401', not {kind!r}")
        if endpoint not in ("scores", "results", "lineitems", "memberships", "token"):
            raise ValueError(f"fail_next: unknown endpoint {endpoint!r}")
        with self.lock:
            self._failures.setdefault(endpoint, []).append(kind)

    def _failure(self, endpoint: str) -> str | None:
        with self.lock:
            pending = self._failures.get(endpoint)
            return pending.pop(0) if pending else None

    def _other_key(self) -> str:
        if self._other is None:
            self._other = _new_key()
        return self._other

    # -- the browser's launch --
    def launch(self, session: requests.Session, user: dict, context_id: str, resource_link_id: str,
               target_link_uri: str, custom: dict | None = None, tamper: dict | None = None,
               follow: bool = True, deep_link: bool = False) -> requests.Response:
        tamper = dict(tamper or {})
        hint = secrets.token_urlsafe(16)
        with self.lock:
            if context_id in self._contexts:
                self._contexts[context_id]["links"].add(resource_link_id)
            self._messages[hint] = {"user": dict(user), "context_id": context_id, "resource_link_id": resource_link_id,
                                    "target_link_uri": target_link_uri, "custom": custom, "tamper": tamper,
                                    "deep_link": deep_link}
        initiation = {"iss": tamper.get("issuer", self.issuer), "login_hint": str(user["sub"]),
                      "target_link_uri": target_link_uri, "lti_message_hint": hint,
                      "lti_deployment_id": tamper.get("deployment_id", self.deployment_id),
                      "client_id": self.client_id}
        response = session.post(self.tool_login_url, data=initiation, allow_redirects=True, timeout=30)
        if not response.url.startswith(self.authorize_url) or response.status_code != 200:
            return response   # the tool refused the initiation, or the platform the authorization request
        action, fields = _read_form(response.text)
        answer = session.post(action, data=fields, allow_redirects=follow, timeout=60)
        if tamper.get("replay"):
            answer = session.post(action, data=fields, allow_redirects=follow, timeout=60)
        return answer

    def _authorize(self, query: dict) -> str:
        """The OIDC authentication request: checked, then the signed launch's form."""
        checks = {"response_type": "id_token", "scope": "openid", "response_mode": "form_post", "prompt": "none"}
        for key, expected in checks.items():
            if query.get(key) != expected:
                raise Refused(400, "invalid_request", f"{key} must be {expected!r}")
        if query.get("client_id") != self.client_id:
            raise Refused(400, "unauthorized_client", f"unknown client_id {query.get('client_id')!r}")
        if query.get("redirect_uri") not in self.tool_redirect_urls:
            raise Refused(400, "invalid_request", f"redirect_uri {query.get('redirect_uri')!r} is not registered")
        for key in ("nonce", "state", "login_hint"):
            if not query.get(key):
                raise Refused(400, "invalid_request", f"{key} is required")
        with self.lock:
            message = self._messages.get(query.get("lti_message_hint", ""))
        if message is None:
            raise Refused(400, "invalid_request", "lti_message_hint names no launch")
        user = message["user"]
        if query["login_hint"] != str(user["sub"]):
            raise Refused(400, "login_required", "login_hint is not the user of this launch")
        launch = _Launch(_Request({"method": "GET", "get_data": query, "form_data": {}, "headers": {},
                                   "content_type": None, "path": "/authorize", "json": None}),
                         self.conf, message["tamper"], self._other_key, self._signing_key, self._kid)
        launch.set_user_data(str(user["sub"]), list(user.get("roles") or [LEARNER]), user.get("name"),
                             user.get("email"), user.get("preferred_username"))
        launch.set_resource_link_claim(message["resource_link_id"])
        context = self._contexts.get(message["context_id"], {"title": message["context_id"]})
        launch.set_launch_context_claim(message["context_id"],
                                        ["http://purl.imsglobal.org/vocab/lis/v2/course#CourseOffering"],
                                        context["title"], context.get("label"))
        if message["custom"]:
            launch.set_custom_parameters_claim(dict(message["custom"]))
        launch.set_ags(self.lineitems_url(message["context_id"]), allow_creating_lineitems=True)
        launch.set_nrps(self.memberships_url(message["context_id"]))
        launch.set_launch_url(message["target_link_uri"])
        # what Canvas and Moodle send with every launch (and ltiauthenticator asks of a deep linking request)
        launch.set_launch_presentation_claim(document_target="iframe")
        launch.set_extra_claims({"https://purl.imsglobal.org/spec/lti/claim/tool_platform": {
            "guid": self.issuer, "name": "lti test platform", "product_family_code": "lti1p3platform"}})
        if message["deep_link"]:   # the LMS's opaque data, to be sent back as it was
            data = secrets.token_urlsafe(12)
            with self.lock:
                self._deep_link_requests[data] = {"context_id": message["context_id"], "used": False}
            launch.set_dl(self.deep_link_return_url, title="Add a tool link", accept_types={"ltiResourceLink"},
                          extra_data={"request": data})
        return launch.lti_launch()

    def _deep_link_return(self, form: dict) -> str:
        """The tool's LtiDeepLinkingResponse (Deep Linking 2.0, section 4): signed by the tool's key
        (its JWKS), from its client id to this platform, for this deployment, fresh, carrying the data
        of a request this platform made (once), with LTI resource links only. The items are kept."""
        token = form.get("JWT")
        if not token:
            raise Refused(400, "invalid_request", "no JWT")
        try:   # the signature, by the tool's JWKS (lti1p3platform's check)
            claims = LTI1P3PlatformConfAbstract.tool_validate_and_decode(self.conf, token)
        except Exception as exc:  # noqa: BLE001 - every failure of the JWT is the tool's
            raise Refused(400, "invalid_request", f"the deep linking response's JWT: {type(exc).__name__}: {exc}") from None
        audience = claims.get("aud")
        checks = {
            "iss is the tool's client id": claims.get("iss") == self.client_id,
            "aud is this platform": self.issuer in (audience if isinstance(audience, list) else [audience]),
            "the deployment is this one": claims.get(DEPLOYMENT_CLAIM) == self.deployment_id,
            "a deep linking response": claims.get(MESSAGE_TYPE_CLAIM) == "LtiDeepLinkingResponse",
            "LTI 1.3.0": claims.get("https://purl.imsglobal.org/spec/lti/claim/version") == "1.3.0",
            "not expired": isinstance(claims.get("exp"), int) and claims["exp"] > time.time(),
            "a nonce": bool(claims.get("nonce")),
        }
        failed = [what for what, ok in checks.items() if not ok]
        if failed:
            raise Refused(400, "invalid_request", f"the deep linking response is not right: {', '.join(failed)}")
        data = claims.get("https://purl.imsglobal.org/spec/lti-dl/claim/data")
        with self.lock:
            request = self._deep_link_requests.get((data or {}).get("request", "") if isinstance(data, dict) else "")
            if request is None or request["used"]:
                raise Refused(400, "invalid_request", "the response's data names no deep linking request (or one "
                                                      "answered already)")
            request["used"] = True
        items = claims.get("https://purl.imsglobal.org/spec/lti-dl/claim/content_items") or []
        if not isinstance(items, list) or any(not isinstance(i, dict) or i.get("type") != "ltiResourceLink"
                                              for i in items):
            raise Refused(400, "invalid_request", "only LTI resource links were asked for")
        with self.lock:
            self.deep_links.extend((request["context_id"], item) for item in items)
        return ", ".join(str(item.get("title")) for item in items)

    def _token(self, form: dict) -> dict:
        try:
            granted = self.conf.get_access_token(form)
        except Refused:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of the assertion is the client's
            raise Refused(400, "invalid_client", f"{type(exc).__name__}: {exc}") from None
        scopes = [s for s in form.get("scope", "").split() if s in self.scopes]
        if not scopes:
            raise Refused(400, "invalid_scope", "none of the requested scopes is granted to this tool")
        if scopes != granted["scope"].split():
            # The library grants every LTI scope requested; this platform only the registered ones.
            token = self.registration.platform_encode_and_sign(
                {"sub": self.client_id, "iss": self.issuer, "scopes": " ".join(scopes)}, expiration=3600)
            granted = {**granted, "access_token": token, "scope": " ".join(scopes)}
        return granted

    def _authenticate(self, headers, scopes: tuple[str, ...]) -> None:
        auth = (headers.get("Authorization") or "").split()
        if len(auth) != 2 or auth[0].lower() != "bearer":
            raise Refused(401, "invalid_token", "a bearer token is required")
        try:
            allowed = self.conf.validate_token(auth[1], list(scopes))
        except Exception as exc:  # noqa: BLE001 - a bad signature, an expired token, another issuer
            raise Refused(401, "invalid_token", f"{type(exc).__name__}: {exc}") from None
        if not allowed:
            raise Refused(403, "insufficient_scope", f"the token lacks the scope {' or '.join(scopes)}")


def _read_form(page: str) -> tuple[str, dict]:
    action = re.search(r'<form[^>]*action="([^"]*)"', page)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
    if action is None or not fields:
        raise AssertionError(f"the platform's launch form is not there: {page[:200]!r}")
    return html.unescape(action.group(1)), {k: html.unescape(v) for k, v in fields.items()}


_SERVICE = re.compile(r"^/contexts/(?P<context>[^/]+)/(?:(?P<members>memberships)|lineitems"
                      r"(?:/(?P<item>[^/]+)(?:/(?P<sub>scores|results))?)?)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "lti-test-platform"

    def log_message(self, format, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _send(self, status: int, body: bytes, content_type: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data, content_type: str = "application/json", extra: dict | None = None) -> None:
        body = b"" if data is None else json.dumps(data).encode()
        self._send(status, body, content_type, extra)

    def _serve(self, method: str) -> None:
        platform: Platform = self.server.platform
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        with platform.lock:
            platform.requests.append((method, parts.path))
        if platform.latency and parts.path not in ("/authorize", "/jwks"):
            time.sleep(platform.latency)
        try:
            self._route(platform, method, parts.path, dict(parse_qsl(parts.query)), body, content_type)
        except Refused as refusal:
            self._json(refusal.status, {"error": refusal.error, "error_description": refusal.description})

    def _fail(self, platform: Platform, endpoint: str) -> bool:
        kind = platform._failure(endpoint)
        if kind == "network":
            self.close_connection = True   # no status line: the client sees the connection dropped
            return True
        if kind == "401":
            error = "invalid_client" if endpoint == "token" else "invalid_token"
            raise Refused(401, error, "the platform refused the tool's credentials (revoked)")
        return False

    def _route(self, platform: Platform, method: str, path: str, query: dict, body: bytes, content_type: str):
        if path == "/jwks" and method == "GET":
            return self._json(200, platform.jwks())
        if path == "/authorize" and method in ("GET", "POST"):
            if method == "POST":
                if content_type != "application/x-www-form-urlencoded":
                    raise Refused(415, "invalid_request", "the form must be application/x-www-form-urlencoded")
                query = dict(parse_qsl(body.decode()))
            page = platform._authorize(query)
            return self._send(200, page.encode(), "text/html; charset=utf-8")
        if path == "/deep_links/return" and method == "POST":
            if content_type != "application/x-www-form-urlencoded":
                raise Refused(415, "invalid_request", "the form must be application/x-www-form-urlencoded")
            added = platform._deep_link_return(dict(parse_qsl(body.decode())))
            return self._send(200, f"<p>Added: {html.escape(added)}</p>".encode(), "text/html; charset=utf-8")
        if path == "/token" and method == "POST":
            if self._fail(platform, "token"):
                return None
            if content_type != "application/x-www-form-urlencoded":
                raise Refused(400, "invalid_request", "the token request must be application/x-www-form-urlencoded")
            return self._json(200, platform._token(dict(parse_qsl(body.decode()))))
        match = _SERVICE.match(path)
        if match is None:
            raise Refused(404, "not_found", f"no such endpoint: {method} {path}")
        context_id, item, sub = match["context"], match["item"], match["sub"]
        if context_id not in platform._contexts:
            raise Refused(404, "not_found", f"no context {context_id!r}")
        endpoint = "memberships" if match["members"] else (sub or "lineitems")
        if self._fail(platform, endpoint):
            return None
        payload = None
        if method in ("POST", "PUT"):
            expected = SCORE_TYPE if sub == "scores" else LINEITEM_TYPE
            if content_type != expected:
                raise Refused(415, "invalid_request", f"the body must be {expected}, not {content_type or 'none'}")
            try:
                payload = json.loads(body)
            except ValueError:
                raise Refused(400, "invalid_request", "the body is not JSON") from None
        need = {("memberships", "GET"): (SCOPE_MEMBERSHIP,),
                ("lineitems", "GET"): (SCOPE_LINEITEM, SCOPE_LINEITEM_READ),
                ("lineitems", "POST"): (SCOPE_LINEITEM,), ("lineitems", "PUT"): (SCOPE_LINEITEM,),
                ("lineitems", "DELETE"): (SCOPE_LINEITEM,),
                ("scores", "POST"): (SCOPE_SCORE,), ("results", "GET"): (SCOPE_RESULT_READ,)}.get((endpoint, method))
        if need is None or (endpoint == "lineitems" and method in ("PUT", "DELETE") and item is None) \
                or (endpoint == "lineitems" and method == "POST" and item is not None):
            raise Refused(405, "invalid_request", f"{method} is not allowed on {path}")
        platform._authenticate(self.headers, need)
        request = _Request({"method": method, "get_data": query, "form_data": {}, "headers": self.headers,
                            "content_type": content_type, "path": path, "json": payload})
        with platform.lock:
            if endpoint == "memberships":
                service = _Nrps(request, platform, context_id)
                response, media = service.handle_resp(service.handle_get_members), MEMBERS_TYPE
                allowed = ("limit", "page", "role", "rlid", "since")
            else:
                service = _Ags(request, platform, context_id)
                handler, media, allowed = {
                    ("lineitems", "GET", False): (service.handle_get_lineitems, LINEITEMS_TYPE,
                                                  ("limit", "page", "resource_link_id", "resource_id", "tag")),
                    ("lineitems", "POST", False): (service.handle_create_lineitem, LINEITEM_TYPE, ()),
                    ("lineitems", "GET", True): (service.handle_get_lineitem, LINEITEM_TYPE, ()),
                    ("lineitems", "PUT", True): (service.handle_update_lineitem, LINEITEM_TYPE, ()),
                    ("lineitems", "DELETE", True): (service.handle_delete_lineitem, "application/json", ()),
                    ("scores", "POST", True): (service.handle_update_score, "application/json", ()),
                    ("results", "GET", True): (service.handle_get_results, RESULTS_TYPE,
                                               ("limit", "page", "user_id")),
                }[(endpoint, method, item is not None)]
                request.request["get_data"] = {k: v for k, v in request.get_data.items() if k in allowed}
                kwargs = {"line_item_id": item} if item is not None else {}
                try:
                    response = service.handle_resp(handler, **kwargs)
                except TypeError as exc:
                    raise Refused(400, "invalid_request", str(exc)) from None
        if not 200 <= response.code < 300:
            raise Refused(response.code, "invalid_request", response.message)
        asked = {k: v for k, v in query.items() if k in allowed}   # (the library's handlers bump its page)
        result = response.result
        extra = {}
        if isinstance(result, dict) and "content" in result:   # a page of line items or results
            if result.get("has_next"):
                extra["Link"] = f'<{_next_page(platform.base_url + path, asked)}>; rel="next"'
            result = result["content"]
        elif isinstance(result, dict) and "members" in result:     # a page of members
            result.pop("next", None)
            if getattr(service, "has_next", False):
                extra["Link"] = f'<{_next_page(platform.base_url + path, asked)}>; rel="next"'
        return self._json(response.code, result, media, extra)


def _next_page(url: str, query: dict) -> str:
    return f"{url}?{urlencode({**query, 'page': int(query.get('page', 1)) + 1})}"
