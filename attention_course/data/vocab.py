"""Character vocabularies, padding and batches of (source, target) pairs.

A sequence-to-sequence model reads the source as a sequence of ids and writes the target
one id at a time. Three special tokens make that work:

* ``<pad>`` (id 0) fills the unused steps of a short sequence in a rectangular batch;
  the masks say which steps are real, so losses and attention can ignore the padding.
* ``<bos>`` (id 1) is the decoder's first input: "begin of sequence".
* ``<eos>`` (id 2) is the decoder's last output: "end of sequence", so the model learns
  where to stop.

With teacher forcing the decoder reads ``<bos> y_1 ... y_T`` and must predict
``y_1 ... y_T <eos>``: the same target, shifted by one step (see :func:`encode_pairs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

PAD_TOKEN = "<pad>"
BOS_TOKEN = "<bos>"
EOS_TOKEN = "<eos>"
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN)


class UnknownCharacterError(ValueError):
    """A text holds a character that the vocabulary does not know."""

    def __init__(self, character: str, position: int, text: str):
        self.character = character
        self.position = position
        self.text = text
        super().__init__(
            f"unknown character {character!r} at position {position} in {text!r}: "
            "the vocabulary has no such symbol"
        )


class Vocabulary:
    """A character-level vocabulary: the special tokens first, then the characters, sorted.

    ``symbols[i]`` is the symbol with id ``i``: ids 0, 1, 2 are ``<pad>``, ``<bos>``,
    ``<eos>``, and ids from 3 on are the characters in code-point order, so two vocabularies
    built from the same characters assign the same ids, whatever order they were seen in.

    Example:
        >>> vocab = Vocabulary("cab")
        >>> vocab.symbols
        ['<pad>', '<bos>', '<eos>', 'a', 'b', 'c']
        >>> vocab.encode("cab", add_eos=True)
        [5, 3, 4, 2]
        >>> vocab.decode([5, 3, 4, 2, 0, 0])
        'cab'
    """

    PAD = PAD_TOKEN
    BOS = BOS_TOKEN
    EOS = EOS_TOKEN

    def __init__(self, symbols: Iterable[str]):
        characters = set()
        for symbol in symbols:
            if not isinstance(symbol, str) or len(symbol) != 1:
                raise ValueError(
                    f"a vocabulary symbol must be a single character, got {symbol!r}"
                )
            characters.add(symbol)
        self._symbols: list[str] = [*SPECIAL_TOKENS, *sorted(characters)]
        self._id_of_character = {
            character: index
            for index, character in enumerate(self._symbols)
            if character not in SPECIAL_TOKENS
        }

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Vocabulary:
        """The vocabulary of every character that occurs in ``texts``."""
        characters: set[str] = set()
        for text in texts:
            characters.update(text)
        return cls(characters)

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def bos_id(self) -> int:
        return 1

    @property
    def eos_id(self) -> int:
        return 2

    @property
    def symbols(self) -> list[str]:
        """Every symbol, special tokens included; the index of a symbol is its id (a copy)."""
        return list(self._symbols)

    @property
    def characters(self) -> list[str]:
        """The regular characters only, sorted (a copy)."""
        return self._symbols[len(SPECIAL_TOKENS) :]

    def __len__(self) -> int:
        return len(self._symbols)

    def __contains__(self, character: object) -> bool:
        return character in self._id_of_character

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self._symbols == other._symbols

    def __hash__(self) -> int:
        return hash(tuple(self._symbols))

    def __repr__(self) -> str:
        return f"Vocabulary({''.join(self.characters)!r})"

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """The ids of the characters of ``text``, optionally framed by ``<bos>``/``<eos>``.

        Raises:
            UnknownCharacterError: a character of ``text`` is not in the vocabulary.
        """
        ids = [self.bos_id] if add_bos else []
        for position, character in enumerate(text):
            character_id = self._id_of_character.get(character)
            if character_id is None:
                raise UnknownCharacterError(character, position, text)
            ids.append(character_id)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> str:
        """The text that ``ids`` spell.

        With ``strip_special`` (the default) decoding stops at the first ``<eos>`` and
        skips ``<pad>`` and ``<bos>``: that turns a model's padded output row into its
        answer. Without it every id is written out, special tokens as ``<pad>``,
        ``<bos>``, ``<eos>``, which is what you want when debugging a batch.

        Shapes:
            ids: (T,) any iterable of integers, e.g. one row of a batch.
        """
        pieces = []
        for raw_id in ids:
            symbol_id = int(raw_id)
            if not 0 <= symbol_id < len(self._symbols):
                raise ValueError(
                    f"id {symbol_id} is out of range for a vocabulary of {len(self)} symbols"
                )
            if strip_special:
                if symbol_id == self.eos_id:
                    break
                if symbol_id in (self.pad_id, self.bos_id):
                    continue
            pieces.append(self._symbols[symbol_id])
        return "".join(pieces)

    def to_dict(self) -> dict:
        """A JSON-serialisable description; :meth:`from_dict` rebuilds the vocabulary."""
        return {"special_tokens": list(SPECIAL_TOKENS), "characters": self.characters}

    @classmethod
    def from_dict(cls, description: dict) -> Vocabulary:
        """The vocabulary that :meth:`to_dict` described."""
        try:
            special_tokens = description["special_tokens"]
            characters = description["characters"]
        except (KeyError, TypeError) as error:
            raise ValueError(
                "a vocabulary description needs the keys 'special_tokens' and 'characters', "
                f"got {description!r}"
            ) from error
        if list(special_tokens) != list(SPECIAL_TOKENS):
            raise ValueError(
                f"special tokens {special_tokens!r} differ from this code's "
                f"{list(SPECIAL_TOKENS)!r}"
            )
        return cls(characters)


def pad_batch(
    sequences: Sequence[Sequence[int]], pad_id: int = 0, length: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Stack sequences of ids of different lengths into one rectangular batch.

    Every row is filled up to ``T`` steps with ``pad_id``; the mask is True on the real
    tokens, so ``ids[mask]`` gives back the concatenated sequences.

    Args:
        sequences: N sequences of ids.
        pad_id: the id written into the unused steps.
        length: T, the width of the batch; by default the longest sequence's length.

    Returns:
        ``(ids, mask)``.

    Shapes:
        ids: (N, T) int64.
        mask: (N, T) bool, True where ``ids`` holds a token of the sequence.

    Raises:
        ValueError: ``sequences`` is empty, or a sequence is longer than ``length``.
    """
    if len(sequences) == 0:
        raise ValueError("pad_batch needs at least one sequence, got an empty list")
    lengths = [len(sequence) for sequence in sequences]
    if length is None:
        length = max(lengths)
    elif length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    else:
        for index, sequence_length in enumerate(lengths):
            if sequence_length > length:
                raise ValueError(
                    f"sequence {index} has {sequence_length} ids, longer than length={length}"
                )
    N, T = len(sequences), length
    ids = np.full((N, T), pad_id, dtype=np.int64)
    mask = np.zeros((N, T), dtype=bool)
    for row, sequence in enumerate(sequences):
        ids[row, : lengths[row]] = sequence
        mask[row, : lengths[row]] = True
    return ids, mask


