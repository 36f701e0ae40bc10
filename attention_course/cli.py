"""The command line: ``attention-course train`` and ``attention-course translate``.

``train`` trains a seq2seq model with attention (on either track) on the built-in dates task
or on pairs from TSV files, shows progress on stderr, saves a checkpoint and a heat map of a
few test alignments, and prints one JSON summary as its last line on stdout.
``translate`` loads a checkpoint and prints the output for each input with its alignment.

Bad input (a missing or malformed file, an unknown character, an impossible option) gets a
one-line error on stderr that names the problem, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from .tracks import TRACKS
from .training import peak_rss_mb, result_summary, write_history

EXIT_USAGE = 2


class UsageError(Exception):
    """A problem with what the user asked for: reported in one line, exit status 2."""


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1], got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attention-course", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a seq2seq model with attention",
                                description="Train a seq2seq model with attention and print a JSON summary last.")
    train.add_argument("--track", choices=sorted(TRACKS), default="numpy",
                       help="implementation to train (default: numpy)")
    train.add_argument("--device", help="torch track: 'cpu' (default) or 'cuda'")
    train.add_argument("--amp", action="store_true", help="torch track on CUDA: bfloat16 automatic mixed precision")
    train.add_argument("--model", choices=["attention", "seq2seq", "transformer", "ntm", "lstm", "mean", "last"],
                       default="attention",
                       help="attention (default), the plain seq2seq bottleneck baseline, or the transformer; "
                            "on --task copy: ntm (the Neural Turing Machine) or lstm (its baseline without memory); "
                            "on --task classify*: attention, mean or last (how the states are pooled)")
    train.add_argument("--task", choices=sorted(TASKS), default="dates",
                       help="a built-in task: " + "; ".join(f"{name}: {text}" for name, (_, text) in sorted(TASKS.items())))
    train.add_argument("--train", type=Path, help="training pairs, one 'source<TAB>target' a line (with --test)")
    train.add_argument("--test", type=Path, help="test pairs, same format (with --train)")
    train.add_argument("--level", choices=["character", "word"], default="character",
                       help="with --train/--test: a symbol is a character (default) or a space-separated word")
    train.add_argument("--n-train", type=_positive(int),
                       help="built-in task: training examples (default 20000; chapter 9's tasks: their own)")
    train.add_argument("--n-test", type=_positive(int),
                       help="built-in task: test examples (default 1000; chapter 9's tasks: their own)")
    train.add_argument("--target-accuracy", type=_fraction, help="stop once test exact match >= this")
    train.add_argument("--max-seconds", type=_positive(float), help="stop after this much training time")
    train.add_argument("--max-cpu-seconds", type=_positive(float),
                       help="stop after this many CPU seconds of the training process (all its threads): a "
                            "budget that other work on the machine does not eat")
    train.add_argument("--epochs", type=_positive(int), help="stop after this many passes over the training set")
    train.add_argument("--max-steps", type=_positive(int), help="stop after this many updates")
    train.add_argument("--seed", type=int, default=0, help="seed for the data, the weights and the batch order")
    train.add_argument("--out", type=Path, help="output folder (default: runs/<task>)")
    train.add_argument("--batch-size", type=_positive(int),
                       help="examples a step (default: 128; 256 with --device cuda, where a step costs the same)")
    train.add_argument("--lr", type=_positive(float), help="Adam's learning rate (default: per track, see README)")
    train.add_argument("--warmup-steps", type=_positive(int),
                       help="raise the rate to --lr over this many steps, then let it fall as 1/sqrt(step) "
                            "(default: the transformer's recipe; a constant rate for the other models)")
    train.add_argument("--embed-dim", type=_positive(int), default=32)
    train.add_argument("--hidden-size", type=_positive(int), help="per direction (default: per track, see README)")
    train.add_argument("--cell", choices=["gru", "lstm", "rnn"], default="gru")
    train.add_argument("--gru-form", choices=["lecture", "torch"],
                       help="the lectures' GRU (reset gate before the recurrent product) or torch's (after; the "
                            "fused kernels). Default: lecture on the numpy track, torch on the torch track")
    train.add_argument("--score", choices=["dot", "general", "additive", "scaled_dot"], default="general")
    train.add_argument("--unidirectional", action="store_true", help="a one-directional encoder")
    train.add_argument("--d-model", type=_positive(int), help="transformer: the model's width (default 64)")
    train.add_argument("--heads", type=_positive(int), help="transformer: attention heads per layer (default 4)")
    train.add_argument("--layers", type=_positive(int), help="transformer: encoder and decoder layers (default 2)")
    train.add_argument("--post-norm", action="store_true",
                       help="transformer: layer normalisation after each residual sum (default: before each sub-layer)")
    train.add_argument("--attention", choices=["global", "local-m", "local-p", "hard"], default="global",
                       help="global (default), local-m / local-p (a window around p_i), or hard (one sampled state)")
    train.add_argument("--window", type=_positive(int),
                       help="local attention: the window's half-width D (default 2)")
    train.add_argument("--hard-estimator", choices=["reinforce", "gumbel"],
                       help="hard attention: REINFORCE (default) or the straight-through Gumbel-softmax")
    train.add_argument("--baseline", choices=["none", "moving_average", "learned"],
                       help="hard attention with REINFORCE: the baseline (default moving_average)")
    train.add_argument("--decoder", choices=["luong", "bahdanau"], default="luong",
                       help="luong (default: query s_i, context after the recurrence) or bahdanau (query "
                            "s_{i-1}, context into the recurrence)")
    train.add_argument("--eval-every", type=_positive(int), default=25, help="evaluate on the test set every N steps")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")

    translate = commands.add_parser("translate", help="translate text with a trained checkpoint",
                                    description="Print the model's output for each text, and its alignment.")
    translate.add_argument("--checkpoint", type=Path, required=True, help="a folder written by 'train'")
    translate.add_argument("--track", choices=sorted(TRACKS), default="numpy", help="implementation to run")
    translate.add_argument("--device", default="cpu", help="torch track: 'cpu' or 'cuda'")
    translate.add_argument("--plot", type=Path, help="also save the alignment heat map(s) to this PNG")
    translate.add_argument("--no-alignment", action="store_true", help="print only the outputs")
    translate.add_argument("text", nargs="+", help="the text(s) to translate, e.g. 'september 27, 1994'")
    doctor = commands.add_parser("doctor", help="check the installation: versions, BLAS, CUDA",
                                 description="Print what the course runs on, and exit non-zero if something it "
                                             "needs is missing.")
    doctor.add_argument("--require", default="",
                        help="comma-separated extras that must be there too: grading, book, cuda")
    return parser


# The built-in tasks: name -> ("module:function", what it is). A sequence-to-sequence task's
# function returns (train pairs, test pairs, level); another kind of task's module trains itself.
TASKS = {
    "dates": ("attention_course.data.dates:generate_dates", "human-written dates to ISO dates (characters)"),
    "translation": ("attention_course.data.translation:generate_translation",
                    "a generated two-language grammar whose word orders differ (words)"),
    "copy": ("attention_course.ntm_copy:copy_command",
             "the Neural Turing Machine's copy task, random bit vectors to recall (--model ntm or lstm)"),
    "classify": ("attention_course.applications.classify:train_command",
                 "a BiGRU classifier whose pooling (--model attention|mean|last) must find five planted "
                 "keywords, the majority of which decides the label"),
    "classify-keyword": ("attention_course.applications.classify:train_command",
                         "the same, with planted keywords all of one kind"),
    "classify-order": ("attention_course.applications.classify:train_command",
                       "the same, where the order of 'ping' and 'pong' decides the label"),
    "caption": ("attention_course.applications.caption:train_command",
                "captions for images of coloured shapes, with soft attention over a grid of features"),
    "babi": ("attention_course.applications.question_answering:train_command",
             "bAbI-like question answering with an end-to-end memory network"),
}
WORD_LEVEL_TASKS = {"translation"}
# Tasks whose function takes the parsed arguments and returns the summary.
SELF_TRAINED_TASKS = {"copy", "classify", "classify-keyword", "classify-order", "caption", "babi"}


def _task_function(name: str):
    import importlib

    module, function = TASKS[name][0].split(":")
    return getattr(importlib.import_module(module), function)


def _load_data(args):
    """(train pairs, test pairs, task label, level) of a sequence-to-sequence task."""
    from .data import load_pairs_tsv

    if (args.train is None) != (args.test is None):
        raise UsageError("give both --train and --test, or neither (for a built-in task)")
    if args.train is not None:
        level = args.level
        return load_pairs_tsv(args.train), load_pairs_tsv(args.test), f"tsv:{args.train}", level
    train_pairs, test_pairs = _task_function(args.task)(args.n_train or 20000, args.n_test or 1000, seed=args.seed)
    return train_pairs, test_pairs, args.task, "word" if args.task in WORD_LEVEL_TASKS else "character"


def _output_tokens(output: str, steps: int, vocab) -> list[str]:
    """Row labels for an alignment: the output's symbols, then the end token if it was reached."""
    return (vocab.split(output) + ["<eos>"])[:steps]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _track_options(args, track) -> None:
    """Check the track's options, and fill in those whose default differs by track (chosen by benchmarks)."""
    track.check_options(args.device, args.amp)
    for name, value in {**track.DEFAULTS, **getattr(track, "MODEL_DEFAULTS", {}).get(args.model, {})}.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.batch_size is None:
        args.batch_size = track.default_batch_size(args.device)


