"""Cloze questions about short generated news stories, with anonymised entities.

Hermann et al. (2015, "Teaching machines to read and comprehend") turned news articles into
cloze questions: a summary sentence with one entity blanked out, to be filled from the article.
Every entity was replaced by a marker (``@ent0``, ``@ent1``, ...) numbered afresh for each
article, so that a model could answer from the text only, not from what it knew about the world.
The articles are a download; these stories are generated, in the same style::

    @ent3 praised @ent1 on monday . @ent0 hired @ent3 . @ent1 sued @ent4 in court .
    @ent2 praised @ent0 .
    question: @placeholder praised @ent1          answer: @ent3

A story tells of a handful of entities, each sentence one event between two of them (a verb
with a subject and an object, now and then a time or a place). The question restates one event
of the story, the **supporting sentence**, with its subject or its object replaced by
``@placeholder``; the answer is the entity it names. The other sentences are distractors: the
same verb between other entities, the same entities in other events, so that neither the verb
nor an entity alone finds the answer. Each question has one answer: no other sentence of the
story has the same verb and the same entity in the question's other role. The markers are
drawn afresh for each story, so a marker's number says nothing.

The answer's **mention** is its position in the supporting sentence (``answer_position``): a
reader that has understood the question looks there, not at the answer's other mentions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attention_course.data.vocab import Vocabulary, pad_batch

ENTITIES = tuple(f"@ent{k}" for k in range(10))
PLACEHOLDER = "@placeholder"
VERBS = ("praised", "criticised", "hired", "sued", "visited", "thanked", "interviewed", "defeated")
# Now and then an event says when or where: filler, which the question leaves out.
COMPLEMENTS = ("on monday", "on friday", "in court", "in a statement", "last week", "in the capital")

CLOZE_VOCABULARY = Vocabulary(
    {*ENTITIES, PLACEHOLDER, *VERBS, ".", *(word for phrase in COMPLEMENTS for word in phrase.split(" "))},
    level="word",
)


@dataclass
class ClozeExample:
    """One story, its cloze question and the answer.

    Fields:
        story: the story's words, sentences ending in ``"."``, as one string.
        question: the supporting sentence's event with one entity replaced by ``@placeholder``.
        answer: an entity marker.
        supporting: the index of the supporting sentence in the story.
        answer_position: the index, among the story's words, of the answer's mention in the
            supporting sentence.
    """

    story: str
    question: str
    answer: str
    supporting: int
    answer_position: int


@dataclass
class ClozeBatch:
    """Examples encoded for a reader.

    Fields:
        stories: word ids, padded with ``pad_id`` (0); ``story_mask`` is True on the real words.
        questions: word ids of the questions, padded; ``question_mask``.
        answers: the answer's index among the entities, ``0 .. len(ENTITIES) - 1``.
        answer_position: where the answer's mention in the supporting sentence is.
        answer_mentions: True on every mention of the answer in the story.
        supporting_sentence: True on the words of the supporting sentence (its "." included).

    Shapes:
        stories: (N, T) int64; story_mask, answer_mentions, supporting_sentence: (N, T) bool.
        questions: (N, T_q) int64; question_mask: (N, T_q) bool.
        answers, answer_position: (N,) int64.
    """

    stories: np.ndarray
    story_mask: np.ndarray
    questions: np.ndarray
    question_mask: np.ndarray
    answers: np.ndarray
    answer_position: np.ndarray
    answer_mentions: np.ndarray
    supporting_sentence: np.ndarray

    def __len__(self) -> int:
        return self.stories.shape[0]


def _pick(rand, options: Sequence):
    # Only random() is used: its sequence for a seed is the one part of Python's random module
    # guaranteed not to change across Python versions.
    return options[int(rand() * len(options))]


def _random_example(rand, n_sentences: int, n_entities: int) -> ClozeExample | None:
    """A story of ``n_sentences`` events among ``n_entities`` entities and a question about one
    of them; None if no event can be asked about with a single answer."""
    names = list(ENTITIES)
    for index in range(len(names) - 1, 0, -1):  # a fresh numbering for this story
        other = int(rand() * (index + 1))
        names[index], names[other] = names[other], names[index]
    cast = names[:n_entities]
    events = []
    for _ in range(n_sentences):
        subject = _pick(rand, cast)
        obj = _pick(rand, [name for name in cast if name != subject])
        complement = _pick(rand, COMPLEMENTS) if rand() < 0.3 else None
        events.append((subject, _pick(rand, VERBS), obj, complement))
    # A question blanks the subject (role 0) or the object (role 2) of one event; it has one
    # answer when no other event has the same verb and the same entity in the other role.
    askable = [(index, role) for index, (subject, verb, obj, _) in enumerate(events) for role in (0, 2)
               if sum(1 for s, v, o, _ in events
                      if v == verb and (o == obj if role == 0 else s == subject)) == 1]
    if not askable:
        return None
    supporting, role = _pick(rand, askable)
    words, start = [], 0
    for index, (subject, verb, obj, complement) in enumerate(events):
        if index == supporting:
            start = len(words)
        words += [subject, verb, obj] + (complement.split(" ") if complement else []) + ["."]
    subject, verb, obj, _ = events[supporting]
    question = [PLACEHOLDER, verb, obj] if role == 0 else [subject, verb, PLACEHOLDER]
    return ClozeExample(story=" ".join(words), question=" ".join(question), answer=events[supporting][role],
                        supporting=supporting, answer_position=start + role)


def generate_cloze(n: int, seed: int | np.random.Generator = 0, min_sentences: int = 4,
                   max_sentences: int = 8, n_entities: int = 5) -> list[ClozeExample]:
    """``n`` random stories with one cloze question each; no (story, question) twice.

    Each draw takes a story length uniformly from ``min_sentences .. max_sentences``; the
    entities are ``n_entities`` markers drawn from ``ENTITIES``; each event's subject, verb and
    object are uniform (subject and object differ), with a time or place three times in ten. The
    question blanks the subject or the object of an event drawn uniformly among those with a
    single answer (a story with none is drawn again).

    Raises:
        ValueError: naming the bad argument, or more unique examples asked for than a bounded
            number of draws reaches.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 1 <= min_sentences <= max_sentences:
        raise ValueError(f"expected 1 <= min_sentences <= max_sentences, got {min_sentences} and {max_sentences}")
    if not 2 <= n_entities <= len(ENTITIES):
        raise ValueError(f"n_entities must lie in 2..{len(ENTITIES)}, got {n_entities}")
    rng = np.random.default_rng(seed)
    rand = random.Random(int(rng.integers(2**63))).random
    examples: dict[tuple[str, str], ClozeExample] = {}
    n_drawn, max_draws = 0, max(100_000, 50 * n)
    while len(examples) < n and n_drawn < max_draws:
        n_drawn += 1
        example = _random_example(rand, min_sentences + int(rand() * (max_sentences - min_sentences + 1)),
                                  n_entities)
        if example is not None:
            examples.setdefault((example.story, example.question), example)
    if len(examples) < n:
        raise ValueError(f"asked for {n} unique examples, but {n_drawn} draws gave only {len(examples)}")
    return list(examples.values())


