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
