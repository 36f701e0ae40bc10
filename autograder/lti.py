"""The course hub as an LTI 1.3 tool: its registration with the university's LMS (the platform).

The roster's ``lti`` block names one platform registration (what the LMS's administrator gives
when the tool is registered there), and each course of the roster may name the LMS context (the
LMS's course) whose launches land in it::

    lti:
      issuer: https://canvas.example.edu            # the platform's issuer (iss)
      client_id: "10000000000001"                    # or a list: the tool's client ids there
      deployment_ids: ["1:4dde05e8ca1973bcca9bffc1"]  # the deployments allowed to launch
      authorize_url: https://canvas.example.edu/api/lti/authorize_redirect  # OIDC authentication
      jwks_url: https://canvas.example.edu/api/lti/security/jwks           # the platform's keys
      token_url: https://canvas.example.edu/login/oauth2/token             # OAuth2 (Advantage)
      key: lti-tool-key.pem     # the tool's private key; made (RSA 2048, mode 600) if absent
    courses:
      nlp101:
        lti_context: "4dde05e8ca1973bcca9bffc1-42"   # the LMS course whose launches land here
        ...

Read here, checked, once for the hub (the launch) and for ``lms push`` (grades back): both sides
use the same ``Registration``. The key file is relative to the roster's folder.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .errors import GradingError

KEYS = {"issuer", "client_id", "deployment_ids", "authorize_url", "jwks_url", "token_url", "key"}
REQUIRED = ("issuer", "client_id", "deployment_ids", "authorize_url", "jwks_url", "token_url")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class Registration:
    issuer: str
    client_ids: tuple[str, ...]
    deployment_ids: tuple[str, ...]
    authorize_url: str
    jwks_url: str
    token_url: str
    key_file: Path
    contexts: dict[str, str] = field(default_factory=dict)   # LMS context id -> course id

    @property
    def client_id(self) -> str:
        """The client id the tool names itself by in its own requests (the first)."""
        return self.client_ids[0]

    def private_key_pem(self) -> str:
        return ensure_key(self.key_file)

    def public_jwk(self) -> dict:
        return public_jwk(self.private_key_pem())

    def public_jwks(self) -> dict:
        """The tool's JSON Web Key Set, as its JWKS URL serves it."""
        return {"keys": [self.public_jwk()]}

    def course_of(self, context_id: str) -> str | None:
        return self.contexts.get(context_id)

    def as_state(self) -> dict:
        """The registration as the hub's state file carries it to ``jupyterhub_config.py`` (the key's
        path, never the key)."""
        return {"issuer": self.issuer, "client_ids": list(self.client_ids), "deployment_ids": list(self.deployment_ids),
                "authorize_url": self.authorize_url, "jwks_url": self.jwks_url, "token_url": self.token_url,
                "key_file": str(self.key_file), "contexts": dict(self.contexts)}

    @classmethod
    def from_state(cls, block: dict) -> Registration:
        return cls(block["issuer"], tuple(block["client_ids"]), tuple(block["deployment_ids"]), block["authorize_url"],
                   block["jwks_url"], block["token_url"], Path(block["key_file"]), dict(block["contexts"]))


def read_registration(data: dict, roster_path: Path) -> Registration | None:
    """The registration of the roster's ``lti`` block (``data``: the roster, parsed), checked; None
    when the roster has none (the hub signs people in with their accounts' passwords, as before)."""
    block = data.get("lti")
    if block is None:
        return None
    if not isinstance(block, dict):
        raise GradingError("roster: lti must be a mapping (issuer, client_id, deployment_ids, authorize_url, "
                           "jwks_url, token_url, key)")
    unknown = set(block) - KEYS
    if unknown:
        raise GradingError(f"roster: lti: unknown key(s) {sorted(unknown)} (known: {sorted(KEYS)})")
    missing = [key for key in REQUIRED if not block.get(key)]
    if missing:
        raise GradingError(f"roster: lti needs {', '.join(missing)} (the values the LMS shows when the tool "
                           "is registered there; see the instructor's guide)")
    issuer = _url(block["issuer"], "issuer")
    for key in ("authorize_url", "jwks_url", "token_url"):
        _url(block[key], key)
    client_ids = _strings(block["client_id"], "client_id")
    deployment_ids = _strings(block["deployment_ids"], "deployment_ids")
    key_file = Path(block.get("key") or "lti-tool-key.pem")
    if not key_file.is_absolute():
        key_file = Path(roster_path).resolve().parent / key_file
    contexts: dict[str, str] = {}
    for course, members in (data.get("courses") or {}).items():
        context = (members or {}).get("lti_context") if isinstance(members, dict) else None
        if context is None:
            continue
        if not isinstance(context, (str, int)) or not str(context):
            raise GradingError(f"roster: {course}.lti_context must be the LMS course's context id (a string)")
        if str(context) in contexts:
            raise GradingError(f"roster: {course} and {contexts[str(context)]} name the same lti_context "
                               f"{context!r}")
        contexts[str(context)] = str(course)
    return Registration(issuer, client_ids, deployment_ids, str(block["authorize_url"]), str(block["jwks_url"]),
                        str(block["token_url"]), key_file, contexts)