def _variant_options(args) -> dict:
    """Chapter 8's options as config fields; a UsageError for one that does not apply."""
    if args.model != "attention" and (args.attention != "global" or args.decoder != "luong"):
        raise UsageError("--attention and --decoder choose the attention model's variants; "
                         "they do not apply to --model seq2seq")
    if args.window is not None and args.attention not in ("local-m", "local-p"):
        raise UsageError(f"--window is local attention's half-width; it does not apply to --attention {args.attention}")
    for option, value in (("--hard-estimator", args.hard_estimator), ("--baseline", args.baseline)):
        if value is not None and args.attention != "hard":
            raise UsageError(f"{option} is an option of hard attention; it does not apply to "
                             f"--attention {args.attention}")
    if args.baseline is not None and args.hard_estimator == "gumbel":
        raise UsageError("--baseline is REINFORCE's; the Gumbel-softmax estimator has none")
    if args.decoder == "bahdanau" and args.attention != "global":
        raise UsageError(f"--decoder bahdanau uses global attention; it does not combine with "
                         f"--attention {args.attention}")
    options = {"attention": args.attention, "decoder": args.decoder}
    for field, value in (("window", args.window), ("hard_estimator", args.hard_estimator),
                         ("hard_baseline", args.baseline)):
        if value is not None:
            options[field] = value
    return options


