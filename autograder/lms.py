"""``lms``: the course's grades of record back to the university's LMS, and its class list from there.

    python -m autograder lms push ASSIGNMENT [--dry-run] [--roster ROSTER]
    python -m autograder lms members [--roster ROSTER]

The LMS is the roster's LTI platform (``autograder/lti.py``); the course's LMS course is its
``lti_context``. Grades go through LTI Advantage's Assignment and Grade Services, spoken by
``pylti1p3``: its ServiceConnector gets the access token (a client assertion signed with the
tool's key) and carries every request, its LineItem and Grade are what is sent, its
AssignmentsGradesService posts each score. The class list comes from Names and Role Provisioning
Services through the same connector. Paged containers are followed by their Link headers as the
LMS wrote them; a line item's new maximum is the one request pylti1p3 has no call for (a PUT
with its token).

What the LMS said in launches into the course, the launch side keeps in the course directory
(``remember_launch``), and the push reads::

    <course dir>/lti/users.json      {local user name: {"sub": LMS user id, "name": ...}}
    <course dir>/lti/services.json   {"context_id": ..., "lineitems": URL, "scope": [...],
                                      "context_memberships_url": URL}

(the AGS and NRPS endpoints are known to a tool only from a launch's claims). On a course hub the
hub also keeps the endpoints in a record of its own, root's (``hub_services_file``), and the push
takes them from there: the course's files are its grader account's to write. A student with no
launch yet is matched in the LMS's class list by ``lis_person_sourcedid`` equal to the local name,
else by the part of the email before the '@' (if one member only has it).

The score of record is the instructor's batch in the nbgrader gradebook (what ``export`` reports),
never a check on submit. A push reads the line item's results first and sends only the scores
that differ, so a second push sends nothing; ``--dry-run`` prints what would change and sends
nothing. Each student's outcome is one line: pushed, unchanged, not in the LMS, held (no final
score yet), refused (with the LMS's reason) or a network failure. Nothing is written to the
gradebook; a failed score is sent again by the next push.
"""

from __future__ import annotations

import fcntl
import json
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .course import Course, atomic_write, check_id
from .errors import GradingError

if TYPE_CHECKING:
    import requests
    from pylti1p3.service_connector import ServiceConnector

    from .lti import Registration

USERS_FILE = "users.json"
SERVICES_FILE = "services.json"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
RESULT_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"
MEMBERS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
RESULTS_TYPE = "application/vnd.ims.lis.v2.resultcontainer+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
MEMBERS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
TIMEOUT = 30   # seconds for one request to the LMS
SENDERS = 4    # scores in flight at once
SAME_POINTS = 0.005   # LMSs keep two decimals: closer than this, a score is the same


# --- what launches told the tool ----------------------------------------------------------------


def lti_dir(course: Course) -> Path:
    return course.root / "lti"


