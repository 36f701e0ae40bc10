"""Images of coloured shapes and their captions: where a captioning model should look.

"Show, attend and tell" (Xu et al., 2015) captions a photo with a decoder that, at each
word, attends over a grid of CNN features; its figures show the attention landing on the
thing the word names. To check that on our own models we need images where we know what
every word names and where it is. These are such images: one to three coloured shapes,
each in its own cell of a coarse grid (4x4 by default), never overlapping::

    a red circle above a blue square
    a green triangle left of a red circle and a yellow square

Every object is mentioned, with its colour and shape; no two objects of an image share
both. The caption is a function of the image (so a model's caption can be scored exactly):

* one object: ``a <colour> <shape>``;
* two objects: along the axis where their cells are farther apart (rows when tied), the
  upper one "above" the lower one, or the left one "left of" the right one;
* three objects: the one strictly above both others ("above"), else the one strictly left
  of both ("left of"), else the one strictly below both ("below"); one of these always
  exists. The other two follow in reading order, joined by "and".

"A above B" means A's grid row is smaller than B's, whatever the columns; "A left of B"
means A's grid column is smaller; "A below B" means A's row is larger.

With each image comes the ground truth for where the model should look: for every word of
the caption the object it names (:attr:`CaptionData.word_objects`; the colour and the shape
word name their object, other words none), and each object's pixel mask and bounding box.
:func:`grid_coverage` maps a mask to a feature grid of any size that divides the image.

Images are channels-last, ``(N, H, W, 3)``, float32 in [0, 1], so ``plt.imshow(images[0])``
shows one; a PyTorch CNN wants ``images.transpose(0, 3, 1, 2)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attention_course.data.vocab import Vocabulary, pad_batch

COLOURS = {
    "red": (1.0, 0.0, 0.0),
    "green": (0.0, 0.8, 0.0),
    "blue": (0.1, 0.3, 1.0),
    "yellow": (1.0, 0.9, 0.0),
    "purple": (0.6, 0.1, 0.8),
    "white": (1.0, 1.0, 1.0),
}
COLOUR_NAMES = tuple(COLOURS)
SHAPE_NAMES = ("circle", "square", "triangle")
BACKGROUND = (0.0, 0.0, 0.0)
RELATION_WORDS = {"above": ("above",), "left_of": ("left", "of"), "below": ("below",)}
MAX_OBJECTS = 3
# "a c s left of a c s and a c s": three objects, a two-word relation and "and".
MAX_CAPTION_LENGTH = 3 * MAX_OBJECTS + 2 + 1
NO_OBJECT = -1  # in word_objects: a word that names no object ("a", "above", "and", ...)

CAPTION_VOCABULARY = Vocabulary(
    ("a", "and", *(word for words in RELATION_WORDS.values() for word in words),
     *COLOUR_NAMES, *SHAPE_NAMES),
    level="word",
)  # fmt: skip


@dataclass
class CaptionData:
    """Images, their captions, and where each object and each caption word is.

    Object slot k of image n holds an object when ``object_present[n, k]``; the present
    slots come first. Absent slots have empty masks, zero boxes and -1 everywhere else.

    Fields:
        images: RGB, float32 in [0, 1], channels last.
        captions: N texts, words separated by single spaces.
        word_objects: the object slot that caption word t names (its colour or its shape
            word), or ``NO_OBJECT`` (-1) for other words and for padding.
        object_masks: True on the pixels of each object.
        object_present: which object slots hold an object.
        boxes: each object's tight bounding box ``(top, left, bottom, right)`` in pixels,
            bottom and right excluded: ``masks[n, k, top:bottom, left:right]``.
        cells: each object's grid cell ``(row, column)``.
        colours: each object's index in :data:`COLOUR_NAMES`.
        shapes: each object's index in :data:`SHAPE_NAMES`.
        grid_size: the objects' grid has ``grid_size x grid_size`` cells.

    Shapes:
        images: (N, H, W, 3) float32.
        word_objects: (N, L) int64, L = :data:`MAX_CAPTION_LENGTH`.
        object_masks: (N, K, H, W) bool, K = the ``max_objects`` asked for.
        object_present: (N, K) bool.
        boxes: (N, K, 4) int64; cells: (N, K, 2) int64; colours, shapes: (N, K) int64.
    """

    images: np.ndarray
    captions: list[str]
    word_objects: np.ndarray
    object_masks: np.ndarray
    object_present: np.ndarray
    boxes: np.ndarray
    cells: np.ndarray
    colours: np.ndarray
    shapes: np.ndarray
    grid_size: int

    def __len__(self) -> int:
        return self.images.shape[0]

    def word_regions(self, grid_size: int) -> np.ndarray:
        """For every caption word, the share of each feature cell its object covers.

        Feature cell (i, j) of a ``grid_size x grid_size`` grid over the image gets the
        fraction of its pixels that belong to the object word t names; words that name no
        object get zeros. Compare with a captioning model's attention weights at the
        decoder step that emits word t (``attention.reshape(N, L, g, g)``).

        Shapes:
            returns: (N, L, grid_size, grid_size) float64.

        Raises:
            ValueError: ``grid_size`` does not divide the image's height and width.
        """
        coverage = grid_coverage(self.object_masks, grid_size)  # (N, K, g, g)
        N, L = self.word_objects.shape
        regions = np.zeros((N, L, grid_size, grid_size))
        rows, steps = np.nonzero(self.word_objects != NO_OBJECT)
        regions[rows, steps] = coverage[rows, self.word_objects[rows, steps]]
        return regions


def grid_coverage(masks: np.ndarray, grid_size: int) -> np.ndarray:
    """The share of each cell of a coarse grid that a pixel mask covers.

    The image is cut into ``grid_size x grid_size`` equal cells, the layout of a CNN
    feature map over it (a 64x64 image seen by a CNN with stride 8 gives an 8x8 grid);
    cell (i, j) gets the fraction of its pixels where the mask is True. ``coverage > 0``
    says which feature cells the object touches.

    Shapes:
        masks: (..., H, W) bool, e.g. (N, K, H, W) object masks.
        returns: (..., grid_size, grid_size) float64 in [0, 1].

    Raises:
        ValueError: ``grid_size`` is not a positive divisor of both H and W.
    """
    masks = np.asarray(masks)
    if masks.ndim < 2:
        raise ValueError(f"masks: expected shape (..., H, W), got {masks.shape}")
    *batch_shape, H, W = masks.shape
    if grid_size < 1 or H % grid_size or W % grid_size:
        raise ValueError(
            f"grid_size must be a positive divisor of the image's height {H} and width "
            f"{W}, got {grid_size}"
        )
    g = grid_size
    cells = masks.reshape(*batch_shape, g, H // g, g, W // g)
    return cells.mean(axis=(-3, -1), dtype=np.float64)


def _shape_templates(size: int) -> np.ndarray:
    """The three shapes drawn in a size x size box, in the order of SHAPE_NAMES.

    A pixel belongs to a shape when its centre does.

    Shapes:
        returns: (3, size, size) bool.
    """
    centres = np.arange(size) + 0.5
    y, x = centres[:, None], centres[None, :]
    half = size / 2
    circle = (y - half) ** 2 + (x - half) ** 2 <= half**2
    square = np.ones((size, size), dtype=bool)
    # Apex at the top centre, base along the bottom edge.
    triangle = np.abs(x - half) <= y / 2
    return np.stack([circle, square, triangle])


def _caption(cells: np.ndarray, colours: Sequence[int], shapes: Sequence[int]):
    """The caption of one image and, for each of its words, the object slot it names.

    Shapes:
        cells: (K, 2) the present objects' grid cells (row, column).
    """
    rows = cells[:, 0].tolist()
    columns = cells[:, 1].tolist()
    K = len(rows)

    def strictly_extreme(values: list[int], pick) -> int | None:
        best = pick(values)
        winners = [k for k in range(K) if values[k] == best]
        return winners[0] if len(winners) == 1 else None

    if K == 1:
        order, relation = [0], None
    elif K == 2:
        row_gap, column_gap = abs(rows[0] - rows[1]), abs(columns[0] - columns[1])
        if row_gap >= column_gap:
            first = 0 if rows[0] < rows[1] else 1
            relation = "above"
        else:
            first = 0 if columns[0] < columns[1] else 1
            relation = "left_of"
        order = [first, 1 - first]
    else:
        for relation, values, pick in (
            ("above", rows, min),
            ("left_of", columns, min),
            ("below", rows, max),
        ):
            first = strictly_extreme(values, pick)
            if first is not None:
                break
        else:  # three distinct cells always have one; see the module's docstring
            raise AssertionError(f"no object stands apart in cells {cells.tolist()}")
        others = sorted((k for k in range(K) if k != first), key=lambda k: (rows[k], columns[k]))
        order = [first, *others]

    words: list[str] = []
    word_objects: list[int] = []
    for position, k in enumerate(order):
        if position == 1:
            words += RELATION_WORDS[relation]
            word_objects += [NO_OBJECT] * len(RELATION_WORDS[relation])
        elif position == 2:
            words.append("and")
            word_objects.append(NO_OBJECT)
        words += ["a", COLOUR_NAMES[colours[k]], SHAPE_NAMES[shapes[k]]]
        word_objects += [NO_OBJECT, k, k]
    return " ".join(words), word_objects


def generate_captions(
    n: int,
    seed: int | np.random.Generator = 0,
    image_size: int = 64,
    grid_size: int = 4,
    min_objects: int = 1,
    max_objects: int = MAX_OBJECTS,
) -> CaptionData:
    """n images of coloured shapes on a grid, with captions and object ground truth.

    Each image draws its number of objects uniformly from ``min_objects .. max_objects``,
    a distinct grid cell for each, and a distinct (colour, shape) for each. A shape fills a
    square box of three quarters of the cell's side, shifted inside the cell by a random
    whole number of pixels, so objects never touch. The background is black. For a test
    set, call again with another seed.

    Args:
        n: the number of images.
        seed: an integer seed, or a ``numpy.random.Generator`` to draw from.
        image_size: the height and width in pixels; a multiple of ``grid_size``.
        grid_size: the objects' grid has ``grid_size x grid_size`` cells, each at least
            4 pixels wide.
        min_objects, max_objects: the range of the number of objects per image,
            ``1 <= min_objects <= max_objects <= 3``.

    Returns:
        A :class:`CaptionData`.

    Shapes:
        images: (n, image_size, image_size, 3) float32; see :class:`CaptionData`.

    Raises:
        ValueError: naming the bad argument.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if grid_size < 1:
        raise ValueError(f"grid_size must be >= 1, got {grid_size}")
    if image_size % grid_size != 0 or image_size // grid_size < 4:
        raise ValueError(
            f"image_size must be a multiple of grid_size={grid_size} with cells of at least "
            f"4 pixels, got image_size={image_size}"
        )
    if not 1 <= min_objects <= max_objects <= MAX_OBJECTS:
        raise ValueError(
            f"need 1 <= min_objects <= max_objects <= {MAX_OBJECTS}, "
            f"got min_objects={min_objects}, max_objects={max_objects}"
        )
    if max_objects > grid_size**2:
        raise ValueError(
            f"max_objects must be <= {grid_size**2}, the number of cells of a "
            f"{grid_size}x{grid_size} grid, got {max_objects}"
        )
    rng = np.random.default_rng(seed)
    N, K, H = n, max_objects, image_size
    cell_size = image_size // grid_size
    box_size = (3 * cell_size) // 4

    n_objects = rng.integers(min_objects, max_objects + 1, size=N)
    present = np.arange(K) < n_objects[:, None]  # (N, K)
    # Distinct cells and distinct (colour, shape) pairs: the first K of a random order.
    cell_index = np.argsort(rng.random((N, grid_size**2)), axis=1)[:, :K]
    kind_index = np.argsort(rng.random((N, len(COLOUR_NAMES) * len(SHAPE_NAMES))), axis=1)[:, :K]
    offsets = rng.integers(0, cell_size - box_size + 1, size=(N, K, 2))

    cells = np.stack([cell_index // grid_size, cell_index % grid_size], axis=-1)  # (N, K, 2)
    colours = kind_index // len(SHAPE_NAMES)
    shapes = kind_index % len(SHAPE_NAMES)
    box_corners = cells * cell_size + offsets  # (N, K, 2) top-left of each shape's box

    templates = _shape_templates(box_size)  # (3, s, s)
    images = np.empty((N, H, H, 3), dtype=np.float32)
    images[...] = BACKGROUND
    object_masks = np.zeros((N, K, H, H), dtype=bool)
    image_of, slot_of = np.nonzero(present)  # one entry per object, M of them
    steps = np.arange(box_size)
    pixel_rows = (box_corners[image_of, slot_of, 0][:, None] + steps)[:, :, None]  # (M, s, 1)
    pixel_columns = (box_corners[image_of, slot_of, 1][:, None] + steps)[:, None, :]  # (M, 1, s)
    object_templates = templates[shapes[image_of, slot_of]]  # (M, s, s)
    object_masks[image_of[:, None, None], slot_of[:, None, None], pixel_rows, pixel_columns] = (
        object_templates
    )
    colour_values = np.array([COLOURS[name] for name in COLOUR_NAMES], dtype=np.float32)
    # Boxes never overlap, so each box can be painted whole: its shape, else background.
    images[image_of[:, None, None], pixel_rows, pixel_columns] = np.where(
        object_templates[..., None],
        colour_values[colours[image_of, slot_of]][:, None, None, :],
        np.asarray(BACKGROUND, dtype=np.float32),
    )  # (M, s, s, 3)

    # Tight boxes: the template's own box, moved to where the shape sits.
    filled_rows = np.nonzero(templates.any(axis=2))
    filled_columns = np.nonzero(templates.any(axis=1))
    template_boxes = np.zeros((len(SHAPE_NAMES), 4), dtype=np.int64)
    for shape in range(len(SHAPE_NAMES)):
        shape_rows = filled_rows[1][filled_rows[0] == shape]
        shape_columns = filled_columns[1][filled_columns[0] == shape]
        template_boxes[shape] = (
            shape_rows.min(), shape_columns.min(), shape_rows.max() + 1, shape_columns.max() + 1
        )
    boxes = template_boxes[shapes] + np.concatenate([box_corners, box_corners], axis=-1)

    captions = []
    word_objects = np.full((N, MAX_CAPTION_LENGTH), NO_OBJECT, dtype=np.int64)
    for index in range(N):
        k = int(n_objects[index])
        caption, objects = _caption(
            cells[index, :k], colours[index, :k].tolist(), shapes[index, :k].tolist()
        )
        captions.append(caption)
        word_objects[index, : len(objects)] = objects

    absent = ~present
    boxes[absent] = 0
    cells[absent] = -1
    colours[absent] = -1
    shapes[absent] = -1
    return CaptionData(
        images=images,
        captions=captions,
        word_objects=word_objects,
        object_masks=object_masks,
        object_present=present,
        boxes=boxes.astype(np.int64, copy=False),
        cells=cells.astype(np.int64, copy=False),
        colours=colours.astype(np.int64, copy=False),
        shapes=shapes.astype(np.int64, copy=False),
        grid_size=grid_size,
    )


def encode_captions(
    captions: Sequence[str], vocab: Vocabulary = CAPTION_VOCABULARY, length: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Captions as teacher-forcing arrays for a captioning decoder.

    The decoder reads ``<bos> w_1 ... w_L`` and learns to predict ``w_1 ... w_L <eos>``,
    as in :func:`attention_course.data.vocab.encode_pairs`; the image plays the source.
    Decoder step t predicts caption word t, so ``CaptionData.word_objects[:, t]`` names
    the object that step should look at.

    Args:
        captions: N captions.
        vocab: a word-level vocabulary; by default every word a caption can hold.
        length: T_dec, counting the extra ``<bos>``/``<eos>`` step; by default the
            longest caption plus one.

    Returns:
        ``(decoder_input, decoder_target, target_mask)``.

    Shapes:
        decoder_input, decoder_target: (N, T_dec) int64; target_mask: (N, T_dec) bool.

    Raises:
        ValueError: no captions, or one longer than ``length`` allows.
        UnknownWordError: a caption holds a word the vocabulary lacks.
    """
    if len(captions) == 0:
        raise ValueError("encode_captions needs at least one caption, got an empty list")
    word_ids = [vocab.encode(caption) for caption in captions]
    for index, ids in enumerate(word_ids):
        if length is not None and len(ids) + 1 > length:
            raise ValueError(
                f"caption {index} ({captions[index]!r}) needs {len(ids) + 1} decoder steps, "
                f"more than length={length}"
            )
    decoder_input, target_mask = pad_batch(
        [[vocab.bos_id, *ids] for ids in word_ids], vocab.pad_id, length
    )
    decoder_target, _ = pad_batch([[*ids, vocab.eos_id] for ids in word_ids], vocab.pad_id, length)
    return decoder_input, decoder_target, target_mask
