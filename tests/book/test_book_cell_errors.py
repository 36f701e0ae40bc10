"""A cell that raises fails the build (``nb_execution_raise_on_error``), with the book's own
``_config.yml``, on a one-page book in a temporary folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from book_helpers import ROOT

PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
# A page whose code fails

```{code-cell} ipython3
1 / 0
```
"""


def test_a_cell_error_fails_the_build(tmp_path):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.md").write_text(PAGE)
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run([str(jupyter_book), "build", str(tmp_path)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"the build passed despite a failing cell:\n{output[-3000:]}"
    assert "ZeroDivisionError" in output or "CellExecutionError" in output or "Executing notebook failed" in output


DIAGRAM_PAGE = """# A page with a diagram

```{{graphviz}}
{alt}:caption: two boxes
digraph two {{ a -> b; }}
```
"""


def _build_one_page(tmp_path, text):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.md").write_text(text)
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    return subprocess.run([str(jupyter_book), "build", str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_a_diagram_is_an_image_with_its_text_alternative_and_one_without_fails_the_build(tmp_path):
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    built = _build_one_page(tmp_path / "good", DIAGRAM_PAGE.format(alt=":alt: Two boxes, a pointing to b.\n"))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    html = (tmp_path / "good" / "_build" / "html" / "book" / "page.html").read_text(encoding="utf-8")
    assert '<a class="diagram-zoom" href="../_images/graphviz-' in html
    assert 'alt="Two boxes, a pointing to b."' in html and "<object" not in html
    failed = _build_one_page(tmp_path / "bad", DIAGRAM_PAGE.format(alt=""))
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "needs an :alt: text" in output, output[-3000:]
