"""The instructor's side of the course: release, import, sandboxed parallel autograding, feedback, export.

Run from the repository root as ``python -m autograder <command>`` (see ``cli.py``). Not part of
the installed wheel: it needs the repository's ``solutions/`` and writes to a course directory
outside git (``grading/`` by default).
"""

import sys

# nbformat validates with jsonschema, which builds a grammar for IRI checks when `rfc3987_syntax`
# is importable: 0.9 s of start-up in every grading process, for a format notebooks never use.
sys.modules.setdefault("rfc3987_syntax", None)
