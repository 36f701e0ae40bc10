"""The Neural Turing Machine's copy task (chapter 10): the NTM, and an LSTM without memory as the
baseline, on either track.

Every step draws a fresh batch of random bit sequences (``attention_course.data.generate_copy_task``,
lengths ``min_length .. max_length``) from a generator seeded once, so a run is deterministic for its
seed. The loss is the mean binary cross-entropy of the output phase's bits (the track's
``"bit_cross_entropy"``); the score is the **bit accuracy**: the fraction of those bits that the sign
of the logit gets right. Training (the track's ``fit``: the one loop, ``training.run_training``)
stops at the first of ``max_steps``, ``max_seconds`` (wall-clock), ``max_cpu_seconds`` (the process's
CPU time: with the one thread a run uses, the time it takes on an idle core, whatever else the
machine runs) or a test bit accuracy >= ``target_accuracy`` (checked every ``eval_every`` steps on a
fixed test set), and keeps the weights of the best evaluation.

A checkpoint is a folder with ``config.json`` (the model's kind and size, and what the run measured)
and ``weights.npz``, readable by either track. ``attention-course train --task copy --model ntm``
(``train_command``) writes one.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..checkpoint import CheckpointError, read_folder, write_folder
from ..core.configs import NTMConfig, OptionError
from ..data import CopyTaskData, generate_copy_task
from ..tracks import get_track, track_of
from ..training import TrainConfig

__all__ = ["COPY_FORMAT", "COPY_MODELS", "CopyTrainConfig", "CopyTrainResult", "copy_model_config", "build_copy_model",
           "threads", "bit_accuracy", "predict", "evaluate_lengths", "train_copy", "save_copy_checkpoint",
           "load_copy_checkpoint", "train_command"]

COPY_FORMAT = "attention-course-copy-checkpoint/1"
COPY_MODELS = ("ntm", "lstm")
WIDTH = 8  # bits per vector, as in Graves et al.
# The LSTM baseline's width: 120 units give it about as many parameters as the default NTM
# (63,368 against 62,260).
LSTM_HIDDEN_SIZE = 120


@dataclass
class CopyTrainConfig:
    """How to train on the copy task. ``test_size`` sequences of lengths ``min_length .. max_length``
    (seed ``seed + 10_000``) are the test set that the stopping rule and the kept weights look at."""

    batch_size: int = 32
    lr: float = 1e-3
    max_grad_norm: float = 10.0
    min_length: int = 1
    max_length: int = 20
    width: int = WIDTH
    max_steps: int | None = None
    max_seconds: float | None = None
    max_cpu_seconds: float | None = None
    target_accuracy: float | None = None
    eval_every: int = 100
    test_size: int = 256
    seed: int = 0
    threads: int | None = 1  # the steps are many small operations: one thread is as fast, and robust to load

    def __post_init__(self) -> None:
        if all(value is None for value in (self.max_steps, self.max_seconds, self.max_cpu_seconds,
                                           self.target_accuracy)):
            raise ValueError("give at least one of max_steps, max_seconds, max_cpu_seconds, target_accuracy")
        if not 1 <= self.min_length <= self.max_length:
            raise ValueError(f"lengths: expected 1 <= min_length <= max_length, got {self.min_length}, "
                             f"{self.max_length}")
        for name in ("batch_size", "eval_every", "test_size", "width"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def train_config(self) -> TrainConfig:
        """The loop's settings (``training.TrainConfig``): the stopping rules, Adam's rate, the clipping,
        the evaluation schedule, the thread count."""
        return TrainConfig(batch_size=self.batch_size, lr=self.lr, max_grad_norm=self.max_grad_norm,
                           max_steps=self.max_steps, max_seconds=self.max_seconds,
                           max_cpu_seconds=self.max_cpu_seconds, target_accuracy=self.target_accuracy,
                           eval_every=self.eval_every, seed=self.seed, blas_threads=self.threads,
                           metric="test bit accuracy")


@dataclass
class CopyTrainResult:
    steps: int = 0
    # Until the stopping rule fired (the final evaluation not included).
    train_seconds: float = 0.0
    stopped_because: str = ""
    losses: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)  # (step, seconds, test bit accuracy)
    best_step: int | None = None  # the step whose weights training ended with
    # The process's CPU seconds (all threads) at each evaluation and at the end: with one thread,
    # what the run would take on an idle core, whatever else the machine was doing.
    evaluation_cpu_seconds: list = field(default_factory=list)
    cpu_seconds: float = 0.0

    @property
    def test_bit_accuracy(self) -> float | None:
        """The test bit accuracy of the weights training ended with (the best evaluation's)."""
        return max(accuracy for _, _, accuracy in self.evaluations) if self.evaluations else None

    def first_reaching(self, accuracy: float) -> tuple[int, float] | None:
        """``(step, seconds)`` of the first evaluation at or above ``accuracy``, or None."""
        for step, seconds, value in self.evaluations:
            if value >= accuracy:
                return step, seconds
        return None

    def cpu_seconds_reaching(self, accuracy: float) -> float | None:
        """The CPU seconds at the first evaluation at or above ``accuracy``, or None."""
        for (_, _, value), cpu in zip(self.evaluations, self.evaluation_cpu_seconds):
            if value >= accuracy:
                return cpu
        return None


def copy_model_config(kind: str, dtype: str = "float32", **sizes) -> dict:
    """The size of a copy-task model of ``kind`` ("ntm" or "lstm"), as plain values (a checkpoint's "config")."""
    if kind == "ntm":
        return NTMConfig(input_size=WIDTH + 1, output_size=WIDTH, dtype=dtype, **sizes).to_dict()
    if kind == "lstm":
        values = {"input_size": WIDTH + 1, "output_size": WIDTH, "hidden_size": LSTM_HIDDEN_SIZE, "dtype": dtype}
        unknown = sorted(set(sizes) - set(values))
        if unknown:
            raise ValueError(f"lstm: unknown sizes {unknown}; give hidden_size")
        return {**values, **sizes}
    raise ValueError(f"model: expected one of {list(COPY_MODELS)} for the copy task, got {kind!r}")


def build_copy_model(kind: str, config: dict, track: str = "torch", seed: int = 0):
    """A fresh NTM or LSTM baseline of ``track``, its weights drawn from ``seed`` (the same on both tracks)."""
    if kind not in COPY_MODELS:
        raise ValueError(f"model: expected one of {list(COPY_MODELS)} for the copy task, got {kind!r}")
    return get_track(track).build_model(kind, NTMConfig(**config) if kind == "ntm" else config, seed)


@contextmanager
def threads(count: int | None = 1):
    """Run with ``count`` threads for torch and the BLAS (None: as they are).

    The copy task's steps are many small operations: one thread is as fast as two, and two threads
    that spin-wait for each other slow down tenfold when another process wants the cores.
    """
    if count is None:
        yield
        return
    import sys

    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(count)
    try:
        with threadpool_limits(count, user_api="blas"):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(previous)


def predict(model, inputs: np.ndarray, chunk: int = 512) -> np.ndarray:
    """The model's logits for ``inputs`` (N, T, width + 1), as a NumPy array (N, T, width), without gradients."""
    with threads(1):
        return track_of(model).call(model, "forward", inputs, batch_size=chunk)


def _steps_needed(data: CopyTaskData) -> int:
    """Every row is done after its own 2 L + 1 steps: the batch needs no more than its longest row's."""
    return 2 * int(data.lengths.max()) + 1


def bit_accuracy(model, data: CopyTaskData) -> float:
    """The fraction of the output phase's bits whose logit has the right sign (> 0 for a 1)."""
    T = _steps_needed(data)
    logits = predict(model, data.inputs[:, :T])
    mask = data.target_mask[:, :T]
    return float(((logits[mask] > 0) == (data.targets[:, :T][mask] > 0.5)).mean())


def evaluate_lengths(model, lengths, n: int = 100, seed: int = 20_000) -> dict[int, float]:
    """Bit accuracy on ``n`` fresh sequences of each length in ``lengths`` (seed ``seed + length``)."""
    return {int(L): bit_accuracy(model, generate_copy_task(n, seed=seed + int(L), width=WIDTH, min_length=int(L),
                                                           max_length=int(L)))
            for L in lengths}


def train_copy(model, config: CopyTrainConfig, progress: bool = False,
               log: Callable[[str], None] | None = None) -> CopyTrainResult:
    """Train ``model`` (either track's NTM or LSTM baseline) on fresh copy-task batches until a stopping rule fires."""
    c = config
    test = generate_copy_task(c.test_size, seed=c.seed + 10_000, width=c.width, min_length=c.min_length,
                              max_length=c.max_length)
    rng = np.random.default_rng(c.seed)

    def draw() -> dict[str, np.ndarray]:
        data = generate_copy_task(c.batch_size, seed=rng, width=c.width, min_length=c.min_length,
                                  max_length=c.max_length)
        T = _steps_needed(data)
        return {"inputs": data.inputs[:, :T], "targets": data.targets[:, :T], "mask": data.target_mask[:, :T]}

    with threads(c.threads):
        trained = track_of(model).fit(model, draw, c.train_config(), lambda: bit_accuracy(model, test),
                                      loss="bit_cross_entropy", progress=progress, log=log)
    evaluations = list(zip((step for step, _ in trained.evaluations), trained.evaluation_seconds,
                           (accuracy for _, accuracy in trained.evaluations)))
    return CopyTrainResult(
        steps=trained.steps, train_seconds=trained.stopped_seconds, stopped_because=trained.stopped_because,
        losses=trained.losses,
        evaluations=[(step, round(seconds, 3), accuracy) for step, seconds, accuracy in evaluations],
        best_step=trained.restored_step if trained.restored_step is not None else
        (trained.evaluations[-1][0] if trained.evaluations else None),
        evaluation_cpu_seconds=[round(seconds, 3) for seconds in trained.evaluation_cpu_seconds],
        cpu_seconds=trained.stopped_cpu_seconds)


def save_copy_checkpoint(directory, kind: str, config: dict, model, extra: dict | None = None) -> Path:
    """Write ``config.json`` (kind, size, ``extra``) and ``weights.npz`` (float32) for a copy-task model."""
    weights = {name: value.astype(np.float32) for name, value in track_of(model).weights(model).items()}
    return write_folder(directory, {"format": COPY_FORMAT, "model": kind, "config": config, **(extra or {})}, weights,
                        compressed=True)


def load_copy_checkpoint(directory, track: str = "torch"):
    """Returns ``(model, description)``: the checkpoint's model on ``track``, in eval mode on the CPU.

    Raises:
        CheckpointError: a folder that is missing, incomplete, damaged or not a copy-task checkpoint.
        TrackError: an unknown track, or one whose library is not installed.
    """
    implementation = get_track(track)
    description, weights = read_folder(directory, COPY_FORMAT, "copy-task checkpoint", "a copy-task checkpoint")
    try:
        model = build_copy_model(description["model"], description["config"], track)
        implementation.load_weights(model, weights)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{directory}: damaged copy-task checkpoint ({error})") from None
    return implementation.to_device(model, "cpu"), description


def train_command(args, task) -> dict:
    """``attention-course train --task copy --model ntm|lstm``: train, measure, save; the JSON summary."""
    import sys

    if args.model not in task.models:
        raise OptionError(f"--model {args.model}: the copy task trains --model ntm or --model lstm")
    if args.device not in (None, "cpu") or args.amp:
        raise OptionError("the copy task trains on the CPU: drop --device and --amp")
    if args.train is not None or args.test is not None:
        raise OptionError("the copy task generates its own data: drop --train/--test")
    stopping = dict(max_steps=args.max_steps, max_seconds=args.max_seconds, max_cpu_seconds=args.max_cpu_seconds,
                    target_accuracy=args.target_accuracy)
    if all(value is None for value in stopping.values()):
        stopping.update(max_seconds=600.0, target_accuracy=0.999)
    config = CopyTrainConfig(batch_size=args.batch_size or 32, lr=args.lr or 1e-3, seed=args.seed, **stopping)
    size_name = {"ntm": "controller_size", "lstm": "hidden_size"}[args.model]
    model_config = copy_model_config(args.model, **({size_name: args.hidden_size} if args.hidden_size else {}))
    model = build_copy_model(args.model, model_config, args.track, seed=args.seed)
    n_parameters = get_track(args.track).num_parameters(model)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log(f"training {args.model} ({n_parameters:,} parameters, {args.track} track) on the copy task, lengths "
        f"{config.min_length}-{config.max_length}")
    result = train_copy(model, config, progress=not args.no_progress, log=log)
    log(f"stopped: {result.stopped_because}")
    by_length = evaluate_lengths(model, [10, 20, 30, 40, 60, 80], n=100)
    reached = result.first_reaching(0.99)
    summary = {
        "test_bit_accuracy": result.test_bit_accuracy,
        "bit_accuracy_by_length": by_length,
        "train_seconds": round(result.train_seconds, 3),
        "cpu_seconds": round(result.cpu_seconds, 3),
        "steps": result.steps,
        "seconds_to_99": None if reached is None else reached[1],
        "cpu_seconds_to_99": result.cpu_seconds_reaching(0.99),
        "steps_to_99": None if reached is None else reached[0],
        "stopped_because": result.stopped_because,
        "best_step": result.best_step,
        "parameters": n_parameters,
        "track": args.track,
        "model": args.model,
        "task": "copy",
        "seed": args.seed,
        "train_config": asdict(config),
    }
    out = args.out if args.out is not None else Path("runs") / f"copy-{args.model}"
    summary["command"] = _command_line(args, out)
    save_copy_checkpoint(out / "checkpoint", args.model, model_config, model, extra={"trained": summary})
    (out / "history.json").write_text(
        # five significant digits: an LSTM baseline makes tens of thousands of steps
        json.dumps({"losses": [float(f"{loss:.5g}") for loss in result.losses],
                    "evaluations": result.evaluations,
                    "evaluation_cpu_seconds": result.evaluation_cpu_seconds}) + "\n"
    )
    summary["checkpoint"] = str(out / "checkpoint")
    return summary


def _command_line(args, out: Path) -> str:
    """The command that trains this model again (the options that were given)."""
    parts = ["attention-course train --task copy", f"--model {args.model}", f"--track {args.track}",
             f"--seed {args.seed}"]
    for option, value in (("--max-seconds", args.max_seconds), ("--max-cpu-seconds", args.max_cpu_seconds),
                          ("--max-steps", args.max_steps),
                          ("--target-accuracy", args.target_accuracy), ("--hidden-size", args.hidden_size),
                          ("--batch-size", args.batch_size), ("--lr", args.lr)):
        if value is not None:
            parts.append(f"{option} {value:g}" if isinstance(value, float) else f"{option} {value}")
    return " ".join(parts + [f"--out {out}"])
