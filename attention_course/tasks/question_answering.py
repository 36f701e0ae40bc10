"""Memory networks for question answering: does each hop look at a supporting sentence?

The data (``attention_course.data.babi``): generated bAbI-like stories of people moving and
handling objects, with one question each, "where is mary" (one supporting sentence) or
"where is the football" (two: who last handled it, and where that person went), and the
indices of the supporting sentences. The model: an end-to-end memory network (``MemN2N`` of
either track) with three hops, position and temporal encoding.

Measured on held-out stories: the accuracy for each kind of question, and for each hop how
often its largest weight falls on a supporting sentence (``supporting_hit_rate``).
"""

from __future__ import annotations

import numpy as np

from ..core.configs import MemoryConfig
from ..data.babi import BABI_KINDS, BABI_VOCABULARY, BabiBatch, encode_babi, generate_babi
from ..tracks import get_track
from ..training import TrainConfig, result_summary
from .common import (TASK_OPTIONS, TaskRun, check_task_command, finish_command, log_to_stderr, stopping_rules,
                     track_settings)

__all__ = ["DEFAULTS", "MAX_SENTENCES", "make_data", "build_model", "measure", "train", "train_command"]

MAX_SENTENCES = 10  # the generator's longest story by default
DEFAULTS = {"lr": 0.01, "batch_size": 32}
STOPPING = {"epochs": 40, "target_accuracy": 1.0}


def make_data(n_train: int = 4000, n_validation: int = 500, n_test: int = 1000, seed: int = 0,
              max_sentences: int = MAX_SENTENCES):
    """``(train, validation, test)`` as ``(examples, BabiBatch)`` pairs; no example is in two of them."""
    train_examples, test_examples = generate_babi(n_train + n_validation, n_test, seed=seed,
                                                  max_sentences=max_sentences)
    validation_examples, train_examples = train_examples[:n_validation], train_examples[n_validation:]
    every = train_examples + validation_examples + test_examples
    W = max(max(len(sentence.split(" ")) for e in every for sentence in e.story),
            max(len(e.question.split(" ")) for e in every))
    return tuple((examples, encode_babi(examples, max_sentences=max_sentences, max_words=W))
                 for examples in (train_examples, validation_examples, test_examples))


def build_model(track: str, config: MemoryConfig, seed: int = 0):
    """A fresh ``MemN2N`` of ``track``, its weights drawn from ``seed`` (the same on both)."""
    return get_track(track).build_model("memory", config, seed)


def _inputs(batch: BabiBatch) -> tuple:
    return batch.stories, batch.story_mask, batch.questions


def measure(model, track: str, examples, batch: BabiBatch) -> dict:
    """Accuracy and supporting-sentence hits per kind of question, and the weights of every hop.

    Returns a dict: ``accuracy``; ``accuracy_by_kind`` {kind: fraction}; ``supporting_hit_rate``
    {kind: [one fraction per hop]}; ``weights`` (N, K, S); ``predictions`` (N,).
    """
    call = get_track(track).call
    predictions = call(model, "predict", *_inputs(batch)).argmax(axis=1)
    weights = call(model, "attend", *_inputs(batch))  # (N, K, S)
    correct = predictions == batch.answers
    kinds = np.array([example.kind for example in examples])
    looked_at = weights.argmax(axis=2)  # (N, K)
    hits = np.take_along_axis(batch.supporting, looked_at, axis=1)  # (N, K)
    by_kind, hit_rate = {}, {}
    for kind in BABI_KINDS:
        rows = kinds == kind
        if rows.any():
            by_kind[kind] = float(correct[rows].mean())
            hit_rate[kind] = [float(rate) for rate in hits[rows].mean(axis=0)]
    return {"accuracy": float(correct.mean()), "accuracy_by_kind": by_kind, "supporting_hit_rate": hit_rate,
            "weights": weights, "predictions": predictions}


def train(track: str = "numpy", seed: int = 0, n_train: int = 4000, n_validation: int = 500, n_test: int = 1000,
          embed_dim: int = 20, hops: int = 3, position_encoding: bool = True, temporal_encoding: bool = True,
          lr: float | None = None, batch_size: int | None = None, eval_every: int = 100, device: str = "cpu",
          progress: bool = False, log=None, **stopping) -> TaskRun:
    """Generate stories, train a memory network on ``track``, and measure it on the test stories.

    ``stopping``: ``epochs``, ``max_steps``, ``max_seconds``, ``target_accuracy`` (validation
    accuracy); by default 40 epochs, or every validation answer right.
    """
    implementation = get_track(track)
    defaults = track_settings(implementation, "babi", DEFAULTS)
    (_, train_batch), (_, validation), (test_examples, test) = make_data(n_train, n_validation, n_test, seed)
    config = MemoryConfig(len(BABI_VOCABULARY), MAX_SENTENCES, embed_dim=embed_dim, hops=hops,
                          position_encoding=position_encoding, temporal_encoding=temporal_encoding)
    model = implementation.build_model("memory", config, seed)
    rules = {name: value for name, value in stopping.items() if value is not None} or dict(STOPPING)
    train_config = TrainConfig(batch_size=batch_size or defaults["batch_size"], lr=lr or defaults["lr"],
                               eval_every=eval_every, seed=seed, **rules)

    def evaluate() -> float:
        predictions = implementation.call(model, "predict", *_inputs(validation)).argmax(axis=1)
        return float((predictions == validation.answers).mean())

    arrays = {"stories": train_batch.stories, "story_mask": train_batch.story_mask,
              "questions": train_batch.questions, "answers": train_batch.answers}
    result = implementation.fit(model, arrays, train_config, evaluate, progress=progress, log=log, device=device)
    measured = measure(model, track, test_examples, test)
    summary = {
        "test_accuracy": measured["accuracy"],
        "test_accuracy_by_kind": measured["accuracy_by_kind"],
        "supporting_hit_rate_by_hop": measured["supporting_hit_rate"],
        "validation_accuracy": result.test_exact_match,
        **result_summary(result),
        "n_parameters": implementation.num_parameters(model),
        "track": track,
        "device": device,
        "model": "attention",
        "task": "babi",
        "seed": seed,
        "n_train": n_train,
    }
    return TaskRun(model=model, summary=summary, result=result, test=(test_examples, test),
                   extra={"measured": measured})


# Options of ``attention-course train`` that this task reads.
OPTIONS = TASK_OPTIONS - {"hidden_size"}


def train_command(args, task) -> dict:
    """``attention-course train --task babi``: train, write ``history.json``, return the summary."""
    given = check_task_command(args, task, OPTIONS, "has one model, the memory network")

    embed_dim = args.embed_dim if "embed_dim" in given else 20
    run = train(track=args.track, seed=args.seed, n_train=args.n_train or 4000, n_test=args.n_test or 1000,
                embed_dim=embed_dim, lr=args.lr, batch_size=args.batch_size, eval_every=args.eval_every,
                device=args.device or "cpu", progress=not args.no_progress, log=log_to_stderr,
                **stopping_rules(args, STOPPING))
    return finish_command(args, run)
