"""The options of ``attention-course train``, which the command line parses and the tasks read.

They live with the tasks, beneath the command line: a task asks which options were given
(``tasks.common.given_options``, against ``train_defaults``) without importing the command line,
which imports the tasks.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..tracks import TRACKS
from . import TASKS, model_choices

__all__ = ["add_train_arguments", "train_defaults"]


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


def add_train_arguments(train: argparse.ArgumentParser) -> None:
    """Every option of ``attention-course train``, added to ``train``."""
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


def train_defaults() -> dict:
    """Every option of ``attention-course train`` at its default: ``{name: value}``."""
    parser = argparse.ArgumentParser(add_help=False)
    add_train_arguments(parser)
    return vars(parser.parse_args([]))
