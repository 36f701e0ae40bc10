"""Model configurations: dataclasses that both tracks build their models from.

A model part takes the config (as nanoGPT's modules take ``config``) rather than a long list of
positional sizes and flags, so a swapped boolean cannot go unnoticed. Widths that follow from
others (the decoder is as wide as the encoder's output) are properties, computed in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .registries import HARD_BASELINES, HARD_ESTIMATORS, attention_spec, cell_spec, decoder_spec, score_spec

__all__ = ["Seq2seqConfig", "OptionError", "TransformerConfig", "NTMConfig", "MODEL_CONFIGS", "model_config",
           "ClassifierConfig", "CaptionerConfig", "MemoryConfig", "ReaderConfig", "POOLINGS", "CAPTION_CONTEXTS"]


class OptionError(ValueError):
    """An option that does not apply where it was given (a device for the NumPy track, an unknown
    track, a GPU that is not there): the command line reports it in one line."""


@dataclass
class Seq2seqConfig:
    """The size and kind of a seq2seq model (with or without attention).

    ``hidden_size`` is per direction in a bidirectional encoder; the decoder is as wide as the
    encoder's output (``2 * hidden_size`` when bidirectional). ``reset_after`` picks torch's form
    of the GRU (the reset gate after the recurrent product). ``dtype`` is the parameters' dtype.

    Chapter 8's variants (the defaults are the model of chapters 1-7, so a config written before
    these fields existed is a global-attention Luong model): ``attention`` is "global",
    "local-m", "local-p" or "hard"; ``window`` is local attention's half-width ``D``;
    ``hard_estimator`` ("reinforce" or "gumbel"), ``hard_baseline`` ("none", "moving_average",
    "learned") and ``gumbel_temperature`` say how hard attention is trained; ``decoder`` is
    "luong" (query ``s_i``, context combined after the recurrence) or "bahdanau" (query
    ``s_{i-1}``, context fed into the recurrence; one recurrent layer, global attention).
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
    attention: str = "global"
    window: int = 2
    hard_estimator: str = "reinforce"
    hard_baseline: str = "moving_average"
    gumbel_temperature: float = 1.0
    decoder: str = "luong"

    def __post_init__(self) -> None:
        cell_spec(self.cell)
        score_spec(self.score)
        attention_spec(self.attention)
        decoder_spec(self.decoder)
        if int(self.window) < 1:
            raise ValueError(f"window must be >= 1 (the half-width D of local attention), got {self.window}")
        if self.hard_estimator not in HARD_ESTIMATORS:
            raise ValueError(f"hard_estimator must be one of {list(HARD_ESTIMATORS)}, got {self.hard_estimator!r}")
        if self.hard_baseline not in HARD_BASELINES:
            raise ValueError(f"hard_baseline must be one of {list(HARD_BASELINES)}, got {self.hard_baseline!r}")
        if not float(self.gumbel_temperature) > 0:
            raise ValueError(f"gumbel_temperature must be > 0, got {self.gumbel_temperature}")
        if self.decoder == "bahdanau" and (self.attention != "global" or self.num_layers != 1):
            raise ValueError("decoder 'bahdanau' has one recurrent layer and global attention "
                             f"(got attention={self.attention!r}, num_layers={self.num_layers})")
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


