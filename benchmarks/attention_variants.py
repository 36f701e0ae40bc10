"""Chapter 8's experiments: global against local attention, soft against hard attention.

Three parts, each over several seeds, all with the torch track on the CPU (one thread):

* ``alignments``: the word-level translation task (sentences of 3-12 words, whose word orders
  differ), one model each with global, local-m and local-p attention (D = 2, general score),
  trained for the same number of steps: test exact match, word accuracy, seconds per training
  step, parameter counts, and the alignments of a few test sentences (seed 0; the model reads
  the reference translation, teacher-forced, so that its rows are the gold ones') next to the
  gold alignments: the analogue of Luong et al.'s alignment figure.
* ``soft_hard``: dates, soft (global) attention against hard attention trained by REINFORCE
  (no baseline, a moving average, a learned baseline) and by the straight-through
  Gumbel-softmax: learning curves (test exact match every 50 steps).
* ``variance``: the gradient of the score's ``W_a`` in the two hard-attention models with a
  baseline (REINFORCE with the moving average, and with the learned baseline; seed 0), at
  several points of their training, estimated many times on one fixed batch: the total
  variance of REINFORCE's estimate with the model's baseline and without one (the same
  samples), and of the straight-through Gumbel estimate, with the Gumbel estimate's
  distance from REINFORCE's mean (which is unbiased).

    .venv/bin/python benchmarks/attention_variants.py                   # all parts, ~25 min
    .venv/bin/python benchmarks/attention_variants.py --part variance   # one part

writes ``book/results/attention_variants.json`` (``--out`` to write elsewhere; a part run alone
replaces only its own entry). ``tests/benchmarks/test_attention_variants.py`` runs a small
instance of every part.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from attention_course.core.configs import Seq2seqConfig
from attention_course.data import (alignment_matrix, build_vocabularies, encode_pairs, generate_dates,
                                   generate_translation)
from attention_course.torch_track.decoding import greedy_decode
from attention_course.torch_track.seq2seq import AttentionSeq2seq
from attention_course.torch_track.trainer import Trainer
from attention_course.training import TrainConfig, exact_match

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "book" / "results" / "attention_variants.json"

ALIGNMENT_KINDS = ("global", "local-m", "local-p")
HARD_VARIANTS = {  # name: config fields
    "soft": {"attention": "global"},
    "hard, REINFORCE, no baseline": {"attention": "hard", "hard_baseline": "none"},
    "hard, REINFORCE, moving average": {"attention": "hard", "hard_baseline": "moving_average"},
    "hard, REINFORCE, learned baseline": {"attention": "hard", "hard_baseline": "learned"},
    "hard, Gumbel-softmax": {"attention": "hard", "hard_estimator": "gumbel"},
}
VARIANCE_MODELS = {"hard, REINFORCE, moving average": "moving_average",
                   "hard, REINFORCE, learned baseline": "learned"}
FULL = {
    "alignments": dict(n_train=6000, n_test=200, max_length=12, steps=800, embed_dim=32, hidden_size=48,
                       batch_size=64, lr=0.01, window=2, examples=2),
    "soft_hard": dict(n_train=8000, n_test=300, steps=600, eval_every=50, embed_dim=24, hidden_size=32,
                      batch_size=128, lr=0.02),
    "variance": dict(at_steps=(50, 100, 300, 600), batch=256, draws=60),
}


def mean_sd(values) -> dict:
    values = [float(v) for v in values]
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def n_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def build(source_vocab, target_vocab, settings: dict, seed: int, **fields) -> AttentionSeq2seq:
    torch.manual_seed(seed)
    config = Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=settings["embed_dim"],
                           hidden_size=settings["hidden_size"], reset_after=True, **fields)
    return AttentionSeq2seq(config, rng=np.random.default_rng(seed))


def word_accuracy(predictions: list[str], targets: list[str]) -> float:
    """The fraction of target words predicted in their place (a prediction shorter than its
    target misses the rest)."""
    right = total = 0
    for prediction, target in zip(predictions, targets):
        guess, words = prediction.split(" "), target.split(" ")
        right += sum(g == w for g, w in zip(guess, words))
        total += len(words)
    return right / total


# --- part 1: global, local-m, local-p on translation -------------------------------------------


@torch.no_grad()
def forced_alignments(model, pairs, source_vocab, target_vocab) -> np.ndarray:
    """The weights of every step while the model reads the reference target (teacher forcing),
    in eval mode: (N, T_dec, T_enc), a row per target word and one for <eos>."""
    batch = encode_pairs(pairs, source_vocab, target_vocab)
    model.eval()
    model(**{name: torch.from_numpy(getattr(batch, name)) for name in
             ("source", "source_mask", "decoder_input", "decoder_target", "target_mask")})
    return model.attention_weights.float().numpy()


def alignments(seeds, settings: dict, log=print) -> dict:
    s = settings
    runs, examples = [], []
    for seed in seeds:
        train_pairs, test_pairs = generate_translation(s["n_train"], s["n_test"], seed=seed, max_length=s["max_length"])
        source_vocab, target_vocab = build_vocabularies(train_pairs + test_pairs, level="word")
        train = encode_pairs(train_pairs, source_vocab, target_vocab)
        test = encode_pairs(test_pairs, source_vocab, target_vocab)
        targets = [target for _, target in test_pairs]
        shown = sorted(range(len(test_pairs)), key=lambda k: -len(test_pairs[k][0].split()))[:s["examples"]]
        for kind in ALIGNMENT_KINDS:
            model = build(source_vocab, target_vocab, s, seed, attention=kind, window=s["window"])
            config = TrainConfig(batch_size=s["batch_size"], lr=s["lr"], max_steps=s["steps"], seed=seed,
                                 restore_best=False)
            result = Trainer(model, config).fit(train, None, progress=False)
            decoded = greedy_decode(model, test, target_vocab)
            run = {"attention": kind, "seed": seed, "steps": result.steps,
                   "seconds_per_step": result.train_seconds / result.steps,
                   "exact_match": exact_match(decoded.texts, targets),
                   "word_accuracy": word_accuracy(decoded.texts, targets), "parameters": n_parameters(model),
                   "final_loss": result.losses[-1]}
            runs.append(run)
            log(f"alignments: {kind} seed {seed}: exact match {run['exact_match']:.3f}, words "
                f"{run['word_accuracy']:.3f}, {1000 * run['seconds_per_step']:.1f} ms/step")
            if seed == seeds[0]:
                forced = forced_alignments(model, [test_pairs[index] for index in shown], source_vocab,
                                           target_vocab)
                for position, index in enumerate(shown):
                    source, target = test_pairs[index]
                    if len(examples) <= position:
                        examples.append({"source": source.split(), "target": target.split(),
                                         "gold": alignment_matrix(source, target).tolist()})
                    length = len(target.split()) + 1  # the words and <eos>
                    weights = forced[position, :length, :len(source.split())]
                    examples[position][kind] = {"output": decoded.texts[index].split(),
                                                "weights": np.round(weights, 4).tolist()}
    summary = {kind: {key: mean_sd([r[key] for r in runs if r["attention"] == kind])
                      for key in ("exact_match", "word_accuracy", "seconds_per_step")}
               | {"parameters": next(r["parameters"] for r in runs if r["attention"] == kind)}
               for kind in ALIGNMENT_KINDS}
    return {"settings": s, "seeds": list(seeds), "runs": runs, "summary": summary, "examples": examples}


# --- part 2 and 3: soft against hard attention on dates ----------------------------------------


def dates_data(settings: dict, seed: int):
    train_pairs, test_pairs = generate_dates(settings["n_train"], settings["n_test"], seed=seed)
    source_vocab, target_vocab = build_vocabularies(train_pairs + test_pairs)
    return (source_vocab, target_vocab, encode_pairs(train_pairs, source_vocab, target_vocab),
            encode_pairs(test_pairs, source_vocab, target_vocab), [target for _, target in test_pairs])


def gradient_estimates(model, batch: dict, draws: int, mode: str) -> np.ndarray:
    """``draws`` estimates of the gradient of W_a on one batch; draw k uses noise seed 10_000 + k,
    so the modes see the same samples. ``mode``: "baseline" (the model's own), "none" (REINFORCE
    without a baseline) or "gumbel" (straight through). ``model`` is a copy, free to change."""
    attention = model.decoder.attention
    baseline = (attention.baseline, attention.baseline_value.clone(), attention.baseline_updates)
    attention.estimator = "gumbel" if mode == "gumbel" else "reinforce"
    attention.baseline = "none" if mode == "none" else baseline[0]
    model._reinforce = attention.estimator == "reinforce"
    W_a = attention.score.W_a
    estimates = []
    model.train()
    for k in range(draws):
        attention._generators.clear()
        attention.noise_seed = 10_000 + k
        attention.baseline_value.copy_(baseline[1])  # as it was: no update from these draws
        attention.baseline_updates = baseline[2]
        model.zero_grad(set_to_none=True)
        model(**batch).backward()
        estimates.append(W_a.grad.detach().cpu().numpy().ravel().copy())
    return np.stack(estimates)  # (draws, entries of W_a)


def measured_copy(model, mode: str):
    """A copy of ``model`` (weights and baseline) for one mode of ``gradient_estimates``: the
    model in training keeps its own noise generator and its baseline untouched."""
    copy = AttentionSeq2seq(model.config)
    copy.load_state_dict(model.state_dict())
    source, target = model.decoder.attention, copy.decoder.attention
    target.baseline_value.copy_(source.baseline_value)
    target.baseline_updates = source.baseline_updates
    return copy


def measure_variance(model, batch: dict, draws: int) -> dict:
    with_baseline, without, gumbel = (gradient_estimates(measured_copy(model, mode), batch, draws, mode)
                                      for mode in ("baseline", "none", "gumbel"))
    # REINFORCE is unbiased: the mean of its estimates (with the baseline, the less noisy) is
    # the true gradient up to a standard error of sqrt(total variance / draws).
    unbiased_mean = with_baseline.mean(axis=0)
    attention = model.decoder.attention
    return {"with_baseline": float(with_baseline.var(axis=0, ddof=1).sum()),
            "without_baseline": float(without.var(axis=0, ddof=1).sum()),
            "gumbel": float(gumbel.var(axis=0, ddof=1).sum()),
            "reinforce_mean_norm": float(np.linalg.norm(unbiased_mean)),
            "reinforce_mean_standard_error": float(np.sqrt(with_baseline.var(axis=0, ddof=1).sum() / draws)),
            "gumbel_distance_from_reinforce_mean": float(np.linalg.norm(gumbel.mean(axis=0) - unbiased_mean)),
            "baseline_value": float(attention.baseline_value) if attention.baseline == "moving_average" else None}


def soft_hard(seeds, settings: dict, variance_settings: dict | None, log=print, variants=None
              ) -> tuple[dict, dict | None]:
    """Train ``variants`` (default: all of ``HARD_VARIANTS``) over ``seeds``; with
    ``variance_settings``, measure the gradient's variance in the models of ``VARIANCE_MODELS``."""
    s = settings
    variants = list(HARD_VARIANTS) if variants is None else variants
    runs, variance = [], ({} if variance_settings is not None else None)
    for seed in seeds:
        source_vocab, target_vocab, train, test, targets = dates_data(s, seed)
        measure_batch = {name: torch.from_numpy(getattr(train.subset(np.arange(
            (variance_settings or {"batch": 1})["batch"])), name)) for name in
            ("source", "source_mask", "decoder_input", "decoder_target", "target_mask")}
        for name in variants:
            model = build(source_vocab, target_vocab, s, seed, **HARD_VARIANTS[name])
            measured = []
            wanted = variance_settings is not None and seed == seeds[0] and name in VARIANCE_MODELS
            evaluations = {"count": 0}

            def evaluate():
                evaluations["count"] += 1
                step = evaluations["count"] * s["eval_every"]
                if wanted and step in variance_settings["at_steps"]:
                    measured.append({"step": step} | measure_variance(model, measure_batch,
                                                                      variance_settings["draws"]))
                return exact_match(greedy_decode(model, test, target_vocab).texts, targets)

            if wanted and 0 in variance_settings["at_steps"]:
                measured.append({"step": 0} | measure_variance(model, measure_batch, variance_settings["draws"]))
            config = TrainConfig(batch_size=s["batch_size"], lr=s["lr"], max_steps=s["steps"],
                                 eval_every=s["eval_every"], seed=seed, restore_best=False)
            started = time.perf_counter()
            result = Trainer(model, config).fit(train, evaluate, progress=False)
            runs.append({"variant": name, "seed": seed, "evaluations": result.evaluations,
                         "final_exact_match": result.evaluations[-1][1], "best_exact_match":
                         max(a for _, a in result.evaluations), "parameters": n_parameters(model),
                         "wall_seconds": time.perf_counter() - started,
                         "losses": [float(np.mean(result.losses[i:i + 10])) for i in range(0, len(result.losses), 10)]})
            log(f"soft_hard: {name} seed {seed}: exact match {runs[-1]['final_exact_match']:.3f} "
                f"(best {runs[-1]['best_exact_match']:.3f})")
            if wanted:
                variance[VARIANCE_MODELS[name]] = {"model": name, "seed": seed, "points": measured}
                for point in measured:
                    log(f"variance ({name}) at step {point['step']}: with baseline "
                        f"{point['with_baseline']:.3g}, without {point['without_baseline']:.3g}, "
                        f"gumbel {point['gumbel']:.3g}")
    if variance is not None:
        variance["settings"] = {k: list(v) if isinstance(v, tuple) else v for k, v in variance_settings.items()}
    summary = {name: {"final_exact_match": mean_sd([r["final_exact_match"] for r in runs if r["variant"] == name]),
                      "best_exact_match": mean_sd([r["best_exact_match"] for r in runs if r["variant"] == name]),
                      "parameters": next(r["parameters"] for r in runs if r["variant"] == name)}
               for name in variants}
    return {"settings": s, "seeds": list(seeds), "runs": runs, "summary": summary}, variance


