"""Chapter 9's comparisons over seeds, written to a JSON file that the book's page loads.

    python -m attention_course.tasks.experiments --out book/results/09_applications.json

(The committed results were made before the tasks moved here, by the same code under its old name,
``python -m attention_course.applications.experiments``; that name is gone, and the file records the
command as it was typed.)

Every run trains from scratch with the task's defaults (the registry's ``classify``, ``caption``,
``babi``);
only what a comparison varies is set here:

* classification, NumPy track: every data variant (majority, keyword, order) with every
  pooling (attention, mean, last state);
* captioning: the NumPy track over given features with the doubly stochastic regulariser's
  weight ``lambda`` at 0, 0.001 and 0.01, and the torch track's CNN, end to end, at 0;
* question answering, NumPy track: memory networks of one hop and of three.

Each row holds the run's summary figures (not the weights). ``--quick`` shrinks every run to a
few steps on a few examples: the structure is the same, the figures mean nothing (the tests use
it). The full run takes about half an hour on one core.

``--update`` re-runs only what ``--parts`` (and, for captioning, ``--caption-tracks``) names and
writes those rows into the existing ``--out`` file, keeping every other row and the original
``command``; the re-run's own command is added to the file's ``updates``::

    python -m attention_course.tasks.experiments --out book/results/09_applications.json \
        --parts caption --caption-tracks torch --seeds 0 1 2 3 4 --update
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import get_task

__all__ = ["SEEDS", "PROGRAM", "COMMAND", "CAPTION_SETTINGS", "classification", "captioning", "question_answering",
           "run", "update", "main"]

SEEDS = (0, 1, 2)
PROGRAM = "python -m attention_course.tasks.experiments"
COMMAND = PROGRAM + " --out book/results/09_applications.json"
# (track, coverage weight lambda) of every captioning row.
CAPTION_SETTINGS = (("numpy", 0.0), ("numpy", 0.001), ("numpy", 0.01), ("torch", 0.0))


def _first_step_at(evaluations, level: float):
    """The first evaluated step whose accuracy reached ``level``, or None."""
    return next((step for step, accuracy in evaluations if accuracy >= level), None)


def classification(seeds=SEEDS, quick: bool = False, log=None) -> list[dict]:
    train = get_task("classify").load().train

    sizes = dict(n_train=200, n_validation=50, n_test=100, max_steps=3) if quick else {}
    rows = []
    for variant in ("majority", "keyword", "order"):
        for pooling in ("attention", "mean", "last"):
            for seed in seeds:
                run = train(track="numpy", task=variant, pooling=pooling, seed=seed, eval_every=25, **sizes)
                measured = run.extra["measured"]
                rows.append({
                    "variant": variant, "pooling": pooling, "seed": seed,
                    "test_accuracy": measured["accuracy"],
                    "planted_share": measured.get("planted_share"),
                    "planted_share_by_label": measured.get("planted_share_by_label"),
                    "steps_to_99": _first_step_at(run.result.evaluations, 0.99),
                    "steps": run.result.steps,
                    "n_parameters": run.summary["n_parameters"],
                    "train_seconds": run.summary["train_seconds"],
                })
                if log:
                    log(f"classify {variant} {pooling} seed {seed}: {rows[-1]}")
    return rows


def captioning(seeds=SEEDS, quick: bool = False, log=None, tracks=("numpy", "torch")) -> list[dict]:
    train = get_task("caption").load().train

    sizes = dict(n_train=100, n_validation=20, n_test=40, max_steps=3) if quick else {}
    settings = [(track, weight) for track, weight in CAPTION_SETTINGS if track in tracks]
    rows = []
    for track, coverage_weight in settings:
        for seed in seeds:
            run = train(track=track, seed=seed, coverage_weight=coverage_weight, **sizes)
            summary = run.summary
            rows.append({
                "track": track, "coverage_weight": coverage_weight, "seed": seed,
                "test_exact_match": summary["test_exact_match"], "test_bleu": summary["test_bleu"],
                "object_hit_rate": summary["object_hit_rate"],
                "object_hit_rate_by_word": summary["object_hit_rate_by_word"],
                "steps": summary["steps"], "n_parameters": summary["n_parameters"],
                "train_seconds": summary["train_seconds"],
            })
            if log:
                log(f"caption {track} lambda={coverage_weight} seed {seed}: {rows[-1]}")
    return rows


def question_answering(seeds=SEEDS, quick: bool = False, log=None) -> list[dict]:
    train = get_task("babi").load().train

    sizes = dict(n_train=200, n_validation=50, n_test=100, max_steps=3) if quick else {}
    rows = []
    for hops in (1, 3):
        for seed in seeds:
            run = train(track="numpy", seed=seed, hops=hops, **sizes)
            summary = run.summary
            rows.append({
                "hops": hops, "seed": seed,
                "test_accuracy": summary["test_accuracy"],
                "test_accuracy_by_kind": summary["test_accuracy_by_kind"],
                "supporting_hit_rate_by_hop": summary["supporting_hit_rate_by_hop"],
                "steps": summary["steps"], "n_parameters": summary["n_parameters"],
                "train_seconds": summary["train_seconds"],
            })
            if log:
                log(f"babi hops={hops} seed {seed}: {rows[-1]}")
    return rows


PARTS = {"classify": classification, "caption": captioning, "babi": question_answering}


def run(seeds=SEEDS, quick: bool = False, parts=tuple(PARTS), log=None, caption_tracks=("numpy", "torch")) -> dict:
    """Every comparison of ``parts`` over ``seeds``: a JSON-serialisable dict."""
    start = time.perf_counter()
    results = {"command": COMMAND + (" --quick" if quick else ""), "seeds": list(seeds), "quick": quick}
    for part in parts:
        if part == "caption":
            results[part] = captioning(seeds, quick, log, tracks=caption_tracks)
        else:
            results[part] = PARTS[part](seeds, quick, log)
    results["seconds"] = round(time.perf_counter() - start, 1)
    return results


def update(previous: dict, new: dict, command: str, caption_tracks=("numpy", "torch")) -> dict:
    """``previous`` with the rows of ``new`` in place of those they re-ran; the rest kept.

    Captioning rows are replaced track by track (``caption_tracks``), in the order of
    ``CAPTION_SETTINGS``; every other part that ``new`` holds is replaced whole. ``command``, the
    re-run's seeds (which may differ from the file's ``seeds``) and the seconds it took are
    appended to ``updates``.
    """
    if previous.get("quick") != new["quick"]:
        raise ValueError(f"--update: the file has quick={previous.get('quick')}, the re-run quick={new['quick']}")
    merged = dict(previous)
    for part in PARTS:
        if part not in new:
            continue
        if part == "caption":
            kept = [row for row in previous.get("caption", []) if row["track"] not in caption_tracks]
            rows = kept + new["caption"]
            order = {setting: index for index, setting in enumerate(CAPTION_SETTINGS)}
            merged[part] = sorted(rows, key=lambda row: order[(row["track"], row["coverage_weight"])])
        else:
            merged[part] = new[part]
    merged["updates"] = [*previous.get("updates", []), {"command": command, "seeds": new["seeds"],
                                                     "seconds": new["seconds"]}]
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM,
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--parts", nargs="+", choices=sorted(PARTS), default=list(PARTS))
    parser.add_argument("--quick", action="store_true", help="a few steps on a few examples (for the tests)")
    parser.add_argument("--caption-tracks", nargs="+", choices=("numpy", "torch"), default=["numpy", "torch"],
                        help="the captioning rows to run, by track")
    parser.add_argument("--update", action="store_true",
                        help="write the re-run rows into the existing --out file, keeping the others")
    args = parser.parse_args(argv)
    if args.update and not args.out.exists():
        parser.error(f"--update: {args.out} does not exist")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    results = run(args.seeds, args.quick, args.parts, log, caption_tracks=args.caption_tracks)
    if args.update:
        given = sys.argv[1:] if argv is None else argv
        command = " ".join([PROGRAM, *given])
        results = update(json.loads(args.out.read_text()), results, command, args.caption_tracks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
