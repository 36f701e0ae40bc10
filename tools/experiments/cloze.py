"""Chapter 9: the attentive reader on cloze questions, over seeds: where does its attention land?

For each seed, the task's defaults (``attention_course.tasks.cloze.train``, NumPy track): 4,000
generated stories for training, 500 for validation, 1,000 for testing, a reader with a
bidirectional GRU of 32 units per direction for the story and another for the question, Adam at
0.01 on batches of 64 for 10 epochs (the weights of the best validation accuracy kept). The seed
sets the stories, the initial weights and the order of the batches. A record holds the run's
summary (accuracy; the weight on the answer's mention in the supporting sentence, how often the
largest weight lies on it or next to it, by the role the question blanks; the weight on the
supporting sentence; what a uniform distribution would give) and, for the first seed, the weights
over a few test stories (to draw).

    .venv/bin/python -m tools.experiments.cloze                         # a few minutes
    .venv/bin/python -m tools.experiments.cloze --seeds 0 --n-train 300 --epochs 1 --out /tmp/cloze.json

from the repository root; it writes ``book/results/cloze.json``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from attention_course.tasks import cloze
from tools.experiments.common import RESULTS, Stopwatch, command_line, write_results

SUMMARY = ("test_accuracy", *cloze.MEASURED, "steps", "restored_best_step", "train_seconds", "n_parameters")
DRAWN = 4  # test stories whose weights the record keeps: two that blank the subject, two the object


def drawn_examples(examples, weights) -> list[dict]:
    """The first two test stories that blank the subject and the first two that blank the object,
    with the weight of every word (rounded to 3 decimals)."""
    chosen, found = [], {"subject": 0, "object": 0}
    for example, row in zip(examples, weights):
        blank = "subject" if example.question.startswith("@placeholder") else "object"
        if found[blank] < DRAWN // 2:
            found[blank] += 1
            words = example.story.split(" ")
            chosen.append({"story": words, "question": example.question, "answer": example.answer,
                           "answer_position": example.answer_position, "blank": blank,
                           "weights": np.round(row[:len(words)].astype(float), 3).tolist()})
    return chosen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--n-train", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--out", type=os.path.abspath, default=str(RESULTS / "cloze.json"))
    args = parser.parse_args(argv)
    command = command_line("tools.experiments.cloze", argv)
    clock = Stopwatch()
    settings = {"track": "numpy", "seeds": args.seeds, "n_train": args.n_train, "n_validation": 500,
                "n_test": 1000, "epochs": args.epochs, **cloze.DEFAULTS}
    records = []
    for seed in args.seeds:
        run = cloze.train(track="numpy", seed=seed, n_train=args.n_train, epochs=args.epochs)
        record = {"seed": seed, **{name: run.summary[name] for name in SUMMARY}}
        if seed == args.seeds[0]:
            examples, _ = run.test
            record["examples"] = drawn_examples(examples, run.extra["measured"]["weights"])
        records.append(record)
        clock.log(f"seed {seed}: accuracy {record['test_accuracy']:.3f}, on the mention "
                  f"{record['mention_hit_rate']:.2f} (next to it {record['near_mention_hit_rate']:.2f}), "
                  f"in the supporting sentence {record['supporting_sentence_weight']:.2f}")
        write_results(args.out, "cloze", settings, records, clock.seconds, command,
                      complete=len(records) == len(args.seeds))
    print(args.out)


if __name__ == "__main__":
    main()
