"""The registry of tracks: what the tasks, the command line, checkpoints and the explorer consult
instead of branching on a track's name or a model's class.

Each track has a module ``<track>.track`` with the same functions: ``build_model`` (every kind of
model a task trains), ``fit`` (training on named arrays or fresh batches, with the one loop of
``attention_course.training``), ``make_trainer`` (training on sequence pairs), ``call`` (a model on
NumPy arrays, in batches), ``num_parameters``, ``weights``, ``load_weights``, ``to_device``,
``greedy_decode``, ``encode``, ``check_options``, ``default_batch_size``, ``is_model``; and tables
of what differs by track: ``DEFAULTS`` (the command line's options whose best value differs by
track), ``TASK_DEFAULTS`` (what a task does differently on it), ``LOSSES`` (losses on a model's
outputs, by name). This module imports a track only when it is asked for, so the NumPy track
works without torch installed.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from .core.configs import OptionError

__all__ = ["TRACKS", "TrackError", "get_track", "track_of"]

TRACKS = {
    "numpy": "attention_course.numpy_track.track",
    "torch": "attention_course.torch_track.track",
}

_NEEDS = {"torch": ("torch", "the torch track needs PyTorch: pip install 'attention-course[torch]'")}


class TrackError(OptionError):
    """An unknown track, or one whose library is not installed."""


def get_track(name: str) -> ModuleType:
    """The ``track`` module of the track called ``name`` ("numpy" or "torch")."""
    if name not in TRACKS:
        raise TrackError(f"track: expected one of {sorted(TRACKS)}, got {name!r}")
    if name in _NEEDS:
        library, message = _NEEDS[name]
        try:
            importlib.import_module(library)
        except ImportError:
            raise TrackError(message) from None
    return importlib.import_module(TRACKS[name])


def track_of(model) -> ModuleType:
    """The track a model belongs to (only tracks already imported can have built it)."""
    for name, module_name in TRACKS.items():
        package = module_name.rsplit(".", 1)[0]
        if package in sys.modules and get_track(name).is_model(model):
            return get_track(name)
    raise TrackError(f"model: a {type(model).__name__} is not a model of any track ({sorted(TRACKS)})")
