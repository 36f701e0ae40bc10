"""Cloze reading comprehension: does the reader look at the answer's mention?

The data (``attention_course.data.cloze``): generated news-like stories of anonymised entities
(``@ent0`` ... renumbered for every story), each with one cloze question that restates one sentence
of the story with an entity replaced by ``@placeholder``. The model: the attentive reader
(``AttentiveReader`` of either track): the question's encoding attends over the story's words and
the weighted sum picks the entity.

Measured on held-out stories: the accuracy; and where the attention lands, which nothing in the
training asks for: the weight on the answer's mention in the supporting sentence
(``mention_weight``), how often the largest weight lies on it (``mention_hit_rate``, also apart for
questions that blank the subject and those that blank the object) or on a word next to it
(``near_mention_hit_rate``: a bidirectional state has read its neighbours), the weight on any
mention of the answer and on the supporting sentence as a whole, and, for comparison, the weight a
uniform distribution would give the mention (``uniform_mention_weight``).
"""

from __future__ import annotations

import numpy as np

from ..core.configs import ReaderConfig
from ..data.cloze import CLOZE_VOCABULARY, ENTITIES, PLACEHOLDER, ClozeBatch, encode_cloze, generate_cloze
from ..tracks import get_track
from ..training import TrainConfig, result_summary
from .common import (TASK_OPTIONS, TaskRun, check_task_command, finish_command, log_to_stderr, stopping_rules,
                     track_settings)

__all__ = ["DEFAULTS", "STOPPING", "make_data", "build_model", "measure", "train", "train_command"]

DEFAULTS = {"lr": 0.01, "batch_size": 64, "hidden_size": 32}
STOPPING = {"epochs": 10, "target_accuracy": 1.0}


# The figures of ``measure`` a summary holds.
MEASURED = ("mention_weight", "mention_hit_rate", "mention_hit_rate_by_blank", "near_mention_hit_rate",
            "near_mention_hit_rate_by_blank", "answer_mentions_weight", "supporting_sentence_weight",
            "uniform_mention_weight")


def make_data(n_train: int = 4000, n_validation: int = 500, n_test: int = 1000, seed: int = 0):
    """``(train, validation, test)`` as ``(examples, ClozeBatch)`` pairs, drawn together from ``seed``
    (no example in two of them), the stories padded to one length."""
    examples = generate_cloze(n_train + n_validation + n_test, seed=seed)
    T = max(len(example.story.split(" ")) for example in examples)
    parts = (examples[:n_train], examples[n_train:n_train + n_validation], examples[n_train + n_validation:])
    return tuple((part, encode_cloze(part, story_length=T)) for part in parts)


def build_model(track: str, config: ReaderConfig, seed: int = 0):
    """A fresh ``AttentiveReader`` of ``track``, its weights drawn from ``seed`` (the same on both)."""
    return get_track(track).build_model("reader", config, seed)


def _inputs(batch: ClozeBatch) -> tuple:
    return batch.stories, batch.story_mask, batch.questions, batch.question_mask


def measure(model, track: str, batch: ClozeBatch) -> dict:
    """Accuracy, and where the attention lands.

    Returns a dict: ``accuracy``; ``mention_weight`` (the mean weight on the answer's mention in the
    supporting sentence), ``mention_hit_rate`` (how often the largest weight is there),
    ``mention_hit_rate_by_blank`` (the same for the questions that blank the ``"subject"`` and those
    that blank the ``"object"``), ``near_mention_hit_rate`` (the largest weight at most one word
    from the mention, and ``near_mention_hit_rate_by_blank``), ``answer_mentions_weight`` (on any mention of the answer), ``supporting_sentence_weight``,
    ``uniform_mention_weight`` (``1 / story length``, on average); ``weights`` (N, T) and
    ``predictions`` (N,).
    """
    call = get_track(track).call
    predictions = call(model, "predict", *_inputs(batch)).argmax(axis=1)
    weights = call(model, "attend", *_inputs(batch))  # (N, T)
    rows = np.arange(len(batch))
    offset = weights.argmax(axis=1) - batch.answer_position  # where the largest weight lies, from the mention
    blanks = {"subject": batch.questions[:, 0] == CLOZE_VOCABULARY.encode(PLACEHOLDER)[0]}
    blanks["object"] = ~blanks["subject"]
    return {
        "accuracy": float((predictions == batch.answers).mean()),
        "mention_weight": float(weights[rows, batch.answer_position].mean()),
        "mention_hit_rate": float((offset == 0).mean()),
        "mention_hit_rate_by_blank": {name: float((offset[chosen] == 0).mean()) for name, chosen in blanks.items()},
        "near_mention_hit_rate": float((np.abs(offset) <= 1).mean()),
        "near_mention_hit_rate_by_blank": {name: float((np.abs(offset[chosen]) <= 1).mean())
                                           for name, chosen in blanks.items()},
        "answer_mentions_weight": float((weights * batch.answer_mentions).sum(axis=1).mean()),
        "supporting_sentence_weight": float((weights * batch.supporting_sentence).sum(axis=1).mean()),
        "uniform_mention_weight": float((1 / batch.story_mask.sum(axis=1)).mean()),
        "weights": weights,
        "predictions": predictions,
    }