def _transformer_options(args) -> None:
    """A UsageError for a transformer option given to another model, or another model's option to the transformer."""
    given = [option for option, value in (("--d-model", args.d_model), ("--heads", args.heads),
                                          ("--layers", args.layers), ("--post-norm", args.post_norm)) if value]
    if args.model != "transformer" and given:
        raise UsageError(f"{given[0]} is an option of --model transformer; it does not apply to --model {args.model}")
    if args.model == "transformer":
        other = [option for option, value in (("--hidden-size", args.hidden_size), ("--gru-form", args.gru_form),
                                              ("--unidirectional", args.unidirectional)) if value]
        if other:
            raise UsageError(f"{other[0]} is an option of the recurrent models; the transformer's width is --d-model")
        if (args.d_model or 64) % (args.heads or 4):
            raise UsageError(f"--d-model {args.d_model or 64}: d_model must be a multiple of num_heads "
                             f"(--heads {args.heads or 4})")


def train_command(args) -> dict:
    if args.task in SELF_TRAINED_TASKS and args.train is None:
        return _task_function(args.task)(args)
    if args.model in ("ntm", "lstm"):
        raise UsageError(f"--model {args.model} trains on --task copy, not on sequence pairs")
    if args.model in ("mean", "last"):
        raise UsageError(f"--model {args.model} pools a classifier's states: it trains on --task classify, "
                         "classify-keyword or classify-order")
    _transformer_options(args)
    from .checkpoint import save_checkpoint
    from .core.configs import Seq2seqConfig, TransformerConfig
    from .data import build_vocabularies, encode_pairs
    from .tracks import get_track
    from .training import TrainConfig, exact_match
    from .viz import save_alignments

    track = get_track(args.track)
    _track_options(args, track)
    variant = _variant_options(args)
    train_pairs, test_pairs, task, level = _load_data(args)
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
                               reset_after=args.gru_form == "torch", **variant)
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

    n_parameters = sum(value.size for value in track.weights(model).values())
    _log(f"training {args.model} ({n_parameters:,} parameters, {args.track} track, {device}) on {task}: "
         f"{len(train_pairs):,} train / {len(test_pairs):,} test pairs")
    result = trainer.fit(train, evaluate, progress=not args.no_progress, log=_log)
    _log(f"stopped: {result.stopped_because}")

    out = args.out
    save_checkpoint(out / "checkpoint", args.model, config, track.weights(model), source_vocab, target_vocab,
                    max_output_length, extra={"task": task, "seed": args.seed, "trained_on": args.track})
    summary = {
        "test_exact_match": result.test_exact_match,
        **result_summary(result),
        "track": args.track,
        "device": device,
        "model": args.model,
        "attention": getattr(config, "attention", None),
        "decoder": getattr(config, "decoder", None),
        "task": task,
        "seed": args.seed,
        "checkpoint": str(out / "checkpoint"),
    }
    examples = test.subset(np.arange(min(4, len(test))))
    shown = track.greedy_decode(model, examples, target_vocab, max_output_length)
    predictions, attention = shown.texts, shown.attention_weights
    if attention is not None:
        drawn = [(attention[i], source_vocab.split(test_pairs[i][0]),
                  _output_tokens(predictions[i], attention.shape[1], target_vocab)) for i in range(len(predictions))]
        summary["alignments"] = save_alignments(drawn, str(out / "alignments.png"))
    write_history(out, result)
    summary["peak_rss_mb"] = peak_rss_mb()  # the whole command's: decoding and plotting included
    return summary


