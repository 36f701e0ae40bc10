"""Copies flagged for review: answers that are substantially the solution, the exercise's reference, the
package's code or another's answer.

The package is public and the book prints it, and a graded exercise asks for what neither computes,
so an answer made mostly of the package's code, or mostly of another student's answer in the same
batch, is worth a look; so is one made mostly of the exercise's own answer (the solution cells of the
source notebook, or the judge's ``reference.py``: a copy passed round from an instructor's files).
This module says which, with the matching lines; it never changes a score.

It uses copydetect's winnowing (as MOSS does) over code normalised the way copydetect normalises it
(every name becomes ``V``, every string ``S``, comments and whitespace go), with Python's own
tokenizer doing the normalising (copydetect's pygments lexer took ten seconds for the package), cell
by cell (a cell that does not tokenize changes no other cell's normalising).
Each answer's code (its answer cells and the cells the student added) is fingerprinted without what
the released notebook already holds (signatures, docstrings, the read-only cells) and compared with
the notebook's *answer key* (the code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` of
the source notebook, and the exercise's ``reference.py``; fingerprinted once per batch), with every
module of the package except what the sandbox offers (those are meant to be used), and with every
other answer to the same notebook. A match counts when it covers at least ``MIN_SHARE`` of the
answer's own fingerprinted code and ``MIN_CHARACTERS`` of it: a short answer that any two students
would write alike is never flagged.

A flag names the matching lines by place (the student's cell and its line numbers "here", the other
code's "there") and never quotes code: it holds no line of the solution or the reference, and it is
the instructor's (the report, the export and the gradebook's ``flagged``), never on a feedback page.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import keyword
import sys
import textwrap
import token
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

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
    the source line of each of its characters. From where code stops tokenizing (an unterminated
    string or bracket, an inconsistent dedent), its lines are compared as they are, without
    whitespace."""
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
        # The last line that yielded a token may be cut short: it and the lines after go raw.
        resume = lines[-1] if lines else 1
        kept = sum(1 for line in lines if line < resume)
        text = "".join(parts)[:kept]
        parts, lines = [text], lines[:kept]
        for number, line in enumerate(code.split("\n")[resume - 1:], resume):
            text = "".join(line.split())
            parts.append(text)
            lines.extend([number] * len(text))
    return "".join(parts), np.array(lines, dtype=np.int64)


Code = Union[str, Sequence[tuple[str, str]]]   # a text, or (where, text) of each cell in order


def normalise_cells(code: Code) -> tuple[str, np.ndarray, list[tuple[str, int]]]:
    """``normalise`` of each cell, joined; each character's *place* (an index into the list
    returned: the cell's ``where`` and the line in that cell; ``where`` is "" for a plain text)."""
    cells = [("", code)] if isinstance(code, str) else list(code)
    parts: list[str] = []
    lines: list[np.ndarray] = []
    places: list[tuple[str, int]] = []
    for where, text in cells:
        normalised, local = normalise(text)
        parts.append(normalised)
        lines.append(local - 1 + len(places))
        places.extend((where, number) for number in range(1, text.count("\n") + 2))
    return "".join(parts), (np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)), places


@dataclass
class Fingerprint:
    hashes: set
    index: dict          # hash -> positions in the normalised code
    coverage: float      # characters the fingerprints cover
    lines: np.ndarray    # the place of each normalised character (an index into ``places``)
    places: list         # (cell, line in it) of each place


def fingerprint(code: Code, boilerplate=None) -> Fingerprint:
    normalised, lines, places = normalise_cells(code)
    hashes, index = get_document_fingerprints(normalised, K, WINDOW, [] if boilerplate is None else boilerplate)
    return Fingerprint(hashes, index, float(get_token_coverage(index, K, len(normalised))) if normalised else 0.0,
                       lines, places)


@dataclass(frozen=True)
class Match:
    other: str          # "attention_course/numpy_track/attention.py", "student bob's answer", "the solution ..."
    share: float        # of this answer's fingerprinted code
    lines: str          # where in this answer ("cell 'softmax' lines 3-9, 12"): the student's own lines
    other_lines: str    # where in the other (line numbers only: never its code)

    def flag(self) -> str:
        return (f"{self.share:.0%} {COPY_FLAG} {self.other} ({self.lines} here; {self.other_lines} "
                f"there): check it is the student's own work")


COPY_FLAG = "of the answer matches"


def is_copy_flag(flag: str) -> bool:
    """Whether a report's flag is this module's (a copy to look at), not a grading problem."""
    return COPY_FLAG in flag


