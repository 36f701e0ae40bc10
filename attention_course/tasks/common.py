"""What the tasks share: what a ``train`` returns, the command line's rules, the GRU's forms.

The tasks train through the registry of tracks (``tracks.get_track``): a track's ``fit`` runs the
one loop (``training.run_training``) on named arrays, its ``call`` runs a model on them in
batches, its ``num_parameters`` counts the weights. Nothing here or in a task asks which track
it holds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..core.configs import OptionError
from ..training import TrainResult, write_history
from .options import train_defaults

__all__ = ["TaskRun", "RESET_AFTER", "TASK_OPTIONS", "track_settings", "given_options", "check_options",
           "check_task_command", "log_to_stderr", "finish_command", "stopping_rules"]

# --gru-form: the lectures' GRU (reset gate before the recurrent product) or torch's (after: the
# fused kernels): a config's ``reset_after``.
RESET_AFTER = {"lecture": False, "torch": True}


@dataclass
class TaskRun:
    """What a task's ``train`` returns: the trained model, its summary and what it was measured on."""

    model: object
    summary: dict
    result: TrainResult
    test: object = None
    extra: dict = field(default_factory=dict)


def track_settings(track, task: str, defaults: dict) -> dict:
    """``defaults`` with what ``task`` does differently on ``track`` (its ``TASK_DEFAULTS``), and the
    GRU form the track prefers as ``reset_after``."""
    return {"reset_after": RESET_AFTER[track.DEFAULTS["gru_form"]], **defaults, **track.TASK_DEFAULTS.get(task, {})}


# --- the command line ---------------------------------------------------------------------------

# The options of ``attention-course train`` that the chapter-9 tasks read.
TASK_OPTIONS = frozenset({"task", "track", "device", "model", "n_train", "n_test", "epochs", "max_steps",
                          "max_seconds", "max_cpu_seconds", "target_accuracy", "seed", "out", "batch_size", "lr",
                          "embed_dim", "hidden_size", "eval_every", "no_progress"})


def given_options(args) -> set[str]:
    """The options of ``attention-course train`` set to something other than their default."""
    defaults = train_defaults()
    return {name for name, value in vars(args).items() if name in defaults and value != defaults[name]}


def check_options(args, allowed: set[str]) -> set[str]:
    """The options given; an OptionError (one line, exit status 2) naming those that do not apply to the task."""
    given = given_options(args)
    wrong = sorted(given - set(allowed))
    if wrong:
        listed = ", ".join("--" + name.replace("_", "-") for name in wrong)
        raise OptionError(f"{listed}: not an option of the {args.task!r} task")
    return given


def check_task_command(args, task, allowed: set[str], models_said: str) -> set[str]:
    """The options given to a task's ``attention-course train``: an OptionError (one line, exit
    status 2) for an option the task does not read, a ``--model`` the task does not train (what
    it trains: ``models_said``), or a device the track cannot use."""
    from ..tracks import get_track

    given = check_options(args, allowed)
    if args.model not in task.models:
        raise OptionError(f"--model {args.model}: the {task.name!r} task {models_said}")
    get_track(args.track).check_options(args.device)
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
