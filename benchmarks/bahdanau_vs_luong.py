"""Bahdanau's decoder against Luong's on dates: test exact match and steps to 99%, over seeds.

Luong's decoder (``AttentionDecoder``, the course's default) scores with ``s_i`` and combines the
context after the recurrence; Bahdanau's (``BahdanauDecoder``) scores with ``s_{i-1}`` and feeds
the context into the recurrence, one step at a time. Both are trained with the torch track on the
CPU (one thread) with the same data, encoder, score, optimizer and seed, checking the test exact
match every ``--eval-every`` steps until it reaches 99% (or ``--max-steps``):

    .venv/bin/python benchmarks/bahdanau_vs_luong.py [--seeds 0,1,2] [--max-steps 1500] [--json FILE]

Prints one line per run and a summary (mean ± sd, min-max over the seeds); with ``--json`` also
writes the results (``book/results/bahdanau_vs_luong.json`` is what the book reads).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

from attention_course.core.configs import Seq2seqConfig
from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.torch_track.decoding import greedy_decode
from attention_course.torch_track.seq2seq import AttentionSeq2seq
from attention_course.torch_track.trainer import Trainer
from attention_course.training import TrainConfig, exact_match

DECODERS = ("luong", "bahdanau")


def train_one(decoder: str, seed: int, args) -> dict:
    train_pairs, test_pairs = generate_dates(args.n_train, args.n_test, seed=seed)
    source_vocab, target_vocab = build_vocabularies(train_pairs + test_pairs)
    train = encode_pairs(train_pairs, source_vocab, target_vocab)
    test = encode_pairs(test_pairs, source_vocab, target_vocab)
    targets = [target for _, target in test_pairs]
    torch.manual_seed(seed)
    config = Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=args.embed_dim,
                           hidden_size=args.hidden_size, reset_after=True, score=args.score, decoder=decoder)
    model = AttentionSeq2seq(config, rng=np.random.default_rng(seed))
    train_config = TrainConfig(batch_size=args.batch_size, lr=args.lr, max_steps=args.max_steps,
                               target_accuracy=args.target, eval_every=args.eval_every, seed=seed)
    result = Trainer(model, train_config).fit(
        train, lambda: exact_match(greedy_decode(model, test, target_vocab).texts, targets), progress=False)
    reached = next((step for step, accuracy in result.evaluations if accuracy >= args.target), None)
    return {"decoder": decoder, "seed": seed, "steps_to_target": reached, "steps": result.steps,
            "test_exact_match": result.test_exact_match, "train_seconds": result.train_seconds,
            "seconds_per_step": result.train_seconds / result.steps, "evaluations": result.evaluations,
            "parameters": sum(p.numel() for p in model.parameters())}


def spread(values) -> str:
    values = [float(v) for v in values]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.1f} ± {sd:.1f} ({min(values):g}-{max(values):g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--n-train", type=int, default=20000)
    parser.add_argument("--n-test", type=int, default=500)
    parser.add_argument("--embed-dim", type=int, default=32)
    parser.add_argument("--hidden-size", type=int, default=48)
    parser.add_argument("--score", default="general")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.015)
    parser.add_argument("--max-steps", type=int, default=1500)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--target", type=float, default=0.99)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    runs = []
    for seed in (int(seed) for seed in args.seeds.split(",")):
        for decoder in DECODERS:
            run = train_one(decoder, seed, args)
            runs.append(run)
            print(f"{decoder:9} seed {seed}: {run['parameters']:,} parameters, 99% at step {run['steps_to_target']}, "
                  f"test exact match {run['test_exact_match']:.3f}, {1000 * run['seconds_per_step']:.0f} ms/step",
                  flush=True)
    summary = {}
    for decoder in DECODERS:
        mine = [run for run in runs if run["decoder"] == decoder]
        reached = [run["steps_to_target"] for run in mine if run["steps_to_target"] is not None]
        summary[decoder] = {"parameters": mine[0]["parameters"], "reached": f"{len(reached)}/{len(mine)}",
                            "steps_to_target": spread(reached) if reached else None,
                            "test_exact_match": spread([100 * run["test_exact_match"] for run in mine]),
                            "ms_per_step": spread([1000 * run["seconds_per_step"] for run in mine])}
        print(f"{decoder:9}: {summary[decoder]}")
    if args.json:
        meta = {"command": "python " + shlex.join(["benchmarks/bahdanau_vs_luong.py", *sys.argv[1:]]),
                "python": platform.python_version(), "torch": torch.__version__, "threads": 1,
                "settings": {k: v for k, v in vars(args).items() if k != "json"}}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "runs": runs, "summary": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