@dataclass
class TransformerConfig:
    """The size of a Transformer seq2seq model (chapter 10): ``num_layers`` encoder and as many
    decoder layers of width ``d_model``, each with ``num_heads`` heads of width ``d_model / num_heads``.

    ``feedforward_size`` is the position-wise feed-forward layer's inner width (by default
    ``4 * d_model``, as in Vaswani et al.). ``norm_first``: layer normalisation before each
    sub-layer (pre-norm, the default) or after the residual sum (post-norm, the original paper's).
    ``label_smoothing``: the training loss's target puts ``1 - label_smoothing`` on the right token
    and spreads the rest evenly over the vocabulary (0.1, as in Vaswani et al.; 0 for plain
    cross-entropy).
    """

    source_vocab_size: int
    target_vocab_size: int
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    feedforward_size: int | None = None
    norm_first: bool = True
    dtype: str = "float32"
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must lie in [0, 1), got {self.label_smoothing}")
        for name in ("source_vocab_size", "target_vocab_size", "d_model", "num_heads", "num_layers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model must be a multiple of num_heads, got d_model={self.d_model}, "
                             f"num_heads={self.num_heads}")
        if self.feedforward_size is not None and int(self.feedforward_size) < 1:
            raise ValueError(f"feedforward_size must be >= 1 or None, got {self.feedforward_size}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")

    @property
    def head_size(self) -> int:
        """``d_k = d_model / h``: the width of each head's queries, keys and values."""
        return self.d_model // self.num_heads

    @property
    def inner_size(self) -> int:
        """The feed-forward layer's inner width."""
        return self.feedforward_size or 4 * self.d_model

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class NTMConfig:
    """The size of a Neural Turing Machine (chapter 10): an LSTM controller, a memory of
    ``memory_size`` locations of width ``memory_width``, read heads and write heads.

    Each head's shift distribution covers the offsets ``-shift_range .. shift_range``.
    """

    input_size: int
    output_size: int
    controller_size: int = 100
    memory_size: int = 128
    memory_width: int = 20
    num_read_heads: int = 1
    num_write_heads: int = 1
    shift_range: int = 1
    dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("input_size", "output_size", "controller_size", "memory_size", "memory_width",
                     "num_read_heads", "num_write_heads", "shift_range"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if 2 * self.shift_range + 1 > self.memory_size:
            raise ValueError(f"shift_range {self.shift_range} needs at least {2 * self.shift_range + 1} memory "
                             f"locations, got memory_size={self.memory_size}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")

    @property
    def num_heads(self) -> int:
        return self.num_read_heads + self.num_write_heads

    @property
    def num_shifts(self) -> int:
        """The length of a shift distribution, ``2 * shift_range + 1``."""
        return 2 * self.shift_range + 1

    def to_dict(self) -> dict:
        return asdict(self)


# The config class each model kind is built from (what a checkpoint's "config" holds).
MODEL_CONFIGS = {"attention": Seq2seqConfig, "seq2seq": Seq2seqConfig, "transformer": TransformerConfig}


def model_config(kind: str, values: dict):
    """The config of a model of ``kind`` from its ``to_dict()`` values (a Seq2seqConfig unless listed)."""
    return MODEL_CONFIGS.get(kind, Seq2seqConfig)(**values)


# --- chapter 9: attention at work -------------------------------------------------------------

POOLINGS = ("attention", "mean", "last")  # how a classifier turns every state h_t into one vector
CAPTION_CONTEXTS = ("attention", "static")  # what a caption decoder reads of the image at each word


def _check_sizes(config, names) -> None:
    for name in names:
        if int(getattr(config, name)) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(config, name)}")
    if config.dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {config.dtype!r}")


