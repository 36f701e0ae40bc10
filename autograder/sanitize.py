"""Student-written HTML made inert, wherever a page shows a submission to an instructor.

Two pages show what a student wrote: the formgrader's submission view (``jupyterhub/
formgrader_guard.py``, on the hub's own origin) and the feedback pages (``feedback.py``). Both run
every notebook through ``sanitizer()`` before it is rendered, and ``live_html`` says what, in a
rendered page, could still run.

This module imports nothing heavy: nbconvert only when a sanitizer is made.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SCRIPT_URL = re.compile(r"(?i)\b(java|vb)script\s*:|\bdata\s*:\s*text/html")


def sanitizer():
    """nbconvert's sanitizer, which also takes script URLs out of markdown links (``[x](javascript:...)``).

    nbconvert's ``SanitizeHTML`` cleans markdown and raw cells with bleach (a tag or attribute off its
    allowlist is shown as text: no script, no event handler, no iframe or form) and keeps in an
    output only plain mimetypes (text, PNG, JPEG, JSON, LaTeX), ``text/html`` and ``text/markdown``
    cleaned the same way; the others (``application/javascript``, ``image/svg+xml``, widget views)
    are dropped. Markdown's own links are made after bleach has looked, hence the URL rule.
    The instance is enabled (nbconvert's is not, by default)."""
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    class Sanitizer(SanitizeHTML):
        def preprocess_cell(self, cell, resources, cell_index):
            cell, resources = super().preprocess_cell(cell, resources, cell_index)
            if cell.cell_type == "markdown":
                cell.source = _SCRIPT_URL.sub("blocked:", cell.source)
            return cell, resources

    return Sanitizer(enabled=True)


# A URL that runs as a script when loaded or followed: its scheme, once the browser has dropped the
# spaces and control characters it ignores.
_SCRIPT_SCHEME = re.compile(r"(?i)(java|vb)script:|data:text/html")
_IGNORED_IN_URLS = re.compile(r"[\x00-\x20]")
# Attributes that take a URL a browser may load or follow.
_URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href", "background", "poster",
                   "codebase", "cite", "srcset", "ping"}
# Elements that run, embed or redirect whatever their attributes say, sanitized or not.
_ACTIVE_ELEMENTS = {"script", "iframe", "frame", "frameset", "object", "embed", "applet", "base", "form",
                    "portal"}


class _Live(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.policies: list[str] = []
        self._in_head = False

    def handle_starttag(self, tag, attrs):
        named = {name: value or "" for name, value in attrs}
        if tag == "head":
            self._in_head = True
        if tag in _ACTIVE_ELEMENTS:
            self.found.append(f"the element <{tag}>")
        for name, value in named.items():
            if name.startswith("on"):
                self.found.append(f"an event handler ({name}) on <{tag}>")
            elif name in _URL_ATTRIBUTES and _SCRIPT_SCHEME.match(_IGNORED_IN_URLS.sub("", value)):
                self.found.append(f"a script URL in {name} of <{tag}>")
        if tag == "meta":
            equiv = named.get("http-equiv", "").lower()
            if equiv == "refresh":
                self.found.append("the element <meta http-equiv=refresh>")
            elif equiv == "content-security-policy" and self._in_head:
                self.policies.append(named.get("content", ""))

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        if tag == "head":
            self._in_head = False


def live_html(page: str) -> tuple[list[str], list[str]]:
    """What in an HTML page could run a script or load another page by itself (script elements,
    frames, objects, forms, ``<base>``, event handlers, script URLs, a refresh), and the
    Content-Security-Policies its head declares (``<meta http-equiv>``), as a browser parses them."""
    parser = _Live()
    parser.feed(page)
    parser.close()
    return parser.found, parser.policies
