"""The built book as a reader sees it: every page of the table of contents, loaded in headless
Chromium (``chromium.py``: the DevTools protocol, every host name unresolvable, so nothing can
come from the network) from disk (``file://``, as the README says to open it), in a window 1280
pixels wide, and again 390 pixels wide (a phone).

Every page must:

* log nothing bad: no console error, no uncaught exception, no failed request (a missing font, a
  script from a CDN, a broken image);
* keep every block inside the column: code, printed output, tables, display math, figures and
  diagrams, none wider than the article's text column and none scrolling sideways;
* show its figures at (nearly) their own size: an image whose pixels are wider than the column
  is shrunk, and its labels with it;
* typeset every math element with MathJax and leave no raw TeX in the text;
* pass axe-core (the accessibility checker, from the book's npm assets) with no serious or
  critical violation;
* give every figure and every diagram a text alternative that says what it shows (not a file
  name), and draw every diagram's text at a legible size, with a link to the diagram at full
  size;
* not scroll sideways at 390 pixels;
* at 390 pixels, make every figure that is drawn at less than half its own width a link to its
  image, so that a tap shows it at full size (its labels legible).

axe-core is pinned in ``tools/book-assets/package.json``; keep it current (4.11 missed the theme's
search button, whose name "Search" did not contain its visible text "Search Ctrl+K": 4.14's
label-content-name-mismatch rule reports it as serious, and the colour-mode button's too).

Search works from disk, and the exercises page's download links download what they promise.

Every chapter (``book/NN_*``) must have at least one Graphviz diagram, drawn. A page that embeds
widget state must render its widgets.
"""

from __future__ import annotations

import re

import pytest

from book_helpers import ROOT, toc_files
from chromium import CHROMIUM, Browser

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(tools/install-system-packages.sh installs it; CI has it)")

WINDOW = (1280, 900)
PHONE = (390, 844)
AXE = ROOT / "tools" / "book-assets" / "node_modules" / "axe-core" / "axe.min.js"
# axe-core's serious and critical violations; preload off: it would fetch the stylesheets,
# which a browser refuses over file://.
AXE_RUN = """
(async () => {
  const result = await axe.run(document, {resultTypes: ["violations"], preload: false});
  return result.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
    `${v.id} (${v.impact}): ${v.help}; ` + v.nodes.slice(0, 3).map(n =>
      n.target.join(" ") + " " + n.html.slice(0, 120)).join(" | "));
})()
"""
MIN_DIAGRAM_TEXT_PX = 9.5  # the smallest text of a diagram, as drawn in the 1280-pixel window
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
    const zoom = e.closest("a");
    return {src: e.getAttribute("data") || e.getAttribute("src") || "inline",
            width: Math.round(b.width), height: Math.round(b.height),
            natural: e.naturalWidth || 0, tag: e.tagName.toLowerCase(),
            alt: e.getAttribute("alt") || e.getAttribute("aria-label") || "",
            zoom: zoom ? zoom.getAttribute("href") : null,
            fallback: !!(e.querySelector && e.querySelector("p.warning") && e.tagName === "OBJECT"
                         && b.height < 30)};
  });
  const alternatives = [...article.querySelectorAll("img")].filter(visible).map(e => ({
    src: (e.getAttribute("src") || "").slice(-60), alt: e.getAttribute("alt") || ""}));
  return {column: Math.round(right - left), wide, images, diagrams, alternatives,
          typeset: document.querySelectorAll("mjx-container").length,
          text: article.innerText,
          classes: [...document.querySelectorAll("[class]")].map(e => String(e.className)).join(" ")};
})()
"""


# At 390 pixels: does the page scroll sideways, and is any of the article cut off at the
# window's edge (sticking out past it, and not inside a block that scrolls on its own, such as a
# code block, a table or a display formula).
SIDEWAYS = r"""
(() => {
  const root = document.documentElement, width = root.clientWidth;
  const scrollsItself = e => {
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const x = getComputedStyle(a).overflowX;
      if ((x === "auto" || x === "scroll") && a.getBoundingClientRect().right <= width + 1) return true;
    }
    return false;
  };
  const cut = [];
  for (const e of document.querySelectorAll("article *")) {
    const b = e.getBoundingClientRect();
    if (b.width > 0 && b.right > width + 1 && !scrollsItself(e)
        && !e.closest("mjx-assistive-mml") && getComputedStyle(e).visibility !== "hidden") {
      cut.push(`${e.tagName.toLowerCase()} "${(e.textContent || "").trim().slice(0, 50)}": `
               + `right edge ${Math.round(b.right)} px`);
    }
  }
  return {scroll: root.scrollWidth, width, cut: cut.slice(0, 10)};
})()
"""


# The plots (images in a cell's output) as drawn: their own width, the width they are shown at,
# and the link around them, if any.
FIGURES = r"""
[...document.querySelectorAll("article .cell_output img")].filter(e => e.getBoundingClientRect().width > 0)
  .map(e => ({src: e.getAttribute("src") || "", natural: e.naturalWidth,
              shown: Math.round(e.getBoundingClientRect().width),
              zoom: e.closest("a") ? e.closest("a").getAttribute("href") : null}))
