"""What the three tasks share: training either track's model on arrays, and the command line's rules.

A model of either track here computes its loss from named arrays: ``model.forward(**batch)``
returns the loss (NumPy: a float, then ``model.backward()`` fills the gradients; torch: a 0-d
tensor for autograd). ``fit`` draws batches of rows from those arrays and runs the shared loop
(``attention_course.training.run_training``): Adam, gradient clipping, periodic evaluation,
the best evaluation's weights kept.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.configs import OptionError
from ..training import TrainConfig, TrainResult, run_training, write_history

__all__ = ["TaskRun", "fit", "call", "num_parameters", "given_options", "check_options", "stopping_rules"]


@dataclass
class TaskRun:
    """What a task's ``train`` returns: the trained model, its summary and what it was measured on."""

    model: object
    summary: dict
    result: TrainResult
    test: object = None
    extra: dict = field(default_factory=dict)


def _to_torch(value, device):
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value)).to(device)
    return value


def call(model, track: str, method: str, *args, batch_size: int = 512, **kwargs):
    """``model.<method>(*args, **kwargs)`` on NumPy arrays, in chunks of ``batch_size`` rows; NumPy results.

    On the torch track the arrays become tensors on the model's device and the call runs
    without autograd in eval mode; tensors come back as NumPy arrays. Results (arrays, or
    tuples of arrays) are joined along the first axis.
    """
    arrays = [value for value in (*args, *kwargs.values()) if isinstance(value, np.ndarray)]
    N = arrays[0].shape[0] if arrays else 0
    chunks = []
    for start in range(0, max(N, 1), batch_size):
        rows = slice(start, start + batch_size)
        part_args = [value[rows] if isinstance(value, np.ndarray) else value for value in args]
        part_kwargs = {name: value[rows] if isinstance(value, np.ndarray) else value for name, value in kwargs.items()}
        chunks.append(_call_once(model, track, method, part_args, part_kwargs))
    if len(chunks) == 1:
        return chunks[0]
    if isinstance(chunks[0], tuple):
        return tuple(np.concatenate(parts) for parts in zip(*chunks))
    return np.concatenate(chunks)


def _call_once(model, track: str, method: str, args, kwargs):
    if track == "numpy":
        return getattr(model, method)(*args, **kwargs)
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = getattr(model, method)(*(_to_torch(a, device) for a in args),
                                         **{name: _to_torch(value, device) for name, value in kwargs.items()})
    finally:
        model.train(was_training)
    if isinstance(out, tuple):
        return tuple(_tensor_to_numpy(part) for part in out)
    return _tensor_to_numpy(out)


def _tensor_to_numpy(value):
    if not hasattr(value, "detach"):
        return value
    value = value.detach().cpu()
    return value.float().numpy() if str(value.dtype) in ("torch.bfloat16", "torch.float16") else value.numpy()


def num_parameters(model, track: str) -> int:
    """The number of trained parameters."""
    if track == "numpy":
        return model.num_parameters()
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def fit(model, track: str, data: dict[str, np.ndarray], config: TrainConfig,
        evaluate: Callable[[], float] | None = None, progress: bool = False,
        log: Callable[[str], None] | None = None, device: str = "cpu") -> TrainResult:
    """Train ``model`` on batches of rows of ``data`` (its ``forward``'s keyword arrays) with Adam.

    Stops by the rules of ``config``; ``evaluate()`` returns the test accuracy that the rules
    and the choice of the best weights go by.
    """
    n_examples = len(next(iter(data.values())))
    if track == "numpy":
        return _fit_numpy(model, data, n_examples, config, evaluate, progress, log)
    return _fit_torch(model, data, n_examples, config, evaluate, progress, log, device)


