"""The loopback LTI 1.3 platform of the tests (``lti_platform.py``) is a real one: its launches verify
with its JWKS by a tool's own validator (``jupyterhub-ltiauthenticator``'s), hostile launches do not,
and a tool's service calls through ``pylti1p3`` get tokens and are checked as a platform checks them."""

from __future__ import annotations

import json
import secrets
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests
from ltiauthenticator.lti13.error import InvalidAudienceError, TokenError
from ltiauthenticator.lti13.validator import LTI13LaunchValidator
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiServiceException
from pylti1p3.grade import Grade
from pylti1p3.lineitem import LineItem
from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.service_connector import ServiceConnector
from pylti1p3.tool_config import ToolConfDict

from autograder.lti import ensure_key, public_jwk
from lti_platform import (ALL_SCOPES, INSTRUCTOR, LEARNER, SCOPE_LINEITEM, SCOPE_LINEITEM_READ, SCOPE_RESULT_READ,
                          SCOPE_SCORE, Platform, _public_pem)

AGS_SCOPES = [SCOPE_LINEITEM, SCOPE_LINEITEM_READ, SCOPE_RESULT_READ, SCOPE_SCORE]
ADA = {"sub": "u-ada", "name": "Ada Lovelace", "email": "ada@example.edu", "roles": [LEARNER]}


