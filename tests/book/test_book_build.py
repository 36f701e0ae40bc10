"""The built book: every page of the table of contents, no broken internal link, no remote
script or style (it must render offline), the exercises' student versions, and no leak."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from book_helpers import ROOT, parse_html, toc_files

REMOTE_ASSET = re.compile(r"^(https?:)?//", re.IGNORECASE)


def built_pages(html_root: Path) -> list[Path]:
    return sorted(p for p in html_root.rglob("*.html") if "_static" not in p.relative_to(html_root).parts)


@pytest.fixture(scope="module")
def parsed(built_book):
    return {page: parse_html(page.read_text(encoding="utf-8")) for page in built_pages(built_book)}


def test_the_book_builds_and_opens_at_the_introduction(built_book):
    index = (built_book / "index.html").read_text(encoding="utf-8")
    root = toc_files()[0]
    assert f"{root}.html" in index, "index.html should redirect to the root page of _toc.yml"


@pytest.mark.parametrize("entry", toc_files())
def test_every_toc_page_exists_as_source_and_html(entry, built_book):
    sources = [ROOT / f"{entry}{suffix}" for suffix in (".md", ".ipynb")]
    assert any(p.is_file() for p in sources), f"_toc.yml names {entry}, but there is no {entry}.md or .ipynb"
    assert (built_book / f"{entry}.html").is_file(), f"{entry} was not built to HTML"


def test_no_broken_internal_link(built_book, parsed):
    broken = []
    for page, parser in parsed.items():
        for tag, attribute, value in parser.links:
            parts = urlsplit(value)
            if parts.scheme or parts.netloc or value.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            where = f"{page.relative_to(built_book)}: <{tag} {attribute}={value!r}>"
            if parts.path.endswith("/"):
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{where} -> missing {target}")
            elif parts.fragment and target.suffix == ".html" and target in parsed:
                if unquote(parts.fragment) not in parsed[target].ids:
                    broken.append(f"{where} -> no id {parts.fragment!r} in {target.name}")
    assert not broken, f"{len(broken)} broken internal link(s):\n" + "\n".join(broken[:30])


def test_scripts_and_styles_are_served_by_the_book_itself(parsed, built_book):
    """Offline, a script or style from a CDN fails: every one must be a local file."""
    remote = [f"{page.relative_to(built_book)}: {value}"
              for page, parser in parsed.items()
              for tag, attribute, value in parser.links
              if tag in {"script", "link", "img", "iframe"} and REMOTE_ASSET.match(value)]
    assert not remote, "remote assets referenced:\n" + "\n".join(remote[:20])
    for page in built_pages(built_book):
        text = page.read_text(encoding="utf-8")
        for cdn in ("cdn.jsdelivr.net", "cdnjs.cloudflare.com", "mathjax@", "cdn.mathjax.org"):
            assert cdn not in text, f"{page.relative_to(built_book)} refers to {cdn}"


def test_mathjax_and_the_widget_manager_come_from_the_local_copy(built_book):
    intro = (built_book / f"{toc_files()[0]}.html").read_text(encoding="utf-8")
    mathjax = re.search(r'<script[^>]+src="([^"]*tex-chtml[^"]*)"', intro)
    assert mathjax, "the page loads no MathJax"
    assert "_static/vendor/mathjax/" in mathjax.group(1)
    vendor = built_book / "_static" / "vendor"
    for asset in ("mathjax/tex-chtml-full.js", "html-manager/embed-amd.js", "requirejs/require.js"):
        assert (vendor / asset).is_file(), f"{asset} missing from the built book"


def test_exercise_links_download_the_student_versions(built_book, parsed):
    page = built_book / "book" / "exercises.html"
    links = sorted({value for _, attribute, value in parsed[page].links
                    if attribute == "href" and value.startswith("exercises/") and value.endswith(".ipynb")})
    assignments = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
    assert links == [f"exercises/{name}.ipynb" for name in assignments]
    for link in links:
        notebook = json.loads((page.parent / link).read_text(encoding="utf-8"))
        source = "\n".join("".join(cell["source"]) for cell in notebook["cells"])
        assert "BEGIN SOLUTION" not in source and "BEGIN HIDDEN TESTS" not in source, link
        assert "NotImplementedError" in source, f"{link} is not a student version (no answer cell left to fill)"


def test_no_link_points_at_a_hub_the_course_has_not_configured(built_book, parsed):
    """With no hub address in _config.yml (the default), the book has no launch link at all, and
    the exercises page links the local set-up instead (tests/book/test_book_exercise_links.py
    checks the links a configured hub gets)."""
    from attention_course.book import launch_settings, wheel_name

    settings = launch_settings(ROOT)
    hub_links = [f"{page.relative_to(built_book)}: {value}" for page, parser in parsed.items()
                 for _, attribute, value in parser.links
                 if "git-pull" in value or "example.edu" in value or "example.org" in value]
    if not settings.jupyterhub_url:
        assert not hub_links, "launch links without a configured hub:\n" + "\n".join(hub_links[:10])
    exercises = parsed[built_book / "book" / "exercises.html"]
    hrefs = [value for _, attribute, value in exercises.links if attribute == "href"]
    assert f"../{wheel_name(ROOT)}" in hrefs and (built_book / wheel_name(ROOT)).is_file()
    assert "on-your-own-computer" in exercises.ids


def test_no_page_contains_a_solution_or_a_hidden_test(built_book):
    result = subprocess.run([sys.executable, "-m", "autograder", "leakscan", str(built_book)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"leakscan found a leak in the built book:\n{result.stdout}{result.stderr}"


def test_the_served_wheel_installs_and_has_what_the_exercises_import(built_book, tmp_path):
    """The one-command local set-up installs the wheel; here without its dependencies (this
    environment has them), into a folder of its own, and the exercises' imports work from it."""
    from attention_course.book import wheel_name

    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                                "--target", str(target), str(built_book / wheel_name(ROOT))],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    code = ("import attention_course, attention_course.testing, attention_course.numpy_track.transformer, "
            "attention_course.convert; print(attention_course.__file__)")
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert imported.stdout.strip().startswith(str(target)), imported.stdout
