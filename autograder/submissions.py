"""``import``: bring submissions into ``submitted/<student>/<assignment>/``, validated first.

Two sources:

- ``--from PATH``: a folder or a .zip holding ``<student>.ipynb`` (one-notebook assignments) or
  ``<student>/<notebook>.ipynb``. Every entry is checked before anything is copied: student ids,
  notebook names, no other files, no links, no absolute or ``..`` paths in a zip, sizes. A bad
  entry is refused, with its name and the reason; the good ones are imported.
- ``--from-exchange DIR``: nbgrader's exchange, ``<course>/inbound/<student>+<assignment>+<timestamp>[+...]/``
  (DIR may be the exchange root, the course folder or the inbound folder); the latest submission
  of each student is taken, with its timestamp; files other than the assignment's notebooks are ignored.

A submission is never lost: one that a new import replaces is moved to ``archive/`` first, and an
identical re-import changes nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import pwd
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from nbgrader.api import MissingEntry
from nbgrader.utils import parse_utc

from .course import Course, atomic_write, check_id, is_valid_id
from .errors import GradingError

MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024
_IGNORED = {"__MACOSX", ".ipynb_checkpoints"}


@dataclass
class Incoming:
    student: str
    notebooks: dict[str, bytes] = field(default_factory=dict)   # notebook name -> content
    timestamp: str | None = None
    secret: str | None = None     # nbgrader's submission_secret.txt: keys the student's feedback in the exchange


class Found(dict):
    """Student id -> ``Incoming``, and the entries refused on the way (``refused``: one line each)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []

    def refuse(self, error: GradingError) -> None:
        self.refused.append(str(error))


def assignment_notebooks(course: Course, assignment: str) -> list[str]:
    from .grading import open_gradebook

    check_id("assignment", assignment)
    if not course.db_path.exists():
        raise GradingError(f"no gradebook at {course.db_path}: run `python -m autograder release {assignment}` first")
    with open_gradebook(course) as gb:
        try:
            return [nb.name for nb in gb.find_assignment(assignment).notebooks]
        except MissingEntry:
            raise GradingError(f"assignment {assignment!r} is not in the gradebook: "
                               f"run `python -m autograder release {assignment}` first") from None


def _place(found: dict[str, Incoming], where: str, parts: tuple[str, ...], data: bytes,
           notebooks: list[str]) -> None:
    """File ``parts`` (relative path) under its student, or raise naming ``where``."""
    if any(part in ("", ".", "..") for part in parts):
        raise GradingError(f"path traversal in {where}")
    if not parts[-1].endswith(".ipynb"):
        raise GradingError(f"not a notebook: {where} (expected <student>.ipynb or <student>/<notebook>.ipynb)")
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise GradingError(f"{where} is larger than {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MiB")
    if len(parts) == 1:
        student = parts[0][: -len(".ipynb")]
        if len(notebooks) != 1:
            raise GradingError(f"{where}: the assignment has several notebooks ({', '.join(notebooks)}); "
                               "use <student>/<notebook>.ipynb")
        notebook = notebooks[0]
    elif len(parts) == 2:
        student, notebook = parts[0], parts[1][: -len(".ipynb")]
        if notebook not in notebooks:
            raise GradingError(f"{where}: {notebook}.ipynb is not a notebook of this assignment "
                               f"(expected {', '.join(n + '.ipynb' for n in notebooks)})")
    else:
        raise GradingError(f"{where} is nested too deep (expected <student>.ipynb or <student>/<notebook>.ipynb)")
    check_id("student", student, where)
    incoming = found.setdefault(student, Incoming(student))
    if notebook in incoming.notebooks:
        raise GradingError(f"{where}: student {student!r} has two copies of {notebook}.ipynb")
    incoming.notebooks[notebook] = data


def _read_file(path: Path) -> bytes:
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise GradingError(f"{path} is larger than {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MiB")
    return path.read_bytes()


def _check_entry(path: Path) -> None:
    if path.is_symlink():
        raise GradingError(f"symbolic link not allowed: {path}")
    if not path.is_dir() and not path.is_file():
        raise GradingError(f"not a regular file: {path}")


