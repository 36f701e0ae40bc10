"""nbgrader's exchange from the instructor's side: ``publish``, ``collect``, ``return-feedback``.

The course hub's end-to-end test (test_hub.py) runs these through real users; here each rule is
checked on its own, in a temporary exchange: who a submission is from, whose feedback is whose,
and that nothing runs nbgrader's own (unsandboxed) autograde.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbgrader.utils import notebook_hash

from autograder.cli import main
from grader_helpers import needs_bwrap

ASSIGNMENT = "fx_softmax"
COURSE = "attention_course"


def cli(course, capsys, *args) -> tuple[int, str, str]:
    code = main(["--course-dir", str(course.root), "--source", str(course.source), *args])
    out, err = capsys.readouterr()
    return code, out, err


def submit(exchange, student: str, stamp: str, text: str, secret: str | None = None):
    """A submission laid out as nbgrader's ExchangeSubmit writes it."""
    folder = exchange / COURSE / "inbound" / f"{student}+{ASSIGNMENT}+{stamp}+{os.urandom(4).hex()}"
    folder.mkdir(parents=True)
    (folder / f"{ASSIGNMENT}.ipynb").write_text(text)
    (folder / "timestamp.txt").write_text(stamp)
    if secret:
        (folder / "submission_secret.txt").write_text(secret)
    return folder


@pytest.fixture
def notebook_text(fixture_course) -> str:
    return nbformat.writes(fixture_course.solved(ASSIGNMENT))