class _Tool(BaseHTTPRequestHandler):
    """The least of a tool's launch: login initiation answered with the authentication request
    (state and nonce kept), the launch's form received. What it received is checked by the tests
    with a real tool library's validator."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        form = dict(parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
        tool = self.server.tool
        if self.path == "/login":
            tool["state"], tool["nonce"] = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
            query = {"response_type": "id_token", "scope": "openid", "response_mode": "form_post", "prompt": "none",
                     "client_id": form["client_id"], "redirect_uri": tool["redirect_uri"],
                     "login_hint": form["login_hint"], "lti_message_hint": form["lti_message_hint"],
                     "nonce": tool["nonce"], "state": tool["state"]}
            tool["initiation"] = form
            self.send_response(302)
            self.send_header("Location", f"{tool['authorize_url']}?{urlencode(query)}")
        else:
            tool["launches"].append(form)
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def tool_key(tmp_path) -> str:
    return ensure_key(tmp_path / "tool.pem")


@pytest.fixture
def tool(tool_key):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Tool)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.tool = {"launches": [], "redirect_uri": f"{base}/launch"}
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield base, server.tool
    server.shutdown()
    server.server_close()


@pytest.fixture
def platform(tool, tool_key):
    base, state = tool
    with Platform(client_id="tool-1", deployment_id="d1", tool_login_url=f"{base}/login",
                  tool_redirect_url=f"{base}/launch", tool_jwks={"keys": [public_jwk(tool_key)]}) as running:
        state["authorize_url"] = running.authorize_url
        running.add_context("ctx-42", "Attention 101")
        running.add_member("ctx-42", ADA)
        yield running


def _verify(platform, token: str) -> dict:
    validator = LTI13LaunchValidator()
    claims = validator.verify_and_decode_jwt(token, issuer=platform.issuer, audience="tool-1",
                                             jwks_endpoint=platform.jwks_url, jwks_algorithms=["RS256"])
    validator.validate_id_token(claims)
    return claims


def test_a_launch_carries_the_standard_claims_signed_by_the_platforms_jwks(platform, tool):
    _, state = tool
    response = platform.launch(requests.Session(), ADA, "ctx-42", "link-7", "http://tool/hub/a1", custom={"a": "1"})
    assert response.status_code == 200 and len(state["launches"]) == 1
    initiation = state["initiation"]
    assert initiation["iss"] == platform.issuer and initiation["login_hint"] == "u-ada"
    assert initiation["lti_deployment_id"] == "d1" and initiation["client_id"] == "tool-1"
    launch = state["launches"][0]
    assert launch["state"] == state["state"]
    claims = _verify(platform, launch["id_token"])
    lti = "https://purl.imsglobal.org/spec/lti/claim/"
    assert claims["nonce"] == state["nonce"] and claims["sub"] == "u-ada" and claims["email"] == ADA["email"]
    assert claims[lti + "message_type"] == "LtiResourceLinkRequest" and claims[lti + "version"] == "1.3.0"
    assert claims[lti + "deployment_id"] == "d1" and claims[lti + "target_link_uri"] == "http://tool/hub/a1"
    assert claims[lti + "resource_link"]["id"] == "link-7" and claims[lti + "context"]["id"] == "ctx-42"
    assert claims[lti + "roles"] == [LEARNER] and claims[lti + "custom"] == {"a": "1"}
    ags = claims["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"]
    assert ags["lineitems"] == platform.lineitems_url("ctx-42") and SCOPE_SCORE in ags["scope"]
    nrps = claims["https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"]
    assert nrps["context_memberships_url"] == platform.memberships_url("ctx-42")


@pytest.mark.parametrize("tamper, error", [
    ({"key": "other"}, TokenError), ({"aud": "x"}, InvalidAudienceError), ({"exp": -60}, TokenError),
    ({"issuer": "http://127.0.0.1:9/other"}, TokenError)])
def test_a_tampered_launch_fails_a_tools_verification(platform, tool, tamper, error):
    _, state = tool
    platform.launch(requests.Session(), ADA, "ctx-42", "link-7", "http://tool/hub", tamper=tamper)
    with pytest.raises(error):
        _verify(platform, state["launches"][0]["id_token"])


def test_tampered_claims_deployment_and_a_replay(platform, tool):
    _, state = tool
    platform.launch(requests.Session(), ADA, "ctx-42", "l", "http://tool/hub",
                    tamper={"deployment_id": "x", "claims": {"sub": "u-bo", "email": None}, "replay": True})
    assert state["initiation"]["lti_deployment_id"] == "x"
    first, second = state["launches"]
    assert first == second   # the same id_token and state, twice
    claims = _verify(platform, first["id_token"])
    assert claims["https://purl.imsglobal.org/spec/lti/claim/deployment_id"] == "x"
    assert claims["sub"] == "u-bo" and "email" not in claims


def test_the_authorization_request_is_checked(platform, tool):
    _, state = tool
    state["redirect_uri"] = "http://127.0.0.1:9/elsewhere"
    response = platform.launch(requests.Session(), ADA, "ctx-42", "l", "http://tool/hub")
    assert response.status_code == 400 and "redirect_uri" in response.json()["error_description"]
    assert state["launches"] == []


def _connector(platform, tool_key, register_public=True) -> ServiceConnector:
    conf = ToolConfDict({platform.issuer: [{"default": True, "client_id": "tool-1",
                                            "auth_login_url": platform.authorize_url,
                                            "auth_token_url": platform.token_url, "key_set_url": platform.jwks_url,
                                            "deployment_ids": ["d1"]}]})
    conf.set_private_key(platform.issuer, tool_key, client_id="tool-1")
    if register_public:
        conf.set_public_key(platform.issuer, _public_pem(tool_key), client_id="tool-1")
    return ServiceConnector(conf.find_registration_by_params(platform.issuer, "tool-1"))


def _grade(user: str, score: float) -> Grade:
    return (Grade().set_score_given(score).set_score_maximum(10).set_user_id(user).set_activity_progress("Completed")
            .set_grading_progress("FullyGraded").set_timestamp(datetime.now(timezone.utc).isoformat()))


def test_a_tool_through_pylti1p3_gets_a_token_and_writes_line_items_and_scores(platform, tool_key):
    ags = AssignmentsGradesService(_connector(platform, tool_key), {"scope": AGS_SCOPES,
                                                                   "lineitems": platform.lineitems_url("ctx-42")})
    item = ags.find_or_create_lineitem(LineItem().set_tag("a1").set_label("a1").set_score_maximum(10))
    assert ags.find_or_create_lineitem(LineItem().set_tag("a1").set_label("a1").set_score_maximum(10)).get_id() \
        == item.get_id()   # found, not made twice
    ags.put_grade(_grade("u-ada", 7.5), item)
    assert [r["resultScore"] for r in ags.get_grades(item)] == [7.5]
    assert [s["scoreGiven"] for s in platform.scores(item.get_id())] == [7.5]
    assert platform.line_items("ctx-42")[0]["label"] == "a1"
    with pytest.raises(LtiServiceException, match="422 .*not a member"):
        ags.put_grade(_grade("u-nobody", 1), item)
    members = NamesRolesProvisioningService(_connector(platform, tool_key),
                                            {"context_memberships_url": platform.memberships_url("ctx-42")})
    assert [(m["user_id"], m["email"]) for m in members.get_members()] == [("u-ada", "ada@example.edu")]


def test_paging_follows_the_link_header(platform, tool_key):
    for n in range(5):
        platform.add_member("ctx-42", {"sub": f"u{n}", "roles": [INSTRUCTOR if n == 0 else LEARNER]})
    connector = _connector(platform, tool_key)
    url = platform.memberships_url("ctx-42") + "?limit=2"
    members = NamesRolesProvisioningService(connector, {"context_memberships_url": url}).get_members()
    assert len(members) == 6 and len({m["user_id"] for m in members}) == 6


def test_requests_without_the_right_token_scope_or_media_type_are_refused(platform, tool_key, tool):
    base, _ = tool
    url = platform.lineitems_url("ctx-42")
    assert requests.get(url).status_code == 401
    assert requests.get(url, headers={"Authorization": "Bearer forged"}).status_code == 401
    # An assertion that names no key the platform knows (no kid): no token.
    with pytest.raises(LtiServiceException, match="400 .*invalid_client"):
        _connector(platform, tool_key, register_public=False).get_access_token(AGS_SCOPES)
    # A tool registered without the score scope is granted no token for it.
    with Platform("tool-1", "d1", f"{base}/login", f"{base}/launch", {"keys": [public_jwk(tool_key)]},
                  scopes=[s for s in ALL_SCOPES if s != SCOPE_SCORE]) as narrow:
        narrow.add_context("c", "C")
        token = _connector(narrow, tool_key).get_access_token([SCOPE_SCORE, SCOPE_LINEITEM])
        created = requests.post(narrow.lineitems_url("c"), headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/vnd.ims.lis.v2.lineitem+json"},
            data=json.dumps({"label": "a1", "scoreMaximum": 3}))
        assert created.status_code == 201
        score = requests.post(created.json()["id"] + "/scores", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/vnd.ims.lis.v1.score+json"},
            data=json.dumps({"userId": "u", "scoreGiven": 1, "scoreMaximum": 3, "timestamp": "2026-01-01T00:00:00Z",
                             "activityProgress": "Completed", "gradingProgress": "FullyGraded"}))
        assert score.status_code == 403 and score.json()["error"] == "insufficient_scope"
    token = _connector(platform, tool_key).get_access_token(AGS_SCOPES)
    wrong_type = requests.post(url, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                               data=json.dumps({"label": "a1", "scoreMaximum": 3}))
    assert wrong_type.status_code == 415 and platform.line_items("ctx-42") == []


def test_failures_on_demand(platform, tool_key):
    ags = AssignmentsGradesService(_connector(platform, tool_key), {"scope": AGS_SCOPES,
                                                                   "lineitems": platform.lineitems_url("ctx-42")})
    item = ags.find_or_create_lineitem(LineItem().set_tag("a1").set_label("a1").set_score_maximum(10))
    platform.fail_next("network")
    with pytest.raises(requests.ConnectionError):
        ags.put_grade(_grade("u-ada", 1), item)
    platform.fail_next("401")
    with pytest.raises(LtiServiceException, match="401"):
        ags.put_grade(_grade("u-ada", 2), item)
    ags.put_grade(_grade("u-ada", 3), item)
    assert [s["scoreGiven"] for s in platform.scores(item.get_id())] == [3]
    platform.fail_next("401", endpoint="token")
    with pytest.raises(LtiServiceException, match="401"):
        _connector(platform, tool_key).get_access_token(AGS_SCOPES)
    assert urlsplit(platform.token_url).path in {path for _, path in platform.requests}
