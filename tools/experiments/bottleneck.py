"""Chapter 1's bottleneck, measured over seeds and training budgets.

Plain seq2seq (the decoder sees only the encoder's final state) against attention, on the toy
tasks of ``attention_course.data.toy``, with the NumPy track. For every condition and seed one
model is trained, and at each budget (a number of Adam steps of one run: the learning rate is
constant, so the weights after 3,000 steps of a 10,000-step run are those of a 3,000-step run)
greedy decoding is scored by exact match, per source length, on the test split and on 1,000
training examples.

Two parts:

* ``budgets``: the chapter's setting (sources of 3-16 characters over 10 letters, GRU, D = 16,
  H = 64): plain and attention on the reverse task, and plain on the copy task (Sutskever et
  al.'s reversed source: reading the source backwards turns copying into the reverse task);
* ``capacity``: where the bottleneck bites: sources of up to 30 characters, and a state of
  H = 16 as well as H = 64, at one budget.

    .venv/bin/python -m tools.experiments.bottleneck                  # both parts, ~30 min
    .venv/bin/python -m tools.experiments.bottleneck --part budgets   # one part

from the repository root; it writes ``book/results/bottleneck.json`` (``--out`` to write elsewhere).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from attention_course.data import build_vocabularies, encode_pairs, generate_toy_splits
from attention_course.numpy_track.decoding import greedy_translate
from attention_course.numpy_track.seq2seq import AttentionSeq2seq, Seq2seq, Seq2seqConfig
from attention_course.numpy_track.trainer import Trainer
from attention_course.training import TrainConfig
from tools.experiments.common import RESULTS, Stopwatch, command_line, write_results

MODELS = {"plain": Seq2seq, "attention": AttentionSeq2seq}


@dataclass(frozen=True)
class Condition:
    """One model on one task; every field but the seed is the same across its runs."""

    part: str
    task: str                  # "reverse" or "copy" (generate_toy_splits)
    model: str                 # "plain" or "attention"
    hidden_size: int
    min_length: int
    max_length: int
    budgets: tuple[int, ...]   # steps at which the model is scored
    n_train: int = 4000
    n_test: int = 1000
    n_train_scored: int = 1000
    alphabet: str = "abcdefghij"
    embed_dim: int = 16
    batch_size: int = 64
    lr: float = 0.01


def plan(part: str) -> list[Condition]:
    """The conditions of a part of the experiment."""
    budgets = (300, 1000, 3000, 10000)
    chapter = dict(part="budgets", hidden_size=64, min_length=3, max_length=16, budgets=budgets)
    conditions = {
        "budgets": [Condition(task="reverse", model="plain", **chapter),
                    Condition(task="reverse", model="attention", **chapter),
                    Condition(task="copy", model="plain", **chapter)],
        "capacity": [Condition(part="capacity", task="reverse", model=model, hidden_size=hidden,
                               min_length=3, max_length=30, budgets=(3000,))
                     for hidden in (16, 64) for model in ("plain", "attention")],
    }
    if part == "all":
        return conditions["budgets"] + conditions["capacity"]
    return conditions[part]


def _score(model, pairs, batch, target_vocab, lengths) -> dict:
    """Exact match overall and per source length (None where a length has no example)."""
    predictions, _ = greedy_translate(model, batch, target_vocab)
    correct = np.array([prediction == target for prediction, (_, target) in zip(predictions, pairs)])
    source_lengths = np.array([len(source) for source, _ in pairs])
    by_length = [float(correct[source_lengths == length].mean()) if (source_lengths == length).any()
                 else None for length in lengths]
    return {"exact_match": float(correct.mean()), "by_length": by_length}


def run_condition(condition: Condition, seed: int, data_seed: int = 0) -> list[dict]:
    """Train one model and score it at every budget: one record per (budget, split)."""
    c = condition
    train_pairs, test_pairs = generate_toy_splits(c.task, c.n_train, c.n_test, min_length=c.min_length,
                                                  max_length=c.max_length, seed=data_seed,
                                                  alphabet=c.alphabet)
    source_vocab, target_vocab = build_vocabularies(train_pairs + test_pairs)
    train = encode_pairs(train_pairs, source_vocab, target_vocab)
    splits = {"test": test_pairs, "train": train_pairs[:c.n_train_scored]}
    batches = {name: encode_pairs(pairs, source_vocab, target_vocab) for name, pairs in splits.items()}
    lengths = list(range(c.min_length, c.max_length + 1))

    config = Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=c.embed_dim,
                           hidden_size=c.hidden_size, cell="gru", bidirectional=False, score="general")
    model = MODELS[c.model](config, rng=seed)
    every = math.gcd(*c.budgets)
    records, calls = [], 0

    def evaluate() -> float:
        nonlocal calls
        calls += 1
        step = calls * every
        if step in c.budgets:
            for split, pairs in splits.items():
                scores = _score(model, pairs, batches[split], target_vocab, lengths)
                records.append({**asdict(c), "seed": seed, "budget": step, "split": split,
                                "lengths": lengths, **scores})
        return 0.0

    settings = TrainConfig(batch_size=c.batch_size, lr=c.lr, max_steps=max(c.budgets), eval_every=every,
                           seed=seed, restore_best=False)
    result = Trainer(model, settings).fit(train, evaluate, progress=False)
    final_loss = float(np.mean(result.losses[-50:]))
    for record in records:
        record["parameters"] = int(model.num_parameters())
        record["final_training_loss"] = final_loss
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["budgets", "capacity", "all"], default="all")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS / "bottleneck.json")
    args = parser.parse_args(argv)

    clock, records = Stopwatch(), []
    for condition in plan(args.part):
        for seed in args.seeds:
            new = run_condition(condition, seed)
            records += new
            best = max((r for r in new if r["split"] == "test"), key=lambda r: r["budget"])
            clock.log(f"{condition.part} {condition.task} {condition.model} H={condition.hidden_size} "
                      f"seed {seed}: test exact match {best['exact_match']:.3f} at {best['budget']} steps")
    settings = {"part": args.part, "seeds": args.seeds, "data_seed": 0, "track": "numpy",
                "cell": "gru", "bidirectional": False, "score": "general", "optimizer": "Adam"}
    path = write_results(args.out, "bottleneck", settings, records, clock.seconds,
                         command_line("tools.experiments.bottleneck", argv))
    print(path)


if __name__ == "__main__":
    main()