@dataclass
class ParallelBatch:
    """A batch of (source, target) pairs, encoded for a teacher-forced encoder-decoder.

    For the target ``y_1 ... y_L`` of one pair, the decoder reads
    ``<bos> y_1 ... y_L`` and learns to predict ``y_1 ... y_L <eos>``: at step t its input
    is the previous target symbol and its target is the current one.

    Fields:
        source: the source ids, padded.
        source_mask: True on real source characters.
        decoder_input: ``<bos>`` followed by the target ids, padded.
        decoder_target: the target ids followed by ``<eos>``, padded.
        target_mask: True on the target ids and the ``<eos>``: the steps that count in
            the loss. The same mask covers ``decoder_input``'s real steps.

    Shapes:
        source, source_mask: (N, T_enc).
        decoder_input, decoder_target, target_mask: (N, T_dec).
    """

    source: np.ndarray
    source_mask: np.ndarray
    decoder_input: np.ndarray
    decoder_target: np.ndarray
    target_mask: np.ndarray

    def __post_init__(self) -> None:
        N, T_enc = self.source.shape
        T_dec = self.decoder_input.shape[1]
        expected_shapes = {
            "source_mask": (N, T_enc),
            "decoder_input": (N, T_dec),
            "decoder_target": (N, T_dec),
            "target_mask": (N, T_dec),
        }
        for name, expected_shape in expected_shapes.items():
            got_shape = getattr(self, name).shape
            if got_shape != expected_shape:
                raise ValueError(f"{name}: expected shape {expected_shape}, got {got_shape}")

    def __len__(self) -> int:
        return self.source.shape[0]

    def subset(self, indices: np.ndarray | Sequence[int] | slice) -> ParallelBatch:
        """The pairs at ``indices``, in that order; the padded widths stay as they are.

        Shapes:
            indices: (M,) integer indices (or a boolean mask of shape (N,), or a slice).
            returns: a batch of M pairs, same T_enc and T_dec.
        """
        if not isinstance(indices, slice):
            indices = np.asarray(indices)
            if indices.dtype != bool:
                indices = indices.astype(np.int64, copy=False)
        return ParallelBatch(
            source=self.source[indices],
            source_mask=self.source_mask[indices],
            decoder_input=self.decoder_input[indices],
            decoder_target=self.decoder_target[indices],
            target_mask=self.target_mask[indices],
        )