def _ranges(numbers: set[int]) -> str:
    ranges, run = [], []
    for number in sorted(numbers):
        if run and number == run[-1] + 1:
            run.append(number)
        else:
            if run:
                ranges.append(run)
            run = [number]
    ranges.append(run)
    text = ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in ranges)
    return ("line " if len(numbers) == 1 else "lines ") + text


def _line_ranges(print_: Fingerprint, slices) -> str:
    """The places the normalised-character ``slices`` (2 x n: starts, ends) cover, cell by cell:
    "cell 'softmax' lines 3-9, 12; cell 'extra' line 2" ("lines 3-9" in a plain text)."""
    parts = [print_.lines[int(start):int(end)] for start, end in zip(slices[0], slices[1])]
    places = np.unique(np.concatenate(parts)) if parts else []
    covered: dict[str, set[int]] = {}    # (in the order of the cells: places are in order)
    for place in places:
        where, line = print_.places[int(place)]
        covered.setdefault(where, set()).add(line)
    if not covered:
        return "no line"
    return "; ".join(f"{where} {_ranges(numbers)}" if where else _ranges(numbers) for where, numbers in covered.items())


SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")


def solution_cells(notebook: Path) -> list[tuple[str, str]]:
    """(cell, code) of each solution cell of a source notebook: what lies between ``### BEGIN
    SOLUTION`` and ``### END SOLUTION`` (dedented; every other line left blank, so that line numbers
    are the cell's own), or the whole cell where it has no markers (nbgrader replaces it whole)."""
    import nbformat

    found = []
    nb = nbformat.read(str(notebook), as_version=4)
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        lines = cell.source.split("\n")
        if any(SOLUTION_MARKERS[0] in line for line in lines):
            kept, inside = [], False
            for line in lines:
                if SOLUTION_MARKERS[0] in line or SOLUTION_MARKERS[1] in line:
                    inside = SOLUTION_MARKERS[0] in line
                    kept.append("")
                else:
                    kept.append(line if inside else "")
            code = textwrap.dedent("\n".join(kept))
        else:
            code = cell.source
        found.append((f"cell {meta['grade_id']!r}" if meta.get("grade_id") else f"cell {index}", code))
    return found


def answer_key(source_notebook: Path | None, reference: Path | None) -> dict[str, list[tuple[str, str]]]:
    """What an answer to one notebook must not be a copy of, besides the package and the other answers:
    the source notebook's solution cells and the exercise's reference (each that exists)."""
    key: dict[str, list[tuple[str, str]]] = {}
    if source_notebook is not None and Path(source_notebook).is_file():
        cells = solution_cells(Path(source_notebook))
        if cells:
            key[f"the solution cells of {Path(source_notebook).name}"] = cells
    if reference is not None and Path(reference).is_file():
        key[f"the exercise's {Path(reference).name}"] = [(Path(reference).name, Path(reference).read_text())]
    return key


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


def _has_code(code: Code) -> bool:
    return bool(code.strip()) if isinstance(code, str) else any(text.strip() for _, text in code)


class CopyCheck:
    """Compares answers with a notebook's answer key, the package's modules (fingerprinted once) and
    each other."""

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
        return Match(name, share, _line_ranges(mine, slices), _line_ranges(theirs, other_slices))

    def flags(self, answers: dict[str, Code], boilerplate_sources: list[str] = (),
              key: dict[str, Code] | None = None) -> dict[str, list[str]]:
        """``answers``: who -> their answer code to one notebook (a text, or (cell, code) of each of
        their cells); ``boilerplate_sources``: what the released notebook already holds; ``key``: the
        notebook's answer key (``answer_key``), fingerprinted here, once for all the answers. Returns
        who -> flags (only for those with a match): one per part of the key matched, one per package
        module matched, and one for the other answers matched (the closest named, with its lines, then
        how many more and who). The same answers give the same flags, in any order."""
        hashes: set = set()
        for source in boilerplate_sources:
            hashes |= fingerprint(source).hashes
        boilerplate = np.array(sorted(hashes)) if hashes else None
        keys = {name: fingerprint(code) for name, code in (key or {}).items()}
        prints = {who: fingerprint(answers[who], boilerplate) for who in sorted(answers) if _has_code(answers[who])}
        found: dict[str, list[str]] = {}
        for who, mine in prints.items():
            flags = [match.flag() for name, theirs in [*keys.items(), *self.references.items()]
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
