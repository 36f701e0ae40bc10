"""Chapter 9: the captioner without attention (one vector of the image) beside the one with it, over seeds.

The decks' standard captioning model reads a static representation of the image; attention lets
each word look at the part of the image it names. Both captioners here are the task's
(``attention_course.tasks.caption.train``, NumPy track, over the given grid of patch features) with
every setting at its default (3,000 training images, 20 epochs, Adam at 0.01, batches of 64, the
weights of the best validation exact match kept, no coverage regulariser), and differ in one thing:

* ``attention``: soft attention over the 16 cells of the grid before every word;
* ``static``: every word reads the mean of the 16 cells' features, the same vector at every step
  (``CaptionerConfig.context = "static"``; it has no attention parameters, so fewer weights).

The seed sets the images, the initial weights and the order of the batches. A record holds the
test exact match (500 held-out images), BLEU, the exact match by the number of objects in the image,
the object words' hit rate (attention only) and the parameter count.

    .venv/bin/python -m tools.experiments.caption_baseline        # about five minutes on one core
    .venv/bin/python -m tools.experiments.caption_baseline --seeds 0 --max-steps 5 --out /tmp/captions.json

from the repository root; it writes ``book/results/caption_baseline.json``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from attention_course.tasks import caption
from tools.experiments.common import RESULTS, Stopwatch, command_line, write_results

MODELS = ("static", "attention")


def by_objects(captions: list[str], data) -> dict[str, float]:
    """Exact match of the greedy captions by the number of objects in the image: {"1": ..., ...}."""
    right = np.array([c == r for c, r in zip(captions, data.captions)])
    counts = data.object_present.sum(axis=1)
    return {str(k): float(right[counts == k].mean()) for k in sorted(set(counts.tolist()))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--max-steps", type=int, help="stop each run after this many steps (quick checks)")
    parser.add_argument("--out", type=os.path.abspath, default=str(RESULTS / "caption_baseline.json"))
    args = parser.parse_args(argv)
    command = command_line("tools.experiments.caption_baseline", argv)
    clock = Stopwatch()
    settings = {"track": "numpy", "models": list(MODELS), "seeds": args.seeds, "n_train": 3000, "n_test": 500,
                "max_steps": args.max_steps, **caption.DEFAULTS}
    stopping = {} if args.max_steps is None else {"max_steps": args.max_steps}
    records = []
    for seed in args.seeds:
        for model in MODELS:
            run = caption.train(track="numpy", seed=seed, model=model, **stopping)
            summary, measured = run.summary, run.extra["measured"]
            records.append({"model": model, "seed": seed, "test_exact_match": summary["test_exact_match"],
                            "test_bleu": summary["test_bleu"], "object_hit_rate": summary["object_hit_rate"],
                            "exact_match_by_objects": by_objects(measured["captions"], run.test),
                            "n_parameters": summary["n_parameters"], "steps": summary["steps"],
                            "train_seconds": summary["train_seconds"]})
            clock.log(f"{model} seed {seed}: exact match {summary['test_exact_match']:.3f}, "
                      f"BLEU {summary['test_bleu']:.1f}, by objects {records[-1]['exact_match_by_objects']}")
            write_results(args.out, "caption_baseline", settings, records, clock.seconds, command,
                          complete=len(records) == len(MODELS) * len(args.seeds))
    print(args.out)


if __name__ == "__main__":
    main()
