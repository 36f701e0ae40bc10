"""Vocabularies (of characters or of words), padding and batches of (source, target) pairs.

A sequence-to-sequence model reads the source as a sequence of ids and writes the target
one id at a time. A vocabulary turns a text into ids one symbol at a time: a
character-level vocabulary (the default, used for dates and the toy tasks) has one symbol
per character; a word-level one (``level="word"``, used for translation, classification,
captions and question answering) has one symbol per word, and a text is its words
separated by single spaces. Three special tokens make that work:

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
LEVELS = ("character", "word")
WORD_SEPARATOR = " "
# Where Vocabulary.to_dict keeps the symbols of each level.
_SYMBOLS_KEY_OF_LEVEL = {"character": "characters", "word": "words"}


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


class UnknownWordError(UnknownCharacterError):
    """A text holds a word that a word-level vocabulary does not know (or an empty word).

    ``position`` counts words, not characters: in ``"the red fox"`` the word ``"fox"`` is at
    position 2. It subclasses :class:`UnknownCharacterError` so that code written for
    character vocabularies (``except UnknownCharacterError``, as the command line does)
    catches unknown words too; ``character`` holds the word, like ``word``.
    """

    def __init__(self, word: str, position: int, text: str):
        self.word = word
        self.character = word
        self.position = position
        self.text = text
        if word == "":
            message = (
                f"empty word at position {position} in {text!r}: words are separated by "
                "exactly one space, with none at the start or the end"
            )
        else:
            message = (
                f"unknown word {word!r} at position {position} in {text!r}: "
                "the vocabulary has no such word"
            )
        ValueError.__init__(self, message)


class Vocabulary:
    """A vocabulary: the special tokens first, then the symbols (characters or words), sorted.

    ``symbols[i]`` is the symbol with id ``i``: ids 0, 1, 2 are ``<pad>``, ``<bos>``,
    ``<eos>``, and ids from 3 on are the regular symbols in code-point order, so two
    vocabularies built from the same symbols assign the same ids, whatever order they
    were seen in.

    ``level`` says what a symbol is. At ``"character"`` (the default) every symbol is one
    character, :meth:`encode` reads a text character by character and :meth:`decode`
    joins characters. At ``"word"`` every symbol is a word (no whitespace inside, and not
    one of the special tokens), :meth:`encode` splits a text on single spaces and
    :meth:`decode` joins words with one space.

    Example:
        >>> vocab = Vocabulary("cab")
        >>> vocab.symbols
        ['<pad>', '<bos>', '<eos>', 'a', 'b', 'c']
        >>> vocab.encode("cab", add_eos=True)
        [5, 3, 4, 2]
        >>> vocab.decode([5, 3, 4, 2, 0, 0])
        'cab'
        >>> words = Vocabulary(["the", "red", "fox"], level="word")
        >>> words.encode("the red fox")
        [5, 4, 3]
        >>> words.decode([5, 3, 2])
        'the fox'
    """

    PAD = PAD_TOKEN
    BOS = BOS_TOKEN
    EOS = EOS_TOKEN

    def __init__(self, symbols: Iterable[str], level: str = "character"):
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        if level == "word" and isinstance(symbols, str):
            raise ValueError(
                "symbols: a word-level vocabulary takes a collection of words, got the string "
                f"{symbols!r} (its characters would become the words)"
            )
        self._level = level
        regular_symbols = set()
        for symbol in symbols:
            if level == "character":
                if not isinstance(symbol, str) or len(symbol) != 1:
                    raise ValueError(
                        f"a vocabulary symbol must be a single character, got {symbol!r}"
                    )
            else:
                _check_word(symbol)
            regular_symbols.add(symbol)
        self._symbols: list[str] = [*SPECIAL_TOKENS, *sorted(regular_symbols)]
        self._id_of_symbol = {
            symbol: index
            for index, symbol in enumerate(self._symbols)
            if index >= len(SPECIAL_TOKENS)
        }

    @classmethod
    def from_texts(cls, texts: Iterable[str], level: str = "character") -> Vocabulary:
        """The vocabulary of every symbol that occurs in ``texts``.

        At ``level="word"`` a text is split on single spaces, as :meth:`encode` splits it.

        Raises:
            ValueError: an unknown level; at word level, a text with an empty word (two
                spaces in a row, or a space at the start or the end).
        """
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        found: set[str] = set()
        for text in texts:
            if level == "character":
                found.update(text)
            else:
                for position, word in enumerate(_split_words(text)):
                    if word == "":
                        raise UnknownWordError(word, position, text)
                    found.add(word)
        return cls(found, level=level)

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
    def level(self) -> str:
        """``"character"`` or ``"word"``: what one symbol of this vocabulary is."""
        return self._level

    @property
    def tokens(self) -> list[str]:
        """The regular symbols only (characters or words), sorted (a copy)."""
        return self._symbols[len(SPECIAL_TOKENS) :]

    @property
    def characters(self) -> list[str]:
        """The regular symbols only, sorted (a copy); words for a word-level vocabulary.

        The name is kept from the character-only vocabulary; :attr:`tokens` says the same
        at either level.
        """
        return self.tokens

    def __len__(self) -> int:
        return len(self._symbols)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._id_of_symbol

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self._level == other._level and self._symbols == other._symbols

    def __hash__(self) -> int:
        return hash((self._level, tuple(self._symbols)))

    def __repr__(self) -> str:
        if self._level == "word":
            return f"Vocabulary({self.tokens!r}, level='word')"
        return f"Vocabulary({''.join(self.characters)!r})"

    def split(self, text: str) -> list[str]:
        """The symbols of ``text`` as :meth:`encode` reads them: characters, or words.

        At word level an empty text has no words, and ``"a  b"`` has an empty word between
        the two spaces (which :meth:`encode` rejects).
        """
        if self._level == "word":
            return _split_words(text)
        return list(text)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """The ids of the symbols of ``text``, optionally framed by ``<bos>``/``<eos>``.

        A character-level vocabulary reads ``text`` one character at a time; a word-level
        one splits it on single spaces (:meth:`split`).

        Raises:
            UnknownCharacterError: a character of ``text`` is not in the vocabulary.
            UnknownWordError: (word level; a subclass of the above) a word of ``text`` is
                not in the vocabulary, or is empty.
        """
        ids = [self.bos_id] if add_bos else []
        unknown_error = UnknownWordError if self._level == "word" else UnknownCharacterError
        for position, symbol in enumerate(self.split(text)):
            symbol_id = self._id_of_symbol.get(symbol)
            if symbol_id is None:
                raise unknown_error(symbol, position, text)
            ids.append(symbol_id)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> str:
        """The text that ``ids`` spell: characters joined, or words joined by one space.

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
        separator = WORD_SEPARATOR if self._level == "word" else ""
        return separator.join(pieces)

    def to_dict(self) -> dict:
        """A JSON-serialisable description; :meth:`from_dict` rebuilds the vocabulary.

        A character-level vocabulary keeps its symbols under ``"characters"`` (as it always
        did, so code that predates word-level vocabularies still reads it); a word-level
        one under ``"words"``. ``"level"`` names which.
        """
        key = _SYMBOLS_KEY_OF_LEVEL[self._level]
        return {"special_tokens": list(SPECIAL_TOKENS), "level": self._level, key: self.tokens}

    @classmethod
    def from_dict(cls, description: dict) -> Vocabulary:
        """The vocabulary that :meth:`to_dict` described.

        A description without ``"level"`` (written before word-level vocabularies existed,
        as in older checkpoints) is character-level.
        """
        try:
            level = description.get("level", "character")
        except AttributeError as error:
            raise ValueError(
                f"a vocabulary description must be a dict, got {description!r}"
            ) from error
        if level not in LEVELS:
            raise ValueError(
                f"a vocabulary description's level must be one of {LEVELS}, got {level!r}"
            )
        key = _SYMBOLS_KEY_OF_LEVEL[level]
        try:
            special_tokens = description["special_tokens"]
            symbols = description[key]
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"a {level}-level vocabulary description needs the keys 'special_tokens' and "
                f"{key!r}, got {description!r}"
            ) from error
        if list(special_tokens) != list(SPECIAL_TOKENS):
            raise ValueError(
                f"special tokens {special_tokens!r} differ from this code's "
                f"{list(SPECIAL_TOKENS)!r}"
            )
        return cls(symbols, level=level)