def train(track: str = "numpy", seed: int = 0, n_train: int = 4000, n_validation: int = 500, n_test: int = 1000,
          embed_dim: int = 32, hidden_size: int | None = None, lr: float | None = None, batch_size: int | None = None,
          eval_every: int = 50, device: str = "cpu", progress: bool = False, log=None, **stopping) -> TaskRun:
    """Generate stories, train an attentive reader on ``track``, and measure it on the test stories.

    ``stopping``: ``epochs``, ``max_steps``, ``max_seconds``, ``target_accuracy`` (validation
    accuracy); by default 10 epochs, or every validation answer right.
    """
    implementation = get_track(track)
    defaults = track_settings(implementation, "cloze", DEFAULTS)
    (_, train_batch), (_, validation), (test_examples, test) = make_data(n_train, n_validation, n_test, seed)
    config = ReaderConfig(len(CLOZE_VOCABULARY), len(ENTITIES), embed_dim=embed_dim,
                          hidden_size=hidden_size or defaults["hidden_size"], reset_after=defaults["reset_after"])
    model = implementation.build_model("reader", config, seed)
    rules = {name: value for name, value in stopping.items() if value is not None} or dict(STOPPING)
    train_config = TrainConfig(batch_size=batch_size or defaults["batch_size"], lr=lr or defaults["lr"],
                               eval_every=eval_every, seed=seed, **rules)

    def evaluate() -> float:
        predictions = implementation.call(model, "predict", *_inputs(validation)).argmax(axis=1)
        return float((predictions == validation.answers).mean())

    arrays = {"stories": train_batch.stories, "story_mask": train_batch.story_mask, "questions": train_batch.questions,
              "question_mask": train_batch.question_mask, "answers": train_batch.answers}
    result = implementation.fit(model, arrays, train_config, evaluate, progress=progress, log=log, device=device)
    measured = measure(model, track, test)
    summary = {
        "test_accuracy": measured["accuracy"],
        **{name: measured[name] for name in MEASURED},
        "validation_accuracy": result.test_exact_match,
        **result_summary(result),
        "n_parameters": implementation.num_parameters(model),
        "track": track,
        "device": device,
        "model": "attention",
        "task": "cloze",
        "seed": seed,
        "n_train": n_train,
    }
    return TaskRun(model=model, summary=summary, result=result, test=(test_examples, test),
                   extra={"measured": measured})


# Options of ``attention-course train`` that this task reads.
OPTIONS = TASK_OPTIONS


def train_command(args, task) -> dict:
    """``attention-course train --task cloze``: train, write ``history.json``, return the summary."""
    check_task_command(args, task, OPTIONS, "has one model, the attentive reader")
    run = train(track=args.track, seed=args.seed, n_train=args.n_train or 4000, n_test=args.n_test or 1000,
                embed_dim=args.embed_dim, hidden_size=args.hidden_size, lr=args.lr, batch_size=args.batch_size,
                eval_every=args.eval_every, device=args.device or "cpu", progress=not args.no_progress,
                log=log_to_stderr, **stopping_rules(args, STOPPING))
    return finish_command(args, run)
