"""attention_course.book.exercise_links: titles, student-version downloads and launch links,
all configured in _config.yml."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from attention_course import book
from book_helpers import ROOT

CONFIG = """
repository:
  url: https://github.com/example/course
  branch: main
launch_buttons:
  jupyterhub_url: "{hub}"
  binderhub_url: "{binder}"
  colab_url: "{colab}"
sphinx:
  config:
    html_context:
      course_exercises:
        branch: student
        path: "exercises/{{assignment}}.ipynb"
"""


def make_course(tmp_path: Path, hub="https://hub.example.org/", binder="", colab="") -> Path:
    (tmp_path / "_config.yml").write_text(CONFIG.format(hub=hub, binder=binder, colab=colab))
    folder = tmp_path / "solutions" / "ch9z_demo"
    folder.mkdir(parents=True)
    notebook = {"cells": [{"cell_type": "code", "source": ["raise SystemExit('never run')"], "metadata": {}},
                          {"cell_type": "markdown", "source": ["Intro\n", "## 9z. A demo & more\n"],
                           "metadata": {}}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "ch9z_demo.ipynb").write_text(json.dumps(notebook))
    return tmp_path


def hrefs(markdown: str) -> dict[str, str]:
    return {label: href.replace("&amp;", "&") for href, label in re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', markdown)}


def test_title_download_and_jupyterhub_link(tmp_path):
    markdown = book.exercise_links_markdown("ch9z_demo", root=make_course(tmp_path))
    assert "9z. A demo &amp; more" in markdown
    links = hrefs(markdown)
    assert links["download the notebook"] == "exercises/ch9z_demo.ipynb"
    hub = urlsplit(links["launch in JupyterHub"])
    assert (hub.scheme, hub.netloc, hub.path) == ("https", "hub.example.org", "/hub/user-redirect/git-pull")
    query = parse_qs(hub.query)
    assert query == {"repo": ["https://github.com/example/course"], "branch": ["student"], "targetpath": ["course"],
                     "urlpath": ["lab/tree/course/exercises/ch9z_demo.ipynb"]}
    assert set(links) == {"download the notebook", "launch in JupyterHub"}


def test_binder_and_colab_only_when_configured(tmp_path):
    root = make_course(tmp_path, hub="", binder="https://mybinder.org", colab="https://colab.research.google.com")
    links = hrefs(book.exercise_links_markdown("ch9z_demo", root=root))
    assert "launch in JupyterHub" not in links
    assert links["launch in Binder"].startswith("https://mybinder.org/v2/gh/example/course/student?urlpath=")
    assert links["open in Colab"] == ("https://colab.research.google.com/github/example/course/blob/student/"
                                      "exercises/ch9z_demo.ipynb")


def test_unknown_assignment_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="ch0_missing"):
        book.exercise_links_markdown("ch0_missing", root=make_course(tmp_path))


def test_exercise_links_returns_markdown_for_the_real_course():
    shown = book.exercise_links("ch3a_weight_sum")
    assert type(shown).__name__ == "Markdown"
    assert "exercises/ch3a_weight_sum.ipynb" in shown.data
    with pytest.raises(ValueError):
        book.exercise_links()


def test_the_exercises_page_lists_every_assignment_once():
    page = (ROOT / "book" / "exercises.md").read_text(encoding="utf-8")
    listed = re.findall(r'"(ch\d[ab]_\w+)"', page)
    assert sorted(listed) == sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