def _split_words(text: str) -> list[str]:
    """The words of ``text`` separated by single spaces; an empty text has none."""
    if text == "":
        return []
    return text.split(WORD_SEPARATOR)


def _check_word(symbol: object) -> None:
    """Raise ValueError unless ``symbol`` can be a symbol of a word-level vocabulary."""
    if not isinstance(symbol, str) or symbol == "":
        raise ValueError(
            f"a word-level vocabulary symbol must be a non-empty string, got {symbol!r}"
        )
    if any(character.isspace() for character in symbol):
        raise ValueError(
            f"a word-level vocabulary symbol must not contain whitespace, got {symbol!r}"
        )
    if symbol in SPECIAL_TOKENS:
        raise ValueError(
            f"a word-level vocabulary symbol must not be a special token {SPECIAL_TOKENS}, "
            f"got {symbol!r}"
        )


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
        source_mask: True on real source symbols (characters or words).
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
        source_vocab, target_vocab: the vocabularies of the two sides, of either level; a
            word-level vocabulary reads its texts as words separated by single spaces.
        source_length: T_enc, in symbols (characters or words); by default the longest
            source.
        target_length: T_dec, counting the extra ``<bos>``/``<eos>`` step, so a target
            of L symbols needs ``target_length >= L + 1``; by default the longest
            target plus one.

    Shapes:
        returns: a :class:`ParallelBatch` with source (N, T_enc) and decoder arrays (N, T_dec).

    Raises:
        ValueError: ``pairs`` is empty, or a text is longer than its length allows.
        UnknownCharacterError: a text holds a character (or, as :class:`UnknownWordError`,
            a word) its vocabulary lacks.
    """
    if len(pairs) == 0:
        raise ValueError("encode_pairs needs at least one pair, got an empty list")
    source_ids = [source_vocab.encode(source) for source, _ in pairs]
    target_ids = [target_vocab.encode(target) for _, target in pairs]
    source_unit = _unit_name(source_vocab)
    target_unit = _unit_name(target_vocab)
    if source_length is not None:
        for index, (source, _) in enumerate(pairs):
            n_symbols = len(source_ids[index])
            if n_symbols > source_length:
                raise ValueError(
                    f"source {index} ({source!r}) has {n_symbols} {source_unit}, "
                    f"longer than source_length={source_length}"
                )
    if target_length is not None:
        for index, (_, target) in enumerate(pairs):
            n_symbols = len(target_ids[index])
            if n_symbols + 1 > target_length:
                raise ValueError(
                    f"target {index} ({target!r}) needs {n_symbols + 1} decoder steps "
                    f"({n_symbols} {target_unit} + <bos>/<eos>), more than "
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


def build_vocabularies(
    pairs: Iterable[tuple[str, str]], level: str = "character"
) -> tuple[Vocabulary, Vocabulary]:
    """The source and the target vocabulary: every symbol that occurs on each side.

    ``level`` is ``"character"`` (the default) or ``"word"`` (texts are words separated by
    single spaces); both vocabularies get that level.
    """
    pairs = list(pairs)
    source_vocab = Vocabulary.from_texts((source for source, _ in pairs), level=level)
    target_vocab = Vocabulary.from_texts((target for _, target in pairs), level=level)
    return source_vocab, target_vocab


def _unit_name(vocab: Vocabulary) -> str:
    """What the symbols of ``vocab`` are called in messages: "characters" or "words"."""
    return "words" if vocab.level == "word" else "characters"
