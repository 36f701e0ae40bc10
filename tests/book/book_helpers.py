"""Helpers for the book tests. The built book, once per test session: ``tools/build-book.sh`` unless ``_build/html`` is fresh.

Fresh means the last build succeeded (``_build/build-book.ok``) and is newer than every input:
the pages, the configuration, the package (the pages run it), the exercises and the build script.
``BOOK_REBUILD=1`` forces a build.
"""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
OK_STAMP = BUILD / "build-book.ok"
BUILD_TIMEOUT_S = 900


def _inputs() -> list[Path]:
    files = [ROOT / "_config.yml", ROOT / "_toc.yml", ROOT / "tools" / "build-book.sh",
             ROOT / "tools" / "book-assets" / "package-lock.json"]
    for folder, pattern in [("book", "*.md"), ("book", "*.ipynb"), ("book", "*.json"),
                            ("book", "*.css"), ("book", "*.js"), ("attention_course", "*.py"),
                            ("solutions", "*.ipynb"), ("autograder", "*.py")]:
        files += [p for p in (ROOT / folder).rglob(pattern) if ".ipynb_checkpoints" not in p.parts
                  and "vendor" not in p.parts and "node_modules" not in p.parts]
    return files


def book_is_fresh() -> bool:
    if not OK_STAMP.is_file() or not (HTML / "index.html").is_file():
        return False
    built = OK_STAMP.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in _inputs() if p.exists())


def build_book_once() -> Path:
    """The folder of the built HTML book, after a successful build."""
    if os.environ.get("BOOK_REBUILD") == "1" or not book_is_fresh():
        env = dict(os.environ, PYTHON=sys.executable)
        result = subprocess.run(["bash", str(ROOT / "tools" / "build-book.sh")], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        assert result.returncode == 0, (f"tools/build-book.sh failed (exit {result.returncode}):\n"
                                        f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}")
    assert OK_STAMP.is_file(), "tools/build-book.sh exited 0 but left no _build/build-book.ok"
    return HTML


def toc_files() -> list[str]:
    """Every ``root``/``file`` entry of ``_toc.yml``, in order (no suffix)."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    found = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({key: value for key, value in toc.items() if key != "root"})
    return found


class PageParser(HTMLParser):
    """The ids, the links (tag, attribute, value) and the visible text of one HTML page."""

    SKIP_TEXT = {"script", "style", "pre", "code", "textarea"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str, str]] = []
        self.classes: list[str] = []
        self.text_parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name in ("id", "name"):
            if attributes.get(name):
                self.ids.add(attributes[name])
        for name in ("href", "src"):
            if attributes.get(name) is not None:
                self.links.append((tag, name, attributes[name]))
        if attributes.get("class"):
            self.classes.append(attributes["class"])
        if tag in self.SKIP_TEXT:
            self._skipping += 1

    def handle_endtag(self, tag):
        if tag in self.SKIP_TEXT and self._skipping:
            self._skipping -= 1

    def handle_data(self, data):
        if not self._skipping:
            self.text_parts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)


def parse_html(text: str) -> PageParser:
    parser = PageParser()
    parser.feed(text)
    parser.close()
    return parser
