"""The one exception the instructor sees: a one-line message, exit status 2."""

from __future__ import annotations


class GradingError(Exception):
    """A problem the instructor can fix (a bad name, a missing file, no sandbox); printed as one line."""