def _fit_numpy(model, data, n_examples, config, evaluate, progress, log) -> TrainResult:
    from threadpoolctl import threadpool_limits

    from ..numpy_track.optim import Adam, clip_grad_norm

    optimizer = Adam(model, lr=config.lr)
    grads = [grad for _, _, grad in model.named_parameters()]

    def step(indices: np.ndarray):
        loss = model.forward(**{name: value[indices] for name, value in data.items()})
        model.backward()
        norm = clip_grad_norm(grads, config.max_grad_norm)
        optimizer.step()
        return loss, norm

    limits = nullcontext() if config.blas_threads is None else threadpool_limits(config.blas_threads, user_api="blas")
    with limits:
        return run_training(step, n_examples, config, evaluate, progress, log, snapshot=model.state_dict,
                            restore=model.load_state_dict)


def _fit_torch(model, data, n_examples, config, evaluate, progress, log, device) -> TrainResult:
    import torch

    from ..torch_track.trainer import resolve_device

    device = resolve_device(device)
    model.to(device)
    tensors = {name: _to_torch(value, device) for name, value in data.items()}
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=config.lr)
    max_norm = config.max_grad_norm if config.max_grad_norm is not None else float("inf")

    def step(indices: np.ndarray):
        index = torch.from_numpy(indices).to(device)
        loss = model(**{name: value.index_select(0, index) for name, value in tensors.items()})
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        optimizer.step()
        return loss.detach(), norm.detach()

    def snapshot():
        return {name: value.detach().clone() for name, value in model.state_dict().items()}

    threads = config.blas_threads if device.type == "cpu" else None
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    model.train()
    try:
        return run_training(step, n_examples, config, evaluate, progress, log, snapshot=snapshot,
                            restore=model.load_state_dict)
    finally:
        torch.set_num_threads(previous)


# --- the command line ---------------------------------------------------------------------------

# The options of ``attention-course train`` that the chapter-9 tasks read.
TASK_OPTIONS = frozenset({"task", "track", "device", "model", "n_train", "n_test", "epochs", "max_steps",
                          "max_seconds", "max_cpu_seconds", "target_accuracy", "seed", "out", "batch_size", "lr",
                          "embed_dim", "hidden_size", "eval_every", "no_progress"})


def given_options(args) -> set[str]:
    """The options of ``attention-course train`` set to something other than their default."""
    from ..cli import build_parser

    defaults = vars(build_parser().parse_args(["train"]))
    return {name for name, value in vars(args).items() if name in defaults and value != defaults[name]}


def check_options(args, allowed: set[str]) -> set[str]:
    """The options given; an OptionError (one line, exit status 2) naming those that do not apply to the task."""
    given = given_options(args)
    wrong = sorted(given - set(allowed))
    if wrong:
        listed = ", ".join("--" + name.replace("_", "-") for name in wrong)
        raise OptionError(f"{listed}: not an option of the {args.task!r} task")
    return given


def check_task_command(args, allowed: set[str], models: tuple[str, ...], models_said: str) -> set[str]:
    """The options given to a task's ``attention-course train``: an OptionError (one line, exit
    status 2) for an option the task does not read, a ``--model`` not in ``models`` (what the task
    trains: ``models_said``), or a GPU asked of the NumPy track."""
    given = check_options(args, allowed)
    if args.model not in models:
        raise OptionError(f"--model {args.model}: the {args.task!r} task {models_said}")
    if args.device not in (None, "cpu") and args.track == "numpy":
        raise OptionError(f"device {args.device!r}: the NumPy track runs on the CPU; for a GPU use --track torch")
    return given


def log_to_stderr(message: str) -> None:
    """Progress lines of the command line (standard output keeps the JSON summary)."""
    print(message, file=sys.stderr, flush=True)


def finish_command(args, run) -> dict:
    """Write the run's ``history.json`` under ``--out`` (default ``runs/<task>``) and return its summary."""
    out = Path(args.out) if args.out is not None else Path("runs") / args.task
    out.mkdir(parents=True, exist_ok=True)
    write_history(out, run.result)
    return run.summary


def stopping_rules(args, defaults: dict) -> dict:
    """The stopping options given on the command line, or ``defaults`` when none is."""
    rules = {name: getattr(args, name) for name in ("epochs", "max_steps", "max_seconds", "max_cpu_seconds",
                                                  "target_accuracy")}
    if all(value is None for value in rules.values()):
        rules.update(defaults)
    return rules
