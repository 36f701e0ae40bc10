"""``release``: the student version of each assignment (nbgrader generate_assignment), checked for leaks."""

from __future__ import annotations

import logging
import re
import shutil

from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory

from . import leakscan
from .course import Course, package_folder
from .errors import GradingError


def nbgrader_api(course: Course) -> NbGraderAPI:
    config = course.nbgrader_config()
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    api.log.setLevel(logging.ERROR)
    return api


def _failure_line(result: dict) -> str:
    """The most specific line of nbgrader's captured log: the exception, else the first error."""
    lines = [line.strip() for line in (result.get("log") or "").splitlines() if line.strip()]
    exceptions = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    if exceptions:
        return exceptions[-1]
    errors = [line.split("] ", 1)[-1] for line in lines if line.startswith("[ERROR]")]
    if errors:
        return errors[0]
    error = (result.get("error") or "").strip().splitlines()
    return error[-1] if error else "nbgrader generate_assignment failed"


def release(course: Course, assignments: list[str]) -> list[str]:
    """Generate ``release/<assignment>/`` for each assignment; returns one line per assignment."""
    for assignment in assignments:
        course.require_source(assignment)
    messages = []
    with course.lock("release"):
        api = nbgrader_api(course)
        for assignment in assignments:
            result = api.generate_assignment(assignment, force=True, create=True)
            if not result.get("success"):
                raise GradingError(f"release {assignment}: {_failure_line(result)}")
            released = course.release_dir(assignment)
            secrets = leakscan.course_secrets(course.source, package_folder(), [assignment])
            leaks = leakscan.scan([released], secrets)
            if leaks:
                shutil.rmtree(released, ignore_errors=True)
                leak = leaks[0]
                raise GradingError(f"release {assignment}: {leak.secret.kind} line from {leak.secret.origin} "
                                   f"found in {leak.where}; release removed")
            notebooks = sorted(p.name for p in released.glob("*.ipynb"))
            messages.append(f"released {assignment}: {', '.join(notebooks)} -> {released}")
    return messages