def _url(value, key: str) -> str:
    parts = urlsplit(str(value))
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK):
        if parts.hostname and not parts.fragment:
            return str(value)
    raise GradingError(f"roster: lti.{key}: {value!r} is not an https URL (plain http only on this machine's "
                       "loopback, for tests)")


def _strings(value, key: str) -> tuple[str, ...]:
    values = [value] if isinstance(value, (str, int)) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, (str, int)) and str(v) for v in values):
        raise GradingError(f"roster: lti.{key} must be a string or a list of strings")
    return tuple(str(v) for v in values)


def ensure_key(path: Path) -> str:
    """The tool's private key (PEM), made on first use: RSA 2048, readable by its owner only. A key
    file that others may read is refused (it signs the tool's requests to the LMS)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    path = Path(path)
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
    if path.stat().st_mode & 0o077:
        raise GradingError(f"the LTI tool key {path} may be read by others: chmod 600 {path}")
    return path.read_text()


def public_jwk(private_pem: str) -> dict:
    """The public half of the tool's key as a JWK (RS256, ``kid``: its RFC 7638 thumbprint)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    numbers = key.public_key().public_numbers()

    def b64(n: int) -> str:
        return base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()

    jwk = {"e": b64(numbers.e), "kty": "RSA", "n": b64(numbers.n)}
    thumbprint = hashlib.sha256(json.dumps(jwk, separators=(",", ":"), sort_keys=True).encode()).digest()
    kid = base64.urlsafe_b64encode(thumbprint).rstrip(b"=").decode()
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


# --- the launch: who she is here, in which course, as what, and where she lands -------------------

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
RESOURCE_LINK_REQUEST = "LtiResourceLinkRequest"
DEEP_LINKING_REQUEST = "LtiDeepLinkingRequest"   # an instructor adding links: the hub offers its assignments
DEEP_LINKING_SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
INSTRUCTOR_ROLES = {"Instructor", "TeachingAssistant"}
LEARNER_ROLES = {"Learner"}
# The LMS's user id (``sub``): the spec allows any ASCII of up to 255 characters; LMSs use UUIDs,
# numbers, "guid_123" or hex. Path characters, spaces and controls are refused, not mapped: no LMS
# sends them, so one that arrives is forged or broken.
_SUB_CHARACTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:@|+=")
NAME_PREFIX = "lti-"


class LaunchRefused(Exception):
    """A launch the hub refuses: the message says why, in a sentence for the page the user sees."""


def local_name(issuer: str, sub: str) -> str:
    """The hub's (and the machine's) user name for the LMS user ``sub`` of ``issuer``: ``lti-`` and
    20 letters and digits of a hash of both. It derives from the LMS's stable user id only, never
    from a claim a person can choose (name, email, custom fields), so nobody becomes another person
    by renaming themselves in the LMS; it is a valid Unix name that no roster name can take (the
    roster's names may not start with ``lti-``)."""
    digest = hashlib.sha256(f"{issuer}\0{sub}".encode()).digest()
    return NAME_PREFIX + base64.b32encode(digest).decode().lower()[:20]


def check_sub(sub) -> str:
    if not isinstance(sub, str) or not sub:
        raise LaunchRefused("the launch names no user (its sub claim is empty)")
    if len(sub) > 255 or not set(sub) <= _SUB_CHARACTERS or ".." in sub:
        raise LaunchRefused("the launch's user id (sub) has characters a user id never has (a path, spaces or "
                            "controls)")
    return sub


def course_role(roles) -> str | None:
    """``"instructor"`` or ``"student"`` from the launch's LTI roles (context roles only: an
    institution's "Instructor" who is a Learner in this course is a student here); None when no
    role of the course fits (a Mentor, a guest)."""
    if not isinstance(roles, list):
        return None
    names = set()
    for role in roles:
        if not isinstance(role, str):
            continue
        if role.startswith("http://purl.imsglobal.org/vocab/lis/v2/membership"):
            names.add(role.rsplit("#", 1)[-1])     # .../membership#Instructor, .../membership/Instructor#TeachingAssistant
        elif "/" not in role and "#" not in role:
            names.add(role)                        # the short form the spec allows for context roles
    if names & INSTRUCTOR_ROLES:
        return "instructor"
    if names & LEARNER_ROLES:
        return "student"
    return None


