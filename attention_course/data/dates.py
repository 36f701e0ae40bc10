"""Human-written dates translated to ISO ``YYYY-MM-DD``: the classic attention demo.

The source is a date as people write it ("tuesday, september 27, 1994", "27.9.94",
"the 27th of september 1994"); the target is always ``1994-09-27``. The task is small
enough to train in seconds, and the alignments are easy to read: the digits of the year in
the output attend to the year in the input, the month digits to the month's name, and so on.

Every source string determines its date:

* ``/`` always means month/day/year ("9/27/94", "09/27/1994"), ``.`` always means
  day.month.year ("27.09.1994", "27.9.94"), and ``-`` appears only in year-month-day
  ("1994-09-27").
* Two-digit years are used only when the range of years spans at most 100 years, where
  each two-digit year names exactly one year of the range: see :func:`expand_two_digit_year`.
  For the default range 1950..2049 that is the pivot ``yy >= 50 -> 19yy``, else ``20yy``.

Month and weekday names are spelled from tables here, never from ``strftime``, whose
names depend on the locale.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence

import numpy as np

MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

DEFAULT_START_YEAR = 1950
DEFAULT_END_YEAR = 2049
MAX_TWO_DIGIT_YEAR_SPAN = 100


def _month(date: datetime.date) -> str:
    return MONTH_NAMES[date.month - 1]


def _month_abbreviation(date: datetime.date) -> str:
    return MONTH_NAMES[date.month - 1][:3]


def _weekday(date: datetime.date) -> str:
    return WEEKDAY_NAMES[date.weekday()]


def _ordinal(day: int) -> str:
    """1 -> '1st', 2 -> '2nd', 3 -> '3rd', 11 -> '11th', 22 -> '22nd'."""
    if 11 <= day % 100 <= 13:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def to_iso(date: datetime.date) -> str:
    """The ISO 8601 form ``YYYY-MM-DD`` (the target of the task)."""
    return f"{date.year:04d}-{date.month:02d}-{date.day:02d}"


# Each format writes a date one way; the comment shows 1994-09-27 in that format.
DATE_FORMATS: dict[str, Callable[[datetime.date], str]] = {
    # 1994-09-27
    "iso": to_iso,
    # 19940927
    "compact": lambda d: f"{d.year:04d}{d.month:02d}{d.day:02d}",
    # september 27, 1994
    "month_day_year": lambda d: f"{_month(d)} {d.day}, {d.year}",
    # September 27, 1994
    "month_day_year_capitalized": lambda d: f"{_month(d).capitalize()} {d.day}, {d.year}",
    # SEPTEMBER 27, 1994
    "month_day_year_upper": lambda d: f"{_month(d).upper()} {d.day}, {d.year}",
    # 27 september 1994
    "day_month_year": lambda d: f"{d.day} {_month(d)} {d.year}",
    # 27 September 1994
    "day_month_year_capitalized": lambda d: f"{d.day} {_month(d).capitalize()} {d.year}",
    # Sep 27, 1994
    "abbreviated_month_day_year": (
        lambda d: f"{_month_abbreviation(d).capitalize()} {d.day}, {d.year}"
    ),
    # 27 sep 1994
    "day_abbreviated_month_year": lambda d: f"{d.day} {_month_abbreviation(d)} {d.year}",
    # SEP 27 1994
    "abbreviated_month_day_year_upper": (
        lambda d: f"{_month_abbreviation(d).upper()} {d.day} {d.year}"
    ),
    # tuesday, september 27, 1994 (the longest: "wednesday, september 27, 1994", 29 characters)
    "weekday_month_day_year": lambda d: f"{_weekday(d)}, {_month(d)} {d.day}, {d.year}",
    # Tue, 27 Sep 1994
    "abbreviated_weekday_day_month_year": lambda d: (
        f"{_weekday(d)[:3].capitalize()}, {d.day} "
        f"{_month_abbreviation(d).capitalize()} {d.year}"
    ),
    # the 27th of september 1994
    "ordinal_day_of_month_year": lambda d: f"the {_ordinal(d.day)} of {_month(d)} {d.year}",
    # september 27th, 1994
    "month_ordinal_day_year": lambda d: f"{_month(d)} {_ordinal(d.day)}, {d.year}",
    # 9/27/94: "/" always means month/day/year
    "slash_month_day_short_year": lambda d: f"{d.month}/{d.day}/{d.year % 100:02d}",
    # 09/27/1994
    "slash_month_day_year": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year:04d}",
    # 27.09.1994: "." always means day.month.year
    "dot_day_month_year": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year:04d}",
    # 27.9.94
    "dot_day_month_short_year": lambda d: f"{d.day}.{d.month}.{d.year % 100:02d}",
}

# The formats that write the year with two digits: usable only over at most 100 years.
TWO_DIGIT_YEAR_FORMATS = frozenset({"slash_month_day_short_year", "dot_day_month_short_year"})

# The longest source the default formats can write: "wednesday, september 27, 1994".
MAX_SOURCE_LENGTH = 29


def expand_two_digit_year(two_digit_year: int, start_year: int = DEFAULT_START_YEAR) -> int:
    """The one year in ``start_year .. start_year + 99`` that ends in ``two_digit_year``.

    This is how a two-digit year is read back. For the default ``start_year=1950`` it is
    the pivot ``yy >= 50 -> 19yy``, else ``20yy``: 94 -> 1994, 3 -> 2003, 49 -> 2049.
    """
    if not 0 <= two_digit_year <= 99:
        raise ValueError(f"two_digit_year must be in 0..99, got {two_digit_year}")
    return start_year + (two_digit_year - start_year) % 100


def usable_formats(
    start_year: int = DEFAULT_START_YEAR,
    end_year: int = DEFAULT_END_YEAR,
    formats: Sequence[str] | None = None,
) -> list[str]:
    """The names of the formats :func:`generate_dates` draws from for this range of years.

    By default every format in :data:`DATE_FORMATS`, minus the two-digit-year formats when
    the range spans more than 100 years (a two-digit year would then be ambiguous).

    Raises:
        ValueError: an unknown format name, no format at all, or a two-digit-year
            format asked for explicitly over a range of more than 100 years.
    """
    span = end_year - start_year + 1
    two_digit_years_are_unambiguous = span <= MAX_TWO_DIGIT_YEAR_SPAN
    if formats is None:
        return [
            name
            for name in DATE_FORMATS
            if two_digit_years_are_unambiguous or name not in TWO_DIGIT_YEAR_FORMATS
        ]
    names = list(dict.fromkeys(formats))
    if not names:
        raise ValueError("formats is empty: name at least one of DATE_FORMATS")
    unknown = [name for name in names if name not in DATE_FORMATS]
    if unknown:
        raise ValueError(f"unknown date formats {unknown}; known formats: {list(DATE_FORMATS)}")
    ambiguous = [name for name in names if name in TWO_DIGIT_YEAR_FORMATS]
    if ambiguous and not two_digit_years_are_unambiguous:
        raise ValueError(
            f"formats {ambiguous} write two-digit years, which are ambiguous over the "
            f"{span} years {start_year}..{end_year}; use a range of at most "
            f"{MAX_TWO_DIGIT_YEAR_SPAN} years or leave these formats out"
        )
    return names


def generate_dates(
    n_train: int,
    n_test: int,
    seed: int = 0,
    start_year: int = DEFAULT_START_YEAR,
    end_year: int = DEFAULT_END_YEAR,
    formats: Sequence[str] | None = None,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Random (human-written date, ISO date) pairs, split into train and test.

    Each draw picks a day uniformly from ``start_year-01-01 .. end_year-12-31`` and a
    format uniformly from :func:`usable_formats`. Sources are unique: a source string
    determines its date, so a repeated draw is dropped (two formats can also write the
    same string: "May 27, 1994" is both the capitalized and the abbreviated month). The first ``n_train`` unique
    sources form the training split and the next ``n_test`` the test split, so no source
    appears in both. The same ``seed`` gives the same pairs.

    Args:
        n_train, n_test: the sizes of the two splits.
        seed: seeds ``numpy.random.default_rng``.
        start_year, end_year: the range of years, both included.
        formats: names from :data:`DATE_FORMATS`; by default all of them that are
            unambiguous over the range (see :func:`usable_formats`).

    Returns:
        ``(train, test)``, lists of ``(source, "YYYY-MM-DD")``.

    Raises:
        ValueError: a bad argument, or more unique pairs asked for than exist or than a
            bounded number of draws reaches.
    """
    if n_train < 0 or n_test < 0:
        raise ValueError(f"n_train and n_test must be >= 0, got {n_train} and {n_test}")
    if not datetime.MINYEAR <= start_year <= end_year <= datetime.MAXYEAR:
        raise ValueError(
            f"need {datetime.MINYEAR} <= start_year <= end_year <= {datetime.MAXYEAR}, "
            f"got start_year={start_year}, end_year={end_year}"
        )
    format_names = usable_formats(start_year, end_year, formats)
    format_functions = [DATE_FORMATS[name] for name in format_names]
    first_ordinal = datetime.date(start_year, 1, 1).toordinal()
    n_days = datetime.date(end_year, 12, 31).toordinal() - first_ordinal + 1

    n_wanted = n_train + n_test
    n_possible_at_most = n_days * len(format_functions)
    if n_wanted > n_possible_at_most:
        raise ValueError(
            f"asked for {n_wanted} unique dates, but {n_days} days x {len(format_functions)} "
            f"formats give at most {n_possible_at_most} distinct sources"
        )

    rng = np.random.default_rng(seed)
    # Draws that repeat a source are wasted; the bound keeps a request close to the
    # number of distinct sources from running forever.
    max_draws = max(100_000, 50 * n_wanted)
    target_of_source: dict[str, str] = {}  # insertion order = draw order
    n_drawn = 0
    while len(target_of_source) < n_wanted and n_drawn < max_draws:
        n_missing = n_wanted - len(target_of_source)
        n_draws = min(max_draws - n_drawn, n_missing + n_missing // 10 + 16)
        day_offsets = rng.integers(0, n_days, size=n_draws)
        format_indices = rng.integers(0, len(format_functions), size=n_draws)
        n_drawn += n_draws
        for day_offset, format_index in zip(day_offsets.tolist(), format_indices.tolist()):
            date = datetime.date.fromordinal(first_ordinal + day_offset)
            source = format_functions[format_index](date)
            if source not in target_of_source:
                target_of_source[source] = to_iso(date)
                if len(target_of_source) == n_wanted:
                    break
    if len(target_of_source) < n_wanted:
        raise ValueError(
            f"asked for {n_wanted} unique dates, but {n_drawn} draws gave only "
            f"{len(target_of_source)}; ask for fewer, widen the range of years or add formats"
        )
    pairs = list(target_of_source.items())
    return pairs[:n_train], pairs[n_train:]
