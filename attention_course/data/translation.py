"""Word-level translation between two generated languages whose word orders differ.

Bahdanau et al.'s alignment figure is the picture of attention that everyone remembers: the
weights mostly follow the diagonal, and leave it where the two languages order words
differently ("European Economic Area" -> "zone économique européenne"). Dates and the toy
tasks cannot show that. This task can: one small grammar, rendered into two languages.

The source is English-like: subject-verb-object, adjectives before the noun, prepositions,
relative clauses after the noun, clauses joined by "and"::

    the tall farmer near the river saw a small bird that sang

The target is an invented language that puts the verb at the end of its clause (SOV, in
relative clauses too), adjectives after the noun in mirror order, and postpositions after
their noun phrase; determiners stay in front::

    lo farmo alta   [lo rivo] nari   [un birdo meni] [ke sengu]  vidu
    the farmer tall [the river] near [a bird small]  [that sang] saw

Every source word has exactly one target word and back (:data:`LEXICON`), and a target
sentence is its source's words, translated and reordered. So every pair has a gold word
alignment, a permutation (:func:`word_alignment`), and most alignments cross. Sentences run
from 3 words ("the dog slept") to :data:`MAX_SENTENCE_LENGTH`; :func:`generate_translation`
draws the length first, uniformly, so BLEU can be plotted against length.

The grammar is unambiguous, so a source sentence determines its target
(:func:`translate` parses it): noun phrases inside a prepositional phrase or a relative
clause are simple (determiner, adjectives, noun), and each word belongs to one word class.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import MappingProxyType
from typing import NoReturn

import numpy as np

from attention_course.data.vocab import Vocabulary

# Each word class maps source words to target words; the classes share no word. No noun or
# adjective starts with a vowel, so the article "a" never needs to be "an".
DETERMINERS = {"the": "lo", "a": "un"}
RELATIVE_PRONOUN = {"that": "ke"}
CONJUNCTION = {"and": "et"}
# People and animals: subjects and objects of verbs.
ANIMATE_NOUNS = {
    "dog": "hundo", "cat": "miko", "bird": "birdo", "horse": "kavo", "wolf": "lupo",
    "fox": "vulpo", "mouse": "muso", "farmer": "farmo", "teacher": "lerno", "child": "kindo",
    "king": "rego", "queen": "regina", "girl": "pika", "boy": "puko", "doctor": "dokto",
    "baker": "bako", "sailor": "naviro", "soldier": "soldo",
}  # fmt: skip
# Places: the nouns of prepositional phrases.
PLACE_NOUNS = {
    "river": "rivo", "garden": "gardo", "house": "domo", "tree": "arbo", "bridge": "ponto",
    "forest": "silvo", "market": "merko", "castle": "kastelo", "village": "vilo",
    "hill": "kolo", "lake": "lago", "road": "vojo",
}  # fmt: skip
ADJECTIVES = {
    "big": "granda", "small": "meni", "tired": "laca", "young": "juna", "red": "ruza",
    "black": "nigra", "white": "blanka", "happy": "felika", "sad": "trista",
    "quiet": "kvieta", "tall": "alta", "brown": "bruna",
}  # fmt: skip
TRANSITIVE_VERBS = {
    "saw": "vidu", "chased": "chasu", "followed": "sekvu", "helped": "helpu",
    "found": "trovu", "called": "vokru", "watched": "gardu", "heard": "audu", "fed": "manju",
    "pushed": "pusu", "liked": "amu", "visited": "vizitu",
}  # fmt: skip
INTRANSITIVE_VERBS = {
    "slept": "dormu", "ran": "kuru", "sang": "sengu", "laughed": "ridu", "waited": "atendu",
    "danced": "dancu", "fell": "falu", "smiled": "smilu",
}  # fmt: skip
PREPOSITIONS = {
    "near": "nari", "behind": "post", "beside": "apud", "under": "sub", "in": "ena",
    "across": "trans",
}  # fmt: skip

_WORD_CLASSES = (
    DETERMINERS, RELATIVE_PRONOUN, CONJUNCTION, ANIMATE_NOUNS, PLACE_NOUNS, ADJECTIVES,
    TRANSITIVE_VERBS, INTRANSITIVE_VERBS, PREPOSITIONS,
)  # fmt: skip
LEXICON = MappingProxyType(
    {source: target for word_class in _WORD_CLASSES for source, target in word_class.items()}
)
"""Every source word and its one target word (read-only)."""

NOUNS = {**ANIMATE_NOUNS, **PLACE_NOUNS}
MAX_ADJECTIVES = 2  # per noun phrase
MAX_CLAUSES = 3
MIN_SENTENCE_LENGTH = 3  # "the dog slept"
# A clause at its longest: subject and object each "det adj adj noun prep det adj adj noun
# that verb det adj adj noun" (15 words), and the verb; clauses are joined by "and".
MAX_SENTENCE_LENGTH = MAX_CLAUSES * (15 + 1 + 15) + (MAX_CLAUSES - 1)

# The word-level vocabularies of the two languages: every word the grammar has.
SOURCE_VOCABULARY = Vocabulary(LEXICON.keys(), level="word")
TARGET_VOCABULARY = Vocabulary(LEXICON.values(), level="word")

# A sentence as a tree of lists (mutable while it grows):
#   noun phrase: [determiner, [adjective, ...], noun, prepositional phrase or None,
#                 relative clause or None]
#   prepositional phrase: [preposition, simple noun phrase]
#   relative clause: [verb, simple noun phrase or None (the verb is intransitive)]
#   clause: [subject noun phrase, verb, object noun phrase or None]
#   sentence: [clause, ...], joined by "and"
# A simple noun phrase has neither a prepositional phrase nor a relative clause.
_DETERMINER_WORDS = tuple(DETERMINERS)
_ANIMATE_WORDS = tuple(ANIMATE_NOUNS)
_PLACE_WORDS = tuple(PLACE_NOUNS)
_ADJECTIVE_WORDS = tuple(ADJECTIVES)
_TRANSITIVE_WORDS = tuple(TRANSITIVE_VERBS)
_INTRANSITIVE_WORDS = tuple(INTRANSITIVE_VERBS)
_PREPOSITION_WORDS = tuple(PREPOSITIONS)

# What a growth step costs, in words.
_ADJECTIVE_COST = 1  # one more adjective on a noun phrase
_OBJECT_COST = 2  # an intransitive clause becomes transitive: "det noun"
_RELATIVE_COST = 2  # a relative clause on a main noun phrase: "that verb"
_RELATIVE_OBJECT_COST = 2  # the relative clause's verb becomes transitive: "det noun"
_PREPOSITION_COST = 3  # a prepositional phrase on a main noun phrase: "prep det noun"
_CLAUSE_COST = 4  # one more clause: "and det noun verb"
_MAX_ATTEMPTS_PER_LENGTH = 1000


# Rendering: a node gives its source words, and its target order as indices into them.


def _render_noun_phrase(noun_phrase: list) -> tuple[list[str], list[int]]:
    determiner, adjectives, noun, prepositional_phrase, relative_clause = noun_phrase
    n_adjectives = len(adjectives)
    words = [determiner, *adjectives, noun]
    # det noun adj_k ... adj_1: the adjectives follow the noun, in mirror order.
    order = [0, n_adjectives + 1, *range(n_adjectives, 0, -1)]
    if prepositional_phrase is not None:
        preposition, inner = prepositional_phrase
        inner_words, inner_order = _render_noun_phrase(inner)
        start = len(words)
        words += [preposition, *inner_words]
        # The preposition becomes a postposition: it follows its noun phrase.
        order += [start + 1 + index for index in inner_order]
        order.append(start)
    if relative_clause is not None:
        verb, relative_object = relative_clause
        start = len(words)
        words += ["that", verb]
        order.append(start)
        if relative_object is not None:
            inner_words, inner_order = _render_noun_phrase(relative_object)
            words += inner_words
            order += [start + 2 + index for index in inner_order]
        # The verb ends its relative clause, after the object.
        order.append(start + 1)
    return words, order


def _render_sentence(sentence: list) -> tuple[list[str], list[int]]:
    words: list[str] = []
    order: list[int] = []
    for clause_index, (subject, verb, object_) in enumerate(sentence):
        if clause_index > 0:
            order.append(len(words))
            words.append("and")
        subject_words, subject_order = _render_noun_phrase(subject)
        start = len(words)
        order += [start + index for index in subject_order]
        words += subject_words
        verb_index = len(words)
        words.append(verb)
        if object_ is not None:
            object_words, object_order = _render_noun_phrase(object_)
            start = len(words)
            order += [start + index for index in object_order]
            words += object_words
        # Subject, object, verb.
        order.append(verb_index)
    return words, order


# Parsing: a source sentence back into its tree (the grammar is unambiguous).


class _Parser:
    """Recursive descent over the source grammar, one method per rule."""

    def __init__(self, source: str):
        self.source = source
        self.words = source.split(" ") if source else []
        self.position = 0

    def fail(self, expected: str) -> NoReturn:
        found = (
            repr(self.words[self.position])
            if self.position < len(self.words)
            else "the end of the sentence"
        )
        raise ValueError(
            f"source: expected {expected} at word {self.position}, got {found}, in "
            f"{self.source!r}: not a sentence of the translation grammar"
        )

    def peek(self) -> str | None:
        return self.words[self.position] if self.position < len(self.words) else None

    def take(self, word_class: dict, expected: str) -> str:
        word = self.peek()
        if word not in word_class:
            self.fail(expected)
        self.position += 1
        return word

    def simple_noun_phrase(self) -> list:
        determiner = self.take(DETERMINERS, "a determiner")
        adjectives = []
        while self.peek() in ADJECTIVES:
            adjectives.append(self.take(ADJECTIVES, "an adjective"))
        noun = self.take(NOUNS, "an adjective or a noun")
        return [determiner, adjectives, noun, None, None]

    def noun_phrase(self) -> list:
        noun_phrase = self.simple_noun_phrase()
        if self.peek() in PREPOSITIONS:
            preposition = self.take(PREPOSITIONS, "a preposition")
            noun_phrase[3] = [preposition, self.simple_noun_phrase()]
        if self.peek() == "that":
            self.position += 1
            if self.peek() in TRANSITIVE_VERBS:
                verb = self.take(TRANSITIVE_VERBS, "a verb")
                noun_phrase[4] = [verb, self.simple_noun_phrase()]
            else:
                noun_phrase[4] = [self.take(INTRANSITIVE_VERBS, "a verb"), None]
        return noun_phrase

    def sentence(self) -> list:
        clauses = []
        while True:
            subject = self.noun_phrase()
            if self.peek() in TRANSITIVE_VERBS:
                verb = self.take(TRANSITIVE_VERBS, "a verb")
                clauses.append([subject, verb, self.noun_phrase()])
            else:
                clauses.append([subject, self.take(INTRANSITIVE_VERBS, "a verb"), None])
            if self.peek() != "and":
                break
            self.position += 1
        if self.position != len(self.words):
            self.fail("'and' or the end of the sentence")
        return clauses


def _target_order(source: str) -> tuple[list[str], list[int]]:
    if not isinstance(source, str):
        raise ValueError(f"source: expected a string, got {type(source).__name__}")
    return _render_sentence(_Parser(source).sentence())


def translate(source: str) -> str:
    """The target sentence of a source sentence of the grammar.

    Example:
        >>> translate("the big red dog chased a cat")
        'lo hundo ruza granda un miko chasu'

    Raises:
        ValueError: ``source`` is not a sentence of the grammar; the message names the
            word where parsing failed and what was expected there.
    """
    words, order = _target_order(source)
    return " ".join(LEXICON[words[index]] for index in order)


def word_alignment(source: str, target: str | None = None) -> list[tuple[int, int]]:
    """The gold word alignment of a pair: ``(source_index, target_index)`` for every word.

    Each source word is aligned to exactly one target word, its translation in
    :data:`LEXICON`, and back; the list is sorted by target index, so it reads as "target
    word j translates source word i".

    Example:
        >>> word_alignment("the red dog slept")
        [(0, 0), (2, 1), (1, 2), (3, 3)]

    Args:
        source: a source sentence of the grammar.
        target: its translation, checked if given.

    Raises:
        ValueError: ``source`` is not a sentence of the grammar, or ``target`` is not
            its translation.
    """
    words, order = _target_order(source)
    if target is not None:
        expected = " ".join(LEXICON[words[index]] for index in order)
        if target != expected:
            raise ValueError(
                f"target: expected the translation of {source!r}, {expected!r}, "
                f"got {target!r}"
            )
    return [(source_index, target_index) for target_index, source_index in enumerate(order)]


def alignment_matrix(source: str, target: str | None = None) -> np.ndarray:
    """The gold alignment as a 0/1 matrix laid out like attention weights.

    Row j is target (decoder) step j, column i is source (encoder) step i; each row and
    each column holds exactly one 1, so the matrix can be compared with a model's
    attention weights for the pair (without the ``<eos>`` step).

    Shapes:
        returns: (T_dec, T_enc) float64, T_dec = T_enc = the number of words.

    Raises:
        ValueError: as :func:`word_alignment`.
    """
    alignment = word_alignment(source, target)
    T = len(alignment)
    matrix = np.zeros((T, T))
    for source_index, target_index in alignment:
        matrix[target_index, source_index] = 1.0
    return matrix


def count_crossings(alignment: Sequence[tuple[int, int]]) -> int:
    """How many pairs of alignment links cross.

    Links ``(i, j)`` and ``(k, l)`` cross when ``i < k`` and ``j > l``: the two source words
    come out in the other order. A monotone (diagonal) alignment has none.
    """
    links = sorted(alignment)
    target_indices = [target_index for _, target_index in links]
    return sum(
        1
        for first, earlier in enumerate(target_indices)
        for later in target_indices[first + 1 :]
        if earlier > later
    )


def _pick(rand, words: tuple[str, ...]) -> str:
    # Only random() is used: its sequence for a seed is the one part of Python's random
    # module guaranteed not to change across Python versions.
    return words[int(rand() * len(words))]


def _simple_noun_phrase(rand, nouns: tuple[str, ...]) -> list:
    return [_pick(rand, _DETERMINER_WORDS), [], _pick(rand, nouns), None, None]


def _grow_sentence(rand, length: int) -> list | None:
    """A random sentence of exactly ``length`` words, or None at a dead end.

    It starts from "det noun verb" and applies growth steps (see the costs above) chosen
    at random among those that still fit, until the sentence has ``length`` words. Each
    kind of step keeps a list of the places where it applies, so a step costs O(1).
    """
    first_subject = _simple_noun_phrase(rand, _ANIMATE_WORDS)
    sentence = [[first_subject, _pick(rand, _INTRANSITIVE_WORDS), None]]
    # Where each kind of step applies.
    open_for_adjective = [first_subject]
    open_for_object = [sentence[0]]
    open_for_preposition = [first_subject]
    open_for_relative = [first_subject]
    open_for_relative_object: list[list] = []

    def take(places: list) -> list:
        index = int(rand() * len(places))
        places[index], places[-1] = places[-1], places[index]
        return places.pop()

    def add_main_noun_phrase(noun_phrase: list) -> None:
        open_for_adjective.append(noun_phrase)
        open_for_preposition.append(noun_phrase)
        open_for_relative.append(noun_phrase)

    remaining = length - MIN_SENTENCE_LENGTH
    while remaining > 0:
        steps = []
        if open_for_adjective:
            steps.append("adjective")
        if remaining >= _OBJECT_COST and open_for_object:
            steps.append("object")
        if remaining >= _RELATIVE_COST and open_for_relative:
            steps.append("relative")
        if remaining >= _RELATIVE_OBJECT_COST and open_for_relative_object:
            steps.append("relative_object")
        if remaining >= _PREPOSITION_COST and open_for_preposition:
            steps.append("preposition")
        if remaining >= _CLAUSE_COST and len(sentence) < MAX_CLAUSES:
            steps.append("clause")
        if not steps:
            return None
        step = steps[int(rand() * len(steps))]
        if step == "adjective":
            noun_phrase = take(open_for_adjective)
            adjective = _pick(rand, _ADJECTIVE_WORDS)
            while adjective in noun_phrase[1]:  # "the big big dog" reads like a typo
                adjective = _pick(rand, _ADJECTIVE_WORDS)
            noun_phrase[1].append(adjective)
            if len(noun_phrase[1]) < MAX_ADJECTIVES:
                open_for_adjective.append(noun_phrase)
            remaining -= _ADJECTIVE_COST
        elif step == "object":
            clause = take(open_for_object)
            clause[1] = _pick(rand, _TRANSITIVE_WORDS)
            clause[2] = _simple_noun_phrase(rand, _ANIMATE_WORDS)
            add_main_noun_phrase(clause[2])
            remaining -= _OBJECT_COST
        elif step == "relative":
            noun_phrase = take(open_for_relative)
            noun_phrase[4] = [_pick(rand, _INTRANSITIVE_WORDS), None]
            open_for_relative_object.append(noun_phrase)
            remaining -= _RELATIVE_COST
        elif step == "relative_object":
            relative_clause = take(open_for_relative_object)[4]
            relative_clause[0] = _pick(rand, _TRANSITIVE_WORDS)
            relative_clause[1] = _simple_noun_phrase(rand, _ANIMATE_WORDS)
            open_for_adjective.append(relative_clause[1])
            remaining -= _RELATIVE_OBJECT_COST
        elif step == "preposition":
            noun_phrase = take(open_for_preposition)
            place = _simple_noun_phrase(rand, _PLACE_WORDS)
            noun_phrase[3] = [_pick(rand, _PREPOSITION_WORDS), place]
            open_for_adjective.append(place)
            remaining -= _PREPOSITION_COST
        else:
            subject = _simple_noun_phrase(rand, _ANIMATE_WORDS)
            sentence.append([subject, _pick(rand, _INTRANSITIVE_WORDS), None])
            add_main_noun_phrase(subject)
            open_for_object.append(sentence[-1])
            remaining -= _CLAUSE_COST
    return sentence


def _random_pair(rand, length: int) -> tuple[str, str]:
    for _ in range(_MAX_ATTEMPTS_PER_LENGTH):
        sentence = _grow_sentence(rand, length)
        if sentence is not None:
            words, order = _render_sentence(sentence)
            source = " ".join(words)
            target = " ".join(LEXICON[words[index]] for index in order)
            return source, target
    raise RuntimeError(  # the growth steps can always reach every length; a bug if not
        f"no sentence of {length} words in {_MAX_ATTEMPTS_PER_LENGTH} attempts"
    )


def generate_translation(
    n_train: int,
    n_test: int,
    seed: int | np.random.Generator = 0,
    min_length: int = MIN_SENTENCE_LENGTH,
    max_length: int = 40,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Random (source, target) sentence pairs of the grammar, split into train and test.

    Each draw picks a length uniformly from ``min_length .. max_length`` (in words; a
    target has as many words as its source) and grows a random sentence of exactly that
    length. Sources are unique, within and across the splits, so the test split measures
    translation of sentences never seen: repeated draws are dropped, which thins out the
    shortest lengths (there are only 288 sentences of 3 words). The first ``n_train``
    unique pairs are the training split, the next ``n_test`` the test split.

    Args:
        n_train, n_test: the sizes of the two splits.
        seed: an integer seed, or a ``numpy.random.Generator`` to draw from.
        min_length, max_length: the range of sentence lengths, in words, both included;
            ``MIN_SENTENCE_LENGTH <= min_length <= max_length <= MAX_SENTENCE_LENGTH``.

    Returns:
        ``(train, test)``, lists of ``(source, target)``: words separated by single spaces.
        Build vocabularies with ``build_vocabularies(train, level="word")``, or use
        :data:`SOURCE_VOCABULARY` and :data:`TARGET_VOCABULARY`, which hold every word.

    Raises:
        ValueError: a bad argument, or more unique pairs asked for than a bounded number
            of draws reaches.
    """
    if n_train < 0 or n_test < 0:
        raise ValueError(f"n_train and n_test must be >= 0, got {n_train} and {n_test}")
    if min_length < MIN_SENTENCE_LENGTH:
        raise ValueError(
            f"min_length must be >= {MIN_SENTENCE_LENGTH} (the shortest sentence, "
            f"'the dog slept'), got {min_length}"
        )
    if max_length > MAX_SENTENCE_LENGTH:
        raise ValueError(
            f"max_length must be <= {MAX_SENTENCE_LENGTH} (the longest sentence of the "
            f"grammar), got {max_length}"
        )
    if min_length > max_length:
        raise ValueError(
            "min_length must be <= max_length, "
            f"got min_length={min_length}, max_length={max_length}"
        )
    rng = np.random.default_rng(seed)
    # Growing a sentence takes many small random choices; Python's generator makes them
    # about 50 times faster than one NumPy call each. It is seeded from ``rng``.
    rand = random.Random(int(rng.integers(2**63))).random

    n_wanted = n_train + n_test
    max_draws = max(100_000, 50 * n_wanted)
    target_of_source: dict[str, str] = {}  # insertion order = draw order
    n_drawn = 0
    n_lengths = max_length - min_length + 1
    while len(target_of_source) < n_wanted and n_drawn < max_draws:
        n_drawn += 1
        source, target = _random_pair(rand, min_length + int(rand() * n_lengths))
        target_of_source.setdefault(source, target)
    if len(target_of_source) < n_wanted:
        raise ValueError(
            f"asked for {n_wanted} unique pairs, but {n_drawn} draws gave only "
            f"{len(target_of_source)}; ask for fewer or allow longer sentences"
        )
    pairs = list(target_of_source.items())
    return pairs[:n_train], pairs[n_train:]