def admit(registration: Registration, token: dict) -> dict:
    """What a launch's id_token (signature, issuer, audience, expiry, nonce and version already
    checked by ltiauthenticator) means on this hub: ``{"name", "course", "role", "assignment",
    "sub", "display_name", "email"}``; raises ``LaunchRefused`` naming what does not fit."""
    message_type = token.get(CLAIM + "message_type")
    if message_type not in (RESOURCE_LINK_REQUEST, DEEP_LINKING_REQUEST):
        raise LaunchRefused(f"the hub opens resource links and deep linking requests only, not a {message_type!r} "
                            "message (add the course's links as external tool links)")
    if token.get(CLAIM + "version") != "1.3.0":
        raise LaunchRefused(f"the launch is LTI version {token.get(CLAIM + 'version')!r}, not 1.3.0")
    deployment = token.get(CLAIM + "deployment_id")
    if deployment not in registration.deployment_ids:
        raise LaunchRefused(f"the launch comes from deployment {deployment!r} of the LMS, which this hub does not "
                            "know (the roster's lti.deployment_ids)")
    context = (token.get(CLAIM + "context") or {}).get("id") if isinstance(token.get(CLAIM + "context"), dict) else None
    course = registration.course_of(str(context)) if context is not None else None
    if course is None:
        raise LaunchRefused(f"the LMS course {context!r} has no course on this hub (no lti_context of the roster "
                            "names it): ask your instructor")
    sub = check_sub(token.get("sub"))
    role = course_role(token.get(CLAIM + "roles"))
    if role is None:
        raise LaunchRefused(f"your role in the LMS course ({', '.join(map(str, token.get(CLAIM + 'roles') or [])) or 'none'})"
                            " is neither Instructor, TeachingAssistant nor Learner")
    admitted = {"name": local_name(registration.issuer, sub), "course": course, "role": role, "sub": sub,
                "assignment": assignment_of(token), "display_name": str(token.get("name") or ""),
                "email": str(token.get("email") or "")}
    if message_type == DEEP_LINKING_REQUEST:
        admitted["deep_linking"] = deep_linking_of(token, role, deployment)
    return admitted


def deep_linking_of(token: dict, role: str, deployment: str) -> dict:
    """What a deep linking request asks (LTI Deep Linking 2.0): where to send the links chosen, the
    LMS's opaque ``data`` to send back, whether it takes several. Only the course's instructors
    add links; the LMS must take LTI resource links and name an http(s) address to return to."""
    if role != "instructor":
        raise LaunchRefused("only the course's instructors add links to it (a deep linking request from a Learner)")
    settings = token.get(DEEP_LINKING_SETTINGS)
    if not isinstance(settings, dict):
        raise LaunchRefused("the deep linking request has no deep_linking_settings")
    back = settings.get("deep_link_return_url")
    if not isinstance(back, str) or urlsplit(back).scheme not in ("http", "https") or not urlsplit(back).netloc:
        raise LaunchRefused(f"the deep linking request's return address {back!r} is not an http(s) URL")
    if "ltiResourceLink" not in (settings.get("accept_types") or []):
        raise LaunchRefused("the LMS does not take LTI resource links here (its accept_types), which is what the hub "
                            "offers")
    return {"return_url": back, "data": settings.get("data"), "deployment_id": deployment,
            "accept_multiple": settings.get("accept_multiple") in (True, "true"),
            "title": str(settings.get("title") or "")}


def assignment_of(token: dict) -> str | None:
    """The assignment the LMS link names: its custom parameter ``assignment``, or ``assignment=`` in
    the link's target URI (``https://hub/hub/lti13/launch?assignment=ch3a_...``); None for a course link.
    A name that is not an assignment id is ignored (the course's list opens)."""
    from urllib.parse import parse_qs

    custom = token.get(CLAIM + "custom")
    name = custom.get("assignment") if isinstance(custom, dict) else None
    if not name:
        target = str(token.get(CLAIM + "target_link_uri") or "")
        name = (parse_qs(urlsplit(target).query).get("assignment") or [None])[0]
    if isinstance(name, str) and _assignment_id(name):
        return name
    return None


def _assignment_id(name: str) -> bool:
    return 0 < len(name) <= 100 and name[0].isalnum() and all(ch.isalnum() or ch in "_-." for ch in name) \
        and ".." not in name


def landing(admitted: dict, hub_prefix: str = "/") -> str:
    """Where a launch lands: an instructor in the course's formgrader; a student on the assignment
    the link names (fetched into her server if she has not yet) or, from a course link, on the
    course's assignment list. Both pages of the student's server are ``landing.py``'s."""
    from urllib.parse import urlencode

    course = admitted["course"]
    if admitted["role"] == "instructor":
        return f"{hub_prefix}services/{course}/formgrader"
    query = {"course": course, **({"assignment": admitted["assignment"]} if admitted["assignment"] else {})}
    return f"{hub_prefix}hub/user-redirect/attention/open?{urlencode(query)}"
