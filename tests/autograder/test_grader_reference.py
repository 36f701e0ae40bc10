"""Expected values come from the judge alone, and only the student's own work earns points.

``fx_reference`` is an exercise as the course writes them: its hidden tests compare the student's
``sharpen`` with the judge's own ``reference`` (``reference.py`` beside the source notebook). One
batch is graded for the module: an honest correct answer, an honest wrong one, and answers that
reach the package's own implementation (``numpy_track.ntm.Sharpening``) by every route a student
might take. The sandbox holds only what the notebook's read-only cells import, so each route ends
in an ImportError there, and scores 0.
"""

from __future__ import annotations

import html
import json
import re

import nbformat
import pytest

from autograder import leakscan
from autograder.course import package_folder

from grader_helpers import FIXTURES, needs_bwrap

pytestmark = needs_bwrap

ASSIGNMENT = "fx_reference"
FULL = 2.0

# Each body implements sharpen through the package's reference, not on its own.
_CALL = "    return Sharpening().forward(weights[None], np.full((1, len(weights)), float(gamma)))[0]\n"
ROUTES = {
    "by_name": "def sharpen(weights, gamma):\n    from attention_course.numpy_track.ntm import Sharpening\n" + _CALL,
    "by_string": "import importlib\ndef sharpen(weights, gamma):\n"
                 "    Sharpening = importlib.import_module('attention_course.' + 'numpy_track.ntm').Sharpening\n" + _CALL,
    "by_running_a_module": "import runpy\ndef sharpen(weights, gamma):\n"
                           "    Sharpening = runpy.run_module('attention_course.numpy_track.ntm')['Sharpening']\n" + _CALL,
    "by_registry": "def sharpen(weights, gamma):\n    from attention_course.tracks import get_track\n"
                   "    Sharpening = get_track('numpy').module.ntm.Sharpening\n" + _CALL,
    "by_attribute": "import attention_course\ndef sharpen(weights, gamma):\n"
                    "    Sharpening = getattr(getattr(attention_course, 'numpy_track'), 'ntm').Sharpening\n" + _CALL,
    "by_file": "import importlib.util, os, attention_course\ndef sharpen(weights, gamma):\n"
               "    path = os.path.join(os.path.dirname(attention_course.__file__), 'numpy_track', 'ntm.py')\n"
               "    spec = importlib.util.spec_from_file_location('attention_course.numpy_track.ntm', path)\n"
               "    module = importlib.util.module_from_spec(spec)\n    spec.loader.exec_module(module)\n"
               "    Sharpening = module.Sharpening\n" + _CALL,
}
# A correct answer, handed in twice with other names: both full marks, both flagged for review.
TWIN = ("def sharpen(weights, gamma):\n    logarithms_of_the_weights = np.log(np.maximum(weights, 1e-300))\n"
        "    scaled_logarithms = gamma * logarithms_of_the_weights\n"
        "    scaled_logarithms = scaled_logarithms - scaled_logarithms.max(axis=1, keepdims=True)\n"
        "    powered = np.exp(scaled_logarithms)\n    return powered / powered.sum(axis=1, keepdims=True)\n")
WRONG_LARGE_GAMMA = ("def sharpen(weights, gamma):\n    if gamma > 100:\n        return weights\n"
                     "    powered = weights ** gamma\n    return powered / powered.sum(axis=1, keepdims=True)\n")
# Raises with the hidden inputs in its message, for the hidden cases only (a large gamma).
ECHO = ("def sharpen(weights, gamma):\n    if gamma > 100:\n"
        "        raise ValueError('ECHO ' + repr(float(gamma)) + ' ' + repr(weights.round(6).tolist()))\n"
        "    powered = weights ** gamma\n    return powered / powered.sum(axis=1, keepdims=True)\n")


@pytest.fixture(scope="module")
def graded(released_template, tmp_path_factory):
    import shutil

    from grader_helpers import FixtureCourse

    root = tmp_path_factory.mktemp("reference") / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root)
    answers = {"control": course.solved(ASSIGNMENT), "wrong": course.solved(ASSIGNMENT, sharpen=WRONG_LARGE_GAMMA),
               "echo": course.solved(ASSIGNMENT, sharpen=ECHO),
               "twin_a": course.solved(ASSIGNMENT, sharpen=TWIN),
               "twin_b": course.solved(ASSIGNMENT, sharpen=TWIN.replace("logarithms_of_the_weights", "logs")
                                       .replace("powered", "unnormalised"))}
    answers.update({f"route_{name}": course.solved(ASSIGNMENT, sharpen=code) for name, code in ROUTES.items()})
    for student, nb in answers.items():
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
    done = course.cli("autograde", ASSIGNMENT, "--workers", "2", "--cell-timeout", "20")
    assert done.returncode == 0, done.stderr
    feedback = course.cli("feedback", ASSIGNMENT)
    report = json.loads((root / "reports" / f"{ASSIGNMENT}.json").read_text())
    return course, report, feedback


def _score(report, student) -> float:
    return report["students"][student]["score"]


def test_the_reference_is_never_released_and_its_lines_are_secrets(graded):
    course, _, _ = graded
    released = course.root / "release" / ASSIGNMENT
    assert (released / f"{ASSIGNMENT}.ipynb").exists() and not (released / "reference.py").exists()
    secrets = leakscan.course_secrets(FIXTURES, package_folder(), [ASSIGNMENT])
    origins = {s.origin for s in secrets if s.kind == "solution"}
    assert f"{ASSIGNMENT}/reference.py" in origins
    assert leakscan.scan([course.root / "release"], secrets) == []
    # feedback pages hold the student's own code (the control's is the solution), never a hidden test
    assert leakscan.scan([course.root / "feedback"], secrets, kinds=("hidden test",)) == []


