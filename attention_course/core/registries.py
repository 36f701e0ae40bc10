"""The recurrent cells, score functions, attentions and decoders of the course, by name, with the
rules that go with them.

Both tracks implement every entry here under the same name (``"gru"``, ``"additive"``, ...) and
look their own classes up with ``bind``, which refuses a track whose names differ from these.
What is true of a cell or a score whatever the track (its gates, its parameters, which widths it
needs) is said once, here.

The GRU's gate convention. The course writes the GRU as the lectures do (Cho et al.; Bahdanau et
al.): ``h_t = (1 - z) * h_{t-1} + z * n``. ``torch.nn.GRU`` (and the fused kernels behind it)
writes ``h_t = (1 - z') * n + z' * h_{t-1}``, so its update gate is ours flipped,
``z' = 1 - z``. Since ``1 - sigma(a) = sigma(-a)``, the two agree when the z block of every
weight and bias enters torch negated: ``CellSpec.torch_gate_signs`` is that sign vector (+1 on
every column, -1 on the z block), used by the torch track's fused kernels and by
``attention_course.convert`` for ``torch.nn.GRU``. The reset gate must also act after the
recurrent product (``reset_after=True``) for the two to compute the same function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

__all__ = ["CellSpec", "ScoreSpec", "AttentionSpec", "DecoderSpec", "CELLS", "SCORES", "ATTENTIONS", "DECODERS",
           "HARD_ESTIMATORS", "HARD_BASELINES", "cell_spec", "score_spec", "attention_spec", "decoder_spec",
           "score_sizes", "bind"]


@dataclass(frozen=True)
class CellSpec:
    """A recurrent cell: its gate blocks in ``W_x``/``W_h`` (in this order) and its state.

    ``torch_negated`` names the gates whose sign ``torch.nn``'s form of the cell flips.
    """

    name: str
    gates: tuple[str, ...]
    state: tuple[str, ...]  # ("h",), or ("h", "c") for the LSTM
    torch_negated: tuple[str, ...] = ()

    @property
    def num_gates(self) -> int:
        return len(self.gates)

    def torch_gate_signs(self, hidden_size: int) -> np.ndarray:
        """+1 on every column of ``W_x``/``W_h``/``b``, -1 on the blocks torch negates. Shape (G*H,)."""
        signs = np.ones(self.num_gates * hidden_size)
        for gate in self.torch_negated:
            start = self.gates.index(gate) * hidden_size
            signs[start:start + hidden_size] = -1
        return signs


@dataclass(frozen=True)
class ScoreSpec:
    """A score function ``e_ij = a(s_i, h_j)`` and its learned parameters.

    A score without parameters compares ``s_i`` and ``h_j`` directly, so it needs them equally wide.
    """

    name: str
    parameters: tuple[str, ...]

    @property
    def equal_widths(self) -> bool:
        return not self.parameters


CELLS: dict[str, CellSpec] = {
    "rnn": CellSpec("rnn", gates=("h",), state=("h",)),
    "lstm": CellSpec("lstm", gates=("i", "f", "g", "o"), state=("h", "c")),
    "gru": CellSpec("gru", gates=("r", "z", "n"), state=("h",), torch_negated=("z",)),
}

SCORES: dict[str, ScoreSpec] = {
    "dot": ScoreSpec("dot", ()),  # s_i . h_j
    "general": ScoreSpec("general", ("W_a",)),  # s_i^T W_a h_j
    "additive": ScoreSpec("additive", ("W_a", "U_a", "v_a")),  # v_a^T tanh(W_a s_i + U_a h_j)
    "scaled_dot": ScoreSpec("scaled_dot", ()),  # s_i . h_j / sqrt(H)
}


@dataclass(frozen=True)
class AttentionSpec:
    """How a decoder step attends (chapter 8): over every source position, a window, or one sample.

    ``parameters`` are the layer's own, besides those of its score function; ``positions`` is how
    the window's centre ``p_i`` is found (``None`` for attention without a window).
    """

    name: str
    parameters: tuple[str, ...] = ()
    positions: str | None = None

    @property
    def local(self) -> bool:
        return self.positions is not None


@dataclass(frozen=True)
class DecoderSpec:
    """Where the context enters the decoder, and which state asks for it.

    ``query``: the decoder state that scores the encoder states (``"s_i"``: the state after this
    step's recurrence, Luong; ``"s_{i-1}"``: the one before it, Bahdanau). ``context_into``:
    ``"output"`` (combined with ``s_i`` after the recurrence) or ``"recurrence"`` (an input of
    the recurrent update).
    """

    name: str
    query: str
    context_into: str


ATTENTIONS: dict[str, AttentionSpec] = {
    "global": AttentionSpec("global"),  # softmax over every real source position (Luong's global)
    "local-m": AttentionSpec("local-m", positions="monotonic"),  # window around p_i = i
    "local-p": AttentionSpec("local-p", ("W_p", "v_p"), positions="predicted"),  # p_i = S sigmoid(v_p^T tanh(W_p s_i))
    "hard": AttentionSpec("hard"),  # the context is one encoder state, sampled from the weights
}

DECODERS: dict[str, DecoderSpec] = {
    "luong": DecoderSpec("luong", query="s_i", context_into="output"),
    "bahdanau": DecoderSpec("bahdanau", query="s_{i-1}", context_into="recurrence"),
}

# How hard attention's gradient is estimated: the score-function estimator (REINFORCE), or the
# straight-through Gumbel-softmax relaxation; and REINFORCE's baseline.
HARD_ESTIMATORS = ("reinforce", "gumbel")
HARD_BASELINES = ("none", "moving_average", "learned")


def _lookup(kind: str, registry: Mapping[str, object], name: str):
    if name not in registry:
        raise ValueError(f"{kind}: unknown {_WHAT[kind]} {name!r}; choose one of {sorted(registry)}")
    return registry[name]


_WHAT = {"cell": "recurrent cell", "score": "score function", "attention": "attention", "decoder": "decoder"}


def cell_spec(name: str) -> CellSpec:
    """The cell named ``name``, or a ValueError listing the choices."""
    return _lookup("cell", CELLS, name)


def score_spec(name: str) -> ScoreSpec:
    """The score function named ``name``, or a ValueError listing the choices."""
    return _lookup("score", SCORES, name)


def attention_spec(name: str) -> AttentionSpec:
    """The attention named ``name`` ("global", "local-m", "local-p", "hard"), or a ValueError listing the choices."""
    return _lookup("attention", ATTENTIONS, name)


def decoder_spec(name: str) -> DecoderSpec:
    """The decoder named ``name`` ("luong", "bahdanau"), or a ValueError listing the choices."""
    return _lookup("decoder", DECODERS, name)


def score_sizes(score: str, encoder_size: int | None, decoder_size: int | None) -> tuple:
    """The (encoder, decoder) widths a score layer is built with, or the clear error.

    ``dot`` and ``scaled_dot`` need one width (either given; None: learned at the first call);
    ``general`` and ``additive`` have parameters and need both.
    """
    spec = score_spec(score)
    if spec.equal_widths:
        if encoder_size is not None and decoder_size is not None and encoder_size != decoder_size:
            raise ValueError(f"score {score!r} needs equal encoder and decoder widths, "
                             f"got {encoder_size} and {decoder_size}")
        size = encoder_size or decoder_size
        return size, size
    if encoder_size is None or decoder_size is None:
        raise ValueError(f"score {score!r} has parameters: give encoder_size and decoder_size")
    return encoder_size, decoder_size


def bind(kind: str, classes: Mapping[str, type]) -> dict[str, type]:
    """A track's classes for every name of the ``"cell"``, ``"score"``, ``"attention"`` or
    ``"decoder"`` registry, checked.

    Raises:
        ValueError: the track lacks a name of the registry, or has one the registry lacks.
    """
    registry = {"cell": CELLS, "score": SCORES, "attention": ATTENTIONS, "decoder": DECODERS}[kind]
    missing, extra = sorted(set(registry) - set(classes)), sorted(set(classes) - set(registry))
    if missing or extra:
        raise ValueError(f"{kind} registry: the track lacks {missing} and has unknown {extra}")
    return dict(classes)
