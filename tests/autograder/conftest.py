"""Fixtures of the autograder tests: the fixture assignments released once, and a fresh copy per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader_helpers import FIXTURES, FixtureCourse, run_cli


@pytest.fixture(scope="session")
def released_template(tmp_path_factory) -> Path:
    """The fixture assignments released once per session (copy it, do not change it)."""
    root = tmp_path_factory.mktemp("released") / "grading"
    done = run_cli(root, FIXTURES, "release", "--all")
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def fixture_course(released_template, tmp_path) -> FixtureCourse:
    root = tmp_path / "grading"
    shutil.copytree(released_template, root)
    return FixtureCourse(root)
