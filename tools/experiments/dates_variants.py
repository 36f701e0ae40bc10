"""Variants of the dates model compared over seeds: score functions (chapter 4), a
unidirectional against a bidirectional encoder (chapter 6), Luong's decoder against
Bahdanau's (chapter 5), deeper stacks with and without skip connections (chapter 7). A
variant with another hidden size matches the parameter count of the first.

Every run trains the NumPy track's ``AttentionSeq2seq`` on the same generated dates (8,000
training pairs, 500 test pairs, data seed 0) with Adam (learning rate 0.02; 0.005 for the
deep stacks), batches of 128, for a fixed number of steps, and scores greedy decoding on the
whole test set every 25 steps (exact match: all ten characters right). The variants of a
comparison differ only in the named setting; the seed (weights and batch order) runs over
``--seeds``. Parameter counts are recorded for every run.

    .venv/bin/python -m tools.experiments.dates_variants scores     # about 6 minutes
    .venv/bin/python -m tools.experiments.dates_variants encoder
    .venv/bin/python -m tools.experiments.dates_variants decoder
    .venv/bin/python -m tools.experiments.dates_variants skips --layers 4 --seeds 0 1 2 3 4

from the repository root; each writes ``book/results/dates_<comparison>.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track.decoding import greedy_translate
from attention_course.numpy_track.seq2seq import AttentionSeq2seq, Seq2seqConfig
from attention_course.numpy_track.trainer import Trainer
from attention_course.training import TrainConfig, exact_match
from tools.experiments.common import RESULTS, Stopwatch, command_line, write_results

# The chapters' dates model: a bidirectional GRU encoder, general score, Luong's decoder.
BASE = dict(embed_dim=24, hidden_size=32, cell="gru", bidirectional=True, score="general",
            reset_after=False)


COMPARISONS = ("scores", "encoder", "decoder", "skips")


@dataclass(frozen=True)
class Variant:
    name: str
    changes: dict = field(default_factory=dict)  # fields of Seq2seqConfig that differ from BASE


@dataclass(frozen=True)
class Setting:
    """What every run of a comparison shares."""

    n_train: int = 8000
    n_test: int = 500
    max_steps: int = 400
    eval_every: int = 25
    batch_size: int = 128
    lr: float = 0.02


# Deep stacks need a smaller step: at 0.02 neither 4-layer stack trains within 400 steps.
SETTINGS = {"skips": Setting(lr=0.005)}


def _config(vocabularies, changes: dict) -> Seq2seqConfig:
    source_vocab, target_vocab = vocabularies
    return Seq2seqConfig(len(source_vocab), len(target_vocab), **{**BASE, **changes})


def parameters(vocabularies, changes: dict) -> int:
    return AttentionSeq2seq(_config(vocabularies, changes), rng=0).num_parameters()


def matched_hidden_size(vocabularies, changes: dict, target: int) -> int:
    """The hidden size whose model (with ``changes``) has the parameter count closest to ``target``."""
    return min(range(8, 257), key=lambda H: abs(parameters(vocabularies, {**changes, "hidden_size": H})
                                                - target))


def variants(comparison: str, vocabularies, layers=(4, 8)) -> list[Variant]:
    """The variants of one comparison; the encoder comparison matches parameter counts.
    ``layers``: the depths of the skips comparison (encoder and decoder alike)."""
    if comparison == "scores":
        return [Variant(score, {"score": score}) for score in ("dot", "general", "additive", "scaled_dot")]
    if comparison == "encoder":
        bidirectional = parameters(vocabularies, {})
        matched = matched_hidden_size(vocabularies, {"bidirectional": False}, bidirectional)
        return [Variant("bidirectional", {}),
                Variant("unidirectional, same H", {"bidirectional": False}),
                Variant("unidirectional, same parameters", {"bidirectional": False, "hidden_size": matched})]
    if comparison == "skips":
        return [Variant(f"{depth} layers{' + skips' if residual else ''}",
                        {"num_layers": depth, "residual": residual})
                for depth in layers for residual in (False, True)]
    if comparison == "decoder":
        if "decoder" not in {f.name for f in dataclasses.fields(Seq2seqConfig)}:
            raise SystemExit("Seq2seqConfig has no 'decoder' field yet: the decoder comparison needs it")
        luong = parameters(vocabularies, {"decoder": "luong"})
        matched = matched_hidden_size(vocabularies, {"decoder": "bahdanau"}, luong)
        return [Variant("luong", {"decoder": "luong"}), Variant("bahdanau", {"decoder": "bahdanau"}),
                Variant("bahdanau, same parameters", {"decoder": "bahdanau", "hidden_size": matched})]
    raise ValueError(f"comparison: expected one of {COMPARISONS}, got {comparison!r}")


def load_dates(setting: Setting, data_seed: int = 0):
    train_pairs, test_pairs = generate_dates(setting.n_train, setting.n_test, seed=data_seed)
    vocabularies = build_vocabularies(train_pairs + test_pairs)
    return train_pairs, test_pairs, vocabularies


def run_variant(variant: Variant, seed: int, setting: Setting, data) -> dict:
    """Train one model; its test exact match every ``eval_every`` steps."""
    train_pairs, test_pairs, vocabularies = data
    source_vocab, target_vocab = vocabularies
    train = encode_pairs(train_pairs, source_vocab, target_vocab)
    test = encode_pairs(test_pairs, source_vocab, target_vocab)
    targets = [target for _, target in test_pairs]
    model = AttentionSeq2seq(_config(vocabularies, variant.changes), rng=np.random.default_rng(seed))

    def evaluate() -> float:
        return exact_match(greedy_translate(model, test, target_vocab)[0], targets)

    config = TrainConfig(batch_size=setting.batch_size, lr=setting.lr, max_steps=setting.max_steps,
                         eval_every=setting.eval_every, seed=seed, restore_best=False)
    result = Trainer(model, config).fit(train, evaluate, progress=False)
    reached = [step for step, accuracy in result.evaluations if accuracy >= 0.99]
    return {"variant": variant.name, "changes": variant.changes, "seed": seed,
            "parameters": int(model.num_parameters()), "curve": result.evaluations,
            "steps_to_99": reached[0] if reached else None,
            "final_exact_match": result.evaluations[-1][1],
            "final_training_loss": float(np.mean(result.losses[-25:])),
            "loss_curve": [round(float(np.mean(result.losses[start:start + setting.eval_every])), 4)
                           for start in range(0, len(result.losses), setting.eval_every)],
            "train_seconds": round(result.train_seconds, 1)}


def run(comparison: str, seeds, setting: Setting = Setting(), log=None,
        layers=(4, 8)) -> list[dict]:
    data = load_dates(setting)
    records = []
    for variant in variants(comparison, data[2], layers):
        for seed in seeds:
            record = run_variant(variant, seed, setting, data)
            records.append(record)
            if log is not None:
                log(f"{comparison} {variant.name} seed {seed}: {record['parameters']} parameters, "
                    f"99% at step {record['steps_to_99']}, final {record['final_exact_match']:.3f}")
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("comparison", choices=COMPARISONS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--layers", type=int, nargs="+", default=[4, 8],
                        help="skips: the depths to compare (default 4 8)")
    parser.add_argument("--out", type=Path, help="default: book/results/dates_<comparison>.json")
    args = parser.parse_args(argv)

    clock, setting = Stopwatch(), SETTINGS.get(args.comparison, Setting())
    records = run(args.comparison, args.seeds, setting, clock.log, tuple(args.layers))
    settings = {"comparison": args.comparison, "seeds": args.seeds, "data_seed": 0, "track": "numpy",
                **({"layers": args.layers} if args.comparison == "skips" else {}),
                "base": BASE, **dataclasses.asdict(setting)}
    out = args.out or RESULTS / f"dates_{args.comparison}.json"
    path = write_results(out, f"dates_{args.comparison}", settings, records, clock.seconds,
                         command_line("tools.experiments.dates_variants", argv))
    print(path)


if __name__ == "__main__":
    main()
