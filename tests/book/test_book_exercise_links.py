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
    assert links["how to open it on your computer"] == "exercises.html#on-your-own-computer"
    hub = urlsplit(links["launch in JupyterHub"])
    assert (hub.scheme, hub.netloc, hub.path) == ("https", "hub.example.org", "/hub/user-redirect/git-pull")
    query = parse_qs(hub.query)
    assert query == {"repo": ["https://github.com/example/course"], "branch": ["student"], "targetpath": ["course"],
                     "urlpath": ["lab/tree/course/exercises/ch9z_demo.ipynb"]}
    assert set(links) == {"download the notebook", "how to open it on your computer", "launch in JupyterHub"}


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
    shown = book.exercise_links("ch3a_multi_query_penalty")
    assert type(shown).__name__ == "Markdown"
    assert "exercises/ch3a_multi_query_penalty.ipynb" in shown.data
    with pytest.raises(ValueError):
        book.exercise_links()


def test_the_exercises_page_lists_every_assignment_once():
    page = (ROOT / "book" / "exercises.md").read_text(encoding="utf-8")
    listed = re.findall(r'"(ch\d+[ab]_\w+)"', page)
    assert sorted(listed) == sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())


def test_a_chapter_launches_its_ipynb_not_its_markdown(tmp_path):
    settings = book.launch_settings(make_course(tmp_path))
    links = dict(book.chapter_launch_links("01_bottleneck", settings))
    query = parse_qs(urlsplit(links["launch in JupyterHub"]).query)
    assert query["urlpath"] == ["lab/tree/course/chapters/01_bottleneck.ipynb"]
    assert query["branch"] == ["student"]


def test_the_sphinx_hook_rewrites_the_theme_launch_buttons_and_drops_dead_ones(tmp_path):
    from types import SimpleNamespace

    root = make_course(tmp_path)
    other = {"type": "link", "text": "Download", "url": "x.ipynb"}
    group = [{"type": "link", "text": "JupyterHub", "url": "https://hub/.../book/01_bottleneck.md"},
             {"type": "link", "text": "Binder", "url": "https://binder/.../01_bottleneck.md"}]
    context = {"header_buttons": [other, {"type": "group", "buttons": group}]}
    app = SimpleNamespace(confdir=str(root))
    book._chapter_launch_buttons(app, "book/01_bottleneck", "page.html", context, None)
    assert context["header_buttons"][0] == other
    (hub,) = context["header_buttons"][1]["buttons"]  # no Binder configured: no Binder button
    assert hub["text"] == "JupyterHub"
    assert parse_qs(urlsplit(hub["url"]).query)["urlpath"] == [
        "lab/tree/course/chapters/01_bottleneck.ipynb"]


def test_without_a_hub_there_is_no_launch_link_at_all(tmp_path):
    root = make_course(tmp_path, hub="")
    links = hrefs(book.exercise_links_markdown("ch9z_demo", root=root))
    assert set(links) == {"download the notebook", "how to open it on your computer"}
    assert book.chapter_launch_links("01_bottleneck", book.launch_settings(root)) == []


def test_the_local_set_up_names_the_wheel_the_book_serves(tmp_path):
    root = make_course(tmp_path)
    (root / "pyproject.toml").write_text('[build-system]\nrequires = []\n[project]\nname = "x"\nversion = "2.5.1"\n')
    markdown = book.local_setup_markdown(root)
    assert 'href="../attention_course-2.5.1-py3-none-any.whl"' in markdown
    assert 'python3 -m pip install "./attention_course-2.5.1-py3-none-any.whl[torch]" jupyterlab' in markdown


def test_the_built_chapters_launch_a_notebook_that_exists(built_book):
    """Every chapter's notebook is built; a hub, if one is configured, launches it (not the .md)."""
    import nbformat

    settings = book.launch_settings(ROOT)
    for page in sorted((ROOT / "book").glob("[01][0-9]_*.md")):
        html = (built_book / "book" / f"{page.stem}.html").read_text(encoding="utf-8")
        launches = [href.replace("&amp;", "&") for href in re.findall(r'href="([^"]*git-pull[^"]*)"', html)]
        chapter = [url for url in launches if "chapters" in url]
        if settings.jupyterhub_url:
            assert chapter, f"{page.name}: no launch link to the chapter's notebook"
        else:
            assert not launches, f"{page.name}: launch links without a configured hub: {launches}"
        for url in chapter:
            urlpath = parse_qs(urlsplit(url).query)["urlpath"][0]
            assert urlpath.endswith(settings.chapter_path.format(page=page.stem)), urlpath
        assert not [url for url in launches if url.split("?")[1].find(".md") >= 0], launches
        notebook = built_book / settings.chapter_path.format(page=page.stem)
        parsed = nbformat.read(notebook, as_version=4)
        nbformat.validate(parsed)
        code = [cell.source for cell in parsed.cells if cell.cell_type == "code"]
        assert code and any("import" in source for source in code), page.name
        # the code the page includes and its diagrams, not the directives' text
        markdown = "\n".join(cell.source for cell in parsed.cells if cell.cell_type == "markdown")
        assert "```{" not in markdown, page.name
    results = sorted(p.name for p in (built_book / "chapters" / "results").glob("*.json"))
    assert "bottleneck.json" in results and "dates_decoder.json" in results
    assert (built_book / "chapters" / "results" / "copy_ntm" / "checkpoint" / "config.json").is_file()
