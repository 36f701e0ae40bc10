"""Tests for attention_course/data/toy.py."""

from collections import Counter

import pytest

from attention_course.data.toy import TOY_TASKS, generate_toy_splits, generate_toy_task


def test_targets_are_copied_reversed_sorted():
    for task in TOY_TASKS:
        pairs = generate_toy_task(task, 200, 1, 12, seed=0)
        for source, target in pairs:
            expected = {"copy": source, "reverse": source[::-1], "sort": "".join(sorted(source))}
            assert target == expected[task], (task, source, target)
    # The tasks differ on the same sources.
    sources = [source for source, _ in generate_toy_task("copy", 50, 5, 5, seed=1)]
    assert sources == [source for source, _ in generate_toy_task("reverse", 50, 5, 5, seed=1)]
    assert any(source != source[::-1] for source in sources)


def test_lengths_cover_the_range_and_characters_come_from_the_alphabet():
    pairs = generate_toy_task("copy", 2000, 3, 7, seed=2, alphabet="xyz")
    lengths = Counter(len(source) for source, _ in pairs)
    assert set(lengths) == {3, 4, 5, 6, 7}
    assert min(lengths.values()) > 300, f"lengths not uniform: {lengths}"
    assert set("".join(source for source, _ in pairs)) == set("xyz")


def test_same_seed_same_pairs():
    first = generate_toy_task("sort", 100, 2, 9, seed=5)
    assert first == generate_toy_task("sort", 100, 2, 9, seed=5)
    assert first != generate_toy_task("sort", 100, 2, 9, seed=6)
    assert generate_toy_task("copy", 0, 1, 3) == []


@pytest.mark.parametrize(
    ("arguments", "bad_argument"),
    [
        ({"task": "rotate"}, "task"),
        ({"min_length": 0}, "min_length"),
        ({"min_length": 6, "max_length": 5}, "min_length must be <= max_length"),
        ({"alphabet": ""}, "alphabet"),
        ({"alphabet": "aab"}, "alphabet"),
        ({"n": -1}, "n must be"),
    ],
)
def test_bad_arguments_are_named(arguments, bad_argument):
    call = {"task": "copy", "n": 10, "min_length": 1, "max_length": 5, **arguments}
    with pytest.raises(ValueError, match=bad_argument):
        generate_toy_task(**call)


def test_splits_have_no_source_in_common():
    train, test = generate_toy_splits("reverse", 2000, 500, 1, 6, seed=0, alphabet="abcd")
    assert len(train) == 2000 and len(test) == 500
    train_sources = {source for source, _ in train}
    test_sources = {source for source, _ in test}
    assert len(train_sources) == 2000 and len(test_sources) == 500
    assert not train_sources & test_sources
    assert all(target == source[::-1] for source, target in train + test)
    assert {len(source) for source in train_sources | test_sources} == {1, 2, 3, 4, 5, 6}


def test_splits_can_use_every_source_and_refuse_more():
    # 2 + 4 + 8 = 14 strings of length 1..3 over "ab".
    train, test = generate_toy_splits("copy", 10, 4, 1, 3, alphabet="ab")
    assert len({source for source, _ in train + test}) == 14
    with pytest.raises(ValueError, match="only 14 strings"):
        generate_toy_splits("copy", 10, 5, 1, 3, alphabet="ab")
    with pytest.raises(ValueError, match="task"):
        generate_toy_splits("rotate", 1, 1, 1, 3)


def test_splits_are_seeded():
    first = generate_toy_splits("sort", 200, 50, 3, 8, seed=11)
    assert first == generate_toy_splits("sort", 200, 50, 3, 8, seed=11)
    assert first != generate_toy_splits("sort", 200, 50, 3, 8, seed=12)
