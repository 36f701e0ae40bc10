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
import errno
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
    from .records import open_gradebook

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


# Folders and files are opened once, without following links (O_NOFOLLOW), and checked and read
# through that descriptor (fstat, then read): a folder or file swapped for a link, or for another
# one, between the check and the read is never what gets read.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC   # NONBLOCK: a FIFO does not hang us


def _open(name: str | Path, flags: int, where: str, dir_fd: int | None = None) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            except OSError:
                link = exc.errno == errno.ELOOP
            raise GradingError(f"{'symbolic link not allowed' if link else 'not a folder'}: {where}") from None
        raise GradingError(f"cannot open {where}: {exc.strerror}") from None


def _open_dir(name: str | Path, where: str, dir_fd: int | None = None) -> tuple[int, os.stat_result]:
    fd = _open(name, _DIR_FLAGS, where, dir_fd)
    info = os.fstat(fd)
    if not stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise GradingError(f"not a folder: {where}")
    return fd, info


def _kind(dir_fd: int, name: str) -> str:
    """"dir", "file", "link" or "other", without following a link."""
    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    return ("dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else
            "link" if stat.S_ISLNK(mode) else "other")


def _read_at(dir_fd: int, name: str, where: str, owner: int | None = None, limit: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of the regular file ``name`` in ``dir_fd``: not a link, not hard-linked from
    elsewhere, owned by ``owner`` (a uid) if given, at most ``limit`` bytes."""
    fd = _open(name, _FILE_FLAGS, where, dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise GradingError(f"not a regular file: {where}")
        if info.st_nlink != 1:
            raise GradingError(f"a file with other names (a hard link) is not allowed: {where}")
        if owner is not None and info.st_uid != owner:
            raise GradingError(f"{where} belongs to {_user_name(info.st_uid)!r}, not to the account that submitted")
        if info.st_size > limit:
            raise GradingError(f"{where} is larger than {limit // (1024 * 1024) or limit} "
                               f"{'MiB' if limit >= 1024 * 1024 else 'bytes'}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise GradingError(f"{where} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def read_folder(path: Path, notebooks: list[str]) -> Found:
    found = Found()
    top, _ = _open_dir(path, str(path))
    try:
        for name in sorted(os.listdir(top)):
            if name in _IGNORED:
                continue
            where = str(path / name)
            try:
                kind = _kind(top, name)
                if kind == "file":
                    _place(found, where, (name,), _read_at(top, name, where), notebooks)
                    continue
                if kind != "dir":
                    raise GradingError(f"{'symbolic link not allowed' if kind == 'link' else 'not a regular file'}: "
                                       f"{where}")
                inner_fd, _ = _open_dir(name, where, top)
            except GradingError as error:
                found.refuse(error)
                continue
            try:
                for inner in sorted(os.listdir(inner_fd)):
                    if inner in _IGNORED:
                        continue
                    inner_where = f"{where}/{inner}"
                    try:
                        if _kind(inner_fd, inner) == "dir":
                            raise GradingError(f"{inner_where} is nested too deep "
                                               "(expected <student>/<notebook>.ipynb)")
                        _place(found, inner_where, (name, inner), _read_at(inner_fd, inner, inner_where), notebooks)
                    except GradingError as error:
                        found.refuse(error)
            finally:
                os.close(inner_fd)
    finally:
        os.close(top)
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


def _submitter(info: os.stat_result) -> str | None:
    """The user name owning a submission folder when that is someone else than the importer (else
    None: a folder the instructor copied carries no sign of who submitted it)."""
    return None if info.st_uid == os.getuid() else _user_name(info.st_uid)


def _canonical_time(stamp: str) -> tuple[dt.datetime, str]:
    """The time a submission names, and that time written the one way nbgrader writes it (what
    the student wrote is never stored or shown as it came)."""
    when = parse_utc(stamp)
    return when, when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def _submission_entry(inbound_fd: int, name: str, where: str, student: str) -> tuple[os.stat_result, str]:
    """Check one ``<student>+<assignment>+<timestamp>`` folder: a real folder, made by that student
    (or the importer); returns its stat and the time it was submitted, canonical."""
    # On a shared exchange every student may write into inbound/: only the folder's owner (the
    # account that submitted) can be the student it names. Asked first of the name itself, so that
    # a folder its maker kept private is named for what it is; then of what is opened.
    try:
        named = os.stat(name, dir_fd=inbound_fd, follow_symlinks=False)
    except OSError as exc:
        raise GradingError(f"cannot open {where}: {exc.strerror}") from None
    _check_submitter(named, where, student)
    fd, info = _open_dir(name, where, inbound_fd)
    try:
        _check_submitter(info, where, student)
        stamp = name.split("+")[2]
        if _kind_or_none(fd, "timestamp.txt") is not None:
            stamp = _read_at(fd, "timestamp.txt", f"{where}/timestamp.txt", _owner_uid(info), 1000).decode(
                errors="replace").strip()[:100] or stamp
        try:
            return info, _canonical_time(stamp)[1]
        except Exception:  # noqa: BLE001 - any unreadable timestamp: that submission is refused
            raise GradingError(f"bad timestamp {stamp!r} in {where}") from None
    finally:
        os.close(fd)


def _check_submitter(info: os.stat_result, where: str, student: str) -> None:
    owner = _submitter(info) if stat.S_ISDIR(info.st_mode) else None
    if owner is not None and owner != student:
        raise GradingError(f"{where} was submitted by {owner!r}, not {student!r}")


def _kind_or_none(dir_fd: int, name: str) -> str | None:
    try:
        return _kind(dir_fd, name)
    except FileNotFoundError:
        return None


def _owner_uid(info: os.stat_result) -> int | None:
    """The uid every file of a submission must have: its folder's owner, when that is a student."""
    return None if info.st_uid == os.getuid() else info.st_uid


def read_exchange(path: Path, assignment: str, notebooks: list[str], course_id: str) -> Found:
    inbound = _inbound_dir(path, course_id)
    latest: dict[str, tuple[dt.datetime, str, os.stat_result, str]] = {}
    found = Found()
    inbound_fd, _ = _open_dir(inbound, str(inbound))
    try:
        for name in sorted(os.listdir(inbound_fd)):
            parts = name.split("+")
            if len(parts) < 3 or parts[1] != assignment:
                continue
            student, where = parts[0], str(inbound / name)
            if not is_valid_id(student):
                found.refuse(GradingError(f"bad student id {student!r} in {where}"))
                continue
            try:
                info, stamp = _submission_entry(inbound_fd, name, where, student)
            except GradingError as error:
                found.refuse(error)
                continue
            when = parse_utc(stamp)
            if student not in latest or when > latest[student][0]:
                latest[student] = (when, name, info, stamp)
        for student, (_, name, info, stamp) in sorted(latest.items()):
            _read_entry(inbound_fd, inbound, name, info, stamp, student, notebooks, found)
    finally:
        os.close(inbound_fd)
    return found


def _read_entry(inbound_fd: int, inbound: Path, name: str, info: os.stat_result, stamp: str, student: str,
                notebooks: list[str], found: Found) -> None:
    """Read one checked submission folder into ``found`` (or refuse it there, with the reason)."""
    where = str(inbound / name)
    try:
        fd, again = _open_dir(name, where, inbound_fd)
    except GradingError as error:
        found.refuse(error)
        return
    try:
        if (again.st_dev, again.st_ino, again.st_uid) != (info.st_dev, info.st_ino, info.st_uid):
            found.refuse(GradingError(f"{where} changed while it was being collected"))
            return
        owner = _owner_uid(info)
        incoming = Incoming(student, timestamp=stamp)
        if _kind_or_none(fd, "submission_secret.txt") is not None:
            try:
                incoming.secret = _read_at(fd, "submission_secret.txt", f"{where}/submission_secret.txt",
                                           owner, 1024).decode(errors="replace").strip()
            except GradingError as error:
                found.refuse(error)
        for notebook in notebooks:
            file = f"{notebook}.ipynb"
            if _kind_or_none(fd, file) is None:
                continue  # this notebook was not handed in
            try:
                incoming.notebooks[notebook] = _read_at(fd, file, f"{where}/{file}", owner)
            except GradingError as error:
                found.refuse(error)
        if incoming.notebooks:
            found[student] = incoming
    finally:
        os.close(fd)


def inbound_names(path: Path, course_id: str, forged: list[tuple[str, str]] | None = None
                  ) -> list[tuple[str, str, str]]:
    """``(folder name, student, assignment)`` of every submission in the exchange's inbound
    folder of ``course_id`` that the student it names made (``read_submission`` checks and reads
    one). A folder made by someone else is left out; with ``forged``, its ``(name, maker)`` is
    added there."""
    inbound = _inbound_dir(path, course_id)
    found = []
    for name in sorted(os.listdir(inbound)):
        parts = name.split("+")
        if len(parts) >= 3 and is_valid_id(parts[0]) and is_valid_id(parts[1]):
            try:
                info = os.stat(inbound / name, follow_symlinks=False)
            except OSError:
                continue   # (gone since it was listed)
            maker = _submitter(info) if stat.S_ISDIR(info.st_mode) else None
            if maker is not None and maker != parts[0]:
                if forged is not None:
                    forged.append((name, maker))
                continue
            found.append((name, parts[0], parts[1]))
    return found


def read_submission(path: Path, name: str, notebooks: list[str], course_id: str) -> Incoming:
    """One submission folder of the exchange, checked as ``collect`` checks it (made by the
    student it names, no links, files of that student's only) and read through its descriptors;
    GradingError with the reason otherwise."""
    inbound = _inbound_dir(path, course_id)
    parts = name.split("+")
    if len(parts) < 3 or "/" in name or not is_valid_id(parts[0]):
        raise GradingError(f"not a submission folder: {name!r}")
    found = Found()
    inbound_fd, _ = _open_dir(inbound, str(inbound))
    try:
        info, stamp = _submission_entry(inbound_fd, name, str(inbound / name), parts[0])
        _read_entry(inbound_fd, inbound, name, info, stamp, parts[0], notebooks, found)
    finally:
        os.close(inbound_fd)
    if found.refused:
        raise GradingError(found.refused[0])
    if parts[0] not in found:
        raise GradingError(f"{inbound / name} holds none of the assignment's notebooks")
    return found[parts[0]]


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
