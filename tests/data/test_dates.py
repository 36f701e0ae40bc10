"""Tests for attention_course/data/dates.py."""

import datetime
import re

import numpy as np
import pytest

from attention_course.data.dates import (
    DATE_FORMATS,
    MAX_SOURCE_LENGTH,
    TWO_DIGIT_YEAR_FORMATS,
    expand_two_digit_year,
    generate_dates,
    to_iso,
    usable_formats,
)

# Written out again here, not imported, so the parser below is independent of the module.
MONTHS = {
    name: number
    for number, name in enumerate(
        "january february march april may june july "
        "august september october november december".split(),
        start=1,
    )
}
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()


def _full_year(year_text):
    year = int(year_text)
    if len(year_text) == 2:
        return 1900 + year if year >= 50 else 2000 + year
    return year


def _parse_month_name(name):
    name = name.lower()
    matches = [number for month, number in MONTHS.items() if month.startswith(name)]
    assert len(name) >= 3 and len(matches) == 1, f"not a month name: {name!r}"
    return matches[0]


def _check_weekday(weekday_text, date):
    weekday_text = weekday_text.lower()
    expected = WEEKDAYS[date.weekday()]
    assert expected.startswith(weekday_text) and len(weekday_text) >= 3, (
        f"{date} is a {expected}, not a {weekday_text!r}"
    )


def parse_iso(text):
    year, month, day = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text).groups()
    return datetime.date(int(year), int(month), int(day))


def parse_slash(text):
    month, day, year = re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})", text).groups()
    return datetime.date(_full_year(year), int(month), int(day))


def parse_dot(text):
    day, month, year = re.fullmatch(r"(\d{1,2})\.(\d{1,2})\.(\d{2}|\d{4})", text).groups()
    return datetime.date(_full_year(year), int(month), int(day))


def parse_compact(text):
    year, month, day = re.fullmatch(r"(\d{4})(\d{2})(\d{2})", text).groups()
    return datetime.date(int(year), int(month), int(day))


def parse_weekday_month_day_year(text):
    pattern = r"([a-z]+), ([a-z]+) (\d{1,2}), (\d{4})"
    weekday, month, day, year = re.fullmatch(pattern, text).groups()
    date = datetime.date(int(year), _parse_month_name(month), int(day))
    _check_weekday(weekday, date)
    return date


def parse_weekday_day_month_year(text):
    weekday, day, month, year = re.fullmatch(
        r"([A-Z][a-z]{2}), (\d{1,2}) ([A-Z][a-z]{2}) (\d{4})", text
    ).groups()
    date = datetime.date(int(year), _parse_month_name(month), int(day))
    _check_weekday(weekday, date)
    return date


def parse_month_day_year(text):
    pattern = r"([A-Za-z]+) (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})"
    month, day, year = re.fullmatch(pattern, text).groups()
    return datetime.date(int(year), _parse_month_name(month), int(day))


def parse_ordinal_of(text):
    pattern = r"the (\d{1,2})(?:st|nd|rd|th) of ([a-z]+) (\d{4})"
    day, month, year = re.fullmatch(pattern, text).groups()
    return datetime.date(int(year), _parse_month_name(month), int(day))


PARSERS = {
    "iso": parse_iso,
    "compact": parse_compact,
    "slash_month_day_short_year": parse_slash,
    "slash_month_day_year": parse_slash,
    "dot_day_month_year": parse_dot,
    "dot_day_month_short_year": parse_dot,
    "weekday_month_day_year": parse_weekday_month_day_year,
    "abbreviated_weekday_day_month_year": parse_weekday_day_month_year,
    "month_day_year": parse_month_day_year,
    "month_day_year_upper": parse_month_day_year,
    "abbreviated_month_day_year_upper": parse_month_day_year,
    "month_ordinal_day_year": parse_month_day_year,
    "ordinal_day_of_month_year": parse_ordinal_of,
}


def _random_dates(count, seed):
    rng = np.random.default_rng(seed)
    first = datetime.date(1950, 1, 1).toordinal()
    last = datetime.date(2049, 12, 31).toordinal()
    # Include the ends of the range, where the two-digit pivot flips.
    offsets = [0, last - first, *rng.integers(0, last - first + 1, size=count).tolist()]
    return [datetime.date.fromordinal(first + offset) for offset in offsets]


@pytest.mark.parametrize("format_name", sorted(PARSERS))
def test_format_parses_back_to_its_date(format_name):
    write = DATE_FORMATS[format_name]
    for date in _random_dates(300, seed=1):
        text = write(date)
        assert PARSERS[format_name](text) == date, f"{format_name}: {text!r} is not {date}"


def test_known_examples():
    date = datetime.date(1994, 9, 27)
    written = {write(date) for write in DATE_FORMATS.values()}
    for example in [
        "september 27, 1994", "September 27, 1994", "SEPTEMBER 27, 1994", "27 september 1994",
        "Sep 27, 1994", "27 sep 1994", "SEP 27 1994", "tuesday, september 27, 1994",
        "Tue, 27 Sep 1994", "the 27th of september 1994", "september 27th, 1994", "9/27/94",
        "09/27/1994", "27.09.1994", "27.9.94", "1994-09-27", "19940927",
    ]:  # fmt: skip
        assert example in written, f"no format writes {example!r}"
    assert to_iso(datetime.date(2003, 1, 2)) == "2003-01-02"


