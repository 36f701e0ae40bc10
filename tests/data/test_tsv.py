"""Tests for attention_course/data/tsv.py."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_course.data.dates import generate_dates
from attention_course.data.tsv import DataFormatError, load_pairs_tsv, save_pairs_tsv

# Any text the format can hold: no tabs, no line breaks, no unencodable surrogates.
field_texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r\ufeff"),
    min_size=1,
    max_size=20,
)


def test_round_trip_of_generated_dates(tmp_path):
    train, _ = generate_dates(200, 0, seed=0)
    path = tmp_path / "dates.tsv"
    save_pairs_tsv(train, path)
    assert load_pairs_tsv(path) == train
    assert load_pairs_tsv(str(path)) == train
    assert path.read_text(encoding="utf-8").count("\n") == 200


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(field_texts, field_texts), min_size=1, max_size=8))
def test_round_trip_of_any_text(tmp_path, pairs):
    path = tmp_path / "pairs.tsv"
    save_pairs_tsv(pairs, path)
    assert load_pairs_tsv(path) == pairs


def test_blank_lines_crlf_and_hash_lines(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(b"\xef\xbb\xbfa b\t1\r\n\n   \n# c\t2\n\n")
    assert load_pairs_tsv(path) == [("a b", "1"), ("# c", "2")]


def _error_for(tmp_path, content: bytes) -> str:
    path = tmp_path / "bad.tsv"
    path.write_bytes(content)
    with pytest.raises(DataFormatError) as raised:
        load_pairs_tsv(path)
    message = str(raised.value)
    assert "\n" not in message, "messages are one line"
    assert str(path) in message
    return message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            b"a\t1\nb\t2\nc\t3\nd\t4\ne\t5\nf\t6\ng\t3\t4\n",
            ":7: expected 'source<TAB>target', found 3 fields",
        ),
        (b"a\t1\nno tab here\n", ":2: expected 'source<TAB>target', found 1 field"),
        (b"a\t1\n\n\t2\n", ":3: the source (before the tab) is empty"),
        (b"a\t1\nb\t\n", ":2: the target (after the tab) is empty"),
        (b"a\t1\nb\t2\ncaf\xe9\t3\n", ":3: not valid UTF-8"),
    ],
)
def test_malformed_lines_name_the_line(tmp_path, content, expected):
    assert expected in _error_for(tmp_path, content)


def test_empty_files(tmp_path):
    assert _error_for(tmp_path, b"").endswith(": no pairs found (the file is empty)")
    assert "no pairs found" in _error_for(tmp_path, b"\n  \n\n")


def test_missing_file_and_directory(tmp_path):
    missing = tmp_path / "missing.tsv"
    with pytest.raises(DataFormatError, match="no such file: .*missing.tsv"):
        load_pairs_tsv(missing)
    with pytest.raises(DataFormatError, match="is a directory"):
        load_pairs_tsv(tmp_path)
    assert issubclass(DataFormatError, ValueError)


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([("a", "1"), ("b\tc", "2")], "pair 1: the source 'b\\\\tc' holds a tab"),
        ([("a", "1\n")], "pair 0: the target '1\\\\n' holds a newline"),
        ([("a", "")], "pair 0: the target must be a non-empty string"),
        ([], "no pairs"),
    ],
)
def test_save_rejects_what_the_format_cannot_hold(tmp_path, pairs, expected):
    path = tmp_path / "out.tsv"
    with pytest.raises(ValueError, match=expected):
        save_pairs_tsv(pairs, path)
    assert not path.exists(), "nothing is written on an error"
