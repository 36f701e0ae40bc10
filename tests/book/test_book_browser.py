"""The built book as a reader sees it: every page of the table of contents, loaded in headless
Chromium (``chromium.py``: the DevTools protocol, every host name unresolvable, so nothing can
come from the network) in a window 1280 pixels wide.

Every page must:

* log nothing bad: no console error, no uncaught exception, no failed request (a missing font, a
  script from a CDN, a broken image);
* keep every block inside the column: code, printed output, tables, display math, figures and
  diagrams, none wider than the article's text column and none scrolling sideways;
* show its figures at (nearly) their own size: an image whose pixels are wider than the column
  is shrunk, and its labels with it;
* typeset every math element with MathJax and leave no raw TeX in the text.

Every chapter (``book/NN_*``) must have at least one Graphviz diagram, drawn. A page that embeds
widget state must render its widgets.
"""

from __future__ import annotations

import re

import pytest

from book_helpers import toc_files
from chromium import CHROMIUM, Browser

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(tools/install-system-packages.sh installs it; CI has it)")

WINDOW = (1280, 900)
MATH_ELEMENT = re.compile(r'<(?:span|div)[^>]*class="[^"]*\bmath\b[^"]*"')
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CHAPTER = re.compile(r"(^|/)\d\d_[^/]+$")
SHRINK_TOLERANCE = 1.05  # an image may be drawn at 95% of its own width, not smaller

# Measures the page in the browser: the column, what sticks out of it, the images, the diagrams.
MEASURE = r"""
(() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const style = getComputedStyle(article), box = article.getBoundingClientRect();
  const left = box.left + parseFloat(style.paddingLeft);
  const right = box.right - parseFloat(style.paddingRight);
  const name = e => {
    const classes = typeof e.className === "string" && e.className.trim()
      ? "." + e.className.trim().split(/\s+/).join(".") : "";
    const what = (e.getAttribute("src") || e.getAttribute("data") || e.textContent || "")
      .trim().replace(/\s+/g, " ").slice(0, 60);
    return `${e.tagName.toLowerCase()}${classes} "${what}"`;
  };
  const visible = e => {
    const b = e.getBoundingClientRect();
    return b.width > 0 && b.height > 0 && getComputedStyle(e).visibility !== "hidden";
  };
  const wide = [];
  const blocks = "pre, div.highlight, table, div.math, mjx-container[display='true'], "
    + "mjx-container[display='true'] > mjx-math, img, object, svg, iframe, .cell_output > *, "
    + "div.graphviz";
  for (const e of article.querySelectorAll(blocks)) {
    if (e.closest("mjx-container") && !e.matches("mjx-container, mjx-container > mjx-math")) continue;
    if (e.tagName === "svg" && e.closest("object, mjx-container")) continue;
    if (!visible(e)) continue;
    const b = e.getBoundingClientRect();
    const scrolls = getComputedStyle(e).overflowX !== "visible" && e.scrollWidth > e.clientWidth + 1;
    if (b.left < left - 1 || b.right > right + 1) {
      wide.push(`${name(e)}: ${Math.round(b.width)} px wide, the column ${Math.round(right - left)}`);
    } else if (scrolls) {
      wide.push(`${name(e)}: scrolls, ${e.scrollWidth} px of content in ${e.clientWidth}`);
    }
  }
  const images = [...article.querySelectorAll("img")].filter(visible).map(e => ({
    src: (e.getAttribute("src") || "").slice(0, 100), complete: e.complete,
    natural: e.naturalWidth, shown: Math.round(e.getBoundingClientRect().width)}));
  const diagrams = [...article.querySelectorAll("div.graphviz object, div.graphviz img, "
                                                + "div.graphviz svg")].map(e => {
    const b = e.getBoundingClientRect();
    return {src: e.getAttribute("data") || e.getAttribute("src") || "inline",
            width: Math.round(b.width), height: Math.round(b.height),
            fallback: !!(e.querySelector && e.querySelector("p.warning") && e.tagName === "OBJECT"
                         && b.height < 30)};
  });
  return {column: Math.round(right - left), wide, images, diagrams,
          typeset: document.querySelectorAll("mjx-container").length,
          text: article.innerText,
          classes: [...document.querySelectorAll("[class]")].map(e => String(e.className)).join(" ")};
})()
"""