def encode_pairs(
    pairs: Sequence[tuple[str, str]],
    source_vocab: Vocabulary,
    target_vocab: Vocabulary,
    source_length: int | None = None,
    target_length: int | None = None,
) -> ParallelBatch:
    """Encode and pad (source, target) pairs for teacher forcing.

    Args:
        pairs: N pairs of texts.
        source_vocab, target_vocab: the vocabularies of the two sides.
        source_length: T_enc; by default the longest source.
        target_length: T_dec, counting the extra ``<bos>``/``<eos>`` step, so a target
            of L characters needs ``target_length >= L + 1``; by default the longest
            target plus one.

    Shapes:
        returns: a :class:`ParallelBatch` with source (N, T_enc) and decoder arrays (N, T_dec).

    Raises:
        ValueError: ``pairs`` is empty, or a text is longer than its length allows.
        UnknownCharacterError: a text holds a character its vocabulary lacks.
    """
    if len(pairs) == 0:
        raise ValueError("encode_pairs needs at least one pair, got an empty list")
    source_ids = [source_vocab.encode(source) for source, _ in pairs]
    target_ids = [target_vocab.encode(target) for _, target in pairs]
    if source_length is not None:
        for index, (source, _) in enumerate(pairs):
            if len(source) > source_length:
                raise ValueError(
                    f"source {index} ({source!r}) has {len(source)} characters, "
                    f"longer than source_length={source_length}"
                )
    if target_length is not None:
        for index, (_, target) in enumerate(pairs):
            if len(target) + 1 > target_length:
                raise ValueError(
                    f"target {index} ({target!r}) needs {len(target) + 1} decoder steps "
                    f"({len(target)} characters + <bos>/<eos>), more than "
                    f"target_length={target_length}"
                )

    source, source_mask = pad_batch(source_ids, source_vocab.pad_id, source_length)
    decoder_input, target_mask = pad_batch(
        [[target_vocab.bos_id, *ids] for ids in target_ids], target_vocab.pad_id, target_length
    )
    decoder_target, _ = pad_batch(
        [[*ids, target_vocab.eos_id] for ids in target_ids], target_vocab.pad_id, target_length
    )
    return ParallelBatch(
        source=source,
        source_mask=source_mask,
        decoder_input=decoder_input,
        decoder_target=decoder_target,
        target_mask=target_mask,
    )


def iterate_batches(
    n: int,
    batch_size: int,
    rng: np.random.Generator,
    shuffle: bool = True,
    drop_last: bool = False,
) -> Iterator[np.ndarray]:
    """Yield index arrays that split ``range(n)`` into batches of ``batch_size``.

    Every index appears in exactly one batch (the last one may be shorter, unless
    ``drop_last`` drops it). With ``shuffle`` the order is ``rng.permutation(n)``, so the
    same generator state gives the same batches; without it, ``rng`` is not used.

    Shapes:
        each yielded array: (batch_size,) int64, or shorter for the last batch.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = rng.permutation(n) if shuffle else np.arange(n, dtype=np.int64)
    for start in range(0, n, batch_size):
        batch_indices = order[start : start + batch_size]
        if drop_last and len(batch_indices) < batch_size:
            return
        yield batch_indices


def build_vocabularies(pairs: Iterable[tuple[str, str]]) -> tuple[Vocabulary, Vocabulary]:
    """The source and the target vocabulary: every character that occurs on each side."""
    pairs = list(pairs)
    source_vocab = Vocabulary.from_texts(source for source, _ in pairs)
    target_vocab = Vocabulary.from_texts(target for _, target in pairs)
    return source_vocab, target_vocab