"""


@pytest.fixture(scope="module")
def pages(built_book) -> dict[str, dict]:
    """What the browser saw on every page of the TOC, by TOC entry (axe-core's verdict too)."""
    seen = {}
    axe = AXE.read_text(encoding="utf-8") if AXE.is_file() else None
    with Browser(*WINDOW) as browser:
        for entry in toc_files():
            path = built_book / f"{entry}.html"
            page = browser.open(path.as_uri())
            report = page.evaluate(MEASURE)
            report["problems"] = page.problems
            report["html"] = path.read_text(encoding="utf-8")
            if axe is not None:
                page.evaluate(axe)
                report["axe"] = page.evaluate(AXE_RUN, timeout=180)
                report["problems"] = page.problems  # axe itself must log nothing either
            seen[entry] = report
            page.close()
    return seen


@pytest.fixture(scope="module")
def phone_pages(built_book) -> dict[str, dict]:
    """Every page of the TOC in a window 390 pixels wide."""
    seen = {}
    with Browser(*PHONE) as browser:
        for entry in toc_files():
            page = browser.open((built_book / f"{entry}.html").as_uri())
            seen[entry] = {**page.evaluate(SIDEWAYS), "diagrams": page.evaluate(MEASURE)["diagrams"],
                           "figures": page.evaluate(FIGURES)}
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


@pytest.mark.parametrize("entry", ENTRIES)
def test_axe_finds_no_serious_or_critical_violation(pages, entry):
    if "axe" not in pages[entry]:
        pytest.fail(f"axe-core is not installed ({AXE}): tools/build-book.sh installs it with npm ci")
    violations = pages[entry]["axe"]
    assert not violations, f"{entry}: axe-core found\n" + "\n".join(violations)


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_figure_and_diagram_says_what_it_shows(pages, entry):
    bad = [f"{image['src']}: alt {image['alt']!r}" for image in pages[entry]["alternatives"]
           if len(image["alt"].split()) < 6 or re.search(r"\.(png|svg|jpe?g)\b|_images/", image["alt"])]
    assert not bad, (f"{entry}: images without a text alternative that says what they show "
                     "(a code cell's `mystnb: image: alt:`, a diagram's `:alt:`):\n" + "\n".join(bad))
    for diagram in pages[entry]["diagrams"]:
        assert diagram["tag"] == "img" and len(diagram["alt"].split()) >= 6, (
            f"{entry}: the diagram {diagram['src']} has no text alternative a browser reads: {diagram}")


@pytest.mark.parametrize("entry", [entry for entry in ENTRIES if CHAPTER.search(entry)])
def test_every_diagram_is_legible_and_opens_at_full_size(pages, phone_pages, built_book, entry):
    for diagram, on_phone in zip(pages[entry]["diagrams"], phone_pages[entry]["diagrams"]):
        svg = ((built_book / entry).parent / diagram["src"]).read_text(encoding="utf-8")
        view_width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', svg).group(1))
        smallest = min(float(size) for size in re.findall(r'font-size="([\d.]+)"', svg))
        drawn = smallest * diagram["width"] / view_width  # CSS pixels at 1280
        assert drawn >= MIN_DIAGRAM_TEXT_PX, (
            f"{entry}: {diagram['src']}: its smallest text is drawn {drawn:.1f} px high in the "
            f"{pages[entry]['column']} px column (at least {MIN_DIAGRAM_TEXT_PX}): larger type, "
            "or a taller layout")
        assert on_phone["zoom"] == on_phone["src"], (
            f"{entry}: on a phone the diagram {diagram['src']} must open at full size when tapped")


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_shrunk_figure_opens_at_full_size_on_a_phone(phone_pages, entry):
    shrunk = [figure for figure in phone_pages[entry]["figures"] if figure["shown"] < 0.5 * figure["natural"]]
    unlinked = [f"{figure['src'][-60:]}: {figure['natural']} px drawn at {figure['shown']} px, link "
                f"{figure['zoom']!r}" for figure in shrunk if figure["zoom"] != figure["src"]]
    assert not unlinked, (f"{entry}: at {PHONE[0]} px these figures shrink below half their width "
                          "and do not open at full size when tapped (book/_assets/figures.js):\n"
                          + "\n".join(unlinked))


@pytest.mark.parametrize("entry", ENTRIES)
def test_no_page_scrolls_sideways_or_cuts_its_text_on_a_phone(phone_pages, entry):
    report = phone_pages[entry]
    assert report["scroll"] <= report["width"] and not report["cut"], (
        f"{entry}: at {PHONE[0]} px the page is {report['scroll']} px wide (the window "
        f"{report['width']}), and these stick out past the window's edge:\n" + "\n".join(report["cut"]))


def test_search_works_from_disk(built_book):
    """Opened as the README says (file://), a search lists pages and logs no error."""
    with Browser(*WINDOW) as browser:
        page = browser.open((built_book / "search.html").as_uri() + "?q=softmax", settle_ms=3000)
        found = page.evaluate("[...document.querySelectorAll('#search-results li a')]"
                              ".map(a => a.getAttribute('href'))")
        problems = page.problems
    assert not problems, "search logged:\n" + "\n".join(problems[:10])
    assert len(found) >= 3 and any("04_attention_weights" in href for href in found), found


def test_the_exercises_page_downloads_a_notebook_and_the_package(built_book, tmp_path):
    """Served over HTTP, as a hosted book is: Chromium ignores ``download`` on a file:// link (each
    file is an origin of its own) and shows a notebook's JSON instead; from disk a reader saves it."""
    import functools
    import http.server
    import json
    import threading
    import zipfile

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built_book)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with Browser(*WINDOW, local_server=True) as browser:
            page = browser.open(f"http://127.0.0.1:{server.server_address[1]}/book/exercises.html")
            notebook = browser.download(
                page, "document.querySelector('a[href$=\"ch3a_multi_query_penalty.ipynb\"][download]').click()",
                tmp_path)
            wheel = browser.download(page, "document.querySelector('a[href$=\".whl\"]').click()", tmp_path)
            # (a browser asks any web server for /favicon.ico; the book has none at the root)
            problems = [problem for problem in page.problems if not problem.endswith("/favicon.ico")]
    finally:
        server.shutdown()
        server.server_close()
    assert not problems, problems
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    assert any("NotImplementedError" in "".join(cell["source"]) for cell in cells), notebook
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "attention_course/__init__.py" in names and "attention_course/numpy_track/attention.py" in names
    assert not [name for name in names if name.startswith(("solutions/", "autograder/", "tests/"))]


def test_the_checks_can_fail(tmp_path):
    """axe, the alternatives and the phone check each fail on a page made to fail them."""
    page = tmp_path / "bad.html"
    page.write_text("<html lang='en'><head><title>t</title></head><body><main><article class='bd-article'>"
                    "<img src='x.png' alt='x.png'><button></button>"
                    "<button aria-label='Search'>Search <kbd>Ctrl</kbd>+<kbd>K</kbd></button>"
                    "<code>" + "x" * 300 + "</code></article></main></body></html>", encoding="utf-8")
    with Browser(*PHONE) as browser:
        opened = browser.open(page.as_uri(), settle_ms=200)
        opened.evaluate(AXE.read_text(encoding="utf-8"))
        violations = opened.evaluate(AXE_RUN, timeout=120)
        report = opened.evaluate(MEASURE)
        sideways = opened.evaluate(SIDEWAYS)
    assert any(v.startswith("button-name") for v in violations), violations
    # axe >= 4.14: a name that does not contain the visible text
    assert any(v.startswith("label-content-name-mismatch (serious)") for v in violations), violations
    assert report["alternatives"][0]["alt"] == "x.png"
    assert sideways["scroll"] > sideways["width"] and sideways["cut"], sideways


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