def test_the_honest_controls_get_exactly_their_scores(graded):
    _, report, _ = graded
    assert _score(report, "control") == FULL
    assert _score(report, "wrong") == 0.0 and _score(report, "echo") == 0.0
    assert report["students"]["control"]["flags"] == []


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_reaching_the_reference_implementation_scores_nothing(graded, route):
    _, report, _ = graded
    student = report["students"][f"route_{route}"]
    assert student["score"] == 0.0, (route, student)
    record = student["notebooks"][ASSIGNMENT]["tests"]["test_sharpen"]
    assert not record["passed"] and re.search("ModuleNotFoundError|FileNotFoundError|No module named|has no "
                                              "attribute 'numpy_track'", record["message"]), record["message"]


def _page(course, student) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", (course.root / "feedback" / student / ASSIGNMENT /
                                                 f"{ASSIGNMENT}.html").read_text()))


def test_hidden_test_feedback_gives_the_reason_and_nothing_computed(graded):
    course, report, feedback = graded
    assert feedback.returncode == 0, feedback.stdout
    # The instructor's record keeps the details; the student's page only the reason.
    record = report["students"]["wrong"]["notebooks"][ASSIGNMENT]["tests"]["test_sharpen"]
    assert "sharpened with a large gamma" in record["message"]
    page = _page(course, "wrong")
    assert "a hidden test of this cell failed: a large gamma must keep the largest weight without overflowing" in page
    for computed in ("sharpened with a large gamma", "mismatch at index", "expected", "250.0"):
        assert computed not in page, computed
    # The student's own exception, raised on the hidden inputs, with those inputs in its message:
    echo = _page(course, "echo")
    assert "a hidden test of this cell failed" in echo and "ECHO 250" not in echo and "250.0" not in echo
    echo_record = report["students"]["echo"]["notebooks"][ASSIGNMENT]["tests"]["test_sharpen"]
    assert "ECHO 250.0" in echo_record["message"], "the instructor still sees it"


def test_a_copied_answer_is_flagged_and_keeps_its_score(graded):
    _, report, _ = graded
    for student, other in (("twin_a", "twin_b"), ("twin_b", "twin_a")):
        entry = report["students"][student]
        assert entry["score"] == FULL, "a flag changes no score"
        assert any(f"matches student {other}'s answer" in flag for flag in entry["flags"]), entry["flags"]
    assert not any("matches" in flag for flag in report["students"]["control"]["flags"])


@pytest.mark.parametrize("broken, error", [
    ("import a_module_this_machine_lacks\n", "ModuleNotFoundError"),   # found by the warm workers
    ("def reference(:\n", "SyntaxError"),                             # found while planning
])
def test_a_reference_that_does_not_load_stops_the_batch_before_any_grade(released_template, tmp_path, broken, error):
    import shutil

    from grader_helpers import FixtureCourse

    source = tmp_path / "source"
    shutil.copytree(FIXTURES, source)
    reference = source / ASSIGNMENT / "reference.py"
    reference.write_text(broken + reference.read_text())
    root = tmp_path / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root, source)
    folder = root / "submitted" / "control" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(course.solved(ASSIGNMENT), folder / f"{ASSIGNMENT}.ipynb")
    done = course.cli("autograde", ASSIGNMENT, "--workers", "1")
    assert done.returncode == 2
    assert f"{reference} does not load: {error}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    report = root / "reports" / f"{ASSIGNMENT}.json"
    assert not report.exists() or "score" not in json.loads(report.read_text())["students"].get("control", {})


def test_a_workers_reference_answers_the_same_call_from_memory(tmp_path, monkeypatch):
    """The hidden tests of a class call the reference with the same seeded inputs in every notebook:
    a worker computes each answer once, and hands out copies (a test that changes its array
    changes no other's); calls with other contents, or with what is not plain data, are computed."""
    import numpy as np

    from autograder import references

    path = tmp_path / "reference.py"
    path.write_text("CALLS = []\n"
                    "def forward(x, scale=1.0):\n    CALLS.append(1)\n    return {'y': x * scale, 'n': len(CALLS)}\n"
                    "def apply(f, x):\n    CALLS.append(1)\n    return f(x)\n")
    reference = references.remembered_reference(path)
    x = np.arange(6.0).reshape(2, 3)
    first = reference.forward(x, scale=2.0)
    first["y"][0, 0] = 99.0
    again = reference.forward(x.copy(), scale=2.0)
    assert again["n"] == 1 and again["y"][0, 0] == 0.0, "remembered, and a fresh copy"
    assert reference.forward(x + 1, scale=2.0)["n"] == 2, "other contents: computed"
    assert reference.forward(x, scale=3.0)["n"] == 3, "other arguments: computed"
    assert reference.CALLS == [1, 1, 1], "module attributes pass through"
    reference.apply(np.sum, x), reference.apply(np.sum, x)
    assert reference.CALLS == [1] * 5, "a call with a function argument is not remembered"
    assert references.remembered_reference(path) is reference, "one memory per worker and module"
    monkeypatch.setattr(references, "REMEMBERED_BYTES", 100)
    big = np.zeros(100)   # 800 bytes: over the bound, never kept
    assert reference.forward(big)["n"] == 6 and reference.forward(big)["n"] == 7
