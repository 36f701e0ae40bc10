"""Model configurations: dataclasses that both tracks build their models from.

A model part takes the config (as nanoGPT's modules take ``config``) rather than a long list of
positional sizes and flags, so a swapped boolean cannot go unnoticed. Widths that follow from
others (the decoder is as wide as the encoder's output) are properties, computed in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .registries import cell_spec, score_spec

__all__ = ["Seq2seqConfig", "OptionError"]


class OptionError(ValueError):
    """An option that does not apply where it was given (a device for the NumPy track, an unknown
    track, a GPU that is not there): the command line reports it in one line."""


@dataclass
class Seq2seqConfig:
    """The size and kind of a seq2seq model (with or without attention).

    ``hidden_size`` is per direction in a bidirectional encoder; the decoder is as wide as the
    encoder's output (``2 * hidden_size`` when bidirectional). ``reset_after`` picks torch's form
    of the GRU (the reset gate after the recurrent product). ``dtype`` is the parameters' dtype.
    """

    source_vocab_size: int
    target_vocab_size: int
    embed_dim: int = 32
    hidden_size: int = 64
    cell: str = "gru"
    num_layers: int = 1
    bidirectional: bool = True
    residual: bool = False
    score: str = "general"
    attention_size: int | None = None
    reset_after: bool = False
    dtype: str = "float32"

    def __post_init__(self) -> None:
        cell_spec(self.cell)
        score_spec(self.score)
        for name in ("source_vocab_size", "target_vocab_size", "embed_dim", "hidden_size", "num_layers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.attention_size is not None and int(self.attention_size) < 1:
            raise ValueError(f"attention_size must be >= 1 or None, got {self.attention_size}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")

    @property
    def encoder_output_size(self) -> int:
        """The width of each encoder state ``h_j``: ``[h_j→ ; h_j←]`` when bidirectional."""
        return self.hidden_size * (2 if self.bidirectional else 1)

    @property
    def decoder_hidden_size(self) -> int:
        """The decoder's width: the encoder's output width, so that ``s_i`` and ``h_j`` can be compared."""
        return self.encoder_output_size

    def to_dict(self) -> dict:
        return asdict(self)
