"""The ``built_book`` fixture: the book is built (or a fresh build reused) once per session."""

from pathlib import Path

import pytest

from book_helpers import build_book_once


@pytest.fixture(scope="session")
def built_book() -> Path:
    return build_book_once()