@pytest.mark.parametrize(
    ("day", "ordinal"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"),
     (13, "13th"), (21, "21st"), (22, "22nd"), (23, "23rd"), (31, "31st")],
)  # fmt: skip
def test_ordinal_suffixes(day, ordinal):
    text = DATE_FORMATS["month_ordinal_day_year"](datetime.date(2000, 1, day))
    assert text == f"january {ordinal}, 2000"


def test_at_least_16_formats_and_every_one_is_drawn():
    assert len(DATE_FORMATS) >= 16
    train, test = generate_dates(4000, 1000, seed=0)
    seen = set()
    for source, iso in train + test:
        date = parse_iso(iso)
        seen.update(name for name, write in DATE_FORMATS.items() if write(date) == source)
    assert seen == set(DATE_FORMATS), f"never drawn: {set(DATE_FORMATS) - seen}"


def test_targets_are_the_iso_dates_of_the_sources():
    train, test = generate_dates(500, 500, seed=4)
    for source, iso in train + test:
        date = parse_iso(iso)
        assert source in {write(date) for write in DATE_FORMATS.values()}, (source, iso)
        assert datetime.date(1950, 1, 1) <= date <= datetime.date(2049, 12, 31)


def test_longest_source_fits_the_documented_bound():
    assert MAX_SOURCE_LENGTH == 29
    longest = max(
        len(write(datetime.date(1994, 9, day)))  # september: the longest month name
        for write in DATE_FORMATS.values()
        for day in range(20, 28)  # includes a wednesday (the 21st) with a two-digit day
    )
    assert longest == 29
    train, test = generate_dates(3000, 0, seed=2)
    assert max(len(source) for source, _ in train) <= MAX_SOURCE_LENGTH


def test_same_seed_same_pairs_other_seed_other_pairs():
    assert generate_dates(300, 100, seed=7) == generate_dates(300, 100, seed=7)
    assert generate_dates(300, 100, seed=7) != generate_dates(300, 100, seed=8)


def test_sizes_and_no_source_in_both_splits():
    train, test = generate_dates(20_000, 5_000, seed=3)
    assert len(train) == 20_000 and len(test) == 5_000
    train_sources = [source for source, _ in train]
    test_sources = [source for source, _ in test]
    assert len(set(train_sources)) == len(train_sources)
    assert len(set(test_sources)) == len(test_sources)
    assert not set(train_sources) & set(test_sources)


def test_two_digit_year_pivot():
    assert expand_two_digit_year(50) == 1950
    assert expand_two_digit_year(99) == 1999
    assert expand_two_digit_year(0) == 2000
    assert expand_two_digit_year(49) == 2049
    assert expand_two_digit_year(94, start_year=2000) == 2094
    assert DATE_FORMATS["slash_month_day_short_year"](datetime.date(2049, 12, 31)) == "12/31/49"
    assert DATE_FORMATS["dot_day_month_short_year"](datetime.date(1950, 1, 1)) == "1.1.50"
    for date in _random_dates(200, seed=5):
        year_text = DATE_FORMATS["slash_month_day_short_year"](date).split("/")[-1]
        assert expand_two_digit_year(int(year_text)) == date.year


def test_a_range_over_100_years_excludes_two_digit_formats():
    assert TWO_DIGIT_YEAR_FORMATS <= set(usable_formats(1950, 2049))
    assert not TWO_DIGIT_YEAR_FORMATS & set(usable_formats(1900, 2000))  # 101 years
    train, _ = generate_dates(3000, 0, seed=0, start_year=1800, end_year=2200)
    assert not any(re.fullmatch(r"\d+[/.]\d+[/.]\d\d", source) for source, _ in train)
    assert any(re.fullmatch(r"\d+/\d+/\d{4}", source) for source, _ in train)
    with pytest.raises(ValueError, match="two-digit years"):
        generate_dates(
            10, 0, start_year=1800, end_year=2200, formats=["slash_month_day_short_year"]
        )


def test_custom_range_and_formats():
    train, test = generate_dates(200, 50, seed=0, start_year=2020, end_year=2021, formats=["iso"])
    for source, target in train + test:
        assert source == target and target[:4] in ("2020", "2021")


def test_errors_are_clear():
    with pytest.raises(ValueError, match="at most 731 distinct sources"):
        generate_dates(700, 32, start_year=2020, end_year=2021, formats=["iso"])
    with pytest.raises(ValueError, match="unknown date formats"):
        generate_dates(1, 1, formats=["klingon"])
    with pytest.raises(ValueError, match="start_year"):
        generate_dates(1, 1, start_year=2000, end_year=1999)
    with pytest.raises(ValueError, match="n_train"):
        generate_dates(-1, 1)


def test_every_distinct_source_can_be_collected():
    train, test = generate_dates(366, 365, seed=0, start_year=2020, end_year=2021, formats=["iso"])
    assert len({source for source, _ in train + test}) == 731