def encode_cloze(examples: Sequence[ClozeExample], vocab: Vocabulary = CLOZE_VOCABULARY,
                 story_length: int | None = None) -> ClozeBatch:
    """Stories, questions and answers as padded id arrays (``story_length``: T, by default the longest).

    Raises:
        ValueError: no examples, or a story longer than ``story_length``.
    """
    if len(examples) == 0:
        raise ValueError("encode_cloze needs at least one example, got an empty list")
    story_ids = [vocab.encode(example.story) for example in examples]
    T = max(len(ids) for ids in story_ids) if story_length is None else story_length
    if max(len(ids) for ids in story_ids) > T:
        raise ValueError(f"story_length={T} is shorter than a story of {max(len(ids) for ids in story_ids)} words")
    stories, story_mask = pad_batch(story_ids, vocab.pad_id, T)
    questions, question_mask = pad_batch([vocab.encode(example.question) for example in examples], vocab.pad_id)
    answers = np.array([ENTITIES.index(example.answer) for example in examples], dtype=np.int64)
    answer_ids = np.array([vocab.encode(example.answer)[0] for example in examples])
    supporting = np.zeros(stories.shape, dtype=bool)
    for row, example in enumerate(examples):
        words = example.story.split(" ")
        sentence_of = np.cumsum([0] + [word == "." for word in words[:-1]])  # each word's sentence
        supporting[row, :len(words)] = sentence_of == example.supporting
    return ClozeBatch(stories=stories, story_mask=story_mask, questions=questions, question_mask=question_mask,
                      answers=answers,
                      answer_position=np.array([example.answer_position for example in examples], dtype=np.int64),
                      answer_mentions=(stories == answer_ids[:, None]) & story_mask,
                      supporting_sentence=supporting)
