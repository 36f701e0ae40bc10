"""The one training loop: batches, stopping rules, periodic evaluation, progress. Every task on
either track trains with it (a track's ``fit`` and ``Trainer`` supply the step).

A track supplies ``train_step(indices) -> (loss, grad_norm)`` (floats, or 0-d tensors that
are read only when needed, so a GPU is not made to wait at every step) and the task
``evaluate() -> accuracy`` (test exact match, bit accuracy, ...: ``TrainConfig.metric`` names it
in the progress lines). ``indices`` are the rows of a training set of ``n_examples`` rows, in
shuffled batches; for a task that draws a fresh batch at every step (``n_examples=None``, the
copy task) they are None. The loop stops at whichever comes first: ``epochs`` or ``max_steps``
done, ``max_seconds`` of wall-clock time or ``max_cpu_seconds`` of the process's CPU time (all
its threads) spent, or accuracy >= ``target_accuracy`` at an evaluation. ``train_seconds`` is
the wall time from the first step until the end (the final evaluation included),
``cpu_seconds`` the process's CPU time over the same span; ``stopped_seconds`` and
``stopped_cpu_seconds`` end where the stopping rule fired.

With ``snapshot``/``restore`` given (and ``TrainConfig.restore_best``), the weights of the best
evaluation are kept, and put back at the end if training later got worse (Adam at a constant
learning rate can spike late in a run): the result then reports the best step and its accuracy.
"""

from __future__ import annotations

import itertools
import json
import math
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .data import iterate_batches

__all__ = ["TrainConfig", "TrainResult", "run_training", "exact_match", "peak_rss_mb", "result_summary",
           "write_history"]


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB, to 0.1 MB.

    On Linux, VmHWM of /proc/self/status: ru_maxrss would also count the parent this process was
    forked from (the kernel carries it over exec), e.g. a test runner's hundreds of MB.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


@dataclass
class TrainConfig:
    batch_size: int = 128
    lr: float = 0.01
    max_grad_norm: float | None = 5.0
    epochs: int | None = None
    max_steps: int | None = None
    max_seconds: float | None = None
    # CPU seconds of this process (all threads): a budget that other work on the machine does not eat.
    max_cpu_seconds: float | None = None
    target_accuracy: float | None = None
    eval_every: int = 50
    seed: int = 0
    # NumPy track: the model's matrices are small, so one BLAS thread is as fast, and extra
    # threads that spin-wait collapse (10x slower) as soon as anything else wants the CPU.
    # None: leave the thread count as it is.
    blas_threads: int | None = 1
    restore_best: bool = True
    # What ``evaluate()`` returns, as the progress lines name it.
    metric: str = "test exact match"
    # The Transformer's schedule (core.schedules.warmup_inverse_sqrt): lr rises to ``lr`` over this
    # many steps, then falls as 1/sqrt(step). None: a constant rate.
    warmup_steps: int | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.warmup_steps is not None and self.warmup_steps < 1:
            raise ValueError(f"warmup_steps must be >= 1 or None, got {self.warmup_steps}")
        if all(value is None for value in (self.epochs, self.max_steps, self.max_seconds, self.max_cpu_seconds,
                                             self.target_accuracy)):
            raise ValueError("give at least one of epochs, max_steps, max_seconds, max_cpu_seconds, target_accuracy")


@dataclass
class TrainResult:
    steps: int = 0
    train_seconds: float = 0.0
    cpu_seconds: float = 0.0
    stopped_because: str = ""
    losses: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)  # (step, test exact match)
    grad_norms: list = field(default_factory=list)
    restored_step: int | None = None  # the step whose weights were put back, if any
    # Seconds since the start (wall-clock and the process's CPU) at each evaluation: after a
    # periodic one; for the final one, when the stopping rule fired (its weights are of that moment).
    evaluation_seconds: list = field(default_factory=list)
    evaluation_cpu_seconds: list = field(default_factory=list)
    stopped_seconds: float = 0.0  # when the stopping rule fired, before the final evaluation
    stopped_cpu_seconds: float = 0.0

    @property
    def test_exact_match(self) -> float | None:
        """The accuracy of the weights training ended with (the restored ones, if restored)."""
        if not self.evaluations:
            return None
        if self.restored_step is not None:
            return max(accuracy for step, accuracy in self.evaluations if step == self.restored_step)
        return self.evaluations[-1][1]


def result_summary(result: TrainResult) -> dict:
    """The training part of a run's JSON summary (the command line's and the chapter-9 tasks'),
    with the process's peak memory so far."""
    return {
        "train_seconds": round(result.train_seconds, 3),
        "cpu_seconds": round(result.cpu_seconds, 3),
        "steps": result.steps,
        "stopped_because": result.stopped_because,
        "restored_best_step": result.restored_step,
        "final_loss": result.losses[-1] if result.losses else None,
        "peak_rss_mb": peak_rss_mb(),
    }


def write_history(folder, result: TrainResult) -> None:
    """``folder/history.json``: the run's losses, evaluations and gradient norms, step by step."""
    history = {"losses": result.losses, "evaluations": result.evaluations, "grad_norms": result.grad_norms}
    (Path(folder) / "history.json").write_text(json.dumps(history) + "\n")


def exact_match(predictions: list[str], targets: list[str]) -> float:
    """The fraction of predictions equal to their target string."""
    if len(predictions) != len(targets):
        raise ValueError(f"exact_match: {len(predictions)} predictions for {len(targets)} targets")
    if not targets:
        raise ValueError("exact_match: no examples")
    return sum(p == t for p, t in zip(predictions, targets)) / len(targets)


