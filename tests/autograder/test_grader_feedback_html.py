"""What a student wrote never runs in a feedback page (``autograder/feedback.py``): the student's markdown
and outputs are sanitized as the formgrader's view is, and the page declares a Content-Security-Policy
under which no script runs at all.

One submission plants every hostile form in markdown cells of its own, and the real ``feedback`` command
writes its page. The grader records a cell's text output only (what the student printed, their
errors), so the rich outputs a runner could keep (HTML, JavaScript, SVG, markdown, images) are planted
in the autograded notebook, where ``feedback`` reads them, as a runner that kept them would have
written them.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from autograder import feedback, sanitize
from autograder.jupyterhub import formgrader_guard

from grader_helpers import FixtureCourse, needs_bwrap

ASSIGNMENT = "fx_softmax"
STUDENT = "mallory"
TITLE = ASSIGNMENT          # the page's own title; a planted script would change it to PWNED_...

MARKDOWN = [
    "<script>document.title='PWNED_md_script'</script>",
    "<img src=x onerror=\"document.title='PWNED_md_img'\">",
    "[a link](javascript:document.title='PWNED_md_link')",
    "<a href=\"javascript:document.title='PWNED_md_a'\">an anchor</a>",
    "<iframe src=\"javascript:parent.document.title='PWNED_md_iframe'\"></iframe>",
    "<svg onload=\"document.title='PWNED_md_svg'\"></svg>",
    "[r]: JavaScript:document.title='PWNED_md_reference'\n\n[a reference link][r]",
    "<details open ontoggle=\"document.title='PWNED_md_toggle'\">x</details>",
    "<meta http-equiv=\"refresh\" content=\"0;url=javascript:document.title='PWNED_md_meta'\">",
    "<object data=\"javascript:document.title='PWNED_md_object'\"></object>",
    "<form action=\"javascript:document.title='PWNED_md_form'\"><button>go</button></form>",
    "<base href=\"javascript:document.title='PWNED_md_base'//\">",
]
# What a student's cell could display, were the runner to keep rich outputs.
OUTPUTS = [
    new_output("display_data", data={
        "text/html": "<script>document.title='PWNED_out_script'</script>"
                     "<img src=y onerror=\"document.title='PWNED_out_img'\">", "text/plain": "<HTML>"}),
    new_output("display_data", data={"application/javascript": "document.title='PWNED_out_js'",
                                     "text/plain": "<Javascript>"}),
    new_output("display_data", data={"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg' "
                                                      "onload=\"document.title='PWNED_out_svg'\">"
                                                      "<script>document.title='PWNED_out_svg_script'</script></svg>"}),
    new_output("display_data", data={"text/markdown": "[md](javascript:document.title='PWNED_out_markdown')"}),
    new_output("display_data", data={"image/png": "AAAA\" onerror=\"document.title='PWNED_out_png'"}),
    new_output("display_data", metadata={"text/html": {"isolated": True}},
               data={"text/html": "<b>isolated</b><img src=z onerror=\"document.title='PWNED_out_iso'\">"}),
    new_output("execute_result", execution_count=1,
               data={"text/html": "<a href=\"javascript:document.title='PWNED_out_a'\">a link</a>"}),
    new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {
        "model_id": "x", "version_major": 2, "version_minor": 0}}),
]
PRINTED = "</pre><script>document.title='PWNED_printed'</script>"


def _chromium():
    """``tests/book/chromium.py`` (a headless Chromium over the DevTools pipe), loaded by its path."""
    path = Path(__file__).resolve().parents[1] / "book" / "chromium.py"
    spec = importlib.util.spec_from_file_location("chromium_for_feedback_tests", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def page(released_template, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("feedback-html") / "grading"
    shutil.copytree(released_template, root)
    course = FixtureCourse(root)
    nb = course.solved(ASSIGNMENT)
    printing = new_code_cell(f"print({PRINTED!r})")
    nb.cells[1:1] = [new_markdown_cell(text) for text in MARKDOWN] + [printing]
    folder = root / "submitted" / STUDENT / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
    done = course.cli("autograde", ASSIGNMENT, "--workers", "1")
    assert done.returncode == 0, done.stderr
    graded = root / "autograded" / STUDENT / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    nb = nbformat.read(graded, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source == printing.source)
    assert PRINTED in "".join(o.get("text", "") for o in cell.outputs), cell.outputs
    cell.outputs = cell.outputs + [nbformat.from_dict(json.loads(json.dumps(o))) for o in OUTPUTS]
    nbformat.validate(nb)
    nbformat.write(nb, graded)
    done = course.cli("feedback", ASSIGNMENT)
    assert done.returncode == 0 and "WITHHELD" not in done.stdout, done.stdout + done.stderr
    return root / "feedback" / STUDENT / ASSIGNMENT / f"{ASSIGNMENT}.html"


class _Page(HTMLParser):
    """Everything live in a page as a browser would parse it, and the policies of its head."""

    URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href", "srcdoc", "background"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts, self.handlers, self.script_urls, self.embedding, self.refresh = [], [], [], [], []
        self.head: list[str] = []          # the start tags inside <head>, in order
        self.policies: list[str] = []
        self.text: list[str] = []
        self._where = None

    def handle_starttag(self, tag, attrs):
        attributes = {name: value or "" for name, value in attrs}
        if tag == "head":
            self._where = "head"
        elif self._where == "head":
            self.head.append(tag)
        if tag == "script":
            self.scripts.append(attributes)
        if tag in ("iframe", "frame", "object", "embed", "base", "form"):
            self.embedding.append(tag)
        for name, value in attributes.items():
            if name.startswith("on"):
                self.handlers.append(f"{tag} {name}")
            scheme = "".join(value.split())
            if name in self.URL_ATTRIBUTES and re.match(r"(?i)(javascript|vbscript|data:text/html)", scheme):
                self.script_urls.append(f"{tag} {name}={value[:60]}")
        if tag == "meta":
            equiv = attributes.get("http-equiv", "").lower()
            if equiv == "content-security-policy" and self._where == "head":
                self.policies.append(attributes.get("content", ""))
            elif equiv == "refresh":
                self.refresh.append(attributes.get("content", ""))

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        if tag == "head":
            self._where = None

    def handle_data(self, data):
        self.text.append(data)


def _parse(text: str) -> _Page:
    parsed = _Page()
    parsed.feed(text)
    parsed.close()
    return parsed


def _directives(policy: str) -> dict[str, str]:
    return {part.split()[0]: " ".join(part.split()[1:]) for part in policy.split(";") if part.strip()}


@needs_bwrap
def test_nothing_a_student_wrote_is_live_in_the_page(page):
    parsed = _parse(page.read_text())
    assert parsed.scripts == [], "no script element at all (the page needs none)"
    assert parsed.handlers == [] and parsed.script_urls == [] and parsed.embedding == [] and parsed.refresh == [], \
        (parsed.handlers, parsed.script_urls, parsed.embedding, parsed.refresh)
    text = "".join(parsed.text)
    # what was planted is shown, as text, for the instructor to see (not silently dropped) ...
    for planted in ("PWNED_md_script", "PWNED_md_img", "onerror", "PWNED_out_script", "PWNED_printed"):
        assert planted in text, planted
    # ... and the page is still the feedback page: the instructor's markdown rendered, the verdicts
    assert re.search(r"<h1[^>]*>Softmax and its backward pass", page.read_text())
    assert "Tests of this cell (hidden tests included): passed" in text


@needs_bwrap
def test_the_page_declares_a_policy_under_which_no_script_runs(page):
    parsed = _parse(page.read_text())
    assert parsed.policies == [feedback.POLICY]
    assert parsed.head[0] == "meta" and parsed.head.count("meta") >= 1   # first in the head, before any style
    policy = _directives(parsed.policies[0])
    assert policy["default-src"] == "'none'" and policy["script-src"] == "'none'"
    assert policy["object-src"] == "'none'" and policy["frame-src"] == "'none'" and policy["base-uri"] == "'none'"
    assert policy["img-src"] == "data:", "an image from elsewhere would tell another server who opened the page"


@needs_bwrap
def test_no_script_runs_in_a_browser_even_one_the_sanitizer_missed(page, tmp_path):
    chromium = _chromium()
    if chromium.CHROMIUM is None:
        pytest.skip("chromium is not installed")
    text = page.read_text()
    probe = ("<script>document.title='PWNED_probe_script'</script>"
             "<img src=\"data:,\" onerror=\"document.title='PWNED_probe_handler'\">"
             "<a id=probe href=\"javascript:void(document.title='PWNED_probe_link')\">x</a>")
    missed = tmp_path / "missed.html"      # as if the sanitizer had let these through
    missed.write_text(text.replace("</body>", probe + "</body>"))
    unguarded = tmp_path / "unguarded.html"   # the same without the policy: the probe does run
    unguarded.write_text(re.sub(r"<meta[^>]*Content-Security-Policy[^>]*>", "", missed.read_text()))
    assert unguarded.read_text() != missed.read_text()
    with chromium.Browser() as browser:
        titles = {}
        for path in (page, missed, unguarded):
            opened = browser.open(path.as_uri(), settle_ms=300)
            opened.evaluate("document.getElementById('probe') && document.getElementById('probe').click(); true")
            titles[path.name] = opened.evaluate("new Promise(r => setTimeout(() => r(document.title), 300))")
    assert titles[page.name] == TITLE and titles[missed.name] == TITLE, titles
    assert titles[unguarded.name].startswith("PWNED_probe"), titles


def test_a_page_that_would_run_anything_or_lacks_the_policy_is_refused():
    """The last check of ``feedback`` on each page written: one that fails it is withheld."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{feedback.POLICY}">'
    good = f"<html><head>{meta}<title>t</title></head><body><p>&lt;script&gt; as text</p></body></html>"
    feedback.check_page(good)
    feedback.check_page(good.replace("<p>", '<p><a href="https://example.org/?q=javascript:x">a link</a>'))
    for bad in (good.replace("<p>", "<p><script>x()</script>"),
                good.replace("<p>", '<p><img src=x onerror="x()">'),
                good.replace("<p>", '<p><a href=" JaVa&#x09;Script:x()">'),
                good.replace("<p>", '<p><iframe src="data:text/html,x">'),
                good.replace(meta, ""),
                good.replace(meta, meta.replace("'none'", "'self'", 1))):
        with pytest.raises(feedback.LiveInFeedback):
            feedback.check_page(bad)


def test_the_feedback_pages_and_the_formgrader_share_one_sanitizer():
    assert formgrader_guard.sanitizer is sanitize.sanitizer
    cleaner = sanitize.sanitizer()
    assert cleaner.enabled, "registered as it is (nbgrader registers preprocessors without enabling them)"
    cell = nbformat.v4.new_markdown_cell("[x](javascript:alert(1)) <script>alert(2)</script>")
    cleaned, _ = cleaner.preprocess_cell(cell, {}, 0)
    assert "javascript:" not in cleaned.source and "<script>" not in cleaned.source
