"""Why the scaled dot score starts slower than the dot score on dates (chapter 4).

Chapter 4's five-seed comparison (``dates_variants scores``) found that dividing the dot score
by sqrt(H) slowed the start of training. This experiment looks inside the first 100 steps of the
same two models (the chapter's dates model, the same data, settings and seeds as that
comparison: ``dates_variants.BASE`` with ``score="dot"`` or ``"scaled_dot"``) and records, every
10 steps, on the 500 test dates read with teacher forcing:

* ``largest_weight``: the mean over the output steps of the largest attention weight of the step
  (``1 / T_enc`` on average for uniform weights, 1 for weights on one position);
* ``score_spread``: the mean over the output steps of the standard deviation of the scores
  ``e_ij`` over the real source positions ``j`` (what the softmax turns into unequal weights);
* ``exact_match``: greedy decoding, all ten characters right.

At step 0 it also records how large the states are that the score compares: the standard
deviation of the components of the encoder states ``h_j`` (real positions) and of the decoder
states ``s_i``, and the size of the raw dot product ``s_i . h_j`` (its root mean square).

    .venv/bin/python -m tools.experiments.scaled_start     # about a minute

writes ``book/results/dates_scaled_start.json``. Deterministic for a seed, like the other
experiments: the same seeds give the same numbers on the same machine (float64 throughout).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from attention_course.numpy_track.attention import DotScore
from attention_course.numpy_track.decoding import greedy_translate
from attention_course.numpy_track.seq2seq import AttentionSeq2seq
from attention_course.numpy_track.trainer import Trainer
from attention_course.data import encode_pairs
from attention_course.training import TrainConfig, exact_match
from tools.experiments.common import RESULTS, Stopwatch, command_line, write_results
from tools.experiments.dates_variants import BASE, Setting, _config, load_dates

SCORES = ("dot", "scaled_dot")


def _score_layer(layer):
    """The model's score layer (a DotScore or ScaledDotScore), found among its children."""
    if isinstance(layer, DotScore):
        return layer
    for child in layer._children.values():
        found = _score_layer(child)
        if found is not None:
            return found
    return None


def probe(model, test) -> dict:
    """Teacher-forced attention on the test set: the largest weight and the scores' spread."""
    model.forward(test.source, test.source_mask, test.decoder_input, test.decoder_target)
    weights = model.attention_weights  # (N, T_dec, T_enc)
    N, T_dec, T_enc = weights.shape
    real = np.broadcast_to(test.source_mask[:, None, :], weights.shape)  # (N, T_dec, T_enc)
    steps = test.target_mask if getattr(test, "target_mask", None) is not None else np.ones((N, T_dec), bool)
    # log alpha_ij = e_ij - logsumexp_j e_ij: over the real j, its spread is the scores' spread.
    log_weights = np.log(np.where(real, np.maximum(weights, 1e-300), 1.0))
    count = real.sum(axis=-1)  # (N, T_dec)
    mean = (log_weights * real).sum(axis=-1) / count
    spread = np.sqrt((((log_weights - mean[..., None]) ** 2) * real).sum(axis=-1) / count)
    return {"largest_weight": float(weights.max(axis=-1)[steps].mean()),
            "score_spread": float(spread[steps].mean()),
            "uniform_weight": float((1.0 / count)[steps].mean())}


def state_sizes(model, test) -> dict:
    """At initialisation: how large the compared states and their raw dot products are."""
    model.forward(test.source, test.source_mask, test.decoder_input, test.decoder_target)
    encoder_states, decoder_states = _score_layer(model)._cache  # (N, T_enc, H), (N, T_dec, H)
    raw = decoder_states @ encoder_states.swapaxes(1, 2)  # (N, T_dec, T_enc): s_i . h_j
    real = np.broadcast_to(test.source_mask[:, None, :], raw.shape)
    return {"encoder_state_sd": float(encoder_states[test.source_mask].std()),
            "decoder_state_sd": float(decoder_states.std()),
            "raw_dot_rms": float(np.sqrt((raw[real] ** 2).mean())),
            "width": int(encoder_states.shape[-1])}


def run_one(score: str, seed: int, setting: Setting, data, every: int) -> dict:
    train_pairs, test_pairs, (source_vocab, target_vocab) = data
    train = encode_pairs(train_pairs, source_vocab, target_vocab)
    test = encode_pairs(test_pairs, source_vocab, target_vocab)
    targets = [target for _, target in test_pairs]
    model = AttentionSeq2seq(_config((source_vocab, target_vocab), {"score": score}),
                             rng=np.random.default_rng(seed))
    checks = [{"step": 0, **probe(model, test), "exact_match": 0.0}]
    at_start = state_sizes(model, test)

    def evaluate() -> float:
        accuracy = exact_match(greedy_translate(model, test, target_vocab)[0], targets)
        checks.append({"step": checks[-1]["step"] + every, **probe(model, test),
                       "exact_match": accuracy})
        return accuracy

    config = TrainConfig(batch_size=setting.batch_size, lr=setting.lr, max_steps=setting.max_steps,
                         eval_every=every, seed=seed, restore_best=False)
    Trainer(model, config).fit(train, evaluate, progress=False)
    return {"variant": score, "seed": seed, "at_start": at_start, "checks": checks}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS / "dates_scaled_start.json")
    args = parser.parse_args(argv)

    clock = Stopwatch()
    setting = dataclasses.replace(Setting(), max_steps=args.steps)
    data = load_dates(setting)
    records = []
    for score in SCORES:
        for seed in args.seeds:
            record = run_one(score, seed, setting, data, args.every)
            records.append(record)
            last = record["checks"][-1]
            clock.log(f"{score} seed {seed}: largest weight {last['largest_weight']:.3f}, "
                      f"exact match {last['exact_match']:.3f} after {last['step']} steps")
    settings = {"scores": list(SCORES), "seeds": args.seeds, "data_seed": 0, "track": "numpy",
                "every": args.every, "base": BASE, **dataclasses.asdict(setting)}
    path = write_results(args.out, "dates_scaled_start", settings, records, clock.seconds,
                         command_line("tools.experiments.scaled_start", argv))
    print(path)


if __name__ == "__main__":
    main()
