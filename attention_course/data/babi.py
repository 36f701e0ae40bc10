"""bAbI-like stories with questions, for end-to-end memory networks.

A memory network (Sukhbaatar et al., 2015) stores each sentence of a story as one memory
and answers a question by attending over the memories, sometimes in several hops. The
bAbI tasks (Weston et al., 2015) come with the sentences a correct answer rests on, the
"supporting facts", so we can check whether the attention lands on them. Facebook's files
are a download; these stories are generated, in the same style::

    0 mary went to the kitchen
    1 john went to the garden
    2 john picked up the football
    3 mary travelled to the office
    where is the football        -> garden (supporting sentences 1 and 2)

People move between places and pick up and drop objects; an object that someone holds goes
where they go. Two kinds of question (:data:`BABI_KINDS`):

``"single_supporting_fact"`` (bAbI task 1)
    "where is mary": the answer is in the last sentence that moved Mary.
``"two_supporting_facts"`` (bAbI task 2)
    "where is the football": the last sentence in which someone picked up or dropped it,
    and that person's last move before the drop (or, if they still hold it, their last
    move at all). A single hop cannot answer it: the second fact is found only through
    the person named in the first.

Each question's answer follows from its supporting sentences alone, and from no fewer;
stories are lowercase words separated by single spaces, with no punctuation.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attention_course.data.vocab import Vocabulary, pad_batch

BABI_KINDS = ("single_supporting_fact", "two_supporting_facts")
PEOPLE = ("mary", "john", "sandra", "daniel")
PLACES = ("kitchen", "garden", "office", "bathroom", "hallway", "bedroom")
OBJECTS = ("football", "apple", "milk")
MOVE_PHRASES = ("went to", "journeyed to", "travelled to", "moved to")
TAKE_PHRASES = ("picked up", "got", "grabbed")
DROP_PHRASES = ("dropped", "put down", "discarded")
# How often each event is drawn, when it is possible at all.
_EVENT_WEIGHTS = {"move": 0.5, "take": 0.25, "drop": 0.25}
_MAX_ATTEMPTS_PER_EXAMPLE = 1000

BABI_VOCABULARY = Vocabulary(
    {
        word
        for phrase in (*MOVE_PHRASES, *TAKE_PHRASES, *DROP_PHRASES, "where is the")
        for word in phrase.split(" ")
    }
    | {*PEOPLE, *PLACES, *OBJECTS},
    level="word",
)


@dataclass
class BabiExample:
    """One story, its question and its answer.

    Fields:
        story: the sentences, in the order they happened.
        question: e.g. ``"where is mary"``.
        answer: one word, a place.
        supporting: the indices into ``story`` of the sentences the answer rests on,
            ascending: one for ``"single_supporting_fact"``, two for
            ``"two_supporting_facts"``.
        kind: one of :data:`BABI_KINDS`.
    """

    story: list[str]
    question: str
    answer: str
    supporting: list[int]
    kind: str


@dataclass
class BabiBatch:
    """Examples encoded for a memory network: one memory row per sentence.

    Fields:
        stories: the word ids of each sentence, padded with ``pad_id`` (0) in both
            directions; ``stories != 0`` is the mask of real words.
        story_mask: True on the real sentences (the memories to attend over).
        questions: the word ids of each question, padded to the same W.
        answers: the id of each answer word.
        supporting: True on the supporting sentences: where the attention should land.

    Shapes:
        stories: (N, S, W) int64; story_mask, supporting: (N, S) bool.
        questions: (N, W) int64; answers: (N,) int64.
    """

    stories: np.ndarray
    story_mask: np.ndarray
    questions: np.ndarray
    answers: np.ndarray
    supporting: np.ndarray

    def __post_init__(self) -> None:
        N, S, W = self.stories.shape
        expected_shapes = {
            "story_mask": (N, S),
            "questions": (N, W),
            "answers": (N,),
            "supporting": (N, S),
        }
        for name, expected_shape in expected_shapes.items():
            got_shape = getattr(self, name).shape
            if got_shape != expected_shape:
                raise ValueError(f"{name}: expected shape {expected_shape}, got {got_shape}")

    def __len__(self) -> int:
        return self.stories.shape[0]


class _World:
    """Where everyone and everything is, and which sentences said so."""

    def __init__(self) -> None:
        self.location: dict[str, str] = {}  # person -> place
        self.last_move: dict[str, int] = {}  # person -> index of their last move
        self.holder: dict[str, str] = {}  # object -> person holding it
        self.dropped_at: dict[str, str] = {}  # object -> place it lies at
        # object -> (index of its last pick-up or drop, who did it, index of the move
        # that put a dropped object's place on record; None while it is held)
        self.last_handled: dict[str, tuple[int, str, int | None]] = {}

    def events(self) -> dict[str, list[tuple]]:
        """Every event possible now, by kind."""
        takes = [
            (person, thing)
            for person in self.location
            for thing in OBJECTS
            if thing not in self.holder
            and self.dropped_at.get(thing, self.location[person]) == self.location[person]
        ]
        drops = [(person, thing) for thing, person in self.holder.items()]
        return {"move": [(person,) for person in PEOPLE], "take": takes, "drop": drops}


def _pick(rand, options: Sequence):
    # Only random() is used: its sequence for a seed is the one part of Python's random
    # module guaranteed not to change across Python versions.
    return options[int(rand() * len(options))]


def _random_story(rand, n_sentences: int) -> tuple[list[str], _World]:
    world = _World()
    story: list[str] = []
    for index in range(n_sentences):
        possible = {kind: events for kind, events in world.events().items() if events}
        kinds = list(possible)
        weights = [_EVENT_WEIGHTS[kind] for kind in kinds]
        draw = rand() * sum(weights)
        kind = kinds[-1]
        for candidate, weight in zip(kinds, weights):
            if draw < weight:
                kind = candidate
                break
            draw -= weight
        event = _pick(rand, possible[kind])
        if kind == "move":
            (person,) = event
            place = _pick(rand, [place for place in PLACES if place != world.location.get(person)])
            story.append(f"{person} {_pick(rand, MOVE_PHRASES)} the {place}")
            world.location[person] = place
            world.last_move[person] = index
        elif kind == "take":
            person, thing = event
            story.append(f"{person} {_pick(rand, TAKE_PHRASES)} the {thing}")
            world.holder[thing] = person
            world.dropped_at.pop(thing, None)
            world.last_handled[thing] = (index, person, None)
        else:
            person, thing = event
            story.append(f"{person} {_pick(rand, DROP_PHRASES)} the {thing}")
            del world.holder[thing]
            world.dropped_at[thing] = world.location[person]
            world.last_handled[thing] = (index, person, world.last_move[person])
    return story, world


def _random_example(rand, kind: str, n_sentences: int) -> BabiExample | None:
    """A story of ``n_sentences`` with a question of ``kind``, or None if it has none."""
    story, world = _random_story(rand, n_sentences)
    if kind == "single_supporting_fact":
        if not world.last_move:
            return None
        person = _pick(rand, sorted(world.last_move))
        return BabiExample(
            story=story,
            question=f"where is {person}",
            answer=world.location[person],
            supporting=[world.last_move[person]],
            kind=kind,
        )
    if not world.last_handled:
        return None
    thing = _pick(rand, sorted(world.last_handled))
    handled_at, person, move_before_drop = world.last_handled[thing]
    if thing in world.holder:
        answer, move = world.location[person], world.last_move[person]
    else:
        answer, move = world.dropped_at[thing], move_before_drop
    return BabiExample(
        story=story,
        question=f"where is the {thing}",
        answer=answer,
        supporting=sorted([handled_at, move]),
        kind=kind,
    )


def generate_babi(
    n_train: int,
    n_test: int,
    seed: int | np.random.Generator = 0,
    kinds: Sequence[str] = BABI_KINDS,
    min_sentences: int = 2,
    max_sentences: int = 10,
) -> tuple[list[BabiExample], list[BabiExample]]:
    """Random stories with one question each, split into train and test.

    Each draw picks a kind uniformly from ``kinds`` and a story length uniformly from
    ``min_sentences .. max_sentences``, then simulates that many events: a person moves
    (half of the time), picks up an object that lies where they are or has not been
    placed yet, or drops one they hold. Stories without anything to ask (nobody moved;
    no object was handled) are drawn again. The question asks about a person (or object)
    drawn uniformly among those the story placed. No (story, question) appears twice,
    within or across the splits.

    Args:
        n_train, n_test: the sizes of the two splits.
        seed: an integer seed, or a ``numpy.random.Generator`` to draw from.
        kinds: the kinds of question to draw from, a non-empty subset of
            :data:`BABI_KINDS`.
        min_sentences, max_sentences: the range of story lengths, both included; at
            least 2 when ``kinds`` holds ``"two_supporting_facts"``, else at least 1.

    Returns:
        ``(train, test)``, lists of :class:`BabiExample`.

    Raises:
        ValueError: naming the bad argument, or more unique examples asked for than a
            bounded number of draws reaches.
    """
    if n_train < 0 or n_test < 0:
        raise ValueError(f"n_train and n_test must be >= 0, got {n_train} and {n_test}")
    kinds = list(dict.fromkeys(kinds)) if not isinstance(kinds, str) else [kinds]
    if not kinds:
        raise ValueError(f"kinds is empty: name at least one of {BABI_KINDS}")
    unknown = [kind for kind in kinds if kind not in BABI_KINDS]
    if unknown:
        raise ValueError(f"kinds: unknown kinds {unknown}, expected some of {BABI_KINDS}")
    shortest = 2 if "two_supporting_facts" in kinds else 1
    if min_sentences < shortest:
        raise ValueError(
            f"min_sentences must be >= {shortest} for kinds {kinds}, got {min_sentences}"
        )
    if min_sentences > max_sentences:
        raise ValueError(
            "min_sentences must be <= max_sentences, "
            f"got min_sentences={min_sentences}, max_sentences={max_sentences}"
        )
    rng = np.random.default_rng(seed)
    # Simulating a story takes many small random choices; Python's generator makes them
    # about 50 times faster than one NumPy call each. It is seeded from ``rng``.
    rand = random.Random(int(rng.integers(2**63))).random

    n_wanted = n_train + n_test
    max_draws = max(100_000, 50 * n_wanted)
    examples: dict[tuple, BabiExample] = {}  # insertion order = draw order
    n_drawn = 0
    n_lengths = max_sentences - min_sentences + 1
    while len(examples) < n_wanted and n_drawn < max_draws:
        n_drawn += 1
        kind = _pick(rand, kinds)
        n_sentences = min_sentences + int(rand() * n_lengths)
        for _ in range(_MAX_ATTEMPTS_PER_EXAMPLE):
            example = _random_example(rand, kind, n_sentences)
            if example is not None:
                break
        else:  # a move then a pick-up gives every kind a question; a bug if never drawn
            raise RuntimeError(f"no {kind} question in {_MAX_ATTEMPTS_PER_EXAMPLE} stories")
        examples.setdefault((tuple(example.story), example.question), example)
    if len(examples) < n_wanted:
        raise ValueError(
            f"asked for {n_wanted} unique examples, but {n_drawn} draws gave only "
            f"{len(examples)}; ask for fewer or allow longer stories"
        )
    unique = list(examples.values())
    return unique[:n_train], unique[n_train:]


def encode_babi(
    examples: Sequence[BabiExample],
    vocab: Vocabulary = BABI_VOCABULARY,
    max_sentences: int | None = None,
    max_words: int | None = None,
) -> BabiBatch:
    """Stories, questions and answers as padded id arrays for a memory network.

    Sentence i of a story is memory row i, in story order; rows past the story's end are
    padding (``story_mask`` False).

    Args:
        examples: N examples.
        vocab: a word-level vocabulary; by default every word the generator uses.
        max_sentences: S; by default the longest story.
        max_words: W, for sentences and questions alike; by default the longest of them.

    Shapes:
        returns: a :class:`BabiBatch` with stories (N, S, W) and questions (N, W).

    Raises:
        ValueError: no examples, or a story or sentence longer than S or W.
        UnknownWordError: a word the vocabulary lacks.
    """
    if len(examples) == 0:
        raise ValueError("encode_babi needs at least one example, got an empty list")
    story_ids = [[vocab.encode(sentence) for sentence in example.story] for example in examples]
    question_ids = [vocab.encode(example.question) for example in examples]
    longest_story = max(len(story) for story in story_ids)
    longest_text = max(
        max(len(ids) for story in story_ids for ids in story),
        max(len(ids) for ids in question_ids),
    )
    S = longest_story if max_sentences is None else max_sentences
    W = longest_text if max_words is None else max_words
    if longest_story > S:
        raise ValueError(f"max_sentences={S} is shorter than a story of {longest_story}")
    if longest_text > W:
        raise ValueError(f"max_words={W} is shorter than a sentence of {longest_text} words")

    N = len(examples)
    stories = np.full((N, S, W), vocab.pad_id, dtype=np.int64)
    story_mask = np.zeros((N, S), dtype=bool)
    supporting = np.zeros((N, S), dtype=bool)
    for row, (example, sentences) in enumerate(zip(examples, story_ids)):
        if sentences:
            stories[row, : len(sentences)], _ = pad_batch(sentences, vocab.pad_id, W)
        story_mask[row, : len(sentences)] = True
        supporting[row, example.supporting] = True
    questions, _ = pad_batch(question_ids, vocab.pad_id, W)
    answers = np.array([vocab.encode(example.answer)[0] for example in examples], dtype=np.int64)
    return BabiBatch(
        stories=stories,
        story_mask=story_mask,
        questions=questions,
        answers=answers,
        supporting=supporting,
    )
