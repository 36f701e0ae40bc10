"""The tasks the course trains, on either track: the registry ``attention-course train --task``, the
experiments and the benchmarks consult.

A task (``Task``) names its data, the models it trains (``--model``), the figure it is judged by
and the fields of its JSON summary, and the module that trains it. One module per task:

    pairs               sequence pairs, text in and text out: dates (chapters 1-8, 10), the
                        translation grammar, or pairs from TSV files; a checkpoint ``translate`` reads
    copy                the Neural Turing Machine's copy task and its LSTM baseline (chapter 10)
    classify            attention pooling for classification, three data variants (chapter 9)
    caption             soft visual attention for image captioning (chapter 9)
    question_answering  end-to-end memory networks on bAbI-like stories (chapter 9; ``--task babi``)
    cloze               the attentive reader on cloze questions about generated stories (chapter 9)

and beside them:

    common              what the tasks share: the options that apply, stopping rules, summaries
    experiments         chapter 9's comparisons over seeds, written for the book

A task sits above both tracks: it asks the registry of tracks (``attention_course.tracks``) for the
track it was given and lets the track build its model, train it (``fit``: the one loop,
``training.run_training``), call it in batches, count and save its weights; it never asks which
track it holds. Each task module has a ``train_command(args, task)`` for the command line; the
chapter-9 ones and ``copy`` also a function that trains from Python (``train``, ``train_copy``).
Torch is imported only when the torch track is asked for.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

from ..core.configs import OptionError

__all__ = ["Task", "TASKS", "FILES", "TaskError", "get_task", "model_choices"]


class TaskError(OptionError):
    """A task that is not in the registry."""


@dataclass(frozen=True)
class Task:
    """One task of ``attention-course train --task NAME``.

    ``module`` trains it (``attention_course.tasks.<module>``); ``data`` is the function that makes
    its data (``"module:function"``); ``models`` are the ``--model`` values it trains; ``metric`` is
    the summary's figure on held-out data that says how well it was learnt; ``summary`` lists the
    fields its JSON summary holds beyond the training figures (``training.result_summary``);
    ``settings`` are what its module needs to know about this task (a data variant, a level).
    """

    name: str
    description: str
    module: str
    data: str
    models: tuple[str, ...]
    metric: str
    summary: tuple[str, ...]
    settings: dict = field(default_factory=dict)

    def load(self) -> ModuleType:
        """The module that trains the task."""
        return importlib.import_module(f"{__name__}.{self.module}")

    def make_data(self):
        """The function that makes the task's data."""
        module, function = self.data.split(":")
        return getattr(importlib.import_module(module), function)

    def train_command(self, args) -> dict:
        """``attention-course train --task NAME``: train, save what the task saves, return the JSON summary."""
        return self.load().train_command(args, self)


_PAIRS = dict(module="pairs", models=("attention", "seq2seq", "transformer"), metric="test_exact_match",
              summary=("test_exact_match", "track", "device", "model", "attention", "decoder", "task", "seed",
                       "checkpoint"))
_CLASSIFY = dict(module="classify", data="attention_course.tasks.classify:make_data",
                 models=("attention", "mean", "last"), metric="test_accuracy",
                 summary=("test_accuracy", "planted_attention_share", "validation_accuracy", "n_parameters",
                          "track", "device", "model", "task", "seed", "n_train"))

TASKS = {task.name: task for task in (
    Task("dates", "human-written dates to ISO dates (characters)", data="attention_course.data.dates:generate_dates",
         settings={"level": "character"}, **_PAIRS),
    Task("translation", "a generated two-language grammar whose word orders differ (words)",
         data="attention_course.data.translation:generate_translation", settings={"level": "word"}, **_PAIRS),
    Task("copy", "the Neural Turing Machine's copy task, random bit vectors to recall (--model ntm or lstm)",
         module="copy", data="attention_course.data.copy_task:generate_copy_task", models=("ntm", "lstm"),
         metric="test_bit_accuracy",
         summary=("test_bit_accuracy", "bit_accuracy_by_length", "train_seconds", "cpu_seconds", "steps",
                  "seconds_to_99", "cpu_seconds_to_99", "steps_to_99", "stopped_because", "best_step", "parameters",
                  "track", "model", "task", "seed", "train_config", "command", "checkpoint")),
    Task("classify", "a BiGRU classifier whose pooling (--model attention|mean|last) must find five planted "
                     "keywords, the majority of which decides the label", settings={"variant": "majority"},
         **_CLASSIFY),
    Task("classify-keyword", "the same, with planted keywords all of one kind", settings={"variant": "keyword"},
         **_CLASSIFY),
    Task("classify-order", "the same, where the order of 'ping' and 'pong' decides the label",
         settings={"variant": "order"}, **_CLASSIFY),
    Task("caption", "captions for images of coloured shapes, with soft attention over a grid of features "
                    "(--model static: the baseline without attention, one vector of the image)",
         module="caption", data="attention_course.tasks.caption:make_data", models=("attention", "static"),
         metric="test_exact_match",
         summary=("test_exact_match", "test_bleu", "object_hit_rate", "object_hit_rate_by_word", "coverage_weight",
                  "validation_exact_match", "n_parameters", "track", "device", "model", "task", "seed", "n_train")),
    Task("babi", "bAbI-like question answering with an end-to-end memory network", module="question_answering",
         data="attention_course.tasks.question_answering:make_data", models=("attention",), metric="test_accuracy",
         summary=("test_accuracy", "test_accuracy_by_kind", "supporting_hit_rate_by_hop", "validation_accuracy",
                  "n_parameters", "track", "device", "model", "task", "seed", "n_train")),
    Task("cloze", "cloze questions about generated stories of anonymised entities, answered by an attentive "
                  "reader", module="cloze", data="attention_course.tasks.cloze:make_data", models=("attention",),
         metric="test_accuracy",
         summary=("test_accuracy", "mention_weight", "mention_hit_rate", "mention_hit_rate_by_blank",
                  "near_mention_hit_rate", "near_mention_hit_rate_by_blank", "answer_mentions_weight",
                  "supporting_sentence_weight", "uniform_mention_weight", "validation_accuracy", "n_parameters",
                  "track", "device", "model", "task", "seed", "n_train")),
)}

# Sequence pairs from the TSV files of ``--train`` and ``--test`` (``--level`` says what a symbol is).
FILES = Task("tsv", "pairs from TSV files, 'source<TAB>target' a line", data="attention_course.data:load_pairs_tsv",
             **_PAIRS)


def get_task(name: str) -> Task:
    """The task called ``name``; a TaskError names the ones there are."""
    if name not in TASKS:
        raise TaskError(f"task: expected one of {sorted(TASKS)}, got {name!r}")
    return TASKS[name]


def model_choices() -> list[str]:
    """Every ``--model`` value some task trains, in the registry's order."""
    return list(dict.fromkeys(model for task in TASKS.values() for model in task.models))