def test_the_steps_need_an_exchange_and_what_comes_before(fixture_course, capsys, tmp_path):
    for command in ("publish", "collect", "return-feedback"):
        code, _, err = cli(fixture_course, capsys, command, ASSIGNMENT)
        assert code == 2 and "no exchange" in err and len(err.strip().splitlines()) == 1, err
    exchange = ["--exchange", str(tmp_path / "exchange")]
    code, _, err = main(["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source), *exchange,
                         "return-feedback", ASSIGNMENT]), *capsys.readouterr()
    assert code == 2 and "no feedback pages" in err and "feedback fx_softmax" in err
    (fixture_course.root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").unlink()
    (fixture_course.root / "release" / ASSIGNMENT).rmdir()
    code, _, err = main(["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source), *exchange,
                         "publish", ASSIGNMENT]), *capsys.readouterr()
    assert code == 2 and "nothing released yet" in err


def test_collect_reads_this_courses_inbound_only(fixture_course, capsys, tmp_path, notebook_text):
    exchange = tmp_path / "exchange"
    other = exchange / "another_course" / "inbound" / f"alice+{ASSIGNMENT}+2024-03-01 09:00:00.000000 UTC+ab"
    other.mkdir(parents=True)
    (other / f"{ASSIGNMENT}.ipynb").write_text(notebook_text)
    (exchange / "third_course" / "inbound").mkdir(parents=True)
    code, _, err = main(["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source),
                         "--exchange", str(exchange), "collect", ASSIGNMENT]), *capsys.readouterr()
    assert code == 2 and "no inbound folder of course 'attention_course'" in err, err
    assert not (fixture_course.root / "submitted" / "alice").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder owned by another user needs root")
def test_a_submission_counts_only_for_the_account_that_made_it(fixture_course, capsys, tmp_path, notebook_text):
    exchange = tmp_path / "exchange"
    submit(exchange, "alice", "2024-03-01 09:00:00.000000 UTC", notebook_text, secret="a" * 128)
    # someone (uid 65534, "nobody") drops a later submission into the shared inbound under bob's name
    forged = submit(exchange, "bob", "2024-03-02 09:00:00.000000 UTC", notebook_text)
    for path in (forged, *forged.iterdir()):
        os.chown(path, 65534, 65534)
    code, out, err = main(["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source),
                           "--exchange", str(exchange), "collect", ASSIGNMENT]), *capsys.readouterr()
    assert code == 1, err
    assert "REFUSED" in out and "not 'bob'" in out and "for 1 student(s)" in out
    assert not (fixture_course.root / "submitted" / "bob").exists()
    alice = fixture_course.root / "submitted" / "alice" / ASSIGNMENT
    assert (alice / "submission_secret.txt").read_text() == "a" * 128


@needs_bwrap
def test_feedback_goes_back_under_the_students_own_key(fixture_course, capsys, tmp_path, notebook_text):
    exchange = tmp_path / "exchange"
    args = ["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source),
            "--exchange", str(exchange)]
    code, out, err = main([*args, "publish", ASSIGNMENT]), *capsys.readouterr()
    assert code == 0, err
    assert (exchange / COURSE / "outbound" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    secrets = {"alice": "1" * 128, "carol": "2" * 128}
    for student, secret in secrets.items():
        submit(exchange, student, "2024-03-01 09:00:00.000000 UTC", notebook_text, secret)
    for command in ("collect", "autograde", "feedback"):
        code, out, err = main([*args, command, ASSIGNMENT]), *capsys.readouterr()
        assert code == 0, (command, out, err)
    # imported again unchanged, with a new secret (the same work handed in once more): that one counts
    submit(exchange, "carol", "2024-03-02 09:00:00.000000 UTC", notebook_text, "3" * 128)
    secrets["carol"] = "3" * 128
    for command in ("collect", "feedback", "return-feedback"):
        code, out, err = main([*args, command, ASSIGNMENT]), *capsys.readouterr()
        assert code == 0, (command, out, err)
    returned = sorted(p.name for p in (exchange / COURSE / "feedback").iterdir())
    expected = sorted(f"{notebook_hash(secret=s, notebook_id=ASSIGNMENT)}.html" for s in secrets.values())
    assert returned == expected


def test_nbgrader_autograde_is_refused_in_a_course_directory(fixture_course, tmp_path, notebook_text):
    """The formgrader's autograde button and `nbgrader autograde` would run student code unsandboxed."""
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "alice.ipynb").write_text(notebook_text)
    assert fixture_course.cli("import", ASSIGNMENT, "--from", str(incoming)).returncode == 0
    marker = fixture_course.root / "autograded" / "alice" / ASSIGNMENT / "kept.txt"
    marker.parent.mkdir(parents=True)
    marker.write_text("ours")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"],
                          cwd=fixture_course.root, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "switched off for this course" in done.stderr and "python -m autograder autograde" in done.stderr
    assert marker.read_text() == "ours"


@pytest.mark.skipif(os.geteuid() != 0, reason="files owned by other users need root")
def test_collect_checks_every_file_and_follows_no_link(fixture_course, capsys, tmp_path, notebook_text):
    """A submission folder is the submitting account's, and so must every file in it be: a
    notebook put there by someone else, a link (to another student's work, to the course's source
    notebook), a hard link, a FIFO: each refused, with its name."""
    exchange = tmp_path / "exchange"
    secret_elsewhere = tmp_path / "elsewhere.ipynb"
    secret_elsewhere.write_text(notebook_text)
    cases = {}
    for student, make in (("alice", lambda f: (f / f"{ASSIGNMENT}.ipynb").symlink_to(secret_elsewhere)),
                          ("bob", lambda f: os.link(secret_elsewhere, f / f"{ASSIGNMENT}.ipynb")),
                          ("carol", lambda f: os.mkfifo(f / f"{ASSIGNMENT}.ipynb")),
                          ("nobody", lambda f: (f / f"{ASSIGNMENT}.ipynb").write_text(notebook_text))):
        folder = exchange / COURSE / "inbound" / f"{student}+{ASSIGNMENT}+2024-03-01 09:00:00.000000 UTC+x"
        folder.mkdir(parents=True)
        make(folder)
        cases[student] = folder
    # the account "nobody" submitted (its folder is its own), but the notebook in it belongs to someone else
    os.chown(cases["nobody"], pwd.getpwnam("nobody").pw_uid, 65534)
    os.chown(cases["nobody"] / f"{ASSIGNMENT}.ipynb", 65533, 65533)
    code, out, err = main(["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source),
                           "--exchange", str(exchange), "collect", ASSIGNMENT]), *capsys.readouterr()
    assert code == 2 and "no submissions" in err and "4 refused" in err, (out, err)   # nothing good: nothing imported
    for student in cases:
        assert not (fixture_course.root / "submitted" / student).exists()
    # each refusal, one by one, as the import reports them
    from autograder.submissions import read_exchange

    found = read_exchange(exchange, ASSIGNMENT, [ASSIGNMENT], COURSE)
    refused = "\n".join(found.refused)
    assert not found
    assert "symbolic link not allowed" in refused and "hard link" in refused
    assert "not a regular file" in refused and "belongs to 'uid 65533', not to the account" in refused


def test_collect_refuses_a_folder_swapped_while_it_is_read(fixture_course, tmp_path, notebook_text, monkeypatch):
    """Checked once, read later: a folder replaced between the two (another of the same name,
    a link) is refused, not read."""
    from autograder import submissions

    exchange = tmp_path / "exchange"
    folder = submit(exchange, "alice", "2024-03-01 09:00:00.000000 UTC", notebook_text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{ASSIGNMENT}.ipynb").write_text('{"swapped": true}')
    checked = submissions._submission_entry

    def check_then_swap(*args, **kwargs):
        result = checked(*args, **kwargs)
        os.rename(folder, tmp_path / "moved-away")
        os.rename(elsewhere, folder)
        return result

    monkeypatch.setattr(submissions, "_submission_entry", check_then_swap)
    found = submissions.read_exchange(exchange, ASSIGNMENT, [ASSIGNMENT], COURSE)
    assert not found and "changed while it was being collected" in found.refused[0]
    shutil.rmtree(folder)
    folder.symlink_to(tmp_path / "moved-away")
    found = submissions.read_exchange(exchange, ASSIGNMENT, [ASSIGNMENT], COURSE)
    assert not found and "symbolic link not allowed" in found.refused[0]


def test_a_submitted_time_is_stored_the_way_nbgrader_writes_it(fixture_course, capsys, tmp_path, notebook_text):
    exchange = tmp_path / "exchange"
    folder = submit(exchange, "alice", "2024-03-01 09:00:00.000000 UTC", notebook_text)
    (folder / "timestamp.txt").write_text("March 1, 2024 9:00 UTC <img src=x onerror=alert(1)>")
    code, out, err = main(["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source),
                           "--exchange", str(exchange), "collect", ASSIGNMENT]), *capsys.readouterr()
    if code == 0:   # dateutil read the date in it: only the date is kept
        stored = (fixture_course.root / "submitted" / "alice" / ASSIGNMENT / "timestamp.txt").read_text()
        assert stored == "2024-03-01 09:00:00.000000 UTC"
    else:
        assert "bad timestamp" in out + err


def test_return_feedback_refuses_a_page_that_shows_a_hidden_test(fixture_course, capsys, tmp_path):
    """nbgrader's own generate_feedback keeps the hidden tests: return-feedback scans every page
    and hands out nothing when one shows a hidden test."""
    from autograder import leakscan
    from autograder.course import package_folder

    hidden = next(s for s in leakscan.course_secrets(fixture_course.source, package_folder(), [ASSIGNMENT])
                  if s.kind == "hidden test")
    page = fixture_course.root / "feedback" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    page.parent.mkdir(parents=True)
    page.write_text(f"<html><pre>{hidden.line}</pre></html>")
    (page.parent / "submission_secret.txt").write_text("1" * 128)
    code, out, err = main(["--course-dir", str(fixture_course.root), "--source", str(fixture_course.source),
                           "--exchange", str(tmp_path / "exchange"), "return-feedback", ASSIGNMENT]), \
        *capsys.readouterr()
    assert code == 2 and "shows a hidden test" in err and f"autograder feedback {ASSIGNMENT}" in err, err
    assert not (tmp_path / "exchange" / COURSE / "feedback").exists()


def test_nbgraders_feedback_and_collect_are_refused_in_a_course_directory(fixture_course):
    for command in (["generate_feedback", ASSIGNMENT, "--force"], ["collect", ASSIGNMENT]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *command], cwd=fixture_course.root,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode != 0 and "switched off for this course" in done.stderr, done.stderr[-500:]
