"""Bahdanau et al.'s Figure 2 on the course's translation task: BLEU by sentence length, plain
seq2seq against attention, over seeds; and alignments that follow the reordering.

The task (``attention_course.data.translation``) translates an English-like language into one
that puts the verb last and adjectives after the noun, so most word alignments cross. Every
model is trained with the NumPy track on the same pairs (data seed 0) with Adam, batches of 64,
and scored at each budget by greedy decoding of the test split: BLEU (sacrebleu's corpus BLEU,
over every test sentence and within bins of source length) and exact match.

Models:

* ``plain``: ``Seq2seq``, a unidirectional GRU encoder whose final state (H numbers) is all the
  decoder gets (Bahdanau et al.'s RNNencdec);
* ``bahdanau``: ``AttentionSeq2seq`` with a bidirectional GRU encoder (H/2 per direction, so its
  states h_j are H wide too), additive scores and Bahdanau's decoder (their RNNsearch);
* ``luong``: the same encoder with the general score and Luong's decoder (the course's default).

For the attention models, the seed-0 run also records the attention weights of a few test
sentences whose alignments cross, with their gold alignments, and every run records how often the
most-attended source word is the gold one (over output words that match the reference).

The attention models are scored after 500 and 1,500 steps; the plain model, which learns
far more slowly (chapter 1), also after 5,000 and 10,000.

    .venv/bin/python -m tools.experiments.translation_bleu       # about an hour on 2 cores
    .venv/bin/python -m tools.experiments.translation_bleu --models plain --update

from the repository root; it writes ``book/results/translation_bleu.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sacrebleu

from attention_course.data import (alignment_matrix, build_vocabularies, count_crossings, encode_pairs,
                                   generate_translation, word_alignment)
from attention_course.numpy_track.decoding import greedy_translate
from attention_course.numpy_track.seq2seq import AttentionSeq2seq, Seq2seq, Seq2seqConfig
from attention_course.numpy_track.trainer import Trainer
from attention_course.training import TrainConfig
from tools.experiments.common import RESULTS, Stopwatch, command_line, write_results


@dataclass(frozen=True)
class Setting:
    n_train: int = 12000
    n_test: int = 1000
    min_length: int = 3
    max_length: int = 30
    bin_width: int = 3               # source lengths min_length .. min_length + bin_width - 1, ...
    hidden_size: int = 64            # H: the width of the hand-over, and of every h_j and s_i
    embed_dim: int = 32
    budgets: tuple[int, ...] = (500, 1500)
    # The plain model learns far more slowly (chapter 1): it is also scored after more steps.
    plain_budgets: tuple[int, ...] = (500, 1500, 5000, 10000)
    batch_size: int = 64
    lr: float = 0.005
    alignment_examples: int = 3


MODELS = ("plain", "bahdanau", "luong")


def build(model: str, vocabularies, setting: Setting, seed: int):
    source_vocab, target_vocab = vocabularies
    H = setting.hidden_size
    sizes = dict(source_vocab_size=len(source_vocab), target_vocab_size=len(target_vocab),
                 embed_dim=setting.embed_dim, cell="gru")
    if model == "plain":
        return Seq2seq(Seq2seqConfig(**sizes, hidden_size=H, bidirectional=False), rng=seed)
    decoder, score = {"bahdanau": ("bahdanau", "additive"), "luong": ("luong", "general")}[model]
    config = Seq2seqConfig(**sizes, hidden_size=H // 2, bidirectional=True, score=score, decoder=decoder)
    return AttentionSeq2seq(config, rng=seed)


def bins(setting: Setting) -> list[tuple[int, int]]:
    edges = range(setting.min_length, setting.max_length + 1, setting.bin_width)
    return [(low, min(low + setting.bin_width - 1, setting.max_length)) for low in edges]


def bleu(hypotheses: list[str], references: list[str]) -> float:
    return float(sacrebleu.corpus_bleu(hypotheses, [references]).score)


def alignment_agreement(test_pairs, hypotheses, weights) -> float:
    """How often the most-attended source word is the gold one, over output words equal to the
    reference word at the same position (where the gold alignment says what "right" is)."""
    hits = total = 0
    for (source, reference), hypothesis, alignment in zip(test_pairs, hypotheses, weights):
        gold = {target_index: source_index for source_index, target_index in word_alignment(source)}
        for i, (word, expected) in enumerate(zip(hypothesis.split(), reference.split())):
            if word == expected:
                total += 1
                hits += int(np.argmax(alignment[i]) == gold[i])
    return hits / total if total else math.nan


def pick_examples(test_pairs, count: int, lengths=(9, 13)) -> list[int]:
    """Test sentences of middling length whose gold alignments cross the most."""
    candidates = [index for index, (source, _) in enumerate(test_pairs)
                  if lengths[0] <= len(source.split()) <= lengths[1]]
    candidates.sort(key=lambda index: -count_crossings(word_alignment(test_pairs[index][0])))
    return candidates[:count]


def run_model(model_name: str, seed: int, setting: Setting, data, log=None) -> list[dict]:
    """Train one model; a record per budget."""
    train_pairs, test_pairs, vocabularies = data
    source_vocab, target_vocab = vocabularies
    train = encode_pairs(train_pairs, source_vocab, target_vocab)
    test = encode_pairs(test_pairs, source_vocab, target_vocab)
    references = [target for _, target in test_pairs]
    source_lengths = np.array([len(source.split()) for source, _ in test_pairs])
    model = build(model_name, vocabularies, setting, seed)
    budgets = setting.plain_budgets if model_name == "plain" else setting.budgets
    every = math.gcd(*budgets)
    records, calls = [], 0

    def evaluate() -> float:
        nonlocal calls
        calls += 1
        step = calls * every
        if step not in budgets:
            return 0.0
        hypotheses, weights = greedy_translate(model, test, target_vocab)
        by_bin = []
        for low, high in bins(setting):
            chosen = np.flatnonzero((source_lengths >= low) & (source_lengths <= high))
            by_bin.append({"lengths": [low, high], "sentences": int(len(chosen)),
                           "bleu": bleu([hypotheses[i] for i in chosen], [references[i] for i in chosen]),
                           "exact_match": float(np.mean([hypotheses[i] == references[i] for i in chosen]))})
        record = {"model": model_name, "seed": seed, "budget": step,
                  "parameters": int(model.num_parameters()),
                  "bleu": bleu(hypotheses, references),
                  "exact_match": float(np.mean([h == r for h, r in zip(hypotheses, references)])),
                  "by_length": by_bin}
        if weights is not None:
            record["alignment_agreement"] = alignment_agreement(test_pairs, hypotheses, weights)
            if seed == 0 and step == max(budgets):
                record["alignments"] = [
                    {"source": test_pairs[i][0], "reference": references[i], "output": hypotheses[i],
                     "weights": np.round(weights[i, :len(hypotheses[i].split()) + 1,
                                                 :len(test_pairs[i][0].split())].astype(float),
                                         3).tolist(),
                     "gold": alignment_matrix(test_pairs[i][0]).astype(int).tolist()}
                    for i in pick_examples(test_pairs, setting.alignment_examples)]
        records.append(record)
        if log is not None:
            log(f"{model_name} seed {seed} step {step}: BLEU {record['bleu']:.1f}, "
                f"exact match {record['exact_match']:.3f}")
        return 0.0

    config = TrainConfig(batch_size=setting.batch_size, lr=setting.lr,
                         max_steps=max(budgets), eval_every=every, seed=seed,
                         restore_best=False)
    Trainer(model, config).fit(train, evaluate, progress=False)
    return records


def load_data(setting: Setting, data_seed: int = 0):
    train_pairs, test_pairs = generate_translation(setting.n_train, setting.n_test, seed=data_seed,
                                                   min_length=setting.min_length,
                                                   max_length=setting.max_length)
    return train_pairs, test_pairs, build_vocabularies(train_pairs + test_pairs, level="word")


def run(models, seeds, setting: Setting = Setting(), log=None) -> list[dict]:
    data = load_data(setting)
    return [record for model in models for seed in seeds
            for record in run_model(model, seed, setting, data, log)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS / "translation_bleu.json")
    parser.add_argument("--update", action="store_true",
                        help="keep the other models' records of --out, replace these models'")
    args = parser.parse_args(argv)

    clock, setting = Stopwatch(), Setting()
    records = run(args.models, args.seeds, setting, clock.log)
    models, seconds = list(args.models), clock.seconds
    command = command_line("tools.experiments.translation_bleu", argv)
    if args.update and args.out.exists():
        import json

        previous = json.loads(args.out.read_text(encoding="utf-8"))
        kept = [r for r in previous["records"] if r["model"] not in args.models]
        records = kept + records
        models = list(dict.fromkeys([r["model"] for r in kept] + models))
        seconds += previous["seconds"]
        history = previous.get("history", [previous["command"]]) + [command]
        command = command_line("tools.experiments.translation_bleu", ["--models", *models])
    else:
        history = [command]
    settings = {"models": models, "seeds": args.seeds, "data_seed": 0, "track": "numpy",
                "sacrebleu": sacrebleu.__version__, **dataclasses.asdict(setting)}
    path = write_results(args.out, "translation_bleu", settings, records, seconds, command,
                         history=history)
    print(path)


if __name__ == "__main__":
    main()
