"""Grades back to the LMS at class size: ``lms push`` of N students to the loopback LTI 1.3 platform.

    .venv/bin/python benchmarks/lms_push.py [--students 200]

Builds a course directory whose nbgrader gradebook holds one assignment (10 points in 5 graded
cells) and N graded submissions with seeded scores (written through nbgrader's own API, as the
batch would leave them), starts the tests' LTI 1.3 platform (``tests/autograder/lti_platform.py``:
real tokens, scopes and media types checked on every request) with the N students in its LMS
course, half of them known from launches and half matched through its class list (NRPS), then
times ``autograder.lms.push``: the first push (the line item created, N scores POSTed one by
one, as the LMS sees them) and a second push (the results read, nothing to send). Checks that
the LMS's results equal the gradebook's and that the second push POSTed nothing. Prints the
seconds and, last, one JSON line. ``--latency-ms`` makes the platform wait before each answer,
as an LMS across the internet (the push keeps a few scores in flight at once). Goal (issue 32):
200 grades pushed in under 60 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from autograder import lms  # noqa: E402
from autograder.course import Course  # noqa: E402
from autograder.lti import ensure_key, public_jwk  # noqa: E402
from autograder.records import save_report  # noqa: E402

ASSIGNMENT = "bench"
CONTEXT = "ctx-bench"
COURSE = "attention_course"


def load_platform():
    path = REPO / "tests" / "autograder" / "lti_platform.py"
    spec = importlib.util.spec_from_file_location("lti_platform_for_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def make_gradebook(course: Course, students: list[str], rng: random.Random) -> dict[str, float]:
    from nbgrader.api import Gradebook

    course.ensure()
    scores = {}
    # nbgrader's add_submission trips SQLAlchemy's autoflush warnings (its own code, harmless here).
    warnings.filterwarnings("ignore", message=".*not in session.*")
    with Gradebook(course.db_url, course.course_id) as gb:
        gb.add_assignment(ASSIGNMENT)
        gb.add_notebook(ASSIGNMENT, ASSIGNMENT)
        for cell in range(5):
            gb.add_grade_cell(f"test_{cell}", ASSIGNMENT, ASSIGNMENT, max_score=2, cell_type="code")
        for student in students:
            gb.add_student(student)
            gb.add_submission(ASSIGNMENT, student)
            for grade in gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).grades:
                grade.auto_score, grade.needs_manual_grade = float(rng.choice((0, 1, 2))), False
            gb.db.commit()
            scores[student] = float(gb.find_submission(ASSIGNMENT, student).score)
    save_report(course, ASSIGNMENT, {"assignment": ASSIGNMENT,
                                     "students": {s: {"status": "graded"} for s in students}})
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="each LMS request waits this long first, as across the internet (default: 0)")
    args = parser.parse_args()
    platform_module = load_platform()
    rng = random.Random(0)
    students = [f"s{n:03d}" for n in range(args.students)]
    with tempfile.TemporaryDirectory(prefix="lms-push-bench-") as folder:
        folder = Path(folder)
        course = Course(root=folder / "grading", source=REPO / "solutions", course_id=COURSE)
        scores = make_gradebook(course, students, rng)
        key = ensure_key(folder / "tool.pem")
        platform = platform_module.Platform("tool-1", "d1", "http://127.0.0.1:9/login", "http://127.0.0.1:9/launch",
                                            {"keys": [public_jwk(key)]}, latency=args.latency_ms / 1000)
        with platform:
            platform.add_context(CONTEXT, "Attention (benchmark)")
            for student in students:
                platform.add_member(CONTEXT, {"sub": f"u-{student}", "name": student, "email": f"{student}@uni.edu",
                                              "roles": [platform_module.LEARNER]})
            claims = {"sub": "", lms.CONTEXT_CLAIM: {"id": CONTEXT},
                      lms.AGS_CLAIM: {"lineitems": platform.lineitems_url(CONTEXT),
                                      "scope": [lms.LINEITEM_SCOPE, lms.RESULT_SCOPE, lms.SCORE_SCOPE]},
                      lms.NRPS_CLAIM: {"context_memberships_url": platform.memberships_url(CONTEXT)}}
            for student in students[::2]:   # half launched from the LMS; the others matched by email
                lms.remember_launch(course, student, {**claims, "sub": f"u-{student}", "name": student})
            roster = folder / "roster.json"
            roster.write_text(json.dumps({
                "lti": {"issuer": platform.issuer, "client_id": "tool-1", "deployment_ids": ["d1"],
                        "authorize_url": platform.authorize_url, "jwks_url": platform.jwks_url,
                        "token_url": platform.token_url, "key": "tool.pem"},
                "courses": {COURSE: {"instructors": ["prof"], "students": students, "lti_context": CONTEXT}}}))
            lines: list[str] = []
            start = time.perf_counter()
            first_status = lms.push(course, ASSIGNMENT, roster, echo=lines.append)
            first = time.perf_counter() - start
            (item,) = platform.line_items(CONTEXT)
            posted = len(platform.scores(item["id"]))
            start = time.perf_counter()
            second_status = lms.push(course, ASSIGNMENT, roster, echo=lines.append)
            second = time.perf_counter() - start
            reposted = len(platform.scores(item["id"])) - posted
            results = {user: r["resultScore"] for user, r in platform.results(item["id"]).items()}
    expected = {f"u-{s}": score for s, score in scores.items()}
    correct = results == expected and first_status == 0 and second_status == 0 and reposted == 0
    print(f"lms push: {posted} score(s) of {len(students)} students in {first:.2f} s (target < 60 s; LMS latency "
          f"{args.latency_ms:g} ms); "
          f"the second push {second:.2f} s, {reposted} POSTed; the LMS's results "
          f"{'equal' if results == expected else 'DIFFER FROM'} the gradebook's")
    print(json.dumps({"benchmark": "lms_push", "students": len(students), "latency_ms": args.latency_ms,
                      "push_s": round(first, 3),
                      "second_push_s": round(second, 3), "posted": posted, "reposted": reposted,
                      "results_equal_gradebook": results == expected, "target_s": 60}))
    return 0 if correct and first < 60 else 1


if __name__ == "__main__":
    raise SystemExit(main())
