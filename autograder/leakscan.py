"""Find solution code and hidden tests where students can see them.

The secrets are the lines inside ``### BEGIN SOLUTION`` / ``### END SOLUTION`` and
``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` in the source notebooks (and the whole of a
solution cell without markers, which nbgrader replaces entirely), and every line of an exercise's
``reference.py`` (the judge's own implementation, beside the source notebook). A line counts only when it is
distinctive: not blank, not a comment, at least ``MIN_LENGTH`` characters, and found neither in
the package ``attention_course/`` (which students have anyway) nor outside the secret regions of
the same notebook. Whitespace is collapsed before comparing.

Any folder or file can be scanned: released notebooks, feedback HTML, a built wheel (a zip, read
member by member), and the built book once it exists (``python -m autograder leakscan _build/html``).
"""

from __future__ import annotations

import html
import json
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

MIN_LENGTH = 25
MAX_FILE_BYTES = 100 * 1024 * 1024
_MARKERS = {"solution": ("BEGIN SOLUTION", "END SOLUTION"), "hidden test": ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")}
_TAG = re.compile(r"<[^>]*>")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TEXT_SUFFIXES = {".py", ".txt", ".md", ".json", ".js", ".css", ".cfg", ".toml", ".yml", ".yaml", ".csv",
                  ".rst", ".svg", ".xml", ".tex", ".ipynb", ".html", ".htm", ".in", ""}


def normalize(line: str) -> str:
    return " ".join(line.split())


@dataclass(frozen=True)
class Secret:
    line: str          # normalized
    kind: str          # "solution" | "hidden test"
    origin: str        # "<assignment>/<notebook>.ipynb, cell <grade_id>"


@dataclass(frozen=True)
class Leak:
    where: str
    secret: Secret


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _regions(source: str, is_solution_cell: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """(kind, line) inside secret regions, and the lines outside them."""
    inside: list[tuple[str, str]] = []
    outside: list[str] = []
    lines = source.splitlines()
    has_markers = any(begin in line for begin, _ in _MARKERS.values() for line in lines)
    if is_solution_cell and not has_markers:
        return [("solution", line) for line in lines], []
    kind = None
    for line in lines:
        started = next((k for k, (begin, _) in _MARKERS.items() if begin in line), None)
        if started:
            kind = started
            continue
        if kind and _MARKERS[kind][1] in line:
            kind = None
            continue
        (inside.append((kind, line)) if kind else outside.append(line))
    return inside, outside


def package_text(package_dir: Path) -> str:
    """The package's text, normalized line by line (students have all of it)."""
    lines: list[str] = []
    for path in sorted(Path(package_dir).rglob("*")):
        if path.is_file() and path.suffix in (".py", ".txt", ".md", ".json", ".tsv", ".csv"):
            try:
                lines.extend(normalize(line) for line in path.read_text(errors="ignore").splitlines())
            except OSError:
                continue
    return "\n".join(lines)


def _notebook_regions(path: Path) -> tuple[list[tuple[str, str, str]], list[str]]:
    """((kind, line, grade id) inside secret regions, lines outside them) of one notebook, normalized."""
    nb = json.loads(Path(path).read_text())
    found: list[tuple[str, str, str]] = []
    public: list[str] = []
    for index, cell in enumerate(nb.get("cells", [])):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        inside, outside = _regions(_source(cell), bool(meta.get("solution")))
        public.extend(normalize(line) for line in outside)
        name = meta.get("grade_id", f"#{index}")
        found.extend((kind, normalize(line), name) for kind, line in inside)
    return found, public


def notebook_secrets(path: Path, known_public: str, origin_prefix: str = "") -> list[Secret]:
    """The distinctive secret lines of one source notebook.

    A line is not distinctive when it occurs, even as part of a longer line, in ``known_public``
    (the package, the visible parts of every notebook) or outside the secret regions of this
    notebook: students see those anyway.
    """
    found, public = _notebook_regions(path)
    public_text = "\n".join(public)
    secrets = {}
    for kind, line, name in found:
        if (not line or line.startswith("#") or len(line) < MIN_LENGTH
                or line in known_public or line in public_text):
            continue
        secrets.setdefault(line, Secret(line, kind, f"{origin_prefix}{Path(path).name}, cell {name}"))
    return list(secrets.values())


def course_secrets(source_dir: Path, package_dir: Path, assignments: list[str] | None = None,
                   public_sources: tuple[Path, ...] = ()) -> list[Secret]:
    """Secrets of every source notebook (or of ``assignments``) under ``source_dir``.

    What one notebook shows (say, an import that another exercise hides) is no secret anywhere,
    and neither is what the released notebooks of ``public_sources`` show (other source folders
    whose student versions are published, as the book publishes every exercise's).
    """
    all_folders = sorted(p for p in Path(source_dir).iterdir() if p.is_dir())
    public_folders = sorted(p for source in public_sources if Path(source).is_dir()
                            for p in Path(source).iterdir() if p.is_dir())
    visible = [package_text(package_dir)]
    for folder in all_folders + public_folders:
        for notebook in sorted(folder.glob("*.ipynb")):
            visible.extend(_notebook_regions(notebook)[1])
    known = "\n".join(visible)
    secrets: list[Secret] = []
    folders = [Path(source_dir) / a for a in assignments] if assignments else all_folders
    for folder in folders:
        for notebook in sorted(folder.glob("*.ipynb")):
            secrets.extend(notebook_secrets(notebook, known, f"{folder.name}/"))
        reference = folder / REFERENCE_FILE
        if reference.is_file():
            secrets.extend(file_secrets(reference, known, f"{folder.name}/"))
    return secrets


REFERENCE_FILE = "reference.py"   # an exercise's judge-side reference (autograder/references.py): all secret


def file_secrets(path: Path, known_public: str, origin_prefix: str = "") -> list[Secret]:
    """Every distinctive line of a file that is secret as a whole (an exercise's ``reference.py``)."""
    secrets = {}
    for line in (normalize(text) for text in Path(path).read_text(errors="ignore").splitlines()):
        if not line or line.startswith("#") or len(line) < MIN_LENGTH or line in known_public:
            continue
        secrets.setdefault(line, Secret(line, "solution", f"{origin_prefix}{Path(path).name}"))
    return list(secrets.values())


def _strings(value, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)


def text_of(name: str, data: bytes) -> str:
    """The readable text of a file: JSON strings of a notebook, the text of HTML, else the bytes."""
    text = data.decode("utf-8", errors="ignore")
    suffix = Path(name).suffix.lower()
    if suffix == ".ipynb":
        try:
            parts: list[str] = []
            _strings(json.loads(text), parts)
            text = "\n".join(parts)
        except ValueError:
            pass
    if suffix in (".html", ".htm", ".svg", ".xml"):
        # Code in HTML is split into highlighted <span>s; the text between tags is the code.
        text = html.unescape(_TAG.sub("", text))
    elif suffix == ".ipynb":
        # Raw sources (where "<" is code), then the same without tags (HTML outputs).
        text = text + "\n" + html.unescape(_TAG.sub("", text))
    return _ANSI.sub("", text)


def _files(path: Path):
    """(where, bytes) for every file under ``path``, and every member of zips and wheels in it."""
    candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in candidates:
        if file.stat().st_size > MAX_FILE_BYTES:
            continue
        if file.suffix.lower() in (".whl", ".zip"):
            try:
                with zipfile.ZipFile(file) as archive:
                    for member in archive.infolist():
                        if not member.is_dir() and member.file_size <= MAX_FILE_BYTES:
                            yield f"{file}!{member.filename}", archive.read(member)
            except zipfile.BadZipFile:
                yield str(file), file.read_bytes()
        else:
            yield str(file), file.read_bytes()


def scan(paths: list[Path], secrets: list[Secret], kinds: tuple[str, ...] = ("solution", "hidden test")) -> list[Leak]:
    """Every secret line (of ``kinds``) found in any file under ``paths``."""
    wanted = [s for s in secrets if s.kind in kinds]
    leaks: list[Leak] = []
    for path in paths:
        for where, data in _files(Path(path)):
            blob = "\n".join(normalize(line) for line in text_of(where, data).splitlines())
            for secret in wanted:
                if secret.line in blob:
                    leaks.append(Leak(where, secret))
    return leaks


# --- what an account can read (``hub start`` runs this as a student) --------------------------------

MARKERS = tuple(begin for begin, _ in _MARKERS.values())   # a source notebook, or a copy of one


def _markers_in_code(text: str) -> bool:
    """Whether a notebook's code cells hold an nbgrader BEGIN marker (as a source notebook's do); a
    markdown cell that names the markers (the instructor's guide) is prose. Text that is not a
    notebook counts wherever the marker is."""
    try:
        cells = json.loads(text).get("cells")
        sources = ["".join(cell.get("source", "")) if isinstance(cell.get("source"), list) else cell.get("source", "")
                   for cell in cells if cell.get("cell_type") == "code"]
    except (ValueError, AttributeError, TypeError):
        return any(marker in text for marker in MARKERS)
    return any(marker in source for source in sources for marker in MARKERS)


def scan_readable(paths: list[str], git_dirs: list[str], secrets: list[Secret]) -> list[dict]:
    """Leaks in the files of ``paths`` that this process can open, and in every object of the git
    repositories ``git_dirs`` it can read; unreadable ones are skipped (that is the point), and so are
    the account's own files (its own work).

    Besides the secret lines, nbgrader's ``BEGIN SOLUTION`` / ``BEGIN HIDDEN TESTS`` markers in a
    notebook count: a copy of a source notebook is a leak even where its lines are not distinctive
    (elsewhere the markers are only words: the course's own pages name them)."""
    import subprocess

    found = []

    def check(where: str, data: bytes) -> None:
        text = text_of(where, data)
        blob = "\n".join(normalize(line) for line in text.splitlines())
        hit = next((s for s in secrets if s.line in blob), None)
        if hit is not None:
            found.append({"where": where, "kind": hit.kind, "origin": hit.origin})
        elif where.lower().endswith(".ipynb") and _markers_in_code(data.decode("utf-8", errors="ignore")):
            found.append({"where": where, "kind": "source notebook", "origin": "an nbgrader BEGIN marker"})

    me = os.getuid()
    for path in paths:
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_uid == me:
                    continue   # the account's own file: what it wrote (a correct answer shares solution lines)
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES:
            continue
        if Path(path).suffix.lower() in (".whl", ".zip"):
            try:
                import io

                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    for member in archive.infolist():
                        if not member.is_dir() and member.file_size <= MAX_FILE_BYTES:
                            check(f"{path}!{member.filename}", archive.read(member))
                continue
            except zipfile.BadZipFile:
                pass
        check(path, data)
    for git_dir in git_dirs:
        try:
            done = subprocess.run(["git", "-c", "safe.directory=*", f"--git-dir={git_dir}", "cat-file",
                                   "--batch-all-objects", "--batch"], capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and done.stdout:
            check(f"{git_dir} (git objects)", done.stdout)
    return found


def main() -> int:
    """``python -m autograder.leakscan`` < JSON {paths, git_dirs, secrets}: JSON leaks on stdout."""
    import sys

    request = json.loads(sys.stdin.read())
    secrets = [Secret(**s) for s in request["secrets"]]
    json.dump(scan_readable(request["paths"], request["git_dirs"], secrets), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