@contextmanager
def _locked(folder: Path):
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _read_json(path: Path, what: str) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise GradingError(f"cannot read {what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise GradingError(f"{what} {path} must be a JSON object")
    return data


def remember_launch(course: Course, local_name: str, claims: dict, owner: tuple[int, int] | None = None) -> None:
    """Keep what a verified launch into the course tells the grade push: the user's LMS id, name
    and e-mail if given (``users.json``), and the context's AGS and NRPS endpoints
    (``services.json``); both readable by their owner only (``owner``: uid and gid to give them,
    the course's grader account on a hub)."""
    remember_launches(course, [(local_name, claims)], owner)


def remember_launches(course: Course, launches: list[tuple[str, dict]], owner: tuple[int, int] | None = None) -> None:
    """``remember_launch`` for several launches into the course (a class launching at once: each
    file written once); the services are the last launch's that names them."""
    for local_name, _ in launches:
        check_id("student", local_name)
    folder = lti_dir(course)
    with _locked(folder):
        users = _read_json(folder / USERS_FILE, "the LMS users")
        changed = False
        for local_name, claims in launches:
            entry = {"sub": str(claims["sub"]), "name": claims.get("name") or ""}
            if claims.get("email"):
                entry["email"] = str(claims["email"])
            if users.get(local_name) != entry:
                users[local_name], changed = entry, True
        if changed:
            _write_private(folder / USERS_FILE, json.dumps(users, indent=1, sort_keys=True), owner)
        named = [services for services in (launch_services(claims) for _, claims in launches)
                 if services.get("lineitems")]
        if named and _read_json(folder / SERVICES_FILE, "the LMS services") != named[-1]:
            _write_private(folder / SERVICES_FILE, json.dumps(named[-1], indent=1, sort_keys=True), owner)


def launch_services(claims: dict) -> dict:
    """The context's AGS and NRPS endpoints a verified launch named (what ``services.json`` keeps)."""
    ags, nrps = claims.get(AGS_CLAIM) or {}, claims.get(NRPS_CLAIM) or {}
    services = {"context_id": (claims.get(CONTEXT_CLAIM) or {}).get("id"), "lineitems": ags.get("lineitems"),
                "scope": sorted(ags.get("scope") or []),
                "context_memberships_url": nrps.get("context_memberships_url")}
    return {k: v for k, v in services.items() if v}


def hub_services_file(hub_dir: Path) -> Path:
    """On a course hub, the hub's own record of what verified launches named of each course's
    services: ``{course: {"lineitems": URL, ...}}``, root's alone (``jupyterhub/lti_auth.py``
    writes it). The push uses it, not the course's ``lti/services.json``, which the course's
    grader account (and so its instructors) can write: the tool's access token, good for every
    course of the LMS, goes to those URLs."""
    return Path(hub_dir) / "lti" / SERVICES_FILE


def hub_services(hub_dir: Path) -> dict:
    try:
        return json.loads(hub_services_file(hub_dir).read_text())
    except (OSError, ValueError):
        return {}


def _services_of(course: Course) -> dict:
    """The course's services: the hub's record when the course is on a hub (``<hub>/courses/<course>``
    with the hub's root-owned record beside), else ``lti/services.json``."""
    hub_dir = course.root.parents[1] if course.root.parent.name == "courses" else None
    if hub_dir is not None:
        try:
            kept_by_root = hub_services_file(hub_dir).stat().st_uid == 0
        except OSError:
            kept_by_root = False
        if kept_by_root:
            return hub_services(hub_dir).get(course.course_id) or {}
    return _read_json(lti_dir(course) / SERVICES_FILE, "the LMS services")


def _write_private(path: Path, text: str, owner: tuple[int, int] | None) -> None:
    atomic_write(path, text, mode=0o600)
    if owner is not None:
        os.chown(path, *owner)


# --- the LMS of the course ----------------------------------------------------------------------


@dataclass
class Lms:
    """The course's LMS: its registration, the course's context and endpoints, a pylti1p3 connector."""

    registration: Registration
    context_id: str
    services: dict                  # services.json: the AGS and NRPS endpoints a launch named
    connector: ServiceConnector
    session: requests.Session       # the connector's

    def ags(self):
        from pylti1p3.assignments_grades import AssignmentsGradesService

        return AssignmentsGradesService(self.connector, {"scope": self.services.get("scope") or [],
                                                         "lineitems": self.services["lineitems"]})

    def members(self) -> list[dict]:
        url = self.services.get("context_memberships_url")
        if not url:
            raise GradingError("no launch into the course has named the LMS's class list service (NRPS)")
        return [member for body in self.pages(url, [MEMBERS_SCOPE], MEMBERS_TYPE)
                for member in (body or {}).get("members", [])]

    def pages(self, url: str, scopes: list[str], accept: str):
        """Each page's body of a paged AGS or NRPS container, through the connector (its token).
        The next page is read from the Link header here: pylti1p3's own reader lowercases its URL."""
        from requests.utils import parse_header_links

        while url:
            page = self.connector.make_service_request(scopes, url, accept=accept, case_insensitive_headers=True)
            yield page["body"]
            links = parse_header_links(page["headers"].get("Link", "").replace("\n", " "))
            url = next((link["url"] for link in links if link.get("rel", "").lower() == "next"), None)


def roster_path(given: Path | None) -> Path:
    path = given or (Path(os.environ["AUTOGRADER_ROSTER"]) if os.environ.get("AUTOGRADER_ROSTER") else None)
    if path is None:
        raise GradingError("name the roster (--roster FILE, or AUTOGRADER_ROSTER): its lti block registers "
                           "this hub with the LMS")
    return Path(path)


def connect(course: Course, roster: Path, services: dict | None = None, started_with=None) -> Lms:
    """The course's LMS as the roster registers it and launches described it; every gap named.
    ``services``: the endpoints to use (default: ``_services_of(course)``). ``started_with``: on a
    running hub, its registration (``lti.Registration``), which the roster must still name (an edited
    roster is not the hub's until it restarts)."""
    import requests
    from pylti1p3.service_connector import ServiceConnector

    from . import lti
    from .hub import _roster_data   # the roster file as hub start reads it (YAML or JSON, checked)

    data = _roster_data(roster)
    registration = lti.read_registration(data, roster)
    if registration is None:
        raise GradingError(f"the roster {roster} has no lti block: this hub is not registered with an LMS "
                           "(see the instructor's guide, LTI)")
    if started_with is not None and (registration.issuer, registration.client_id) != (started_with.issuer,
                                                                                      started_with.client_id):
        raise GradingError(f"the roster's lti block names another LMS or client id than the hub was started with "
                           f"({roster}): restart the hub (hub stop, hub start) or restore it")
    if course.course_id not in data["courses"]:
        raise GradingError(f"course {course.course_id!r} is not in the roster {roster}")
    context_id = next((c for c, name in registration.contexts.items() if name == course.course_id), None)
    if context_id is None:
        raise GradingError(f"course {course.course_id!r} has no lti_context in the roster {roster} (the LMS "
                           "course's context id, from a launch or the LMS's course settings)")
    if services is None:
        services = _services_of(course)
    if not services.get("lineitems"):
        raise GradingError(f"no launch from the LMS into course {course.course_id!r} yet: the LMS names its "
                           f"grade service in a launch (open the course's link in the LMS once as its instructor)")
    if services.get("context_id") not in (None, context_id):
        raise GradingError(f"the launches into {course.course_id!r} came from LMS course "
                           f"{services['context_id']!r}, but the roster's lti_context is {context_id!r}")
    session = requests.Session()
    session.headers["User-Agent"] = "attention-course-autograder (pylti1p3)"
    session.request = _with_timeout(session.request)   # pylti1p3 sets none: a silent LMS must not hang us
    connector = ServiceConnector(tool_registration(registration), requests_session=session)
    return Lms(registration, context_id, services, connector, session)


def tool_registration(registration):
    """pylti1p3's registration of this tool with the LMS (``lti.Registration``): its key, to sign."""
    from pylti1p3.tool_config import ToolConfDict

    pem = registration.private_key_pem()
    issuer, client_id = registration.issuer, registration.client_id
    config = ToolConfDict({issuer: [{"default": True, "client_id": client_id,
                                     "auth_login_url": registration.authorize_url,
                                     "auth_token_url": registration.token_url, "key_set_url": registration.jwks_url,
                                     "deployment_ids": list(registration.deployment_ids)}]})
    config.set_private_key(issuer, pem, client_id=client_id)
    config.set_public_key(issuer, _public_pem(pem), client_id=client_id)   # pylti1p3 takes the kid from it
    return config.find_registration_by_params(issuer, client_id)


def _with_timeout(request: Callable) -> Callable:
    def bounded(*args, **kwargs):
        kwargs.setdefault("timeout", TIMEOUT)
        return request(*args, **kwargs)
    return bounded


def _public_pem(private_pem: str) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def lms_reason(exc: Exception) -> str:
    """The LMS's reason for a refusal, in one line (its error description, else its status)."""
    import requests

    response = getattr(exc, "response", None)
    if isinstance(response, requests.Response):
        try:
            body = response.json()
        except ValueError:
            body = None
        text = ""
        if isinstance(body, dict):
            text = str(body.get("error_description") or body.get("error") or body.get("message") or "")
        text = text or response.text.strip() or response.reason or ""
        return f"HTTP {response.status_code}: {' '.join(text.split())[:200]}"
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _is_network(exc: Exception) -> bool:
    import requests

    return isinstance(exc, (requests.ConnectionError, requests.Timeout))


# --- who is who ---------------------------------------------------------------------------------


def lms_users(course: Course, members: list[dict] | None, local_names: list[str]) -> dict[str, str]:
    """Local name -> LMS user id: from launches, else from the class list (sourcedid, email)."""
    known = {name: str(entry["sub"]) for name, entry in _read_json(lti_dir(course) / USERS_FILE,
                                                                   "the LMS users").items()
             if isinstance(entry, dict) and entry.get("sub")}
    if members is None:
        return known
    by_sourcedid: dict[str, list[str]] = {}
    by_email: dict[str, list[str]] = {}
    for member in members:
        if member.get("lis_person_sourcedid"):
            by_sourcedid.setdefault(str(member["lis_person_sourcedid"]), []).append(str(member["user_id"]))
        if member.get("email") and "@" in member["email"]:
            by_email.setdefault(member["email"].split("@")[0].lower(), []).append(str(member["user_id"]))
    for name in local_names:
        if name in known:
            continue
        candidates = by_sourcedid.get(name) or by_email.get(name.lower()) or []
        if len(candidates) == 1:
            known[name] = candidates[0]
    return known


# --- grades -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """One student's score of record for the assignment."""

    student: str
    score: float | None      # None: nothing final to send
    max_score: float
    held: str = ""           # why nothing is sent (no submission, not graded, manual grading)


def records_of(course: Course, assignment: str) -> tuple[float, list[Record]]:
    """The gradebook's max points and every student's score of record (read only)."""
    from nbgrader.api import Gradebook, MissingEntry

    from .records import load_report

    if not course.db_path.exists():
        raise GradingError(f"no gradebook at {course.db_path}: autograde the assignment first")
    report = load_report(course, assignment)["students"]
    with Gradebook(course.db_url, course.course_id) as gb:
        try:
            maximum = float(gb.find_assignment(assignment).max_score)
        except MissingEntry:
            raise GradingError(f"assignment {assignment!r} is not in the gradebook "
                               f"{course.db_path}") from None
        if maximum <= 0:
            raise GradingError(f"assignment {assignment!r} has no points to give (max score 0)")
        records = []
        for student in sorted(s.id for s in gb.students):
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                records.append(Record(student, None, maximum, "no submission"))
                continue
            status = report.get(student, {}).get("status", "not graded")
            if status not in ("graded", "flagged"):
                records.append(Record(student, None, maximum, f"not graded yet ({status})"))
            elif submission.needs_manual_grade:
                records.append(Record(student, None, maximum, "needs manual grading"))
            else:
                records.append(Record(student, round(float(submission.score), 4), maximum))
    return maximum, records


def _find_lineitem(lms: Lms, assignment: str):
    """The assignment's line item (its resourceId is the assignment), or None."""
    from pylti1p3.lineitem import LineItem
    from pylti1p3.utils import add_param_to_url

    url = add_param_to_url(lms.services["lineitems"], "resource_id", assignment)
    for items in lms.pages(url, lms.services["scope"], LINEITEMS_TYPE):
        for item in items or []:   # (the filter narrows the pages; this check does not trust it)
            if item.get("resourceId") == assignment:
                return LineItem(item)
    return None


def _results(lms: Lms, lineitem) -> dict[str, tuple[float, float]]:
    """The line item's current results: LMS user id -> (score, maximum), every page."""
    found: dict[str, tuple[float, float]] = {}
    for results in lms.pages(_subpath(lineitem.get_id(), "results"), lms.services["scope"], RESULTS_TYPE):
        for result in results or []:
            if result.get("resultScore") is not None:
                found[str(result["userId"])] = (float(result["resultScore"]),
                                                float(result.get("resultMaximum") or 1.0))
    return found


def _subpath(url: str, name: str) -> str:
    """``<line item URL>/results`` (AGS: a sub-path of the line item's URL, before any query)."""
    path, _, query = url.partition("?")
    return f"{path.rstrip('/')}/{name}" + (f"?{query}" if query else "")


def _same(current: tuple[float, float] | None, score: float, maximum: float) -> bool:
    """Whether the LMS's result (score, its maximum) is the gradebook's score, in the gradebook's points."""
    return current is not None and abs(current[0] / current[1] * maximum - score) < SAME_POINTS


def _points(current: tuple[float, float], maximum: float) -> str:
    return f"{current[0] / current[1] * maximum:g}"


def push(course: Course, assignment: str, roster: Path, dry_run: bool = False,
         echo: Callable[[str], None] = print, services: dict | None = None, started_with=None) -> int:
    """Publish the assignment's scores of record to its LMS line item. Returns the exit status:
    1 when a score was refused or lost to the network, else 0. ``services``, ``started_with``: as
    ``connect``'s."""
    from pylti1p3.exception import LtiException
    from pylti1p3.grade import Grade
    from pylti1p3.lineitem import LineItem

    check_id("assignment", assignment)
    maximum, records = records_of(course, assignment)
    lms = connect(course, roster, services, started_with)
    scopes = set(lms.services.get("scope") or [])
    if SCORE_SCOPE not in scopes:
        raise GradingError("the LMS grants this tool no score scope for the course (its AGS claim); "
                           "allow grade passback in the tool's LMS settings")
    ags = lms.ags()
    try:
        members = lms.members() if lms.services.get("context_memberships_url") else None
        lineitem = _find_lineitem(lms, assignment)
        if lineitem is None:
            echo(f"line item {assignment!r} ({maximum:g} points): {'would be created' if dry_run else 'created'}")
            current: dict[str, tuple[float, float]] = {}
            if not dry_run:
                new = (LineItem().set_label(assignment).set_score_maximum(maximum).set_resource_id(assignment)
                       .set_tag(assignment))
                created = lms.connector.make_service_request(
                    lms.services["scope"], lms.services["lineitems"], is_post=True, data=new.get_value(),
                    content_type=LINEITEM_TYPE, accept=LINEITEM_TYPE)   # (as pylti1p3 creates one, unsearched)
                lineitem = LineItem(created["body"])
        else:
            if float(lineitem.get_score_maximum() or 0) != maximum:
                echo(f"line item {assignment!r}: {lineitem.get_score_maximum():g} -> {maximum:g} points"
                     f"{' (would be changed)' if dry_run else ''}")
                if not dry_run:
                    lineitem = _update_maximum(lms, lineitem, maximum)
            current = _results(lms, lineitem)
    except (LtiException, OSError) as exc:
        if _is_network(exc):
            raise GradingError(f"the LMS could not be reached ({lms_reason(exc)}); nothing was sent") \
                from None
        raise GradingError(f"the LMS refused the tool's request ({lms_reason(exc)}); nothing was sent") from None
    users = lms_users(course, members, [r.student for r in records])
    enrolled = {str(m["user_id"]) for m in members if m.get("status", "Active") == "Active"} \
        if members is not None else None

    def send(record: Record, sub: str) -> tuple[str, str]:
        old = _points(current[sub], maximum) if sub in current else "none"
        if dry_run:
            return "pushed", f"would push: {old} -> {record.score:g}/{maximum:g}"
        grade = (Grade().set_score_given(record.score).set_score_maximum(maximum).set_user_id(sub)
                 .set_activity_progress("Completed").set_grading_progress("FullyGraded")
                 .set_timestamp(datetime.now(timezone.utc).isoformat(timespec="milliseconds")))
        try:
            ags.put_grade(grade, lineitem)
        except (LtiException, OSError) as exc:
            outcome = "network failure" if _is_network(exc) else "refused"
            return outcome, f"{outcome}: {lms_reason(exc)}"
        return "pushed", f"pushed: {old} -> {record.score:g}/{maximum:g}"

    decided: list[tuple[Record, str | None, tuple[str, str] | None]] = []   # None: to send
    for record in records:
        sub = users.get(record.student)
        if record.score is None:
            decided.append((record, sub, ("held", f"held: {record.held}")))
        elif sub is None or (enrolled is not None and sub not in enrolled):
            decided.append((record, sub, ("not in the LMS", "not in the LMS (no launch from it, not in its class "
                                          "list)" if sub is None else f"not in the LMS course (LMS id {sub})")))
        elif _same(current.get(sub), record.score, maximum):
            decided.append((record, sub, ("unchanged", f"unchanged: {record.score:g}/{maximum:g}")))
        else:
            decided.append((record, sub, None))
    counts = dict.fromkeys(("pushed", "unchanged", "not in the LMS", "held", "refused", "network failure"), 0)
    # A few scores in flight at once: an LMS across the internet answers each in a fraction of a second.
    with ThreadPoolExecutor(SENDERS) as pool:
        sent = pool.map(lambda pair: send(*pair), [(r, sub) for r, sub, outcome in decided if outcome is None])
        for record, _, outcome in decided:
            outcome, line = outcome or next(sent)
            counts[outcome] += 1
            echo(f"{record.student}: {line}")
    changes = counts["pushed"]
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n and k != "pushed")
    if dry_run:
        head = f"dry run: {changes} score(s) would change" if changes else "dry run: nothing to change"
    else:
        head = f"{changes} score(s) pushed" if changes else "nothing to change"
    echo(f"lms push {assignment}: {head}{'; ' + summary if summary else ''} (LMS course {lms.context_id})")
    return 1 if counts["refused"] or counts["network failure"] else 0


