"""tools/chapter_notebooks.py: the launch notebooks show the code and the diagrams the book shows."""

from __future__ import annotations

import base64
import importlib.util
import inspect
import shutil
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot (the book's build does)")


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("chapter_notebooks", ROOT / "tools" / "chapter_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGE = '''---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---

# A page

Some code:

```{literalinclude} ../attention_course/training.py
:pyobject: exact_match
```

A diagram:

```{graphviz}
:caption: Two boxes, the first
:  pointing at the second.
digraph { a -> b; }
```

```{code-cell} ipython3
print("a code cell stays a code cell")
```
'''


def _markdown(notebook) -> str:
    return "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")


def _page(tmp_path: Path, text: str) -> Path:
    """``text`` as ``book/page.md`` of a folder where ``../attention_course`` is the package."""
    (tmp_path / "book").mkdir()
    (tmp_path / "attention_course").symlink_to(ROOT / "attention_course")
    page = tmp_path / "book" / "page.md"
    page.write_text(text)
    return page


def test_an_include_becomes_the_code_and_a_diagram_its_svg(tool, tmp_path):
    from attention_course.training import exact_match

    notebook = tool.chapter_notebook(_page(tmp_path, PAGE))
    nbformat.validate(notebook)
    markdown = _markdown(notebook)
    assert "```{" not in markdown
    assert f"```python\n{inspect.getsource(exact_match).rstrip()}\n```" in markdown
    assert "*Two boxes, the first pointing at the second.*" in markdown
    cell = next(cell for cell in notebook.cells if "attachment:diagram-1.svg" in cell.source)
    svg = base64.b64decode(cell.attachments["diagram-1.svg"]["image/svg+xml"]).decode()
    assert "<svg" in svg and svg.count('class="node"') == 2
    assert [cell.source for cell in notebook.cells if cell.cell_type == "code"] == [
        'print("a code cell stays a code cell")']


HEADER = PAGE.split("# A page")[0]


@pytest.mark.parametrize("directive, message", [
    ("```{literalinclude} ../attention_course/training.py\n:pyobject: no_such_function\n```",
     "page.md: literalinclude ../attention_course/training.py {'pyobject': 'no_such_function'}: "),
    ("```{literalinclude} ../attention_course/missing.py\n```",
     "page.md: literalinclude ../attention_course/missing.py {}: Include file"),
    ("```{graphviz}\ndigraph { a -> }\n```", "page.md: graphviz diagram 1: dot failed: "),
    # a stray line ends the options: the rest is the body, which dot cannot read
    ("```{graphviz}\n:caption: one\nno colon\n```", "page.md: graphviz diagram 1: dot failed: "),
    ("```{graphviz}\n:caption: one\n:: two\n```", "page.md: a {graphviz} directive: not an option line: ':: two'"),
    ("```{figure} picture.png\n```",
     "page.md: a {figure} directive: the notebooks know only literalinclude, graphviz"),
])
def test_a_directive_it_cannot_convert_is_a_clear_error(tool, tmp_path, directive, message):
    with pytest.raises(tool.DirectiveError) as raised:
        tool.chapter_notebook(_page(tmp_path, HEADER + directive + "\n"))
    assert str(raised.value).startswith(message), str(raised.value)


def test_every_page_of_the_book_converts_and_its_results_come_along(tool, tmp_path):
    written = tool.write_chapters(ROOT, tmp_path)
    chapters = {path.stem for path in written}
    assert {page.stem for page in (ROOT / "book").glob("[01][0-9]_*.md")} <= chapters
    includes = diagrams = 0
    for path in written:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        markdown = _markdown(notebook)
        assert "```{" not in markdown, path.name
        source = (ROOT / "book" / f"{path.stem}.md").read_text()
        includes += source.count("```{literalinclude}")
        diagrams += sum(len(cell.get("attachments", {})) for cell in notebook.cells)
        assert sum(len(cell.get("attachments", {})) for cell in notebook.cells) == source.count("```{graphviz}")
    assert includes > 50 and diagrams >= 10
    # the checkpoints chapter 10 loads, not only the JSON files
    assert (tmp_path / "results" / "copy_ntm" / "checkpoint" / "weights.npz").read_bytes() == (
        ROOT / "book" / "results" / "copy_ntm" / "checkpoint" / "weights.npz").read_bytes()
    # a second run rewrites nothing, and a result removed from book/results/ goes
    stamps = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*") if path.is_file()}
    (tmp_path / "results" / "old.json").write_text("{}")
    tool.write_chapters(ROOT, tmp_path)
    assert not (tmp_path / "results" / "old.json").exists()
    assert {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*") if path.is_file()} == stamps


def test_the_command_line_reports_an_error_in_one_line(tool, tmp_path, capsys):
    assert tool.main([]) == 2
    assert capsys.readouterr().err == "usage: chapter_notebooks.py ROOT OUT\n"
    (tmp_path / "book").mkdir()
    (tmp_path / "_config.yml").write_text("title: x\n")
    (tmp_path / "_toc.yml").write_text("root: book/page\n")
    (tmp_path / "book" / "page.md").write_text(PAGE.split("# A page")[0] + "```{figure} x.png\n```\n")
    (tmp_path / "book" / "results").mkdir()
    assert tool.main([str(tmp_path), str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.startswith("chapter_notebooks: page.md: a {figure} directive")
