"""The roster's LTI registration (autograder/lti.py): read and checked, and the tool's key."""

from __future__ import annotations

import json

import jwt
import pytest

from autograder import lti
from autograder.errors import GradingError

PLATFORM = "http://127.0.0.1:8765"


def roster(**changes) -> dict:
    block = {"issuer": PLATFORM, "client_id": "tool-1", "deployment_ids": ["d1", "d2"],
             "authorize_url": f"{PLATFORM}/authorize", "jwks_url": f"{PLATFORM}/jwks",
             "token_url": f"{PLATFORM}/token", "key": "keys/tool.pem", **changes}
    return {"lti": {k: v for k, v in block.items() if v is not None},
            "courses": {"nlp101": {"instructors": ["ada"], "students": [], "lti_context": "ctx-42"},
                        "cv202": {"instructors": ["di"], "students": []}}}


def test_a_registration_is_read_with_its_courses_and_a_private_key_made_once(tmp_path):
    reg = lti.read_registration(roster(), tmp_path / "roster.yml")
    assert reg.issuer == PLATFORM and reg.client_ids == ("tool-1",) and reg.deployment_ids == ("d1", "d2")
    assert reg.course_of("ctx-42") == "nlp101" and reg.course_of("ctx-43") is None
    assert reg.key_file == tmp_path / "keys" / "tool.pem" and not reg.key_file.exists()
    pem = reg.private_key_pem()
    assert reg.key_file.stat().st_mode & 0o777 == 0o600 and reg.private_key_pem() == pem   # made once
    # What the tool signs with its key, its public JWK verifies (and its kid is the key's, stable).
    jwk = reg.public_jwk()
    token = jwt.encode({"iss": "tool-1"}, pem, algorithm="RS256", headers={"kid": jwk["kid"]})
    public = jwt.PyJWK.from_json(json.dumps(jwk))
    assert jwt.decode(token, public.key, algorithms=["RS256"]) == {"iss": "tool-1"}
    assert reg.public_jwks() == {"keys": [jwk]} and lti.public_jwk(pem)["kid"] == jwk["kid"]
    other = lti.read_registration(roster(key=str(tmp_path / "other.pem")), tmp_path / "roster.yml")
    assert other.public_jwk()["kid"] != jwk["kid"]


def test_no_lti_block_is_a_hub_without_an_lms(tmp_path):
    assert lti.read_registration({"courses": {"a": {"instructors": ["ada"]}}}, tmp_path / "r.yml") is None


@pytest.mark.parametrize("changes, message", [
    ({"issuer": "http://lms.example.edu"}, "lti.issuer: .* is not an https URL"),
    ({"token_url": "ftp://x/token"}, "lti.token_url"),
    ({"client_id": None}, "lti needs client_id"),
    ({"deployment_ids": []}, "lti needs deployment_ids"),
    ({"deployment_ids": [{"a": 1}]}, "lti.deployment_ids must be a string or a list"),
    ({"colour": "blue"}, r"unknown key\(s\) \['colour'\]"),
])
def test_a_bad_registration_is_named(tmp_path, changes, message):
    with pytest.raises(GradingError, match=message):
        lti.read_registration(roster(**changes), tmp_path / "roster.yml")


def test_two_courses_cannot_share_an_lms_context(tmp_path):
    data = roster()
    data["courses"]["cv202"]["lti_context"] = "ctx-42"
    with pytest.raises(GradingError, match="name the same lti_context"):
        lti.read_registration(data, tmp_path / "roster.yml")


def test_a_key_others_can_read_is_refused(tmp_path):
    reg = lti.read_registration(roster(), tmp_path / "roster.yml")
    reg.private_key_pem()
    reg.key_file.chmod(0o644)
    with pytest.raises(GradingError, match="chmod 600"):
        reg.private_key_pem()
