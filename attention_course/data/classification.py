"""Sequence classification where a few planted words decide the label.

Attention pooling (chapter 9) reads a whole sequence and sums its encoder states, weighted
by attention, into one vector for a classifier. Whether the weights land on the words that
matter is easy to check only when we know which words those are. Here we do: each sequence
is neutral filler (:data:`DISTRACTOR_WORDS`, 10 to 60 words by default) with a few words
planted at random positions, and only the planted words decide the label.

Three tasks (:data:`CLASSIFICATION_TASKS`):

``"keyword"``
    ``n_planted`` words, all positive (:data:`POSITIVE_WORDS`, label 1) or all negative
    (:data:`NEGATIVE_WORDS`, label 0). A bag of words solves it; attention should land on
    the planted words.
``"majority"``
    ``n_planted`` words, each positive or negative; the label is 1 when the positive ones
    are more. Every planted word counts, of either kind, so a model must find all of them
    (in ``"keyword"`` the presence of a positive word is enough to decide).
``"order"``
    Both :data:`ORDER_WORDS` are planted, ``"ping"`` and ``"pong"``; the label is 1 when
    ``"ping"`` comes first. Every sequence holds the same two words, so a bag of words is at
    chance: the model must look at both and know where they are.

:attr:`ClassificationData.planted` marks the planted positions: the ground truth for "the
share of attention on the planted words".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attention_course.data.vocab import Vocabulary

CLASSIFICATION_TASKS = ("keyword", "order", "majority")
POSITIVE_WORDS = ("great", "superb", "lovely", "brilliant")
NEGATIVE_WORDS = ("awful", "dreadful", "boring", "terrible")
ORDER_WORDS = ("ping", "pong")  # label 1: "ping" comes before "pong"
# Neutral filler: no word here hints at either label.
DISTRACTOR_WORDS = (
    "the", "a", "of", "and", "to", "in", "is", "was", "it", "for", "on", "with", "as", "at",
    "by", "from", "this", "that", "then", "there", "some", "each", "other", "which", "when",
    "where", "about", "after", "before", "into", "over", "under", "while", "also", "just",
    "film", "movie", "story", "plot", "actor", "actress", "scene", "music", "camera",
    "screen", "script", "director", "ending", "opening", "minute", "hour", "night", "day",
    "city", "house", "road", "train", "car", "letter", "phone", "table", "window", "door",
    "garden", "river", "winter", "summer", "friend", "brother", "sister", "mother", "father",
    "doctor", "teacher", "captain", "walks", "talks", "opens", "closes", "returns",
    "arrives", "leaves", "meets", "writes", "reads", "finds", "keeps", "turns", "waits",
    "second", "third", "long", "short", "early", "late", "again", "still", "often",
)  # fmt: skip

# One vocabulary for both tasks, so a model can be trained on one and probed on the other.
CLASSIFICATION_VOCABULARY = Vocabulary(
    (*DISTRACTOR_WORDS, *POSITIVE_WORDS, *NEGATIVE_WORDS, *ORDER_WORDS), level="word"
)


@dataclass
class ClassificationData:
    """Padded token ids, their labels and the positions of the planted words.

    Fields:
        ids: word ids in :attr:`vocab`, padded with ``vocab.pad_id``.
        mask: True on the real words.
        labels: 0 or 1.
        planted: True on the planted words: the words that decide the label.
        vocab: the word-level vocabulary of ``ids``.
        task: ``"keyword"`` or ``"order"``.

    Shapes:
        ids, mask, planted: (N, T), int64, bool, bool; T = the ``max_length`` asked for.
        labels: (N,) int64.
    """

    ids: np.ndarray
    mask: np.ndarray
    labels: np.ndarray
    planted: np.ndarray
    vocab: Vocabulary
    task: str

    def __post_init__(self) -> None:
        N, T = self.ids.shape
        for name, expected_shape in {"mask": (N, T), "planted": (N, T), "labels": (N,)}.items():
            got_shape = getattr(self, name).shape
            if got_shape != expected_shape:
                raise ValueError(f"{name}: expected shape {expected_shape}, got {got_shape}")

    def __len__(self) -> int:
        return self.ids.shape[0]

    def texts(self) -> list[str]:
        """Every sequence as text: its words separated by single spaces, without padding."""
        return [self.vocab.decode(row) for row in self.ids]

    def subset(self, indices: np.ndarray | Sequence[int] | slice) -> ClassificationData:
        """The sequences at ``indices``, in that order; the padded width stays T."""
        if not isinstance(indices, slice):
            indices = np.asarray(indices)
        return ClassificationData(
            ids=self.ids[indices],
            mask=self.mask[indices],
            labels=self.labels[indices],
            planted=self.planted[indices],
            vocab=self.vocab,
            task=self.task,
        )


def rule_label(words: Sequence[str], task: str) -> int:
    """The label that the planted words among ``words`` give: the rule a model must learn.

    ``"keyword"``: 1 if the planted words are positive, 0 if negative. ``"majority"``: 1 if
    more of them are positive than negative, else 0. ``"order"``: 1 if ``"ping"`` comes before
    ``"pong"``, else 0. Filler words are ignored, wherever they are.

    Raises:
        ValueError: an unknown task, or ``words`` that no sequence of the task holds
            (no planted word, both kinds of keyword, as many positive as negative keywords,
            not exactly one "ping" and one "pong").
    """
    if task not in CLASSIFICATION_TASKS:
        raise ValueError(f"task must be one of {CLASSIFICATION_TASKS}, got {task!r}")
    words = list(words)
    if task == "keyword":
        has_positive = any(word in POSITIVE_WORDS for word in words)
        has_negative = any(word in NEGATIVE_WORDS for word in words)
        if has_positive == has_negative:
            raise ValueError(
                f"words: expected keywords of one kind only, got {words!r} with "
                f"{'both kinds' if has_positive else 'no keyword'}"
            )
        return int(has_positive)
    if task == "majority":
        n_positive = sum(word in POSITIVE_WORDS for word in words)
        n_negative = sum(word in NEGATIVE_WORDS for word in words)
        if n_positive == n_negative:
            raise ValueError(
                f"words: expected more keywords of one kind than of the other, got {words!r} "
                f"with {n_positive} of each"
            )
        return int(n_positive > n_negative)
    first, second = ORDER_WORDS
    if words.count(first) != 1 or words.count(second) != 1:
        raise ValueError(
            f"words: expected exactly one {first!r} and one {second!r}, got {words!r}"
        )
    return int(words.index(first) < words.index(second))


def generate_classification(
    n: int,
    seed: int | np.random.Generator = 0,
    task: str = "keyword",
    min_length: int = 10,
    max_length: int = 60,
    n_planted: int = 2,
) -> ClassificationData:
    """n sequences of filler words with planted words that decide a balanced label.

    Each sequence has a length drawn uniformly from ``min_length .. max_length``; every
    word is a filler word drawn uniformly from :data:`DISTRACTOR_WORDS`, except at
    ``n_planted`` distinct positions drawn uniformly among the sequence's steps, which
    hold the planted words (see the module's docstring for the two tasks). Labels are
    balanced: ``n // 2`` of one and ``n - n // 2`` of the other, in random order. Filler
    words never include a planted word. For a test set, call again with another seed.

    In ``"majority"``, a sequence of label 1 holds ``k`` positive words, ``k`` drawn uniformly
    from the counts that are a majority (``n_planted // 2 + 1 .. n_planted``), at random places
    among the planted ones; a sequence of label 0 likewise holds ``k`` negative words.

    Args:
        n: the number of sequences.
        seed: an integer seed, or a ``numpy.random.Generator`` to draw from.
        task: ``"keyword"``, ``"majority"`` or ``"order"``.
        min_length, max_length: the range of lengths, in words, both included.
        n_planted: how many planted words; ``"order"`` needs exactly 2.

    Returns:
        A :class:`ClassificationData`; its ``ids`` are padded to T = ``max_length``.

    Shapes:
        ids, mask, planted: (n, max_length); labels: (n,).

    Raises:
        ValueError: naming the bad argument.
    """
    if task not in CLASSIFICATION_TASKS:
        raise ValueError(f"task must be one of {CLASSIFICATION_TASKS}, got {task!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n_planted < 1:
        raise ValueError(f"n_planted must be >= 1, got {n_planted}")
    if task == "order" and n_planted != 2:
        raise ValueError(f"n_planted must be 2 for the 'order' task, got {n_planted}")
    if min_length < n_planted:
        raise ValueError(
            f"min_length must be >= n_planted={n_planted} (room for the planted words), "
            f"got {min_length}"
        )
    if min_length > max_length:
        raise ValueError(
            "min_length must be <= max_length, "
            f"got min_length={min_length}, max_length={max_length}"
        )
    vocab = CLASSIFICATION_VOCABULARY
    rng = np.random.default_rng(seed)
    N, T = n, max_length

    labels = rng.permutation(np.arange(N, dtype=np.int64) % 2)
    lengths = rng.integers(min_length, max_length + 1, size=N)
    mask = np.arange(T) < lengths[:, None]  # (N, T)

    distractor_ids = np.array([vocab.encode(word)[0] for word in DISTRACTOR_WORDS])
    ids = distractor_ids[rng.integers(0, len(DISTRACTOR_WORDS), size=(N, T))]
    ids[~mask] = vocab.pad_id

    # n_planted distinct real steps per row: the smallest random keys among the real steps.
    keys = rng.random((N, T))
    keys[~mask] = 2.0
    positions = np.sort(np.argsort(keys, axis=1)[:, :n_planted], axis=1)  # (N, n_planted)
    rows = np.arange(N)[:, None]

    if task in ("keyword", "majority"):
        positive_ids = np.array([vocab.encode(word)[0] for word in POSITIVE_WORDS])
        negative_ids = np.array([vocab.encode(word)[0] for word in NEGATIVE_WORDS])
        positive = positive_ids[rng.integers(0, len(POSITIVE_WORDS), size=(N, n_planted))]
        negative = negative_ids[rng.integers(0, len(NEGATIVE_WORDS), size=(N, n_planted))]
        planted_ids = np.where(labels[:, None] == 1, positive, negative)
        if task == "majority":
            # k words of the label's own kind (a majority), the others of the other kind.
            smallest_majority = n_planted // 2 + 1
            n_own = rng.integers(smallest_majority, n_planted + 1, size=N)
            own = np.argsort(rng.random((N, n_planted)), axis=1) < n_own[:, None]  # (N, n_planted)
            other_ids = np.where(labels[:, None] == 1, negative, positive)
            planted_ids = np.where(own, planted_ids, other_ids)
    else:
        ping_id, pong_id = (vocab.encode(word)[0] for word in ORDER_WORDS)
        in_order = np.array([ping_id, pong_id])
        planted_ids = np.where(labels[:, None] == 1, in_order, in_order[::-1])
    ids[rows, positions] = planted_ids
    planted = np.zeros((N, T), dtype=bool)
    planted[rows, positions] = True
    return ClassificationData(
        ids=ids.astype(np.int64, copy=False),
        mask=mask,
        labels=labels,
        planted=planted,
        vocab=vocab,
        task=task,
    )
