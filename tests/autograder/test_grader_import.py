"""``import``: folders, zips and the nbgrader exchange.

A bad entry is refused by name (exit 1) and the good ones are imported; input with nothing to
import at all (no such folder, not a zip, no assignment) is one clear line, exit 2, nothing copied.
"""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.cli import main

ASSIGNMENT = "fx_softmax"


def cli(course, capsys, *args) -> tuple[int, str, str]:
    code = main(["--course-dir", str(course.root), "--source", str(course.source), *args])
    out, err = capsys.readouterr()
    return code, out, err


def submitted(course, student: str) -> Path:
    return course.root / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"


@pytest.fixture
def notebook_text(fixture_course) -> str:
    return nbformat.writes(fixture_course.solved(ASSIGNMENT))


def _one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


def _refused(code: int, out: str, fragment: str, imported: int) -> None:
    """Exit 1; the refused entry named on a REFUSED line; the good ones imported."""
    assert code == 1, out
    refused = [line for line in out.splitlines() if line.startswith("REFUSED ")]
    assert len(refused) == 1 and fragment in refused[0], out
    assert f"for {imported} student(s)" in out, out


def test_folder_of_student_notebooks(fixture_course, capsys, tmp_path, notebook_text):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "alice.ipynb").write_text(notebook_text)
    (folder / "bob").mkdir()
    (folder / "bob" / f"{ASSIGNMENT}.ipynb").write_text(notebook_text)
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    assert code == 0 and "2 new" in out
    for student in ("alice", "bob"):
        assert submitted(fixture_course, student).read_text() == notebook_text
        assert (submitted(fixture_course, student).parent / "timestamp.txt").exists()


@pytest.mark.parametrize("name, fragment", [
    ("bad name.ipynb", "bad student id 'bad name'"),
    ("-dash.ipynb", "bad student id '-dash'"),
    ("a+b.ipynb", "bad student id 'a+b'"),
    ("notes.txt", "not a notebook"),
])
def test_a_bad_entry_in_a_folder_is_refused_and_the_good_ones_imported(fixture_course, capsys, tmp_path,
                                                                     notebook_text, name, fragment):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.ipynb").write_text(notebook_text)
    (folder / name).write_text(notebook_text)
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    _refused(code, out, fragment, imported=1)
    assert sorted(p.name for p in (fixture_course.root / "submitted").iterdir()) == ["good"]


def test_a_notebook_of_another_name_links_and_oversized_files_are_refused(fixture_course, capsys, tmp_path,
                                                                         notebook_text, monkeypatch):
    folder = tmp_path / "in"
    (folder / "carol").mkdir(parents=True)
    (folder / "carol" / "other.ipynb").write_text(notebook_text)
    (folder / "alice.ipynb").write_text(notebook_text)
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    _refused(code, out, "other.ipynb is not a notebook of this assignment", imported=1)
    (folder / "carol" / "other.ipynb").unlink()
    (folder / "dave.ipynb").symlink_to(fixture_course.root / "gradebook.db")
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    _refused(code, out, "symbolic link not allowed", imported=1)
    (folder / "dave.ipynb").unlink()
    import autograder.submissions

    monkeypatch.setattr(autograder.submissions, "MAX_NOTEBOOK_BYTES", len(notebook_text) + 10)
    (folder / "erin.ipynb").write_text(notebook_text + " " * 100)
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    _refused(code, out, "erin.ipynb is larger than", imported=1)
    assert not (fixture_course.root / "submitted" / "erin").exists()


def _zip(path: Path, members: dict[str, str], links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return path


def test_zip_of_notebooks(fixture_course, capsys, tmp_path, notebook_text):
    archive = _zip(tmp_path / "in.zip", {"alice.ipynb": notebook_text, f"bob/{ASSIGNMENT}.ipynb": notebook_text,
                                         "__MACOSX/._alice.ipynb": "junk"})
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(archive))
    assert code == 0 and "2 new" in out
    assert submitted(fixture_course, "bob").read_text() == notebook_text