def _update_maximum(lms: Lms, lineitem, maximum: float):
    """The line item PUT with its new maximum (pylti1p3 has no line item update; its token is used)."""
    from pylti1p3.exception import LtiServiceException
    from pylti1p3.lineitem import LineItem

    body = {**json.loads(lineitem.get_value()), "id": lineitem.get_id(), "scoreMaximum": maximum}
    token = lms.connector.get_access_token(lms.services["scope"])
    response = lms.session.put(lineitem.get_id(), data=json.dumps(body), headers={
        "Authorization": f"Bearer {token}", "Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE})
    if not response.ok:
        raise LtiServiceException(response)
    return LineItem(response.json() if response.content else body)


def members(course: Course, roster: Path, echo: Callable[[str], None] = print) -> int:
    """Compare the LMS's class list with the roster's course: who is in one and not the other."""
    from .hub import read_roster

    people = read_roster(roster).get(course.course_id)
    lms = connect(course, roster)
    if people is None:
        raise GradingError(f"course {course.course_id!r} is not in the roster {roster}")
    try:
        found = lms.members()
    except GradingError:
        raise
    except Exception as exc:  # noqa: BLE001 - the LMS's refusal or the network, in one line
        raise GradingError(f"the LMS's class list could not be read ({lms_reason(exc)})") from None
    # (the roster's people and those the LMS's launches admitted: an LTI hub's roster may list nobody)
    launched = _read_json(lti_dir(course) / USERS_FILE, "the LMS users")
    local = sorted(set(people["students"]) | set(people["instructors"]) | set(launched))
    users = lms_users(course, found, local)
    active = [m for m in found if m.get("status", "Active") == "Active"]
    matched = set(users.values())
    missing_here = [m for m in active if str(m["user_id"]) not in matched]
    ids = {str(m["user_id"]) for m in active}
    missing_there = [name for name in local if users.get(name) not in ids]
    for member in missing_here:
        echo(f"in the LMS, not in the roster: {member.get('name') or '?'} <{member.get('email') or '?'}> "
             f"(LMS id {member['user_id']}, {_role(member)})")
    for name in missing_there:
        echo(f"in the roster, not in the LMS: {name}")
    echo(f"lms members: {len(active)} in the LMS course {lms.context_id}, {len(local)} in the roster's "
         f"{course.course_id}; {len(missing_here)} only in the LMS, {len(missing_there)} only in the roster")
    return 0


def _role(member: dict) -> str:
    roles = " ".join(member.get("roles") or [])
    return "instructor" if "Instructor" in roles else "learner" if "Learner" in roles else "other role"
