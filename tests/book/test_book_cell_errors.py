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
