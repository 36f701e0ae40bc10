"""The code the chapters show (``literalinclude`` with ``:pyobject:``) reads as the method it teaches: no listing
spends its lines on input checks or carries a later chapter's options, and none runs long.

Each listing is taken from the package's source exactly as Sphinx takes it (the whole function or class the
``:pyobject:`` names); the checks below read its lines.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "book").glob("[01][0-9]_*.md"))
INCLUDE = re.compile(r"```\{literalinclude\} (\S+)\n((?::[\w-]+:.*\n)*)```")
# A line that checks inputs rather than computing: shape and dtype checks, raising, a call of a _check helper.
CHECK = re.compile(r"check_array\(|check_tensor\(|float_dtype\(|\braise\b|\b_check\w*\(|\bself\._check\w*\(")
MAX_LINES = 22  # lines of code a listing may show (its docstring and blank lines not counted)


def listings() -> list[tuple[str, str, str, list[str]]]:
    """``(chapter, file, pyobject, code lines)`` of every ``literalinclude`` of a Python object."""
    found = []
    for chapter in CHAPTERS:
        for match in INCLUDE.finditer(chapter.read_text(encoding="utf-8")):
            options = dict(re.findall(r":([\w-]+): ?(.*)", match.group(2)))
            if "pyobject" not in options or "start-at" in options:
                continue
            path = (chapter.parent / match.group(1)).resolve()
            node = ast.parse(path.read_text(encoding="utf-8"))
            for part in options["pyobject"].split("."):
                node = next(child for child in ast.iter_child_nodes(node) if getattr(child, "name", None) == part)
            lines = path.read_text(encoding="utf-8").splitlines()[node.lineno - 1:node.end_lineno]
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                first, last = body[0].lineno - node.lineno, body[0].end_lineno - node.lineno
                lines = lines[:first] + lines[last + 1:]  # the docstring
            code = [line for line in lines if line.strip() and not line.strip().startswith("#")]
            found.append((chapter.name, str(path.relative_to(ROOT)), options["pyobject"], code))
    return found


LISTINGS = listings()


def test_the_listings_are_found():
    names = {(chapter, name) for chapter, _, name, _ in LISTINGS}
    assert len(LISTINGS) > 60
    assert ("00_lookup.md", "KernelRegression.forward") in names and ("10_outlook.md", "positional_encoding") in names


@pytest.mark.parametrize("chapter, path, name, code", LISTINGS, ids=[f"{c}:{n}" for c, _, n, _ in LISTINGS])
def test_a_listing_shows_the_method_not_its_checks(chapter, path, name, code):
    """At most one line of a listing hands its inputs to a check, and it runs at most MAX_LINES lines."""
    checks = [line.strip() for line in code if CHECK.search(line)]
    assert len(checks) <= 1, f"{chapter} shows {path}:{name} with {len(checks)} lines of checks: {checks}"
    assert len(code) <= MAX_LINES, f"{chapter} shows {path}:{name}: {len(code)} lines of code"


def shown(chapter: str, name: str) -> str:
    codes = [code for c, _, n, code in LISTINGS if c == chapter and n == name]
    assert codes, f"{chapter} no longer shows {name}"
    return "\n".join(codes[0])


@pytest.mark.parametrize("chapter, name, later", [
    ("01_bottleneck.md", "GRUCell._lecture_step", r"reset_after|_torch_step"),  # torch's GRU form: the torch page
    ("06_bidirectional.md", "GRUCell._lecture_step", r"reset_after|_torch_step"),
    ("05_attention_layer.md", "AttentionSeq2seq.forward", r"reinforce|step_losses|hard"),  # chapter 8
    ("05_attention_layer.md", "AttentionDecoder.forward", r"options|first_step|sample"),
    ("05_attention_layer.md", "AttentionDecoder.backward", r"options|step_losses|hard"),
])
def test_an_earlier_chapter_shows_none_of_a_later_chapters_options(chapter, name, later):
    code = shown(chapter, name)
    assert not re.search(later, code, re.I), f"{chapter} shows {name} with {re.findall(later, code, re.I)}"
