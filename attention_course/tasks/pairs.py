"""Sequence pairs, text in and text out: dates, the translation grammar, or pairs from TSV files.

``attention-course train`` on these trains a seq2seq model (on either track): the attention model
of chapters 2-8 (``--model attention``, with chapter 8's variants), the plain bottleneck of chapter 1
(``seq2seq``) or chapter 10's Transformer (``transformer``). It shows progress on stderr, saves a
checkpoint (``attention_course.checkpoint``; ``attention-course translate`` reads it) and a heat
map of a few test alignments, and returns the JSON summary. The track builds, trains and decodes
(``make_trainer``: the one loop, ``training.run_training``); its defaults fill in what differs by
track.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.configs import OptionError
from ..training import peak_rss_mb, result_summary, write_history
from .common import RESET_AFTER, log_to_stderr

__all__ = ["MODELS", "output_tokens", "train_command"]

MODELS = ("attention", "seq2seq", "transformer")


def _load_data(args, task):
    """(train pairs, test pairs, task label, level) of ``task``, or of the TSV files given."""
    from ..data import load_pairs_tsv

    if (args.train is None) != (args.test is None):
        raise OptionError("give both --train and --test, or neither (for a built-in task)")
    if args.train is not None:
        level = args.level
        return load_pairs_tsv(args.train), load_pairs_tsv(args.test), f"tsv:{args.train}", level
    train_pairs, test_pairs = task.make_data()(args.n_train or 20000, args.n_test or 1000, seed=args.seed)
    return train_pairs, test_pairs, task.name, task.settings["level"]


def output_tokens(output: str, steps: int, vocab) -> list[str]:
    """Row labels for an alignment: the output's symbols, then the end token if it was reached."""
    return (vocab.split(output) + ["<eos>"])[:steps]


def _track_options(args, track) -> None:
    """Check the track's options, and fill in those whose default differs by track (chosen by benchmarks)."""
    track.check_options(args.device, args.amp)
    for name, value in {**track.DEFAULTS, **track.MODEL_DEFAULTS.get(args.model, {})}.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.batch_size is None:
        args.batch_size = track.default_batch_size(args.device)


def _variant_options(args) -> dict:
    """Chapter 8's options as config fields; an OptionError for one that does not apply."""
    if args.model != "attention" and (args.attention != "global" or args.decoder != "luong"):
        raise OptionError("--attention and --decoder choose the attention model's variants; "
                          "they do not apply to --model seq2seq")
    if args.window is not None and args.attention not in ("local-m", "local-p"):
        raise OptionError(f"--window is local attention's half-width; it does not apply to "
                          f"--attention {args.attention}")
    for option, value in (("--hard-estimator", args.hard_estimator), ("--baseline", args.baseline)):
        if value is not None and args.attention != "hard":
            raise OptionError(f"{option} is an option of hard attention; it does not apply to "
                              f"--attention {args.attention}")
    if args.baseline is not None and args.hard_estimator == "gumbel":
        raise OptionError("--baseline is REINFORCE's; the Gumbel-softmax estimator has none")
    if args.decoder == "bahdanau" and args.attention != "global":
        raise OptionError(f"--decoder bahdanau uses global attention; it does not combine with "
                          f"--attention {args.attention}")
    options = {"attention": args.attention, "decoder": args.decoder}
    for field, value in (("window", args.window), ("hard_estimator", args.hard_estimator),
                         ("hard_baseline", args.baseline)):
        if value is not None:
            options[field] = value
    return options


def _transformer_options(args) -> None:
    """An OptionError for a transformer option given to another model, or another model's option to the transformer."""
    given = [option for option, value in (("--d-model", args.d_model), ("--heads", args.heads),
                                          ("--layers", args.layers), ("--post-norm", args.post_norm)) if value]
    if args.model != "transformer" and given:
        raise OptionError(f"{given[0]} is an option of --model transformer; it does not apply to --model {args.model}")
    if args.model == "transformer":
        other = [option for option, value in (("--hidden-size", args.hidden_size), ("--gru-form", args.gru_form),
                                              ("--unidirectional", args.unidirectional)) if value]
        if other:
            raise OptionError(f"{other[0]} is an option of the recurrent models; the transformer's width is --d-model")
        if (args.d_model or 64) % (args.heads or 4):
            raise OptionError(f"--d-model {args.d_model or 64}: d_model must be a multiple of num_heads "
                              f"(--heads {args.heads or 4})")


