"""Copies flagged for review: answers that are substantially the package's code or another's answer.

The package is public and the book prints it, and a graded exercise asks for what neither computes,
so an answer made mostly of the package's code, or mostly of another student's answer in the same
batch, is worth a look. This module says which, with the matching lines; it never changes a score.

It uses copydetect's winnowing (as MOSS does) over code normalised the way copydetect normalises it
(every name becomes ``V``, every string ``S``, comments and whitespace go), with Python's own
tokenizer doing the normalising (copydetect's pygments lexer took ten seconds for the package).
Each answer's code (its answer cells and the cells the student added) is fingerprinted without what
the released notebook already holds (signatures, docstrings, the read-only cells) and compared with
every module of the package except what the sandbox offers (those are meant to be used), and with
every other answer to the same notebook. A match counts when it covers at least ``MIN_SHARE`` of the
answer's own fingerprinted code and ``MIN_CHARACTERS`` of it: a short answer that any two students
would write alike is never flagged.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import keyword
import sys
import token
import tokenize
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _copydetect_utils():
    """``copydetect.utils``, the winnowing functions, without running ``copydetect/__init__.py``:
    that imports copydetect's report writer and with it matplotlib's pyplot, 0.7 s of the copy
    check's 2 s in every batch, for HTML reports this module never writes. Then copydetect leaves
    ``sys.modules`` as it was, so a later ``import copydetect`` imports the whole package afresh."""
    if "copydetect" in sys.modules:
        return importlib.import_module("copydetect.utils")
    spec = importlib.util.find_spec("copydetect")
    sys.modules["copydetect"] = importlib.util.module_from_spec(spec)   # (its __init__ not run)
    try:
        return importlib.import_module("copydetect.utils")
    finally:
        for name in [name for name in sys.modules if name == "copydetect" or name.startswith("copydetect.")]:
            del sys.modules[name]


_utils = _copydetect_utils()
find_fingerprint_overlap, get_copied_slices = _utils.find_fingerprint_overlap, _utils.get_copied_slices
get_document_fingerprints, get_token_coverage = _utils.get_document_fingerprints, _utils.get_token_coverage

K = 25              # characters per fingerprinted k-gram (copydetect's noise threshold)
WINDOW = 1          # winnowing window: every k-gram (answers are short)
MIN_SHARE = 0.5     # of the answer's own code found in one other place
MIN_CHARACTERS = 60  # of normalised code that match, at the least

_DROPPED = {token.COMMENT, token.NL, token.NEWLINE, token.INDENT, token.DEDENT, token.ENDMARKER}
_STRINGS = {token.STRING} | {getattr(token, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
                             if hasattr(token, name)}


def normalise(code: str) -> tuple[str, np.ndarray]:
    """``code`` as copydetect compares it (names ``V``, strings ``S``, no comments or whitespace), and
    the source line of each of its characters. Code that does not tokenize is compared as it is,
    without whitespace."""
    parts: list[str] = []
    lines: list[int] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in _DROPPED:
                continue
            if tok.type == token.NAME and not keyword.iskeyword(tok.string):
                text = "V"
            elif tok.type in _STRINGS:
                text = "S"
            else:
                text = tok.string
            parts.append(text)
            lines.extend([tok.start[0]] * len(text))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        parts, lines = [], []
        for number, line in enumerate(code.split("\n"), 1):
            text = "".join(line.split())
            parts.append(text)
            lines.extend([number] * len(text))
    return "".join(parts), np.array(lines, dtype=np.int64)


@dataclass
class Fingerprint:
    hashes: set
    index: dict          # hash -> positions in the normalised code
    coverage: float      # characters the fingerprints cover
    lines: np.ndarray    # the source line of each normalised character


def fingerprint(code: str, boilerplate=None) -> Fingerprint:
    normalised, lines = normalise(code)
    hashes, index = get_document_fingerprints(normalised, K, WINDOW, [] if boilerplate is None else boilerplate)
    return Fingerprint(hashes, index, float(get_token_coverage(index, K, len(normalised))) if normalised else 0.0,
                       lines)


@dataclass(frozen=True)
class Match:
    other: str          # "attention_course/numpy_track/attention.py" or "student bob's answer"
    share: float        # of this answer's fingerprinted code
    lines: str          # where in this answer ("lines 3-9, 12")
    other_lines: str    # where in the other

    def flag(self) -> str:
        return (f"{self.share:.0%} {COPY_FLAG} {self.other} ({self.lines} here; {self.other_lines} "
                f"there): check it is the student's own work")


COPY_FLAG = "of the answer matches"


def is_copy_flag(flag: str) -> bool:
    """Whether a report's flag is this module's (a copy to look at), not a grading problem."""
    return COPY_FLAG in flag


def _line_ranges(lines: np.ndarray, slices) -> str:
    """The source lines the normalised-character ``slices`` (2 x n: starts, ends) cover: "lines 3-9, 12"."""
    covered: set[int] = set()
    for start, end in zip(slices[0], slices[1]):
        covered.update(int(line) for line in lines[int(start):int(end)])
    if not covered:
        return "no line"
    ranges, run = [], [min(covered)]
    for line in sorted(covered)[1:]:
        if line == run[-1] + 1:
            run.append(line)
        else:
            ranges.append(run)
            run = [line]
    ranges.append(run)
    text = ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in ranges)
    return ("line " if len(covered) == 1 else "lines ") + text


def package_sources(root: Path, offered: set[str]) -> dict[str, str]:
    """The package's modules by their path (``attention_course/...``), except the ``offered`` ones."""
    sources = {}
    for path in sorted(Path(root).rglob("*.py")):
        relative = path.relative_to(Path(root).parent)
        module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        if module in offered or "__pycache__" in relative.parts:
            continue
        try:
            sources[str(relative)] = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
    return sources


