"""Save and load a trained model with its vocabularies: a folder with ``config.json`` and ``weights.npz``."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ..data import Vocabulary
from .seq2seq import Seq2seqConfig, build_model

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint"]

FORMAT = "attention-course-checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint folder that is missing, incomplete or not ours."""


def save_checkpoint(directory, model, source_vocab: Vocabulary, target_vocab: Vocabulary, kind: str,
                    max_output_length: int, extra: dict | None = None) -> Path:
    """Write ``config.json`` (model config, vocabularies, metadata) and ``weights.npz``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "format": FORMAT,
        "track": "numpy",
        "model": kind,
        "config": model.config.to_dict(),
        "source_vocab": source_vocab.to_dict(),
        "target_vocab": target_vocab.to_dict(),
        "max_output_length": int(max_output_length),
        **(extra or {}),
    }
    np.savez(directory / "weights.npz", **model.state_dict())
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return directory


def load_checkpoint(directory):
    """Returns ``(model, source_vocab, target_vocab, config_dict)``.

    Raises:
        CheckpointError: one line naming the folder and what is wrong with it.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"no checkpoint folder at {directory}")
    config_path, weights_path = directory / "config.json", directory / "weights.npz"
    for path in (config_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"{directory} is not a checkpoint: {path.name} is missing")
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{config_path}: not valid JSON ({error})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise CheckpointError(f"{config_path}: not an attention-course checkpoint (format {config.get('format') if isinstance(config, dict) else None!r})")
    try:
        model = build_model(config["model"], Seq2seqConfig(**config["config"]))
        source_vocab = Vocabulary.from_dict(config["source_vocab"])
        target_vocab = Vocabulary.from_dict(config["target_vocab"])
        with np.load(weights_path) as weights:
            model.load_state_dict({name: weights[name] for name in weights.files})
    except (KeyError, TypeError, ValueError, OSError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"{directory}: damaged checkpoint ({error})") from None
    return model, source_vocab, target_vocab, config