def run(parts, seeds, settings: dict | None = None, log=print) -> dict:
    """The results of ``parts`` ("alignments", "soft_hard", "variance") as a dict (see the module)."""
    settings = settings or FULL
    results = {}
    if "alignments" in parts:
        results["alignments"] = alignments(seeds, settings["alignments"], log)
    if "soft_hard" in parts or "variance" in parts:
        alone = "soft_hard" not in parts  # the variance only: train just the models it measures
        soft_hard_results, variance = soft_hard(seeds[:1] if alone else seeds, settings["soft_hard"],
                                                settings["variance"] if "variance" in parts else None, log,
                                                list(VARIANCE_MODELS) if alone else None)
        if "soft_hard" in parts:
            results["soft_hard"] = soft_hard_results
        if "variance" in parts:
            results["variance"] = variance
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["all", "alignments", "soft_hard", "variance"], default="all")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    parts = ("alignments", "soft_hard", "variance") if args.part == "all" else (args.part,)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    started = time.perf_counter()
    results = run(parts, seeds, log=lambda message: print(message, file=sys.stderr, flush=True))
    meta = {"command": "python " + shlex.join(["benchmarks/attention_variants.py", *sys.argv[1:]]),
            "python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "threads": 1, "minutes": round((time.perf_counter() - started) / 60, 1)}
    stored = json.loads(args.out.read_text()) if args.out.exists() else {}
    for part, result in results.items():
        stored[part] = result | {"meta": meta}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(stored, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
