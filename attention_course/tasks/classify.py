"""Attention pooling for classification: does the attention land on the words that decide the label?

The data (``attention_course.data.classification``): filler words with a few planted words that
alone decide the label: positive or negative keywords (``"keyword"``), or "ping" and "pong" in
one order or the other (``"order"``, where a bag of words is at chance). The model: embedding,
bidirectional GRU, pooling over time, affine, sigmoid (``SequenceClassifier`` of either track).

Measured on held-out sequences: the accuracy, and for attention pooling the share of the
attention that falls on the planted words (``planted_share``; 1 would be all of it).
Training stops by the rules given, and keeps the weights of its best evaluation on a separate
validation set; the test set is only measured at the end.
"""

from __future__ import annotations

import numpy as np

from ..core.configs import ClassifierConfig
from ..data.classification import ClassificationData, generate_classification
from ..tracks import get_track
from ..training import TrainConfig, result_summary
from .common import (TASK_OPTIONS, TaskRun, check_task_command, finish_command, log_to_stderr, stopping_rules,
                     track_settings)

__all__ = ["VARIANTS", "DEFAULTS", "make_data", "build_model", "measure", "train", "train_command"]

# Command-line task name -> the data's task (the registry's ``settings["variant"]``), and how many
# words each plants.
VARIANTS = {"classify": "majority", "classify-keyword": "keyword", "classify-order": "order"}
PLANTED = {"majority": 5, "keyword": 2, "order": 2}
# Chosen by runs of attention_course/tasks/experiments.py. Each track takes the GRU form it
# prefers (torch's: its fused kernels), as for the dates task (``common.track_settings``).
DEFAULTS = {"hidden_size": 32, "lr": 0.03, "batch_size": 64}
STOPPING = {"epochs": 6}


def make_data(task: str = "majority", n_train: int = 3000, n_validation: int = 500, n_test: int = 1000,
              seed: int = 0, min_length: int = 10, max_length: int = 60):
    """``(train, validation, test)`` ``ClassificationData``, drawn one after another from ``seed``.

    ``PLANTED[task]`` words are planted in each sequence (5 for ``"majority"``).
    """
    rng = np.random.default_rng(seed)
    return tuple(generate_classification(n, rng, task=task, min_length=min_length, max_length=max_length,
                                         n_planted=PLANTED[task])
                 for n in (n_train, n_validation, n_test))


def build_model(track: str, config: ClassifierConfig, seed: int = 0):
    """A fresh ``SequenceClassifier`` of ``track``, its weights drawn from ``seed`` (the same on both)."""
    return get_track(track).build_model("classifier", config, seed)


def measure(model, track: str, data: ClassificationData) -> dict:
    """Accuracy, and for attention or mean pooling the weights and their share on the planted words.

    Returns a dict: ``accuracy``; ``predictions`` (N,); ``weights`` (N, T), ``planted_share``
    (the mean over sequences of the weight on the planted words) and ``planted_share_by_label``
    ({label: the same over the sequences of that label}) unless the model pools the last state.
    """
    call = get_track(track).call
    probabilities = call(model, "predict", data.ids, data.mask)
    predictions = probabilities.argmax(axis=1)
    measured = {"accuracy": float((predictions == data.labels).mean()), "predictions": predictions}
    if model.config.pooling != "last":
        weights = call(model, "pooling_weights", data.ids, data.mask)  # (N, T)
        measured["weights"] = weights
        shares = (weights * data.planted).sum(axis=1)  # (N,)
        measured["planted_share"] = float(shares.mean())
        measured["planted_share_by_label"] = {int(label): float(shares[data.labels == label].mean())
                                              for label in np.unique(data.labels)}
    return measured


def train(track: str = "numpy", task: str = "majority", pooling: str = "attention", seed: int = 0,
          n_train: int = 3000, n_validation: int = 500, n_test: int = 1000, min_length: int = 10,
          max_length: int = 60, embed_dim: int = 32, hidden_size: int | None = None, attention_size: int = 32,
          lr: float | None = None, batch_size: int | None = None, eval_every: int = 25, device: str = "cpu",
          progress: bool = False, log=None, **stopping) -> TaskRun:
    """Generate the data, train a classifier with ``pooling`` on ``track``, and measure it.

    ``stopping``: ``epochs``, ``max_steps``, ``max_seconds``, ``target_accuracy`` (validation
    accuracy), as in ``TrainConfig``; by default 6 epochs (attention keeps sharpening after the
    accuracy is perfect).
    Returns a ``TaskRun`` whose summary holds ``test_accuracy``, ``planted_attention_share``
    (attention pooling), the parameter count and the training figures.
    """
    implementation = get_track(track)
    defaults = track_settings(implementation, "classify", DEFAULTS)
    hidden_size = hidden_size or defaults["hidden_size"]
    train_data, validation, test = make_data(task, n_train, n_validation, n_test, seed, min_length, max_length)
    config = ClassifierConfig(len(train_data.vocab), embed_dim=embed_dim, hidden_size=hidden_size,
                              attention_size=attention_size, pooling=pooling, reset_after=defaults["reset_after"])
    model = implementation.build_model("classifier", config, seed)
    rules = {name: value for name, value in stopping.items() if value is not None} or dict(STOPPING)
    train_config = TrainConfig(batch_size=batch_size or defaults["batch_size"], lr=lr or defaults["lr"],
                               eval_every=eval_every, seed=seed, **rules)

    def evaluate() -> float:
        probabilities = implementation.call(model, "predict", validation.ids, validation.mask)
        return float((probabilities.argmax(axis=1) == validation.labels).mean())

    arrays = {"ids": train_data.ids, "mask": train_data.mask, "labels": train_data.labels}
    result = implementation.fit(model, arrays, train_config, evaluate, progress=progress, log=log, device=device)
    measured = measure(model, track, test)
    summary = {
        "test_accuracy": measured["accuracy"],
        "planted_attention_share": measured.get("planted_share") if pooling == "attention" else None,
        "validation_accuracy": result.test_exact_match,
        **result_summary(result),
        "n_parameters": implementation.num_parameters(model),
        "track": track,
        "device": device,
        "model": pooling,
        "task": {variant: name for name, variant in VARIANTS.items()}[task],
        "seed": seed,
        "n_train": n_train,
    }
    return TaskRun(model=model, summary=summary, result=result, test=test, extra={"measured": measured})


# Options of ``attention-course train`` that this task reads.
OPTIONS = TASK_OPTIONS


def train_command(args, task) -> dict:
    """``attention-course train --task classify|classify-keyword|classify-order``: train, write
    ``history.json``, return the summary."""
    check_task_command(args, task, OPTIONS, "pools by attention, mean or last")

    n_train = args.n_train or 3000
    run = train(track=args.track, task=task.settings["variant"], pooling=args.model, seed=args.seed, n_train=n_train,
                n_test=args.n_test or 1000, embed_dim=args.embed_dim, hidden_size=args.hidden_size, lr=args.lr,
                batch_size=args.batch_size, eval_every=args.eval_every, device=args.device or "cpu",
                progress=not args.no_progress, log=log_to_stderr,
                **stopping_rules(args, STOPPING))
    return finish_command(args, run)