def train_command(args, task) -> dict:
    """``attention-course train`` on ``task`` (dates, translation), or on the pairs of ``--train`` and
    ``--test``: train, save the checkpoint, the alignments and ``history.json``; the JSON summary."""
    if args.model in ("ntm", "lstm"):
        raise OptionError(f"--model {args.model} trains on --task copy, not on sequence pairs")
    if args.model in ("mean", "last"):
        raise OptionError(f"--model {args.model} pools a classifier's states: it trains on --task classify, "
                          "classify-keyword or classify-order")
    _transformer_options(args)
    from ..checkpoint import save_checkpoint
    from ..core.configs import Seq2seqConfig, TransformerConfig
    from ..data import build_vocabularies, encode_pairs
    from ..tracks import get_track
    from ..training import TrainConfig, exact_match
    from ..viz import save_alignments

    track = get_track(args.track)
    _track_options(args, track)
    variant = _variant_options(args)
    train_pairs, test_pairs, label, level = _load_data(args, task)
    if args.out is None:
        args.out = Path("runs") / args.task
    source_vocab, target_vocab = build_vocabularies(train_pairs + test_pairs, level=level)
    train = encode_pairs(train_pairs, source_vocab, target_vocab)
    test = encode_pairs(test_pairs, source_vocab, target_vocab)
    max_output_length = max(train.decoder_target.shape[1], test.decoder_target.shape[1])
    test_targets = [target for _, target in test_pairs]

    if args.model == "transformer":
        config = TransformerConfig(len(source_vocab), len(target_vocab), d_model=args.d_model or 64,
                                   num_heads=args.heads or 4, num_layers=args.layers or 2,
                                   norm_first=not args.post_norm)
    else:
        config = Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=args.embed_dim,
                               hidden_size=args.hidden_size, cell=args.cell, score=args.score,
                               bidirectional=not args.unidirectional and args.model == "attention",
                               reset_after=RESET_AFTER[args.gru_form], **variant)
    stopping = dict(epochs=args.epochs, max_steps=args.max_steps, max_seconds=args.max_seconds,
                    max_cpu_seconds=args.max_cpu_seconds, target_accuracy=args.target_accuracy)
    if all(value is None for value in stopping.values()):
        stopping.update(epochs=3, target_accuracy=0.999)
    train_config = TrainConfig(batch_size=args.batch_size, lr=args.lr, eval_every=args.eval_every, seed=args.seed,
                               warmup_steps=args.warmup_steps, **stopping)
    model = track.build_model(args.model, config, seed=args.seed)
    trainer = track.make_trainer(model, train_config, device=args.device, amp=args.amp)
    device = str(getattr(trainer, "device", "cpu"))

    def evaluate() -> float:
        return exact_match(track.greedy_decode(model, test, target_vocab, max_output_length).texts, test_targets)

    n_parameters = track.num_parameters(model)
    log_to_stderr(f"training {args.model} ({n_parameters:,} parameters, {args.track} track, {device}) on {label}: "
         f"{len(train_pairs):,} train / {len(test_pairs):,} test pairs")
    result = trainer.fit(train, evaluate, progress=not args.no_progress, log=log_to_stderr)
    log_to_stderr(f"stopped: {result.stopped_because}")

    out = args.out
    save_checkpoint(out / "checkpoint", args.model, config, track.weights(model), source_vocab, target_vocab,
                    max_output_length, extra={"task": label, "seed": args.seed, "trained_on": args.track})
    summary = {
        "test_exact_match": result.test_exact_match,
        **result_summary(result),
        "track": args.track,
        "device": device,
        "model": args.model,
        "attention": getattr(config, "attention", None),
        "decoder": getattr(config, "decoder", None),
        "task": label,
        "seed": args.seed,
        "checkpoint": str(out / "checkpoint"),
    }
    examples = test.subset(np.arange(min(4, len(test))))
    shown = track.greedy_decode(model, examples, target_vocab, max_output_length)
    predictions, attention = shown.texts, shown.attention_weights
    if attention is not None:
        drawn = [(attention[i], source_vocab.split(test_pairs[i][0]),
                  output_tokens(predictions[i], attention.shape[1], target_vocab)) for i in range(len(predictions))]
        summary["alignments"] = save_alignments(drawn, str(out / "alignments.png"))
    write_history(out, result)
    summary["peak_rss_mb"] = peak_rss_mb()  # the whole command's: decoding and plotting included
    return summary
