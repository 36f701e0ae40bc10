"""Tests for attention_course/data/vocab.py."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attention_course.data.vocab import (
    ParallelBatch,
    UnknownCharacterError,
    UnknownWordError,
    Vocabulary,
    build_vocabularies,
    encode_pairs,
    iterate_batches,
    pad_batch,
)

DATE_CHARACTERS = "abcdefghijklmnopqrstuvwxyz ,./0123456789"


def test_special_tokens_come_first_then_sorted_characters():
    vocab = Vocabulary("cba")
    assert vocab.symbols == ["<pad>", "<bos>", "<eos>", "a", "b", "c"]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2)
    assert len(vocab) == 6
    assert "a" in vocab and "d" not in vocab
    assert "<pad>" not in vocab, "special tokens are not characters of the text"


def test_order_of_construction_does_not_change_ids():
    assert Vocabulary("xyz") == Vocabulary(["z", "y", "x", "x"])
    assert Vocabulary("xyz") != Vocabulary("xy")
    assert Vocabulary.from_texts(["hello", "world"]) == Vocabulary("dehlorw")


def test_symbols_must_be_single_characters():
    with pytest.raises(ValueError, match="single character"):
        Vocabulary(["ab"])


@given(st.text(alphabet=DATE_CHARACTERS, max_size=40))
def test_encode_decode_round_trip(text):
    vocab = Vocabulary(DATE_CHARACTERS)
    ids = vocab.encode(text, add_bos=True, add_eos=True)
    assert len(ids) == len(text) + 2
    assert ids[0] == vocab.bos_id and ids[-1] == vocab.eos_id
    assert vocab.decode(ids) == text
    assert vocab.decode(vocab.encode(text)) == text


def test_decode_stops_at_first_eos_and_skips_pad_and_bos():
    vocab = Vocabulary("ab")
    a, b = vocab.encode("ab")
    ids = [vocab.bos_id, a, vocab.pad_id, b, vocab.eos_id, a, a]
    assert vocab.decode(ids) == "ab"
    assert vocab.decode(np.array(ids)) == "ab"
    assert vocab.decode(ids, strip_special=False) == "<bos>a<pad>b<eos>aa"


def test_decode_rejects_ids_out_of_range():
    with pytest.raises(ValueError, match="id 9 is out of range"):
        Vocabulary("ab").decode([3, 9])


def test_unknown_character_error_names_character_position_and_text():
    vocab = Vocabulary("acf")
    with pytest.raises(UnknownCharacterError) as raised:
        vocab.encode("café")
    message = str(raised.value)
    assert message == (
        "unknown character 'é' at position 3 in 'café': the vocabulary has no such symbol"
    )
    assert isinstance(raised.value, ValueError)
    assert (raised.value.character, raised.value.position) == ("é", 3)


def test_to_dict_from_dict_round_trip_through_json():
    vocab = Vocabulary.from_texts(["september 27, 1994", "27.9.94", "Tue"])
    restored = Vocabulary.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert restored == vocab
    assert restored.symbols == vocab.symbols
    assert restored.encode("27 sep") == vocab.encode("27 sep")


def test_from_dict_rejects_other_special_tokens():
    with pytest.raises(ValueError, match="special tokens"):
        Vocabulary.from_dict({"special_tokens": ["<s>", "</s>"], "characters": ["a"]})


def test_pad_batch_pads_and_masks():
    ids, mask = pad_batch([[5, 6, 7], [8], []], pad_id=0)
    assert ids.dtype == np.int64 and mask.dtype == bool
    np.testing.assert_array_equal(ids, [[5, 6, 7], [8, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(
        mask, [[True, True, True], [True, False, False], [False, False, False]]
    )
    np.testing.assert_array_equal(ids[mask], [5, 6, 7, 8])


def test_pad_batch_fixed_length_and_custom_pad_id():
    ids, mask = pad_batch([[1, 2]], pad_id=9, length=4)
    np.testing.assert_array_equal(ids, [[1, 2, 9, 9]])
    np.testing.assert_array_equal(mask, [[True, True, False, False]])


def test_pad_batch_errors():
    with pytest.raises(ValueError, match="sequence 1 has 3 ids, longer than length=2"):
        pad_batch([[1], [1, 2, 3]], length=2)
    with pytest.raises(ValueError, match="empty"):
        pad_batch([])


def test_parallel_batch_places_bos_and_eos_and_masks():
    pairs = [("ab", "xyz"), ("b", "y")]
    source_vocab, target_vocab = build_vocabularies(pairs)
    batch = encode_pairs(pairs, source_vocab, target_vocab)
    x, y, z = target_vocab.encode("xyz")
    a, b = source_vocab.encode("ab")
    bos, eos, pad = target_vocab.bos_id, target_vocab.eos_id, target_vocab.pad_id

    assert len(batch) == 2
    np.testing.assert_array_equal(batch.source, [[a, b], [b, source_vocab.pad_id]])
    np.testing.assert_array_equal(batch.source_mask, [[True, True], [True, False]])
    np.testing.assert_array_equal(batch.decoder_input, [[bos, x, y, z], [bos, y, pad, pad]])
    np.testing.assert_array_equal(batch.decoder_target, [[x, y, z, eos], [y, eos, pad, pad]])
    np.testing.assert_array_equal(
        batch.target_mask, [[True, True, True, True], [True, True, False, False]]
    )
    for field in (batch.source, batch.decoder_input, batch.decoder_target):
        assert field.dtype == np.int64
    # Teacher forcing: the input is the target shifted right by one step.
    np.testing.assert_array_equal(batch.decoder_input[0, 1:], batch.decoder_target[0, :-1])


def test_encode_pairs_fixed_lengths_and_limits():
    pairs = [("abc", "xy")]
    source_vocab, target_vocab = build_vocabularies(pairs)
    batch = encode_pairs(pairs, source_vocab, target_vocab, source_length=5, target_length=3)
    assert batch.source.shape == (1, 5) and batch.decoder_input.shape == (1, 3)
    assert batch.decoder_target[0, -1] == target_vocab.eos_id
    with pytest.raises(ValueError, match="target_length=2"):
        encode_pairs(pairs, source_vocab, target_vocab, target_length=2)
    with pytest.raises(ValueError, match="source_length=2"):
        encode_pairs(pairs, source_vocab, target_vocab, source_length=2)
    with pytest.raises(UnknownCharacterError, match="'q'"):
        encode_pairs([("q", "x")], source_vocab, target_vocab)


def test_subset_fancy_indexes_every_field_and_keeps_width():
    pairs = [("a", "x"), ("abcd", "xyzzy"), ("ab", "xy")]
    batch = encode_pairs(pairs, *build_vocabularies(pairs))
    subset = batch.subset(np.array([2, 0]))
    assert isinstance(subset, ParallelBatch) and len(subset) == 2
    assert subset.source.shape == (2, 4) and subset.decoder_input.shape == (2, 6)
    for name in ("source", "source_mask", "decoder_input", "decoder_target", "target_mask"):
        np.testing.assert_array_equal(getattr(subset, name), getattr(batch, name)[[2, 0]])


def test_parallel_batch_rejects_mismatched_shapes():
    ids = np.zeros((2, 3), dtype=np.int64)
    mask = np.ones((2, 3), dtype=bool)
    with pytest.raises(ValueError, match="target_mask"):
        ParallelBatch(ids, mask, ids, ids, mask[:1])


@given(
    n=st.integers(0, 60),
    batch_size=st.integers(1, 17),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_iterate_batches_covers_every_index_exactly_once(n, batch_size, shuffle, seed):
    batches = list(iterate_batches(n, batch_size, np.random.default_rng(seed), shuffle=shuffle))
    all_indices = np.concatenate(batches) if batches else np.array([], dtype=np.int64)
    assert sorted(all_indices.tolist()) == list(range(n))
    assert all(len(batch) == batch_size for batch in batches[:-1])
    if not shuffle:
        np.testing.assert_array_equal(all_indices, np.arange(n))


def test_iterate_batches_drop_last_and_seeded_shuffle():
    batches = list(iterate_batches(10, 4, np.random.default_rng(0), drop_last=True))
    assert [len(batch) for batch in batches] == [4, 4]
    first = list(iterate_batches(10, 4, np.random.default_rng(3)))
    again = list(iterate_batches(10, 4, np.random.default_rng(3)))
    assert all(np.array_equal(one, two) for one, two in zip(first, again))
    assert not np.array_equal(np.concatenate(first), np.arange(10)), "shuffle left the order"


# Word-level vocabularies.

WORDS = ["the", "red", "fox", "jumped", "over", "a", "lazy", "dog"]


def test_word_level_ids_are_sorted_words_after_the_special_tokens():
    vocab = Vocabulary(["the", "fox", "red", "the"], level="word")
    assert vocab.level == "word"
    assert vocab.symbols == ["<pad>", "<bos>", "<eos>", "fox", "red", "the"]
    assert vocab.tokens == ["fox", "red", "the"] and vocab.characters == vocab.tokens
    assert "fox" in vocab and "f" not in vocab and "<eos>" not in vocab
    assert vocab.encode("the red fox", add_bos=True, add_eos=True) == [1, 5, 4, 3, 2]
    assert vocab.decode([5, 3, 2, 4]) == "the fox"
    assert vocab.decode([1, 5, 0, 3, 2], strip_special=False) == "<bos> the <pad> fox <eos>"
    assert vocab.encode("") == [] and vocab.decode([]) == ""
    assert repr(vocab) == "Vocabulary(['fox', 'red', 'the'], level='word')"


def test_character_level_is_the_default_and_levels_differ():
    assert Vocabulary("ab").level == "character"
    assert Vocabulary("ab") == Vocabulary("ab", level="character")
    assert Vocabulary(["a", "b"], level="word") != Vocabulary(["a", "b"])
    with pytest.raises(ValueError, match="level must be one of"):
        Vocabulary("ab", level="sentence")
    with pytest.raises(ValueError, match="level must be one of"):
        Vocabulary.from_texts(["ab"], level="bytes")


@pytest.mark.parametrize(
    ("symbol", "reason"),
    [("two words", "whitespace"), ("tab\there", "whitespace"), ("", "non-empty"),
     ("<eos>", "special token"), (7, "non-empty string")],
)  # fmt: skip
def test_word_symbols_are_checked(symbol, reason):
    with pytest.raises(ValueError, match=reason):
        Vocabulary(["ok", symbol], level="word")


def test_a_string_is_not_a_collection_of_words():
    with pytest.raises(ValueError, match="a collection of words, got the string 'the'"):
        Vocabulary("the", level="word")


@given(st.lists(st.sampled_from(WORDS), max_size=30))
def test_word_encode_decode_round_trip(words):
    vocab = Vocabulary(WORDS, level="word")
    text = " ".join(words)
    ids = vocab.encode(text, add_bos=True, add_eos=True)
    assert len(ids) == len(words) + 2
    assert [vocab.symbols[i] for i in ids[1:-1]] == words
    assert vocab.decode(ids) == text
    assert vocab.split(text) == words


def test_unknown_word_error_names_word_position_and_text():
    vocab = Vocabulary(WORDS, level="word")
    with pytest.raises(UnknownWordError) as raised:
        vocab.encode("the red cat jumped")
    assert str(raised.value) == (
        "unknown word 'cat' at position 2 in 'the red cat jumped': the vocabulary has no such word"
    )
    assert (raised.value.word, raised.value.position) == ("cat", 2)
    # Code written for characters (the command line) catches it too.
    assert isinstance(raised.value, UnknownCharacterError)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(("text", "position"), [("the  fox", 1), (" the", 0), ("the ", 1)])
def test_empty_words_are_named(text, position):
    vocab = Vocabulary(WORDS, level="word")
    with pytest.raises(UnknownWordError, match=f"empty word at position {position}"):
        vocab.encode(text)
    with pytest.raises(UnknownWordError, match="empty word"):
        Vocabulary.from_texts([text], level="word")


def test_word_from_texts_splits_on_single_spaces():
    vocab = Vocabulary.from_texts(["the red fox", "a lazy dog", ""], level="word")
    assert vocab.tokens == sorted(["the", "red", "fox", "a", "lazy", "dog"])


def test_word_to_dict_from_dict_round_trip_through_json():
    vocab = Vocabulary(WORDS, level="word")
    description = json.loads(json.dumps(vocab.to_dict()))
    assert description["level"] == "word" and description["words"] == sorted(WORDS)
    restored = Vocabulary.from_dict(description)
    assert restored == vocab and restored.level == "word"
    assert restored.encode("the lazy fox") == vocab.encode("the lazy fox")


def test_character_to_dict_keeps_the_old_key_and_round_trips_the_level():
    vocab = Vocabulary("abc")
    description = vocab.to_dict()
    assert description["characters"] == ["a", "b", "c"] and description["level"] == "character"
    assert Vocabulary.from_dict(description) == vocab


def test_old_dicts_without_a_level_load_as_character_level():
    # What to_dict wrote before word-level vocabularies existed (older checkpoints hold it).
    old_description = {"special_tokens": ["<pad>", "<bos>", "<eos>"], "characters": ["a", "b"]}
    vocab = Vocabulary.from_dict(old_description)
    assert vocab.level == "character" and vocab == Vocabulary("ab")
    assert vocab.encode("ab") == [3, 4]


def test_from_dict_errors_name_what_is_missing():
    with pytest.raises(ValueError, match="'words'"):
        Vocabulary.from_dict({"special_tokens": ["<pad>", "<bos>", "<eos>"], "level": "word"})
    with pytest.raises(ValueError, match="level must be one of"):
        Vocabulary.from_dict({"special_tokens": [], "level": "phrase", "characters": []})
    with pytest.raises(ValueError, match="must be a dict"):
        Vocabulary.from_dict(["a", "b"])


def test_word_level_parallel_batch_counts_words():
    pairs = [("the red fox", "lo vulpo ruza"), ("a dog", "un hundo")]
    source_vocab, target_vocab = build_vocabularies(pairs, level="word")
    assert source_vocab.level == target_vocab.level == "word"
    assert source_vocab.tokens == ["a", "dog", "fox", "red", "the"]
    batch = encode_pairs(pairs, source_vocab, target_vocab)
    assert batch.source.shape == (2, 3) and batch.decoder_input.shape == (2, 4)
    np.testing.assert_array_equal(batch.source_mask, [[True, True, True], [True, True, False]])
    assert target_vocab.decode(batch.decoder_target[1]) == "un hundo"
    assert source_vocab.decode(batch.source[0]) == "the red fox"
    # Teacher forcing: the input is the target shifted right by one step.
    np.testing.assert_array_equal(batch.decoder_input[0, 1:], batch.decoder_target[0, :-1])
    with pytest.raises(ValueError, match="has 3 words, longer than source_length=2"):
        encode_pairs(pairs, source_vocab, target_vocab, source_length=2)
    with pytest.raises(ValueError, match=r"\(3 words \+ <bos>/<eos>\), more than target_length=3"):
        encode_pairs(pairs, source_vocab, target_vocab, target_length=3)
    with pytest.raises(UnknownWordError, match="'cat' at position 1"):
        encode_pairs([("a cat", "un hundo")], source_vocab, target_vocab)
