"""Tests for attention_course/data/captions.py."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.data.captions import (
    BACKGROUND,
    CAPTION_VOCABULARY,
    COLOUR_NAMES,
    COLOURS,
    MAX_CAPTION_LENGTH,
    NO_OBJECT,
    SHAPE_NAMES,
    CaptionData,
    encode_captions,
    generate_captions,
    grid_coverage,
)


@pytest.fixture(scope="module")
def data():
    return generate_captions(400, seed=0)


def parse_caption(caption):
    """[(colour, shape), ...] in the order mentioned, and the relation word(s)."""
    words = caption.split(" ")
    objects, relation, position = [], None, 0
    while position < len(words):
        if words[position] == "a":
            objects.append((words[position + 1], words[position + 2]))
            position += 3
        elif words[position] == "and":
            assert len(objects) == 2, caption
            position += 1
        else:
            assert relation is None and len(objects) == 1, caption
            relation = "left of" if words[position] == "left" else words[position]
            assert words[position : position + len(relation.split())] == relation.split()
            position += len(relation.split())
    return objects, relation


def holds(relation, first_cell, other_cell):
    (row, column), (other_row, other_column) = first_cell, other_cell
    return {
        "above": row < other_row,
        "below": row > other_row,
        "left of": column < other_column,
    }[relation]


def test_shapes_dtypes_and_ranges(data):
    assert isinstance(data, CaptionData) and len(data) == 400
    assert data.images.shape == (400, 64, 64, 3) and data.images.dtype == np.float32
    assert data.images.min() >= 0.0 and data.images.max() <= 1.0
    assert data.object_masks.shape == (400, 3, 64, 64) and data.object_masks.dtype == bool
    assert data.object_present.shape == (400, 3)
    assert data.boxes.shape == (400, 3, 4) and data.cells.shape == (400, 3, 2)
    assert data.colours.shape == data.shapes.shape == (400, 3)
    assert data.word_objects.shape == (400, MAX_CAPTION_LENGTH)
    for name in ("boxes", "cells", "colours", "shapes", "word_objects"):
        assert getattr(data, name).dtype == np.int64, name
    assert len(data.captions) == 400 and data.grid_size == 4


def test_every_object_mask_has_its_colour_and_the_rest_is_background(data):
    for n in range(len(data)):
        covered = np.zeros((64, 64), dtype=bool)
        for k in np.flatnonzero(data.object_present[n]):
            mask = data.object_masks[n, k]
            assert mask.sum() > 20, "an object too small to see"
            colour = COLOURS[COLOUR_NAMES[data.colours[n, k]]]
            assert (data.images[n][mask] == np.float32(colour)).all(), (n, k)
            assert not (covered & mask).any(), "objects overlap"
            covered |= mask
        assert (data.images[n][~covered] == np.float32(BACKGROUND)).all(), n
        absent = ~data.object_present[n]
        assert not data.object_masks[n, absent].any()
        assert (data.colours[n, absent] == -1).all() and (data.cells[n, absent] == -1).all()


def test_boxes_are_tight_and_objects_stay_in_their_cells(data):
    cell = 64 // data.grid_size
    for n, k in zip(*np.nonzero(data.object_present)):
        rows, columns = np.nonzero(data.object_masks[n, k])
        top, left, bottom, right = data.boxes[n, k]
        assert (top, left, bottom, right) == (
            rows.min(), columns.min(), rows.max() + 1, columns.max() + 1
        )
        row, column = data.cells[n, k]
        assert row * cell <= top and bottom <= (row + 1) * cell
        assert column * cell <= left and right <= (column + 1) * cell


def test_present_objects_come_first_and_differ_in_colour_or_shape(data):
    counts = data.object_present.sum(axis=1)
    np.testing.assert_array_equal(data.object_present, np.arange(3) < counts[:, None])
    assert set(counts.tolist()) == {1, 2, 3}
    for n in range(len(data)):
        kinds = list(zip(data.colours[n, : counts[n]], data.shapes[n, : counts[n]]))
        cells = [tuple(cell) for cell in data.cells[n, : counts[n]].tolist()]
        assert len(set(kinds)) == len(kinds) and len(set(cells)) == len(cells)


def test_captions_name_every_object_and_their_relations_hold(data):
    relations_seen = set()
    for n, caption in enumerate(data.captions):
        mentioned, relation = parse_caption(caption)
        present = np.flatnonzero(data.object_present[n])
        slot_of = {
            (COLOUR_NAMES[data.colours[n, k]], SHAPE_NAMES[data.shapes[n, k]]): k for k in present
        }
        assert sorted(mentioned) == sorted(slot_of), caption
        cells = [tuple(data.cells[n, slot_of[kind]]) for kind in mentioned]
        for other in cells[1:]:
            assert holds(relation, cells[0], other), (caption, cells)
        if len(cells) == 2:
            row_gap = abs(cells[0][0] - cells[1][0])
            column_gap = abs(cells[0][1] - cells[1][1])
            assert (relation == "above") == (row_gap >= column_gap), (caption, cells)
        if len(cells) == 3:
            assert sorted(cells[1:]) == cells[1:], "the other two in reading order"
        relations_seen.add(relation)
    assert relations_seen == {None, "above", "left of", "below"}


def test_word_objects_point_at_the_object_each_word_names(data):
    for n, caption in enumerate(data.captions):
        words = caption.split(" ")
        objects = data.word_objects[n]
        assert (objects[len(words) :] == NO_OBJECT).all()
        for t, word in enumerate(words):
            k = objects[t]
            if word in COLOUR_NAMES:
                assert COLOUR_NAMES[data.colours[n, k]] == word
                assert SHAPE_NAMES[data.shapes[n, objects[t + 1]]] == words[t + 1]
                assert objects[t + 1] == k, "colour and shape name the same object"
            elif word in SHAPE_NAMES:
                assert SHAPE_NAMES[data.shapes[n, k]] == word
            else:
                assert k == NO_OBJECT, (caption, t)


@given(grid_size=st.sampled_from([1, 2, 4, 8, 16]), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=20, deadline=None)
def test_grid_coverage_is_the_share_of_each_cell(grid_size, seed):
    masks = np.random.default_rng(seed).random((2, 3, 32, 16)) < 0.3
    masks = np.concatenate([masks, masks], axis=-1)  # (2, 3, 32, 32)
    coverage = grid_coverage(masks, grid_size)
    assert coverage.shape == (2, 3, grid_size, grid_size)
    cell = 32 // grid_size
    for i in range(grid_size):
        for j in range(grid_size):
            block = masks[..., i * cell : (i + 1) * cell, j * cell : (j + 1) * cell]
            np.testing.assert_allclose(coverage[..., i, j], block.mean(axis=(-2, -1)))


def test_word_regions_cover_the_named_object_only(data):
    regions = data.word_regions(8)
    assert regions.shape == (len(data), MAX_CAPTION_LENGTH, 8, 8)
    coverage = grid_coverage(data.object_masks, 8)
    for n in range(0, len(data), 7):
        for t, k in enumerate(data.word_objects[n]):
            if k == NO_OBJECT:
                assert not regions[n, t].any()
            else:
                np.testing.assert_array_equal(regions[n, t], coverage[n, k])
                # The object's pixels lie in exactly the feature cells with coverage.
                pixels = data.object_masks[n, k].sum()
                assert regions[n, t].sum() * (64 // 8) ** 2 == pixels
    with pytest.raises(ValueError, match="grid_size must be a positive divisor"):
        data.word_regions(5)


def test_encode_captions_lines_up_with_word_objects(data):
    decoder_input, decoder_target, target_mask = encode_captions(data.captions[:30])
    T_dec = max(len(caption.split(" ")) for caption in data.captions[:30]) + 1
    assert decoder_input.shape == decoder_target.shape == target_mask.shape == (30, T_dec)
    vocab = CAPTION_VOCABULARY
    for n in range(30):
        assert vocab.decode(decoder_target[n]) == data.captions[n]
        assert decoder_input[n, 0] == vocab.bos_id
        words = data.captions[n].split(" ")
        for t, word in enumerate(words):
            assert vocab.symbols[decoder_target[n, t]] == word
        assert decoder_target[n, len(words)] == vocab.eos_id
        assert target_mask[n].sum() == len(words) + 1
    assert encode_captions(["a red circle"], length=MAX_CAPTION_LENGTH + 1)[0].shape == (1, 13)
    with pytest.raises(ValueError, match="more than length=3"):
        encode_captions(["a red circle"], length=3)


def test_same_seed_same_images():
    first = generate_captions(30, seed=1)
    again = generate_captions(30, seed=np.random.default_rng(1))
    other = generate_captions(30, seed=2)
    np.testing.assert_array_equal(first.images, again.images)
    np.testing.assert_array_equal(first.object_masks, again.object_masks)
    assert first.captions == again.captions
    assert not np.array_equal(first.images, other.images)


def test_other_sizes_and_counts():
    data = generate_captions(
        50, seed=3, image_size=48, grid_size=3, min_objects=2, max_objects=2
    )
    assert data.images.shape == (50, 48, 48, 3) and data.object_masks.shape == (50, 2, 48, 48)
    assert data.object_present.all()
    assert (data.cells < 3).all()
    assert all(len(parse_caption(caption)[0]) == 2 for caption in data.captions)


def test_five_thousand_images_take_a_couple_of_seconds():
    start = time.perf_counter()
    data = generate_captions(5000, seed=0)
    elapsed = time.perf_counter() - start
    assert len(data) == 5000
    assert elapsed < 2.5, f"generating 5,000 images took {elapsed:.2f} s"


@pytest.mark.parametrize(
    ("arguments", "bad_argument"),
    [
        ({"n": -1}, "n must be >= 0"),
        ({"grid_size": 0}, "grid_size must be >= 1"),
        ({"image_size": 50}, "image_size must be a multiple of grid_size=4"),
        ({"image_size": 12}, "cells of at least 4 pixels"),
        ({"min_objects": 0}, "min_objects"),
        ({"max_objects": 4}, "max_objects <= 3"),
        ({"min_objects": 3, "max_objects": 2}, "min_objects <= max_objects"),
        ({"grid_size": 1, "image_size": 8}, "max_objects must be <= 1"),
    ],
)
def test_bad_arguments_are_named(arguments, bad_argument):
    with pytest.raises(ValueError, match=bad_argument):
        generate_captions(**{"n": 4, **arguments})
