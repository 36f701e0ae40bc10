"""Checkpoints both tracks read and write: a folder with ``config.json`` and ``weights.npz``.

The tracks share parameter names and layouts, so one format serves both: a model trained on a
GPU with the torch track can be loaded into the NumPy track, and back. Which track builds the
model is the registry's business (``attention_course.tracks``); this module only reads and writes.
``save_checkpoint``/``load_checkpoint`` are the sequence-pair models' (format ``FORMAT``);
``write_folder``/``read_folder`` are the folder itself, which the copy task's checkpoints
(``tasks.copy``, their own format) share.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from .core.configs import Seq2seqConfig, TransformerConfig, model_config
from .data import Vocabulary
from .tracks import get_track

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "write_folder", "read_folder"]

FORMAT = "attention-course-checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint folder that is missing, incomplete or not ours."""


def save_checkpoint(directory, kind: str, config: Seq2seqConfig | TransformerConfig, weights: dict[str, np.ndarray],
                    source_vocab: Vocabulary, target_vocab: Vocabulary, max_output_length: int,
                    extra: dict | None = None) -> Path:
    """Write ``config.json`` (model kind and config, vocabularies, metadata) and ``weights.npz``."""
    description = {
        "format": FORMAT,
        "model": kind,
        "config": config.to_dict(),
        "source_vocab": source_vocab.to_dict(),
        "target_vocab": target_vocab.to_dict(),
        "max_output_length": int(max_output_length),
        **(extra or {}),
    }
    return write_folder(directory, description, weights)


def write_folder(directory, description: dict, weights: dict[str, np.ndarray], compressed: bool = False) -> Path:
    """Write ``weights.npz`` (``np.savez``, or ``np.savez_compressed``) and ``config.json`` (``description``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (np.savez_compressed if compressed else np.savez)(directory / "weights.npz", **weights)
    (directory / "config.json").write_text(json.dumps(description, indent=2) + "\n")
    return directory


def read_folder(directory, format: str = FORMAT, what: str = "checkpoint",
                ours: str = "an attention-course checkpoint") -> tuple[dict, dict[str, np.ndarray]]:
    """``(description, weights)`` of a folder written by ``write_folder`` whose description has ``format``.

    Raises:
        CheckpointError: one line naming the folder (a ``what``) and what is wrong with it: missing,
        a file missing, not JSON, not ``ours`` (another format), weights that cannot be read.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"no {what} folder at {directory}")
    config_path, weights_path = directory / "config.json", directory / "weights.npz"
    for path in (config_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"{directory} is not a {what}: {path.name} is missing")
    try:
        description = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{config_path}: not valid JSON ({error})") from None
    if not isinstance(description, dict) or description.get("format") != format:
        found = description.get("format") if isinstance(description, dict) else None
        raise CheckpointError(f"{config_path}: not {ours} (format {found!r})")
    try:
        with np.load(weights_path, allow_pickle=False) as stored:
            weights = {name: stored[name] for name in stored.files}
    except (ValueError, OSError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"{directory}: damaged {what} ({error})") from None
    return description, weights


def load_checkpoint(directory, track: str = "numpy", device: str = "cpu"):
    """Returns ``(model, source_vocab, target_vocab, description)`` for the ``track`` asked for,
    the model on ``device``.

    Raises:
        CheckpointError: one line naming the folder and what is wrong with it.
        TrackError: an unknown track, or one whose library is not installed.
    """
    implementation = get_track(track)  # a TrackError: an unknown track, or torch not installed
    description, weights = read_folder(directory)
    try:
        config = model_config(description.get("model", "attention"), description["config"])
        source_vocab = Vocabulary.from_dict(description["source_vocab"])
        target_vocab = Vocabulary.from_dict(description["target_vocab"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{directory}: damaged checkpoint ({error})") from None
    try:
        model = implementation.build_model(description["model"], config)
        implementation.load_weights(model, weights)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{directory}: damaged checkpoint ({error})") from None
    return implementation.to_device(model, device), source_vocab, target_vocab, description
