"""The book's chapters as plain Jupyter notebooks: what a chapter's launch button opens.

    .venv/bin/python tools/chapter_notebooks.py ROOT OUT

jupytext turns each MyST page of the table of contents into a notebook (no outputs), but leaves the
Sphinx directives of its Markdown cells as text, which Jupyter shows verbatim: a path where the
book shows code, Graphviz source where it shows a diagram. Here each ``literalinclude`` becomes the
code it includes, read by Sphinx's own reader with the page's options (so the notebook shows the
lines the book shows), and each ``graphviz`` becomes its diagram, drawn by ``dot`` as SVG with the
book's settings (``_config.yml``), attached to the cell, with its caption below. The experiments'
results the pages load (``book/results/``: JSON files and checkpoints) are copied beside them.
A file is rewritten only when its content changed. ``tools/build-book.sh`` runs this.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import jupytext
import nbformat
import yaml

# A fenced directive: ```{name} argument, then ":key: value" option lines (a ":  " line continues
# the one before, as in MyST), then the body, then the closing fence.
DIRECTIVE = re.compile(r"^(?P<fence>`{3,})\{(?P<name>[\w-]+)\}[ \t]*(?P<argument>[^\n]*)\n"
                       r"(?P<content>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
CONVERTED = ("literalinclude", "graphviz")


class DirectiveError(ValueError):
    """A directive of a page that cannot be turned into notebook content (names the page and why)."""


OPTION = re.compile(r"^:(?P<key>[A-Za-z][\w-]*):(?:[ \t]+(?P<value>.*))?$")


def split_options(content: str) -> tuple[dict, str]:
    """A directive's ``:key: value`` options and the body after them. A line ``:  more`` continues
    the value before it (as MyST reads them); a key without a value is a flag (``True``)."""
    lines = content.splitlines(keepends=True)
    options, key, count = {}, None, 0
    for line in lines:
        if not line.startswith(":"):
            break
        count += 1
        match = OPTION.match(line.rstrip("\n"))
        if match:
            key = match["key"]
            options[key] = (match["value"] or "").strip() or True
        elif key is not None and line[1:2].isspace():
            options[key] = f"{options[key]} {line[1:].strip()}".strip()
        else:
            raise DirectiveError(f"not an option line: {line.strip()!r}")
    return options, "".join(lines[count:])


def dot_arguments(root: Path) -> list[str]:
    """The book's own arguments for ``dot`` (``sphinx.config.graphviz_dot_args`` of ``_config.yml``)."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}
    return list(((config.get("sphinx") or {}).get("config") or {}).get("graphviz_dot_args") or [])


def include(page: Path, argument: str, options: dict) -> str:
    """The Markdown code block that a ``literalinclude`` of ``page`` shows."""
    from sphinx.directives.code import LiteralIncludeReader

    path = (page.parent / argument.strip()).resolve()
    language = options.pop("language", "python" if path.suffix == ".py" else "")
    reader_options = {key: value for key, value in options.items() if key not in ("caption", "name")}
    try:
        text, _ = LiteralIncludeReader(str(path), reader_options,
                                       types.SimpleNamespace(source_encoding="utf-8-sig")).read()
    except (OSError, ValueError) as error:
        raise DirectiveError(f"{page.name}: literalinclude {argument.strip()} {reader_options}: {error}") from None
    if not text.strip():
        raise DirectiveError(f"{page.name}: literalinclude {argument.strip()} {reader_options}: includes nothing")
    return f"```{language}\n{text.rstrip()}\n```"


def diagram(page: Path, body: str, options: dict, dot_args: list[str], number: int) -> tuple[str, str, str]:
    """A ``graphviz`` block as (Markdown, attachment name, base64 SVG)."""
    done = subprocess.run(["dot", "-Tsvg", *dot_args], input=body.encode(), capture_output=True, check=False)
    if done.returncode != 0:
        raise DirectiveError(f"{page.name}: graphviz diagram {number}: dot failed: "
                             f"{done.stderr.decode(errors='replace').strip()}")
    name = f"diagram-{number}.svg"
    caption = " ".join(str(options.get("caption", "")).split())
    alt = " ".join(str(options.get("alt") or f"diagram {number}").split()).replace("]", "\\]")
    markdown = f"![{alt}](attachment:{name})"
    if caption:
        markdown += f"\n\n*{caption}*"
    return markdown, name, base64.b64encode(done.stdout).decode("ascii")


def chapter_notebook(page: Path, dot_args: list[str] | None = None) -> nbformat.NotebookNode:
    """The notebook of a MyST page, its ``literalinclude`` and ``graphviz`` directives resolved."""
    notebook = jupytext.read(page)
    diagrams = 0
    for number, cell in enumerate(notebook.cells):
        if "id" in cell:
            cell.id = f"cell-{number}"  # not random: an unchanged page makes the same file
        if cell.cell_type != "markdown":
            continue
        attachments = {}

        def convert(match: re.Match) -> str:
            nonlocal diagrams
            name = match["name"]
            if name not in CONVERTED:
                raise DirectiveError(f"{page.name}: a {{{name}}} directive: the notebooks know only "
                                     f"{', '.join(CONVERTED)} (add it to tools/chapter_notebooks.py)")
            try:
                options, body = split_options(match["content"])
            except DirectiveError as error:
                raise DirectiveError(f"{page.name}: a {{{name}}} directive: {error}") from None
            if name == "literalinclude":
                return include(page, match["argument"], dict(options))
            diagrams += 1
            markdown, attachment, svg = diagram(page, body, options, dot_args or [], diagrams)
            attachments[attachment] = {"image/svg+xml": svg}
            return markdown

        cell.source = DIRECTIVE.sub(convert, cell.source)
        if attachments:
            cell.attachments = attachments
    return notebook


def pages(root: Path) -> list[Path]:
    """The pages of the table of contents that are notebooks (MyST with a kernel)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]] + [entry["file"] for entry in toc.get("chapters", []) if "file" in entry]
    sources = [root / f"{name}.md" for name in names]
    return [source for source in sources
            if source.is_file() and "kernelspec" in source.read_text(encoding="utf-8")[:600]]


def write_if_changed(target: Path, data: bytes) -> None:
    if not target.is_file() or target.read_bytes() != data:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def write_chapters(root: Path, out: Path) -> list[Path]:
    """Write every chapter's notebook and the results they load into ``out``; the notebooks written."""
    dot_args = dot_arguments(root)
    written = []
    for page in pages(root):
        target = out / f"{page.stem}.ipynb"
        write_if_changed(target, nbformat.writes(chapter_notebook(page, dot_args)).encode("utf-8"))
        written.append(target)
    results = root / "book" / "results"
    for source in sorted(results.rglob("*")):
        if source.is_file():
            write_if_changed(out / "results" / source.relative_to(results), source.read_bytes())
    # results that are no longer in book/results/ go too
    for stale in sorted((out / "results").rglob("*"), reverse=True):
        counterpart = results / stale.relative_to(out / "results")
        if stale.is_file() and not counterpart.is_file():
            stale.unlink()
        elif stale.is_dir() and not counterpart.is_dir():
            shutil.rmtree(stale)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: chapter_notebooks.py ROOT OUT", file=sys.stderr)
        return 2
    try:
        written = write_chapters(Path(argv[0]), Path(argv[1]))
    except DirectiveError as error:
        print(f"chapter_notebooks: {error}", file=sys.stderr)
        return 1
    print(f"chapter_notebooks: {len(written)} notebooks in {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
