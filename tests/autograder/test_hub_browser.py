"""The students' "Check my work" button, clicked in a real browser on the real course hub.

The hub of ``test_hub.py`` (its module fixtures ``hub`` and ``users``, imported: a hub of this
module's own, started the same way) releases the assignment; bo fetches it and types in the
answers (as the hub tests do, through his server's API). Then headless Chromium (``chromium.py``,
the DevTools protocol) does what bo does: signs in through the hub's login form, lands on the
notebook in JupyterLab, finds "Check my work" on its toolbar (the hub's own extension,
``autograder/jupyterhub/labextension``) and clicks it with the mouse. The submission must reach
the exchange, a panel "Check: <assignment>" must open with the check service's page in a frame
that runs no script, and that page must come to say "checked" with full points, although the
browser refuses the page's own refresh in such a frame (the extension reloads it instead). A
second click reuses the panel and shows the newer check, not the one before it (the extension
waits until the service has the submission). Nothing the extension runs may fail, and the lab
sees no server error.
"""

from __future__ import annotations

import json
import os
import time
from urllib.parse import quote, urlsplit

import pytest

from autograder import sandbox
from tests.book.chromium import CHROMIUM, Browser, Page

# The course hub of test_hub.py, for this module: pytest finds fixtures by name in a test's module.
from test_hub import ASSIGNMENT, answered, instructor_runs, points  # noqa: E402
from test_hub import hub, searchable_checkout, users  # noqa: E402,F401  (fixtures)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the course hub starts servers as other users: needs root"),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                       "(tools/install-system-packages.sh installs it; CI has it)"),
    pytest.mark.skipif(sandbox.find_bwrap() is None, reason="bubblewrap is not installed: the hub's checks cannot run"),
]

EXTENSION = "attention-course-check"
BUTTON = f".{EXTENSION}-button"
PANEL = f'[id^="{EXTENSION}-"]'
# What Chromium logs, in the frame, each time the check's page asks to refresh itself: a frame
# without allow-scripts may not (the extension reloads it instead).
REFRESH_REFUSED = "Refused to execute the redirect specified via '<meta http-equiv='refresh'"

# Resolves with the value of the expression once it is truthy, or null after ``ms`` milliseconds.
UNTIL = """new Promise(resolve => {
  const start = Date.now();
  const tick = () => {
    let value = null;
    try { value = (%s); } catch (error) { value = null; }
    if (value) { resolve(value); } else if (Date.now() - start > %d) { resolve(null); } else { setTimeout(tick, 250); }
  };
  tick();
})"""
# The check panel's frame: its attributes and what its document shows (same origin: readable).
FRAME = f"""(() => {{
  const frame = document.querySelector('{PANEL} iframe');
  if (!frame || !frame.contentDocument || !frame.contentDocument.body) {{ return null; }}
  return {{sandbox: frame.getAttribute('sandbox'), url: frame.contentDocument.location.href,
           html: frame.contentDocument.body.innerHTML}};
}})()"""
CHECK_TABS = """Array.from(document.querySelectorAll('.lm-TabBar-tabLabel')).map(e => e.textContent)
  .filter(t => t.startsWith('Check:'))"""


def until(page: Page, expression: str, timeout: float) -> object:
    return page.evaluate(UNTIL % (expression, timeout * 1000), timeout=timeout + 30)