def translate_command(args) -> list[dict]:
    from .checkpoint import load_checkpoint
    from .data import encode_pairs
    from .tracks import get_track
    from .viz import alignment_text, save_alignments

    track = get_track(args.track)
    model, source_vocab, target_vocab, config = load_checkpoint(args.checkpoint, args.track, args.device)
    for text in args.text:
        if not text:
            raise UsageError("cannot translate an empty text")
        source_vocab.encode(text)  # raises UnknownCharacterError naming the character
    batch = encode_pairs([(text, "") for text in args.text], source_vocab, target_vocab)
    decoded = track.greedy_decode(model, batch, target_vocab, config["max_output_length"])
    outputs, weights = decoded.texts, decoded.attention_weights
    results, drawn = [], []
    for i, (text, output) in enumerate(zip(args.text, outputs)):
        print(output)
        if weights is not None:
            drawn.append((weights[i], source_vocab.split(text), _output_tokens(output, weights.shape[1], target_vocab)))
            if not args.no_alignment:
                print(alignment_text(*drawn[-1]) + "\n")
        results.append({"input": text, "output": output})
    if args.plot is not None and drawn:
        save_alignments(drawn, str(args.plot))
    return results


def main(argv: list[str] | None = None) -> int:
    from .checkpoint import CheckpointError
    from .core.configs import OptionError
    from .data import DataFormatError, UnknownCharacterError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            summary = train_command(args)
            print(json.dumps(summary), flush=True)
        elif args.command == "translate":
            translate_command(args)
        else:
            from .doctor import doctor_command

            return doctor_command(args)
    except (UsageError, OptionError, DataFormatError, UnknownCharacterError, CheckpointError) as error:
        print(f"attention-course {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"attention-course {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
