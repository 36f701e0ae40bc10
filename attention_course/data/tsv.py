"""Read and write (source, target) pairs as tab-separated text, one pair a line.

The format, so you can bring your own data set::

    september 27, 1994<TAB>1994-09-27
    27.9.94<TAB>1994-09-27

UTF-8; each line holds exactly one tab; spaces are part of the texts and kept as they are.
Blank lines are skipped; ``#`` is an ordinary character, not a comment. A byte-order mark
at the start of the file and Windows line ends (``\\r\\n``) are accepted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


# What a source or target cannot hold: the characters that separate fields and lines.
FORBIDDEN_CHARACTERS = (("\t", "a tab"), ("\n", "a newline"), ("\r", "a carriage return"))


class DataFormatError(ValueError):
    """A pairs file that cannot be read; the message names the file and, if any, the line."""


def load_pairs_tsv(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The (source, target) pairs of a tab-separated file.

    Raises:
        DataFormatError: the file is missing, a directory, unreadable or not UTF-8; a
            line does not hold exactly one tab; a source or target is empty; or the file
            holds no pairs. The message is one line, ``FILE:LINE: what is wrong``.
    """
    path = Path(path)
    if not path.exists():
        raise DataFormatError(f"no such file: {path}")
    if path.is_dir():
        raise DataFormatError(f"{path}: is a directory, not a file of pairs")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise DataFormatError(f"{path}: cannot read the file ({error.strerror})") from error
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line_number = raw[: error.start].count(b"\n") + 1
        bad_byte = raw[error.start]
        raise DataFormatError(
            f"{path}:{line_number}: not valid UTF-8 (byte 0x{bad_byte:02x}); "
            "save the file as UTF-8"
        ) from error
    text = text.removeprefix("\ufeff")

    pairs = []
    for line_number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if "\t" not in line and line.strip() == "":
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            plural = "field" if len(fields) == 1 else "fields"
            raise DataFormatError(
                f"{path}:{line_number}: expected 'source<TAB>target', "
                f"found {len(fields)} {plural}"
            )
        source, target = fields
        if source == "":
            raise DataFormatError(f"{path}:{line_number}: the source (before the tab) is empty")
        if target == "":
            raise DataFormatError(f"{path}:{line_number}: the target (after the tab) is empty")
        pairs.append((source, target))
    if not pairs:
        why = "the file is empty" if raw == b"" else "the file holds only blank lines"
        raise DataFormatError(f"{path}: no pairs found ({why})")
    return pairs


def save_pairs_tsv(pairs: Iterable[tuple[str, str]], path: str | os.PathLike) -> None:
    """Write pairs so that :func:`load_pairs_tsv` reads them back unchanged.

    Nothing is written unless every pair can be: the file is left alone on an error.

    Raises:
        ValueError: no pairs; a source or target is empty, holds a tab or a line break,
            or cannot be encoded as UTF-8; or the first source starts with a byte-order
            mark (U+FEFF), which reading would drop.
    """
    encoded_lines = []
    for index, (source, target) in enumerate(pairs):
        for side, value in (("source", source), ("target", target)):
            if not isinstance(value, str) or value == "":
                raise ValueError(
                    f"pair {index}: the {side} must be a non-empty string, got {value!r}"
                )
            for forbidden, name in FORBIDDEN_CHARACTERS:
                if forbidden in value:
                    raise ValueError(
                        f"pair {index}: the {side} {value!r} holds {name}, "
                        "which the tab-separated format cannot store"
                    )
        if index == 0 and source.startswith("\ufeff"):
            raise ValueError(
                "pair 0: the source starts with a byte-order mark (U+FEFF), which reading drops"
            )
        try:
            encoded_lines.append(f"{source}\t{target}\n".encode("utf-8"))
        except UnicodeEncodeError as error:
            raise ValueError(
                f"pair {index}: cannot be encoded as UTF-8 ({error.reason})"
            ) from error
    if not encoded_lines:
        raise ValueError("no pairs to save: load_pairs_tsv would reject the empty file")
    Path(path).write_bytes(b"".join(encoded_lines))