def click(page: Page, selector: str) -> None:
    """A mouse click (pressed and released) in the middle of what ``selector`` finds."""
    box = page.evaluate(f"""(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
                                      return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null; }})()""")
    assert box, f"{selector} is not to be seen (a toolbar's item moved into its 'more' menu?)"
    for kind in ("mousePressed", "mouseReleased"):
        page.browser.command("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                           "clickCount": 1}, page.session)


def type_into(page: Page, selector: str, text: str) -> None:
    page.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
    page.browser.command("Input.insertText", {"text": text}, page.session)


def inbound_of(hub, name: str) -> set[str]:
    """bo's folders in the exchange's inbound folder: one per submission."""
    return {f for f in os.listdir(hub["dir"] / "exchange" / hub["a"] / "inbound") if f.startswith(f"{name}+")}


def checked(page: Page, timeout: float, submitted: str) -> dict:
    """The frame once its page says the check of the submission of ``submitted`` (a time) is done."""
    deadline = time.monotonic() + timeout
    frame = None
    while time.monotonic() < deadline:
        frame = page.evaluate(FRAME)
        if frame and f"Your submission of {submitted}: <strong>checked</strong>" in frame["html"]:
            return frame
        time.sleep(1)
    raise AssertionError(f"the panel's frame did not come to the check of {submitted} within {timeout} s: {frame}")


def test_check_my_work_submits_and_shows_the_check_beside_the_notebook(hub, users):
    course, name, total = hub["a"], hub["names"]["bo"], points()
    instructor_runs(users, hub, "a", ["release", ASSIGNMENT], ["publish", ASSIGNMENT])
    bo = users["bo"]
    bo.nbgrader("fetch", course, ASSIGNMENT)
    path = f"{course}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    bo.put_notebook(path, answered(bo, path, None))
    before = inbound_of(hub, name)
    lab = f"/user/{name}/lab/tree/{quote(path)}"
    with Browser(local_server=True) as browser:
        browser.command("Security.setIgnoreCertificateErrors", {"ignore": True})   # the hub's test certificate
        page = browser.open(f"{hub['url']}/hub/login?next={quote(lab, safe='')}")
        type_into(page, "#username_input", name)
        type_into(page, "#password_input", hub["password"])
        click(page, "#login_submit")
        browser.wait_for_event("Page.loadEventFired", page.session, timeout=120)   # the lab, after the redirects
        assert until(page, f"!!(document.querySelector('.jp-NotebookPanel .jp-Cell') && "
                           f"document.querySelector('{BUTTON}'))", 90), \
            f"no notebook with the button at {page.evaluate('location.href')}: {page.problems}"
        assert urlsplit(page.evaluate("location.href")).path.endswith(f"/tree/{path}")
        assert page.evaluate(f"document.querySelector('{BUTTON}').textContent.trim()") == "Check my work"

        # What the button asks the check service first (it must know which check is bo's newest, not
        # to show that one as his new check): from a lab not yet signed in to the service, an
        # answer, through the hub's OAuth redirects.
        api = f"/services/checks-{course}/api/assignments/{ASSIGNMENT}"
        assert page.evaluate(f"fetch('{api}', {{headers: {{Accept: 'application/json'}}}})"
                             ".then(r => r.ok ? r.json() : r.status)") == {"state": None}

        click(page, BUTTON)
        assert until(page, f"{CHECK_TABS}.length", 60) == 1, f"no check panel opened: {page.problems}"
        assert page.evaluate(f"{CHECK_TABS}[0]") == f"Check: {ASSIGNMENT}"
        first = inbound_of(hub, name) - before
        assert len(first) == 1, f"the click did not submit once: {first}"
        submitted = first.pop().split("+")[2]   # <student>+<assignment>+<time>+<random>
        frame = checked(page, 120, submitted)
        assert frame["sandbox"] == "allow-same-origin"   # (no allow-scripts: the page runs nothing)
        assert urlsplit(frame["url"]).path == f"/services/checks-{course}/assignments/{ASSIGNMENT}"
        assert f"Points: {total:g} of {total:g}" in frame["html"], frame["html"][-800:]

        # Another click: a newer submission, its check in the same panel.
        click(page, BUTTON)
        deadline = time.monotonic() + 60
        while len(inbound_of(hub, name) - before) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        second = inbound_of(hub, name) - before
        assert len(second) == 2, f"the second click did not submit: {second}"
        newer = max(folder.split("+")[2] for folder in second)
        assert newer > submitted
        frame = checked(page, 120, newer)
        assert f"Points: {total:g} of {total:g}" in frame["html"], frame["html"][-800:]
        assert page.evaluate(f"{CHECK_TABS}.length") == 1, "a second panel opened"

        errors = [problem for problem in page.problems
                  if (EXTENSION in problem or problem.startswith("uncaught exception"))
                  and REFRESH_REFUSED not in problem]
        assert errors == [], errors
        # (and the lab saves bo's layout in his home: the fork server's frozen JupyterLab folders)
        failed = [problem for problem in page.problems if problem.startswith("failed request: HTTP 5")]
        assert failed == [], failed
        assert not page.evaluate("Array.from(document.querySelectorAll('.jp-Dialog')).map(d => d.textContent)"
                                 ".filter(t => t.includes('Check my work')).length"), "an error dialog opened"