@pytest.fixture(scope="module")
def pages(built_book) -> dict[str, dict]:
    """What the browser saw on every page of the TOC, by TOC entry."""
    seen = {}
    with Browser(*WINDOW) as browser:
        for entry in toc_files():
            path = built_book / f"{entry}.html"
            page = browser.open(path.as_uri())
            report = page.evaluate(MEASURE)
            report["problems"] = page.problems
            report["html"] = path.read_text(encoding="utf-8")
            seen[entry] = report
            page.close()
    return seen


ENTRIES = toc_files()


@pytest.mark.parametrize("entry", ENTRIES)
def test_page_logs_no_error(pages, entry):
    problems = pages[entry]["problems"]
    assert not problems, f"{entry}: the page logged\n" + "\n".join(problems)


@pytest.mark.parametrize("entry", ENTRIES)
def test_no_block_is_wider_than_the_column(pages, entry):
    wide = pages[entry]["wide"]
    assert not wide, (f"{entry}: {len(wide)} block(s) do not fit the {pages[entry]['column']} px "
                      f"column at a {WINDOW[0]} px window:\n" + "\n".join(wide[:20]))


@pytest.mark.parametrize("entry", ENTRIES)
def test_images_load_and_are_not_shrunk(pages, entry):
    report, problems = pages[entry], []
    for image in report["images"]:
        if not image["complete"] or image["natural"] == 0:
            problems.append(f"{image['src']}: does not load")
        elif image["natural"] > SHRINK_TOLERANCE * report["column"]:
            problems.append(f"{image['src']}: {image['natural']} px wide, shown at {image['shown']} px "
                            f"in a {report['column']} px column (draw it at most 7 inches wide)")
    assert not problems, f"{entry}:\n" + "\n".join(problems)


@pytest.mark.parametrize("entry", ENTRIES)
def test_math_is_typeset_offline(pages, entry):
    report = pages[entry]
    expected = len(MATH_ELEMENT.findall(report["html"]))
    assert report["typeset"] >= expected, f"{entry}: {report['typeset']} of {expected} math elements typeset"
    raw = RAW_TEX.findall(report["text"])
    assert not raw, f"{entry}: raw TeX left in the rendered text: {raw[:5]}"


def test_the_book_has_math(pages):
    with_math = [entry for entry, report in pages.items() if MATH_ELEMENT.search(report["html"])]
    assert len(with_math) >= 3, f"only {len(with_math)} page(s) with math: {with_math}"


@pytest.mark.parametrize("entry", [entry for entry in ENTRIES if CHAPTER.search(entry)])
def test_every_chapter_draws_a_diagram(pages, built_book, entry):
    diagrams = pages[entry]["diagrams"]
    assert diagrams, f"{entry}: no Graphviz diagram (add a ```{{graphviz}} block)"
    for diagram in diagrams:
        assert diagram["width"] > 40 and diagram["height"] > 20 and not diagram["fallback"], (
            f"{entry}: the diagram {diagram['src']} was not drawn ({diagram})")
        if diagram["src"] != "inline":
            svg = (built_book / entry).parent / diagram["src"]
            assert svg.is_file() and "<svg" in svg.read_text(encoding="utf-8")[:2000], (
                f"{entry}: {diagram['src']} is not an SVG file")


def test_a_widget_renders_offline(pages):
    with_state = [entry for entry, report in pages.items() if WIDGET_STATE in report["html"]]
    if not with_state:
        pytest.skip("no page embeds ipywidgets state")
    for entry in with_state:
        classes = pages[entry]["classes"]
        assert "jupyter-widgets" in classes and "widget-" in classes, (
            f"{entry}: the widget state is embedded, but no widget rendered")


def test_the_measurement_sees_a_wide_block(tmp_path):
    """The rules can fail: a page with a 200-character line, a broken image and a console error."""
    page = tmp_path / "wide.html"
    page.write_text("<html><body><article class='bd-article' style='width:600px;padding:0 20px'>"
                    "<pre style='overflow-x:auto'>" + "x" * 200 + "</pre>"
                    "<img src='missing.png'><script>console.error('boom')</script>"
                    "</article></body></html>", encoding="utf-8")
    with Browser(*WINDOW) as browser:
        opened = browser.open(page.as_uri(), settle_ms=200)
        report = opened.evaluate(MEASURE)
        problems = opened.problems
    assert any("scrolls" in line for line in report["wide"]), report["wide"]
    assert any("boom" in line for line in problems), problems
    assert any("missing.png" in line or "ERR_FILE_NOT_FOUND" in line for line in problems), problems
