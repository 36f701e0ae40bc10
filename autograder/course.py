"""Where things live: the source notebooks (in git) and the course directory (outside git).

The course directory holds everything nbgrader writes and every student's work::

    grading/
      gradebook.db                      nbgrader's SQLite gradebook (grades, source cells)
      release/<assignment>/             student versions (solutions and hidden tests removed)
      submitted/<student>/<assignment>/ imported submissions, never modified by grading
      archive/<assignment>/<student>/   earlier submissions replaced by a re-import
      autograded/<student>/<assignment>/ executed notebooks (instructor only: holds hidden tests)
      feedback/<student>/<assignment>/  HTML feedback (hidden tests removed)
      reports/<assignment>.json         per-student status and flags for manual grading
      logs/                             grading worker logs
      nbgrader_config.py                the same configuration, for nbgrader's own apps (formgrader)
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from traitlets.config import Config

from .errors import GradingError

REPO_ROOT = Path(__file__).resolve().parent.parent
# On a course hub (autograder/hub.py) the grader account's environment names its course.
DEFAULT_COURSE_DIR = Path(os.environ.get("AUTOGRADER_COURSE_DIR") or REPO_ROOT / "grading")
DEFAULT_SOURCE_DIR = Path(os.environ.get("AUTOGRADER_SOURCE") or REPO_ROOT / "solutions")
COURSE_ID = os.environ.get("AUTOGRADER_COURSE_ID") or "attention_course"
DEFAULT_EXCHANGE = os.environ.get("AUTOGRADER_EXCHANGE") or ""

# What nbgrader never copies from a source folder into a release: its defaults, and an exercise's
# reference.py (the judge's own implementation: autograder/references.py).
RELEASE_IGNORE = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "reference.py"]

# Student and assignment ids become folder names and nbgrader exchange keys ('+' separates those).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
ID_RULE = "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64"


def is_valid_id(value: str) -> bool:
    return bool(_ID.fullmatch(value)) and ".." not in value


def check_id(kind: str, value: str, where: str = "") -> str:
    if not is_valid_id(value):
        place = f" in {where}" if where else ""
        raise GradingError(f"bad {kind} id {value!r}{place}: use {ID_RULE}")
    return value


@dataclass(frozen=True)
class Course:
    root: Path = DEFAULT_COURSE_DIR
    source: Path = DEFAULT_SOURCE_DIR
    course_id: str = COURSE_ID
    exchange: str = DEFAULT_EXCHANGE   # nbgrader's exchange root, for publish and return-feedback

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())
        object.__setattr__(self, "source", Path(self.source).resolve())
        check_id("course", self.course_id)

    # -- folders -----------------------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        return self.root / "gradebook.db"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.db_path}"

    def release_dir(self, assignment: str) -> Path:
        return self.root / "release" / assignment

    def submitted_dir(self, student: str, assignment: str) -> Path:
        return self.root / "submitted" / student / assignment

    def autograded_dir(self, student: str, assignment: str) -> Path:
        return self.root / "autograded" / student / assignment

    def feedback_dir(self, student: str, assignment: str) -> Path:
        return self.root / "feedback" / student / assignment

    def archive_dir(self, assignment: str, student: str) -> Path:
        return self.root / "archive" / assignment / student

    def report_path(self, assignment: str) -> Path:
        return self.root / "reports" / f"{assignment}.json"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    # -- source notebooks --------------------------------------------------------------------
    def source_assignments(self) -> list[str]:
        """Assignments in the source folder: sub-folders holding at least one notebook."""
        if not self.source.is_dir():
            return []
        return sorted(p.name for p in self.source.iterdir()
                      if p.is_dir() and is_valid_id(p.name) and any(p.glob("*.ipynb")))

    def source_notebooks(self, assignment: str) -> list[Path]:
        return sorted(p for p in (self.source / assignment).glob("*.ipynb") if p.is_file())

    def require_source(self, assignment: str) -> list[Path]:
        check_id("assignment", assignment)
        notebooks = self.source_notebooks(assignment)
        if not notebooks:
            raise GradingError(f"no source notebooks for assignment {assignment!r} in {self.source / assignment}")
        return notebooks

    def submitted_students(self, assignment: str) -> list[str]:
        base = self.root / "submitted"
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if is_valid_id(p.name) and (p / assignment).is_dir())

    # -- nbgrader ----------------------------------------------------------------------------
    def nbgrader_config(self) -> Config:
        c = Config()
        c.CourseDirectory.root = str(self.root)
        c.CourseDirectory.source_directory = str(self.source)
        c.CourseDirectory.course_id = self.course_id
        c.CourseDirectory.db_url = self.db_url
        if self.exchange:
            c.Exchange.root = self.exchange
            c.Exchange.path_includes_course = True
        # For nbgrader's own autograde (formgrader): a deleted test cell must come back, not score 0.
        c.OverwriteCells.add_missing_cells = True
        c.CourseDirectory.ignore = RELEASE_IGNORE
        return c

    def ensure(self) -> None:
        """Create the course directory and its nbgrader_config.py (for formgrader and friends)."""
        venv_bin_on_path()
        self.root.mkdir(parents=True, exist_ok=True)
        config_file = self.root / "nbgrader_config.py"
        text = (
            "# Written by `python -m autograder`; the same settings as autograder/course.py.\n"
            "# Use it for nbgrader's formgrader (manual grading of flagged submissions).\n"
            "# nbgrader's own autograde, feedback and collect (the commands, or the formgrader's buttons)\n"
            "# bypass the course's safe path: autograde would run student code unsandboxed, as you;\n"
            "# generate_feedback writes pages with the hidden tests; collect takes a submission named\n"
            "# after one student from the account of another. They are refused here (on a course hub\n"
            "# the formgrader's buttons run the course's own commands instead).\n"
            "from nbgrader.converters import Autograde, GenerateFeedback, NbGraderException\n"
            "from nbgrader.exchange.default.collect import ExchangeCollect\n\n\n"
            "def switched_off(instead):\n"
            "    def refuse(self):\n"
            "        message = ('this nbgrader command is switched off for this course (it bypasses the '\n"
            "                   f'sandbox, the hidden-test check or the owner check). Use: {instead}')\n"
            "        self.log.error(message)\n"
            "        raise NbGraderException(message)\n"
            "    return refuse\n\n\n"
            "# before any of them touches a file or the gradebook:\n"
            "Autograde.start = switched_off('python -m autograder autograde ASSIGNMENT')\n"
            "GenerateFeedback.start = switched_off('python -m autograder feedback ASSIGNMENT')\n"
            "ExchangeCollect.start = switched_off('python -m autograder collect ASSIGNMENT')\n"
            "c = get_config()  # noqa: F821\n"
            f"c.CourseDirectory.root = {str(self.root)!r}\n"
            f"c.CourseDirectory.source_directory = {str(self.source)!r}\n"
            f"c.CourseDirectory.course_id = {self.course_id!r}\n"
            f"c.CourseDirectory.db_url = {self.db_url!r}\n"
            "c.OverwriteCells.add_missing_cells = True\n"
            f"c.CourseDirectory.ignore = {RELEASE_IGNORE!r}  # an exercise's reference.py is never released\n"
            + (f"c.Exchange.root = {self.exchange!r}\nc.Exchange.path_includes_course = True\n" if self.exchange else "")
        )
        if not config_file.exists() or config_file.read_text() != text:
            config_file.write_text(text)

    @contextmanager
    def lock(self, what: str):
        """One writer at a time: a second autograde/import/release on the same course waits for nothing, it fails."""
        self.ensure()
        with open(self.root / ".lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise GradingError(f"{what}: another autograder command is running on {self.root}") from None
            handle.write(str(os.getpid()))
            handle.flush()
            yield


def venv_bin_on_path() -> None:
    """nbgrader creates a new gradebook by running the ``alembic`` command: find the venv's."""
    venv_bin = str(Path(sys.prefix) / "bin")
    if venv_bin not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")


def package_folder() -> Path:
    """The source folder of the installed ``attention_course`` package."""
    spec = importlib.util.find_spec("attention_course")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return REPO_ROOT / "attention_course"


def atomic_write(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Write to a temporary file next to ``path``, then rename: readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)
        handle.flush()
        os.fsync(handle.fileno())
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)