def _as_floats(values: list) -> list[float]:
    return [float(v) for v in values]


def run_training(train_step: Callable[[np.ndarray | None], tuple], n_examples: int | None, config: TrainConfig,
                 evaluate: Callable[[], float] | None = None, progress: bool = True,
                 log: Callable[[str], None] | None = None, snapshot: Callable[[], object] | None = None,
                 restore: Callable[[object], None] | None = None) -> TrainResult:
    """Call ``train_step`` on shuffled batches of indices (None for each step when ``n_examples``
    is None: the step draws its own batch) until a stopping rule fires.

    After a normal stop: a final evaluation (unless the last step was just evaluated), and the
    best evaluation's weights put back if training got worse since. An exception from a step or
    an evaluation (Ctrl-C included) propagates at once: no further evaluation runs, and the
    model keeps the weights of its last step.
    """
    from tqdm.auto import tqdm

    c = config
    if n_examples is None and c.epochs is not None:
        raise ValueError("epochs: a task that draws a fresh batch at every step has no epochs; give max_steps")
    steps_per_epoch = None if n_examples is None else -(-n_examples // c.batch_size)
    total = c.max_steps if c.max_steps is not None else (c.epochs * steps_per_epoch if c.epochs else None)
    result = TrainResult()
    keep_best = c.restore_best and snapshot is not None and restore is not None
    best = None  # (accuracy, step, weights)
    start, cpu_start = time.perf_counter(), time.process_time()

    def evaluated(accuracy: float, at: tuple[float, float] | None = None) -> None:
        nonlocal best
        result.evaluations.append((result.steps, accuracy))
        seconds, cpu_seconds = at or (time.perf_counter() - start, time.process_time() - cpu_start)
        result.evaluation_seconds.append(seconds)
        result.evaluation_cpu_seconds.append(cpu_seconds)
        if keep_best and (best is None or accuracy > best[0]):
            best = (accuracy, result.steps, snapshot())

    bar = tqdm(total=total, disable=not progress, unit="step", dynamic_ncols=True, mininterval=0.5)
    try:
        _train(train_step, n_examples, c, evaluate, log, result, evaluated, bar, start, cpu_start)
    finally:
        bar.close()
    result.stopped_seconds = time.perf_counter() - start
    result.stopped_cpu_seconds = time.process_time() - cpu_start

    result.losses[:] = _as_floats(result.losses)
    result.grad_norms[:] = _as_floats(result.grad_norms)
    finite = not result.losses or math.isfinite(result.losses[-1])
    if not finite:
        result.stopped_because = result.stopped_because or "loss is not finite"
    if evaluate is not None and finite and (not result.evaluations or result.evaluations[-1][0] != result.steps):
        evaluated(evaluate(), at=(result.stopped_seconds, result.stopped_cpu_seconds))
    if keep_best and best is not None and (not finite or result.evaluations[-1][1] < best[0]):
        restore(best[2])
        result.restored_step = best[1]
        if log is not None:
            log(f"restored the weights of step {best[1]} ({c.metric} {best[0]:.4f}, the best evaluation)")
    result.train_seconds = time.perf_counter() - start
    result.cpu_seconds = time.process_time() - cpu_start
    return result


def _train(train_step, n_examples: int | None, c: TrainConfig, evaluate, log, result: TrainResult,
           evaluated: Callable[[float], None], bar, start: float, cpu_start: float) -> None:
    """The loop itself: steps, periodic checks and evaluations, until a stopping rule sets
    ``result.stopped_because``."""
    rng = np.random.default_rng(c.seed)
    read = 0  # losses before this index are already floats

    def loss_is_finite() -> bool:
        # Read the losses since the last check (one device sync), then decide.
        nonlocal read
        result.losses[read:] = _as_floats(result.losses[read:])
        read = len(result.losses)
        return math.isfinite(result.losses[-1])

    epoch = 0
    while True:
        batches = itertools.repeat(None) if n_examples is None else iterate_batches(n_examples, c.batch_size, rng)
        for indices in batches:
            loss, norm = train_step(indices)
            result.steps += 1
            result.losses.append(loss)
            result.grad_norms.append(norm)
            bar.update(1)
            evaluate_now = evaluate is not None and result.steps % c.eval_every == 0
            if result.steps % 10 == 0 or evaluate_now:
                if not loss_is_finite():
                    result.stopped_because = "loss is not finite"
                    return
                bar.set_postfix(loss=f"{result.losses[-1]:.3f}")
            if evaluate_now:
                accuracy = evaluate()
                evaluated(accuracy)
                bar.set_postfix({"loss": f"{result.losses[-1]:.3f}", c.metric.replace(" ", "_"): f"{accuracy:.3f}"})
                if log is not None:
                    log(f"step {result.steps}: loss {result.losses[-1]:.4f}, {c.metric} {accuracy:.4f}")
                if c.target_accuracy is not None and accuracy >= c.target_accuracy:
                    result.stopped_because = "target accuracy reached"
                    return
            if c.max_steps is not None and result.steps >= c.max_steps:
                result.stopped_because = "max_steps reached"
                return
            if c.max_seconds is not None and time.perf_counter() - start >= c.max_seconds:
                result.stopped_because = "max_seconds reached"
                return
            if c.max_cpu_seconds is not None and time.process_time() - cpu_start >= c.max_cpu_seconds:
                result.stopped_because = "max_cpu_seconds reached"
                return
        epoch += 1
        if c.epochs is not None and epoch >= c.epochs:
            result.stopped_because = "epochs done"
            return
