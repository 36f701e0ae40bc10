"""No solution code and no hidden test in what students get: the built wheel, and (later) the built book.

The secrets come from ``solutions/`` and the fixture assignments. The released notebooks and the
feedback are scanned where they are made (``test_grader_solutions.py``, ``test_grader_hostile.py``).
"""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
import zipfile

import pytest

from autograder import leakscan
from autograder.course import REPO_ROOT, package_folder

from grader_helpers import FIXTURES



def _secrets() -> list[leakscan.Secret]:
    secrets = leakscan.course_secrets(FIXTURES, package_folder())
    if (REPO_ROOT / "solutions").is_dir():
        secrets += leakscan.course_secrets(REPO_ROOT / "solutions", package_folder())
    return secrets


def test_the_scanner_finds_a_planted_line(tmp_path):
    secrets = _secrets()
    hidden = next(s for s in secrets if s.kind == "hidden test")
    page = tmp_path / "page.html"
    # Highlighted code is split into spans and escaped in HTML; the scan reads the text.
    words = hidden.line.split(" ")
    page.write_text("<pre>" + " ".join(f'<span class="n">{w.replace("<", "&lt;")}</span>' for w in words) + "</pre>")
    assert [leak.secret for leak in leakscan.scan([page], secrets)] == [hidden]
    with zipfile.ZipFile(tmp_path / "x.whl", "w") as wheel:
        wheel.writestr("pkg/module.py", "x = 1\n    " + hidden.line + "\n")
    assert leakscan.scan([tmp_path / "x.whl"], secrets)


def test_the_wheel_holds_no_solution_or_hidden_test(tmp_path):
    # Build from a copy of the files a wheel is made of, so the repository gets no build/ folder.
    tree = tmp_path / "tree"
    tree.mkdir()
    for item in REPO_ROOT.iterdir():
        if item.is_file() and not item.name.startswith("."):
            shutil.copy2(item, tree / item.name)
    shutil.copytree(package_folder(), tree / "attention_course", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           str(tree), "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    wheels = list((tmp_path / "dist").glob("*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert not [n for n in names if n.startswith(("solutions/", "autograder/", "tests/"))]
    assert leakscan.scan(wheels, _secrets()) == []


# The built book is scanned in tests/book/test_book_build.py, which builds it first.


def test_feedback_withholds_a_page_whose_instructor_part_would_show_a_hidden_test_line(fixture_course):
    """What is shown is decided from the test cells, not from what the student wrote: a hidden line in
    the instructor's part of a page (here planted in a test cell's output, as a bug would) withholds
    the page; the same line in the student's own output does not (it was made in a sandbox without
    secrets, so the student typed it: withholding the page would tell them it is a hidden test)."""
    import nbformat

    from autograder import sandbox

    if sandbox.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed")
    hidden = "hidden_expected = np.exp(hidden_scores - hidden_scores.max(axis=1, keepdims=True))"
    answer = fixture_course.solved("fx_softmax").cells[2].source
    # the student prints a guessed line, built at run time so that it is not in their source
    guess = "print(' '.join(['hidden_expected', '=', " + repr(hidden.split(" = ", 1)[1]) + "]))"
    answers = {"printed": fixture_course.solved("fx_softmax", softmax=answer + "\n" + guess),
               "echoed": fixture_course.solved("fx_softmax")}
    for student, nb in answers.items():
        folder = fixture_course.root / "submitted" / student / "fx_softmax"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "fx_softmax.ipynb")
    assert fixture_course.cli("autograde", "fx_softmax", "--workers", "1").returncode == 0
    # As if a bug let a hidden line into the judge's output of a test cell:
    path = fixture_course.root / "autograded" / "echoed" / "fx_softmax" / "fx_softmax.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text=hidden + "\n")]
    nbformat.write(nb, path)
    done = fixture_course.cli("feedback", "fx_softmax")
    assert done.returncode == 1 and "echoed: feedback WITHHELD" in done.stdout, done.stdout
    assert not (fixture_course.root / "feedback" / "echoed" / "fx_softmax").exists()
    page = fixture_course.root / "feedback" / "printed" / "fx_softmax" / "fx_softmax.html"
    assert page.exists(), done.stdout
    assert "hidden_expected = np.exp(hidden_scores" in html.unescape(page.read_text())


def test_the_marker_rule_reads_a_notebooks_code_cells_and_skips_the_accounts_own_files(tmp_path, monkeypatch):
    """A notebook whose code cells hold nbgrader's markers is a source notebook, wherever it lies; one
    whose markdown names them (the instructor's guide as a chapter notebook) is prose; a file that is
    not a notebook counts as text. Files the scanning account owns are its own work."""
    import nbformat

    def notebook(name: str, *cells) -> str:
        path = tmp_path / name
        nbformat.write(nbformat.v4.new_notebook(cells=list(cells)), path)
        return str(path)

    marker = "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"
    source = notebook("copy.ipynb", nbformat.v4.new_code_cell(marker))
    guide = notebook("instructor.ipynb", nbformat.v4.new_markdown_cell(f"Write `{marker.splitlines()[0]}`."))
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json " + marker)
    monkeypatch.setattr(leakscan.os, "getuid", lambda: -1)   # no file here is the scanner's own
    found = leakscan.scan_readable([source, guide, str(broken)], [], [])
    assert sorted(leak["where"] for leak in found) == sorted([source, str(broken)])
    assert {leak["kind"] for leak in found} == {"source notebook"}
    monkeypatch.undo()
    assert leakscan.scan_readable([source], [], []) == []   # this process's own file


def test_a_line_another_published_notebook_shows_is_no_secret(tmp_path):
    """hub start's source may hold one assignment while the book publishes every exercise: a line
    of the reference that another exercise's released notebook prints is public."""
    import nbformat

    generic = "for index, item in enumerate(things_here):"
    source, published = tmp_path / "source", tmp_path / "published"
    (source / "a1").mkdir(parents=True)
    (published / "a2").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), source / "a1" / "a1.ipynb")
    (source / "a1" / "reference.py").write_text(f"def judge(things_here):\n    {generic}\n        running_total_of_all_items += item\n")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"{generic}\n    print(item)")]),
                   published / "a2" / "a2.ipynb")
    alone = {secret.line for secret in leakscan.course_secrets(source, package_folder())}
    with_book = {secret.line for secret in leakscan.course_secrets(source, package_folder(), public_sources=(published,))}
    assert leakscan.normalize(generic) in alone
    assert leakscan.normalize(generic) not in with_book
    assert leakscan.normalize("running_total_of_all_items += item") in with_book   # the rest stays secret
