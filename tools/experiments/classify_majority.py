"""Where attention pooling puts its weight on the majority task, by kind of word (chapter 9.1).

The majority task plants five words in each sequence, each positive or negative; the label
says which kind is in the majority. Chapter 9 trains the BiGRU classifier with attention
pooling on it (``classify.train(task="majority")``, the page's settings) and shows that nearly
all the weight lands on the planted words. This experiment asks whether it lands on them
evenly, or favours the words of the majority's kind: for every test sequence it takes the mean
weight of a planted word of the majority's kind and of the minority's kind (sequences with
words of both kinds only), and records over the test set

* ``majority_per_word`` and ``minority_per_word``: those means, averaged over the sequences;
* ``ratio``: the first over the second;
* ``majority_ahead``: the share of the sequences in which a majority word gets more weight,
  on average, than a minority word;
* ``test_accuracy`` and ``planted_share`` (the weight on all five planted words).

    .venv/bin/python -m tools.experiments.classify_majority     # about a minute

writes ``book/results/classify_majority_weights.json``; seeds 0 to 4 by default (seed 0 is the
run the page trains).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from attention_course.data.classification import CLASSIFICATION_VOCABULARY, POSITIVE_WORDS
from attention_course.tasks import classify
from tools.experiments.common import RESULTS, Stopwatch, command_line, write_results


def by_kind(weights: np.ndarray, data) -> dict:
    """The weights of the planted words of the majority's and of the minority's kind.

    Shapes: weights (N, T); data.ids, data.planted (N, T); data.labels (N,).
    """
    positive_ids = [CLASSIFICATION_VOCABULARY.encode(word)[0] for word in POSITIVE_WORDS]
    positive = np.isin(data.ids, positive_ids) & data.planted  # (N, T)
    negative = data.planted & ~positive
    majority = np.where(data.labels[:, None] == 1, positive, negative)  # label 1: more positive
    minority = np.where(data.labels[:, None] == 1, negative, positive)
    both = minority.any(axis=1) & majority.any(axis=1)  # sequences with words of both kinds
    per_majority = (weights * majority).sum(axis=1)[both] / majority.sum(axis=1)[both]
    per_minority = (weights * minority).sum(axis=1)[both] / minority.sum(axis=1)[both]
    return {"majority_per_word": float(per_majority.mean()),
            "minority_per_word": float(per_minority.mean()),
            "ratio": float(per_majority.mean() / per_minority.mean()),
            "majority_ahead": float((per_majority > per_minority).mean()),
            "sequences": int(both.sum())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", type=Path, default=RESULTS / "classify_majority_weights.json")
    args = parser.parse_args(argv)

    clock, records = Stopwatch(), []
    for seed in args.seeds:
        run = classify.train(track="numpy", task="majority", pooling="attention", seed=seed)
        measured = by_kind(run.extra["measured"]["weights"], run.test)
        records.append({"seed": seed, "test_accuracy": run.summary["test_accuracy"],
                        "planted_share": run.summary["planted_attention_share"], **measured})
        clock.log(f"seed {seed}: ratio {measured['ratio']:.2f}, majority ahead in "
                  f"{measured['majority_ahead']:.3f} of {measured['sequences']} sequences")
    settings = {"task": "majority", "pooling": "attention", "track": "numpy", "seeds": args.seeds,
                "train": "classify.train defaults (the page's run)"}
    path = write_results(args.out, "classify_majority_weights", settings, records, clock.seconds,
                         command_line("tools.experiments.classify_majority", argv))
    print(path)


if __name__ == "__main__":
    main()
