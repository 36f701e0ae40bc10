"""The built book in a real browser: headless Chromium, with every host name unresolvable so that
nothing can come from the network, renders the pages; the rendered DOM must show typeset math
(MathJax's ``mjx-container`` for every math element of the page, no raw TeX left in the text) and,
on the page that embeds widget state, rendered ipywidgets."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from book_helpers import parse_html, toc_files

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(tools/install-system-packages.sh installs it; CI has it)")

MATH_ELEMENT = re.compile(r'<(?:span|div)[^>]*class="[^"]*\bmath\b[^"]*"')
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MIN_PAGES = 3


def render(page: Path) -> str:
    """The DOM of ``page`` after its scripts ran, offline."""
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}",
             "--virtual-time-budget=15000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"chromium failed on {page}:\n{result.stderr[-3000:]}"
    assert "</html>" in result.stdout, f"chromium dumped no DOM for {page}"
    return result.stdout


@pytest.fixture(scope="module")
def math_pages(built_book) -> dict[Path, int]:
    """The built pages of the TOC with math, and how many math elements each has before rendering."""
    pages = {}
    for entry in toc_files():
        page = built_book / f"{entry}.html"
        count = len(MATH_ELEMENT.findall(page.read_text(encoding="utf-8")))
        if count:
            pages[page] = count
    return pages


@pytest.fixture(scope="module")
def rendered(math_pages) -> dict[Path, str]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(math_pages, pool.map(render, math_pages)))


def test_at_least_three_pages_have_math(math_pages):
    assert len(math_pages) >= MIN_PAGES, f"only {len(math_pages)} page(s) with math: {sorted(map(str, math_pages))}"


def test_mathjax_typeset_every_math_element_offline(math_pages, rendered):
    problems = []
    for page, dom in rendered.items():
        containers = dom.count("<mjx-container")
        if containers < math_pages[page]:
            problems.append(f"{page.name}: {containers} typeset of {math_pages[page]} math elements")
        raw = RAW_TEX.findall(parse_html(dom).text)
        if raw:
            problems.append(f"{page.name}: raw TeX left in the rendered text: {raw[:5]}")
    assert not problems, "\n".join(problems)


def test_a_widget_renders_offline(built_book):
    pages = [built_book / f"{entry}.html" for entry in toc_files()]
    with_state = [p for p in pages if WIDGET_STATE in p.read_text(encoding="utf-8")]
    if not with_state:
        pytest.skip("no page embeds ipywidgets state yet (the explorer goes into book/05_attention_layer.md)")
    dom = render(with_state[0])
    classes = " ".join(parse_html(dom).classes)
    assert "jupyter-widgets" in classes and "widget-" in classes, (
        f"{with_state[0].name}: the widget state is embedded, but no widget rendered")