@dataclass
class ClassifierConfig:
    """A sequence classifier (chapter 9): embedding, recurrent encoder, pooling over time, affine.

    ``pooling`` turns the encoder states ``h_1 .. h_T`` into one vector: ``"attention"`` (the
    lectures' attention pooling, ``sum_t alpha_t h_t`` with learned weights), ``"mean"`` (the
    average over the real steps) or ``"last"`` (the forward direction's state at the last real
    token and the backward direction's at the first). ``num_classes == 2`` gives one logit and a
    sigmoid, as in the lectures' code; more classes give a softmax. ``hidden_size`` is per
    direction; ``attention_size`` is the width ``A`` of the pooling's projection.
    """

    vocab_size: int
    num_classes: int = 2
    embed_dim: int = 32
    hidden_size: int = 32
    attention_size: int = 32
    cell: str = "gru"
    bidirectional: bool = True
    pooling: str = "attention"
    reset_after: bool = False
    dtype: str = "float32"

    def __post_init__(self) -> None:
        cell_spec(self.cell)
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {self.pooling!r}")
        if int(self.num_classes) < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        _check_sizes(self, ("vocab_size", "embed_dim", "hidden_size", "attention_size"))

    @property
    def encoder_output_size(self) -> int:
        """The width of each state ``h_t``: ``[h_t→ ; h_t←]`` when bidirectional."""
        return self.hidden_size * (2 if self.bidirectional else 1)

    @property
    def num_logits(self) -> int:
        """One logit for two classes (a sigmoid), else one per class (a softmax)."""
        return 1 if self.num_classes == 2 else self.num_classes

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReaderConfig:
    """An attentive reader for cloze questions (chapter 9; Hermann et al. 2015, as simplified by
    Chen, Bolton & Manning 2016).

    A bidirectional GRU reads the story, another the question; the question's encoding ``u``
    (its forward state at the last word and its backward state at the first) scores every state
    ``p_i`` of the story with the general score ``p_i^T W_a u``; the weighted sum of the ``p_i`` is
    mapped to one logit per entity marker (``num_entities``). ``hidden_size`` is per direction.
    """

    vocab_size: int
    num_entities: int
    embed_dim: int = 32
    hidden_size: int = 32
    reset_after: bool = False
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _check_sizes(self, ("vocab_size", "num_entities", "embed_dim", "hidden_size"))

    @property
    def state_size(self) -> int:
        """The width of each story state ``p_i`` and of ``u``: ``2 * hidden_size``."""
        return 2 * self.hidden_size

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CaptionerConfig:
    """An image captioner with soft attention over a grid of features (chapter 9; Xu et al. 2015).

    The decoder reads ``L`` feature vectors of width ``feature_size`` (``D_f``), one per cell of
    a grid over the image: given ones on the NumPy track; on the torch track a small CNN's, whose
    ``len(cnn_channels) + 1`` convolutions of stride 2 turn an ``image_size`` image into a
    ``grid_size x grid_size`` grid. ``attention_size`` is the additive score's width ``A``;
    ``coverage_weight`` is ``lambda`` of the doubly stochastic regulariser
    ``lambda sum_l (1 - sum_t alpha_tl)^2``. ``reset_after`` picks torch's form of the GRU.
    ``context``: ``"attention"`` (soft attention over the grid at every word) or ``"static"``, the
    baseline without attention: every word reads the same vector, the mean of the grid's features
    (the static representation of the image of the decks' standard model).
    """

    vocab_size: int
    feature_size: int
    embed_dim: int = 32
    hidden_size: int = 64
    attention_size: int = 32
    coverage_weight: float = 0.0
    reset_after: bool = False
    image_size: int = 64
    grid_size: int = 8
    cnn_channels: tuple = (16, 32)
    context: str = "attention"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _check_sizes(self, ("vocab_size", "feature_size", "embed_dim", "hidden_size", "attention_size"))
        if self.context not in CAPTION_CONTEXTS:
            raise ValueError(f"context must be one of {list(CAPTION_CONTEXTS)}, got {self.context!r}")
        if not float(self.coverage_weight) >= 0:
            raise ValueError(f"coverage_weight must be >= 0, got {self.coverage_weight}")
        self.cnn_channels = tuple(int(channels) for channels in self.cnn_channels)
        if self.grid_size < 1 or self.image_size % self.grid_size:
            raise ValueError(f"grid_size must divide image_size={self.image_size}, got {self.grid_size}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class MemoryConfig:
    """An end-to-end memory network (chapter 9; Sukhbaatar et al. 2015).

    ``hops`` attention hops over at most ``max_sentences`` memories; ``embed_dim`` is ``d``.
    Adjacent weight tying: ``hops + 1`` embedding matrices, hop ``k`` (from 1) reading its
    input memory with matrix ``k - 1`` and its output memory with matrix ``k``; the question is
    embedded with the first, the answer read with the last. ``position_encoding`` weighs each
    word by its place in the sentence; ``temporal_encoding`` adds a learned vector for each
    sentence's age (0 for the story's last sentence).
    """

    vocab_size: int
    max_sentences: int
    embed_dim: int = 20
    hops: int = 3
    position_encoding: bool = True
    temporal_encoding: bool = True
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _check_sizes(self, ("vocab_size", "max_sentences", "embed_dim", "hops"))

    def to_dict(self) -> dict:
        return asdict(self)