def read_folder(path: Path, notebooks: list[str]) -> Found:
    found = Found()
    for entry in sorted(path.iterdir()):
        if entry.name in _IGNORED:
            continue
        try:
            _check_entry(entry)
            if not entry.is_dir():
                _place(found, str(entry), (entry.name,), _read_file(entry), notebooks)
                continue
        except GradingError as error:
            found.refuse(error)
            continue
        for inner in sorted(entry.iterdir()):
            if inner.name in _IGNORED:
                continue
            try:
                _check_entry(inner)
                if inner.is_dir():
                    raise GradingError(f"{inner} is nested too deep (expected <student>/<notebook>.ipynb)")
                _place(found, str(inner), (entry.name, inner.name), _read_file(inner), notebooks)
            except GradingError as error:
                found.refuse(error)
    return found


def _zip_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, where: str) -> bytes | None:
    """The member's bytes, None for what is skipped (folders, metadata), or a GradingError."""
    name = member.filename
    if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise GradingError(f"path traversal in {where}")
    parts = PurePosixPath(name).parts
    if any(part == ".." for part in parts):
        raise GradingError(f"path traversal in {where}")
    if parts and parts[0] in _IGNORED or (len(parts) > 1 and parts[1] in _IGNORED) or member.is_dir():
        return None
    if stat.S_ISLNK(member.external_attr >> 16):
        raise GradingError(f"symbolic link not allowed: {where}")
    if member.flag_bits & 0x1:
        raise GradingError(f"encrypted member not supported: {where}")
    if member.file_size > MAX_NOTEBOOK_BYTES:
        raise GradingError(f"{where} is larger than {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MiB")
    try:
        with archive.open(member) as handle:
            data = handle.read(MAX_NOTEBOOK_BYTES + 1)  # the header's size may lie
    except (zipfile.BadZipFile, OSError, NotImplementedError, RuntimeError, EOFError) as exc:
        raise GradingError(f"cannot read {where}: {exc}") from None
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise GradingError(f"{where} is larger than {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MiB")
    return data


def read_zip(path: Path, notebooks: list[str]) -> Found:
    found = Found()
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise GradingError(f"not a valid zip file: {path} ({exc})") from None
    with archive:
        for member in archive.infolist():
            where = f"{path}!{member.filename}"
            try:
                data = _zip_member(archive, member, where)
                if data is not None:
                    _place(found, where, tuple(member.filename.rstrip("/").split("/")), data, notebooks)
            except GradingError as error:
                found.refuse(error)
    return found


def _inbound_dir(path: Path, course_id: str) -> Path:
    for candidate in (path / course_id / "inbound", path / "inbound", path):
        if candidate.is_dir() and candidate.name == "inbound":
            return candidate
    # An exchange root of one course under another id (a copy from elsewhere); never one of several
    # courses, whose submissions are not this course's.
    others = [p / "inbound" for p in sorted(path.iterdir()) if (p / "inbound").is_dir()] if path.is_dir() else []
    if len(others) == 1:
        return others[0]
    if others:
        raise GradingError(f"no inbound folder of course {course_id!r} in the exchange {path} (it has "
                           f"{', '.join(p.parent.name for p in others)}): pass --course-id")
    raise GradingError(f"no nbgrader exchange inbound folder in {path} "
                       f"(expected {path}/{course_id}/inbound/<student>+<assignment>+<timestamp>)")


def _owner(path: Path) -> str | None:
    """The user name owning ``path`` when that is someone else than the importer (else None: a
    folder the instructor copied carries no sign of who submitted it)."""
    uid = path.lstat().st_uid
    if uid == os.getuid():
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def read_exchange(path: Path, assignment: str, notebooks: list[str], course_id: str) -> Found:
    inbound = _inbound_dir(path, course_id)
    latest: dict[str, tuple[dt.datetime, Path, str]] = {}
    found = Found()
    for entry in sorted(inbound.iterdir()):
        parts = entry.name.split("+")
        if len(parts) < 3 or parts[1] != assignment or not entry.is_dir() or entry.is_symlink():
            continue
        student, stamp = parts[0], parts[2]
        if not is_valid_id(student):
            found.refuse(GradingError(f"bad student id {student!r} in {entry}"))
            continue
        owner = _owner(entry)
        if owner is not None and owner != student:
            # On a shared exchange every student may write into inbound/: only the folder's owner
            # (the account that submitted) can be the student it names.
            found.refuse(GradingError(f"{entry.name} in {inbound} was submitted by {owner!r}, not {student!r}"))
            continue
        stamp_file = entry / "timestamp.txt"
        if stamp_file.is_file() and not stamp_file.is_symlink():
            stamp = stamp_file.read_text(errors="replace").strip()[:100] or stamp
        try:
            when = parse_utc(stamp)
        except Exception:  # noqa: BLE001 - any unreadable timestamp: that submission is refused
            found.refuse(GradingError(f"bad timestamp {stamp!r} in {entry}"))
            continue
        if student not in latest or when > latest[student][0]:
            latest[student] = (when, entry, stamp)
    for student, (_, entry, stamp) in sorted(latest.items()):
        incoming = Incoming(student, timestamp=stamp)
        secret_file = entry / "submission_secret.txt"
        if secret_file.is_file() and not secret_file.is_symlink() and secret_file.stat().st_size <= 1024:
            incoming.secret = secret_file.read_text(errors="replace").strip()
        for notebook in notebooks:
            file = entry / f"{notebook}.ipynb"
            if not file.exists() and not file.is_symlink():
                continue  # this notebook was not handed in
            try:
                _check_entry(file)
                incoming.notebooks[notebook] = _read_file(file)
            except GradingError as error:
                found.refuse(error)
        if incoming.notebooks:
            found[student] = incoming
    return found


