"""The command line: ``attention-course train`` and ``attention-course translate``.

``train`` trains a task of the registry (``attention_course.tasks``; ``--task``, default the
dates), or sequence pairs from TSV files, on either track: by default a seq2seq model with
attention on the dates, saving a checkpoint and a heat map of a few test alignments. It shows
progress on stderr and prints one JSON summary as its last line on stdout.
``translate`` loads a checkpoint and prints the output for each input with its alignment;
``doctor`` checks the installation.

Bad input (a missing or malformed file, an unknown character, an impossible option) gets a
one-line error on stderr that names the problem, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .core.configs import OptionError
from .tasks import FILES, TASKS, get_task, model_choices
from .tracks import TRACKS

EXIT_USAGE = 2


class UsageError(OptionError):
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
    train.add_argument("--model", choices=model_choices(), default="attention",
                       help="attention (default), the plain seq2seq bottleneck baseline, or the transformer; "
                            "on --task copy: ntm (the Neural Turing Machine) or lstm (its baseline without memory); "
                            "on --task classify*: attention, mean or last (how the states are pooled)")
    train.add_argument("--task", choices=sorted(TASKS), default="dates",
                       help="a built-in task: " + "; ".join(f"{name}: {task.description}"
                                                           for name, task in sorted(TASKS.items())))
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


def train_command(args) -> dict:
    """The task of ``--task`` trains itself (``tasks.Task.train_command``); pairs from ``--train``
    and ``--test`` train as sequence pairs, whatever ``--task`` says (it names the output folder)."""
    return (FILES if args.train is not None else get_task(args.task)).train_command(args)


def translate_command(args) -> list[dict]:
    from .checkpoint import load_checkpoint
    from .data import encode_pairs
    from .tasks.pairs import output_tokens
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
            drawn.append((weights[i], source_vocab.split(text), output_tokens(output, weights.shape[1], target_vocab)))
            if not args.no_alignment:
                print(alignment_text(*drawn[-1]) + "\n")
        results.append({"input": text, "output": output})
    if args.plot is not None and drawn:
        save_alignments(drawn, str(args.plot))
    return results


def main(argv: list[str] | None = None) -> int:
    from .checkpoint import CheckpointError
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
    except (OptionError, DataFormatError, UnknownCharacterError, CheckpointError) as error:
        print(f"attention-course {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"attention-course {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