class CopyCheck:
    """Compares answers with the package's modules (fingerprinted once) and with each other."""

    def __init__(self, references: dict[str, str]) -> None:
        self.references = {name: fingerprint(code) for name, code in references.items()}

    @staticmethod
    def _compare(mine: Fingerprint, theirs: Fingerprint, name: str) -> Match | None:
        if not mine.coverage:
            return None
        index, other_index = find_fingerprint_overlap(mine.hashes, theirs.hashes, mine.index, theirs.index)
        slices, other_slices = get_copied_slices(index, K), get_copied_slices(other_index, K)
        overlap = float(np.sum(slices[1] - slices[0])) if slices.shape[1] else 0.0
        share = overlap / mine.coverage
        if share < MIN_SHARE or overlap < MIN_CHARACTERS:
            return None
        return Match(name, share, _line_ranges(mine.lines, slices), _line_ranges(theirs.lines, other_slices))

    def flags(self, answers: dict[str, str], boilerplate_sources: list[str] = ()) -> dict[str, list[str]]:
        """``answers``: who -> their answer code to one notebook; ``boilerplate_sources``: what the
        released notebook already holds. Returns who -> flags (only for those with a match): one per
        package module matched, and one for the other answers matched (the closest named, with its
        lines, then how many more and who). The same answers give the same flags, in any order."""
        hashes: set = set()
        for source in boilerplate_sources:
            hashes |= fingerprint(source).hashes
        boilerplate = np.array(sorted(hashes)) if hashes else None
        prints = {who: fingerprint(answers[who], boilerplate) for who in sorted(answers) if answers[who].strip()}
        found: dict[str, list[str]] = {}
        for who, mine in prints.items():
            flags = [match.flag() for name, theirs in self.references.items()
                     if (match := self._compare(mine, theirs, name)) is not None]
            peers = [(other, match) for other, theirs in prints.items() if other != who
                     if (match := self._compare(mine, theirs, f"student {other}'s answer")) is not None]
            if peers:
                closest_name, closest = max(peers, key=lambda pair: (pair[1].share, pair[0]))
                others = sorted(other for other, _ in peers if other != closest_name)
                more = (f"; also {len(others)} other answer(s): {', '.join(others[:8])}"
                        f"{', ...' if len(others) > 8 else ''}") if others else ""
                flags.append(closest.flag() + more)
            if flags:
                found[who] = flags
        return found