def _same(folder: Path, incoming: Incoming) -> bool:
    existing = {p.stem: p.read_bytes() for p in folder.glob("*.ipynb")}
    return existing == incoming.notebooks


def store(course: Course, assignment: str, found: dict[str, Incoming]) -> dict[str, list[str]]:
    """Write every submission; the one each replaces goes to ``archive/``. Returns students per outcome."""
    outcome: dict[str, list[str]] = {"new": [], "replaced": [], "unchanged": []}
    now = dt.datetime.now(dt.timezone.utc)
    for student, incoming in sorted(found.items()):
        folder = course.submitted_dir(student, assignment)
        if folder.exists() and _same(folder, incoming):
            # The same work handed in again: its new secret is the one the student's feedback is keyed by.
            if incoming.secret:
                atomic_write(folder / "submission_secret.txt", incoming.secret)
            outcome["unchanged"].append(student)
            continue
        staging = folder.parent / f".incoming-{assignment}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for notebook, data in incoming.notebooks.items():
            (staging / f"{notebook}.ipynb").write_bytes(data)
        (staging / "timestamp.txt").write_text(incoming.timestamp or now.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
        if incoming.secret:
            (staging / "submission_secret.txt").write_text(incoming.secret)
        if folder.exists():
            old_stamp = (folder / "timestamp.txt").read_text().strip() if (folder / "timestamp.txt").exists() else ""
            label = "".join(ch if ch.isalnum() else "-" for ch in old_stamp) or now.strftime("%Y%m%dT%H%M%S")
            archive = course.archive_dir(assignment, student) / label
            while archive.exists():
                archive = archive.with_name(archive.name + "-1")
            archive.parent.mkdir(parents=True, exist_ok=True)
            os.replace(folder, archive)
            outcome["replaced"].append(student)
        else:
            outcome["new"].append(student)
        os.replace(staging, folder)
    return outcome


def import_submissions(course: Course, assignment: str, *, source: Path | None = None,
                       exchange: Path | None = None) -> tuple[str, list[str]]:
    """Import every good entry; returns the summary line and one line per refused entry.

    Raises:
        GradingError when there is nothing to import at all (no such source, not a zip, no entry).
    """
    notebooks = assignment_notebooks(course, assignment)
    if exchange is not None:
        if not exchange.is_dir():
            raise GradingError(f"exchange folder not found: {exchange}")
        found = read_exchange(exchange, assignment, notebooks, course.course_id)
    else:
        assert source is not None
        if source.is_dir():
            found = read_folder(source, notebooks)
        elif source.is_file():
            found = read_zip(source, notebooks)
        else:
            raise GradingError(f"no such file or folder: {source}")
    if not found:
        refused = f" ({len(found.refused)} refused: {found.refused[0]})" if found.refused else ""
        raise GradingError(f"no submissions of {assignment} found in {exchange or source}{refused}")
    with course.lock("import"):
        outcome = store(course, assignment, found)
    parts = [f"{len(v)} {k}" for k, v in outcome.items() if v]
    archived = f"; replaced submissions kept in {course.root / 'archive' / assignment}" if outcome["replaced"] else ""
    refused = f"; {len(found.refused)} entry(ies) refused" if found.refused else ""
    summary = f"imported {assignment} for {len(found)} student(s): {', '.join(parts)}{archived}{refused}"
    return summary, [f"REFUSED {line}" for line in found.refused]