@pytest.mark.parametrize("members, links, fragment", [
    ({"../evil.ipynb": "{}"}, (), "path traversal"),
    ({"alice/../../evil.ipynb": "{}"}, (), "path traversal"),
    ({"/etc/evil.ipynb": "{}"}, (), "path traversal"),
    ({"alice\\..\\evil.ipynb": "{}"}, (), "path traversal"),
    ({"readme.md": "hello"}, (), "not a notebook"),
    ({"x/y/z.ipynb": "{}"}, (), "nested too deep"),
    ({}, ("alice.ipynb",), "symbolic link not allowed"),
    ({"bad name.ipynb": "{}"}, (), "bad student id"),
])
def test_bad_zip_members_are_refused_and_the_good_ones_imported(fixture_course, capsys, tmp_path, notebook_text,
                                                                members, links, fragment):
    archive = _zip(tmp_path / "in.zip", {"good.ipynb": notebook_text, **members}, links)
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(archive))
    _refused(code, out, fragment, imported=1)
    assert sorted(p.name for p in (fixture_course.root / "submitted").iterdir()) == ["good"]


def test_a_file_that_is_no_zip(fixture_course, capsys, tmp_path):
    fake = tmp_path / "in.zip"
    fake.write_bytes(b"PK\x03\x04 this is not really a zip")
    code, _, err = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(fake))
    _one_line_error(code, err, "not a valid zip file")


def test_reimport_keeps_the_replaced_submission(fixture_course, capsys, tmp_path, notebook_text):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "alice.ipynb").write_text(notebook_text)
    assert cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))[0] == 0
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    assert code == 0 and "1 unchanged" in out
    changed = notebook_text.replace("shifted_scores", "shifted")
    (folder / "alice.ipynb").write_text(changed)
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    assert code == 0 and "1 replaced" in out
    assert submitted(fixture_course, "alice").read_text() == changed
    archived = list((fixture_course.root / "archive" / ASSIGNMENT / "alice").rglob(f"{ASSIGNMENT}.ipynb"))
    assert [p.read_text() for p in archived] == [notebook_text]


def test_exchange_takes_the_latest_submission(fixture_course, capsys, tmp_path, notebook_text):
    inbound = tmp_path / "exchange" / "attention_course" / "inbound"
    early = inbound / f"alice+{ASSIGNMENT}+2024-03-01 09:00:00.000000 UTC+a1b2"
    late = inbound / f"alice+{ASSIGNMENT}+2024-03-02 09:00:00.000000 UTC+c3d4"
    other = inbound / "alice+fx_scale+2024-03-03 09:00:00.000000 UTC+e5f6"
    for folder, text in ((early, "{}"), (late, notebook_text), (other, "{}")):
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(text)
        (folder / "timestamp.txt").write_text(folder.name.split("+")[2])
        (folder / "scratch.txt").write_text("ignored")
    code, out, err = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from-exchange", str(tmp_path / "exchange"))
    assert code == 0, err
    assert submitted(fixture_course, "alice").read_text() == notebook_text
    assert "2024-03-02" in (submitted(fixture_course, "alice").parent / "timestamp.txt").read_text()
    assert not (submitted(fixture_course, "alice").parent / "scratch.txt").exists()


def test_import_needs_a_released_assignment(fixture_course, capsys, tmp_path, notebook_text):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "alice.ipynb").write_text(notebook_text)
    code, _, err = cli(fixture_course, capsys, "import", "no_such_assignment", "--from", str(folder))
    _one_line_error(code, err, "not in the gradebook", "release")
    code, _, err = cli(fixture_course, capsys, "import", "../etc", "--from", str(folder))
    _one_line_error(code, err, "bad assignment id")


def test_usage_errors_are_one_line_with_status_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["autograde"])
    assert exit_info.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        main(["autograde", "fx", "--workers", "0"])
    assert "must be at least 1" in capsys.readouterr().err


def test_zip_reader_never_writes_outside(fixture_course, capsys, tmp_path, notebook_text):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("alice.ipynb", notebook_text)
        archive.writestr("../../outside.ipynb", notebook_text)
    (tmp_path / "in.zip").write_bytes(buffer.getvalue())
    code, out, _ = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(tmp_path / "in.zip"))
    assert code == 1 and "path traversal" in out
    assert not list(tmp_path.parent.rglob("outside.ipynb"))


def test_nothing_to_import_is_an_error(fixture_course, capsys, tmp_path, notebook_text):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "bad name.ipynb").write_text(notebook_text)
    code, _, err = cli(fixture_course, capsys, "import", ASSIGNMENT, "--from", str(folder))
    _one_line_error(code, err, "no submissions", "1 refused", "bad student id")
    assert not (fixture_course.root / "submitted").exists()
