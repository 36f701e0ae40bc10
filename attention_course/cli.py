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
from .tasks import FILES, get_task
from .tasks.options import add_train_arguments
from .tracks import TRACKS

EXIT_USAGE = 2


class UsageError(OptionError):
    """A problem with what the user asked for: reported in one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attention-course", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a seq2seq model with attention",
                                description="Train a seq2seq model with attention and print a JSON summary last.")
    add_train_arguments(train)

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
