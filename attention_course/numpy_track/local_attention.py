"""Local attention (Luong et al. 2015, section 3.2): a window around a source position.

Global attention (chapters 4-5) scores every source position at every decoder step.
Local attention first picks an aligned source position ``p_i`` for decoder step ``i``,
then looks only at the ``2D + 1`` positions of the window around it:

* local-m (monotonic): ``p_i = i``, as if the two languages kept the same order;
* local-p (predictive): ``p_i = S_n sigmoid(v_p^T tanh(W_p s_i))``, learned, with
  ``S_n`` the real source length of example ``n``.

Inside the window the weights are a softmax of the scores (any of the four score
functions). For local-p, as in the paper, the softmax is multiplied by a Gaussian centred on
``p_i`` that favours the positions near it; local-m is the plain softmax over the window:

    local-m:  alpha_ij = softmax_{j in window}(e_ij)
    local-p:  alpha_ij = softmax_{j in window}(e_ij) exp(-(j - p_i)^2 / (2 sigma^2)),  sigma = D / 2
    c_i = sum_{j in window} alpha_ij h_j .

The Gaussian is what lets a gradient reach ``p_i`` (and through it ``W_p`` and ``v_p``):
which positions are in the window changes only in jumps, but the Gaussian's values move
smoothly with ``p_i``. Local-p's weights no longer sum to one (the Gaussian is at most 1), as
in the paper.

Positions are 0-based: source positions ``j = 0 .. S_n - 1``, decoder steps
``i = 0 .. T_dec - 1``. The window is the ``2D + 1`` positions ``round(p_i) - D ..
round(p_i) + D``; those outside the sequence's real tokens (before the start, on
padding, past the end) get exactly zero weight.

Cost: the scores are computed for the window only, so a decoder step costs ``O(D H)``
whatever the source length, against ``O(T_enc H)`` for global attention
(``benchmarks/local_attention.py`` measures it).
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import attention_spec
from ..core.shapes import ShapeError, check_array
from ..functional import sigmoid
from .attention import make_score
from .base import Layer, as_dtype, float_dtype
from .layers import masked_softmax, softmax_backward

__all__ = ["LocalAttention", "check_attention_inputs", "monotonic_positions"]


def check_attention_inputs(layer: Layer, encoder_states: np.ndarray, decoder_states: np.ndarray,
                           mask: np.ndarray | None) -> np.dtype:
    """Check the inputs of an attention layer over all decoder steps (``layer.encoder_size``,
    ``layer.decoder_size``); return their floating dtype. A wrong one raises ``ShapeError``."""
    dtype = float_dtype(encoder_states, "encoder_states")
    float_dtype(decoder_states, "decoder_states")
    if getattr(decoder_states, "ndim", 3) != 3:
        raise ShapeError("decoder_states: expected shape (N, T_dec, H_dec), "
                         f"got {decoder_states.shape}")
    sizes = check_array("encoder_states", encoder_states, ("N", "T_enc", layer.encoder_size))
    check_array("decoder_states", decoder_states, ("N", "T_dec", layer.decoder_size), sizes)
    if mask is not None:
        check_array("mask", mask, ("N", "T_enc"), sizes, kind="bool")
    return dtype


def monotonic_positions(lengths: np.ndarray, T_dec: int, first_step: int = 0,
                        dtype=np.float64) -> np.ndarray:
    """Local-m's positions ``p_i = i``, clipped to each sequence's last real token.

    Decoder step ``i`` (counted from ``first_step``) aligns with source position ``i``
    while the source lasts, and with its last real position ``S_n - 1`` after that (a
    target longer than its source keeps looking at the end). A source with no real token
    gets ``p_i = 0``.

    Shapes:
        lengths: (N,) int, the real source lengths ``S_n``.  returns: (N, T_dec).
    """
    steps = first_step + np.arange(T_dec)  # (T_dec,)
    last = np.maximum(np.asarray(lengths) - 1, 0)  # (N,)
    return np.minimum(steps[None, :], last[:, None]).astype(dtype)  # (N, T_dec)


class LocalAttention(Layer):
    """Local attention, local-m or local-p, for every decoder step at once.

    ``alpha_ij = softmax_{j in window_i}(e_ij)`` and ``c_i = sum_j alpha_ij h_j``; the window
    is the ``2D + 1`` positions around ``round(p_i)`` that hold real tokens.
    ``kind="local-m"``: ``p_i = min(i, S_n - 1)`` (see ``monotonic_positions``);
    ``kind="local-p"``: ``p_i = S_n sigmoid(v_p^T tanh(W_p s_i))``, and the softmax is
    multiplied by ``exp(-(j - p_i)^2 / (2 sigma^2))`` with ``sigma = D / 2``.

    The interface of ``TimeAttention``: ``forward(encoder_states, decoder_states,
    mask=None)`` returns the contexts of all decoder steps; ``backward(d_context)``
    returns ``(d_encoder_states, d_decoder_states)`` and writes the gradients of the
    score's
    parameters and of ``W_p``, ``v_p``. After ``forward``, ``attention_weights`` is
    (N, T_dec, T_enc), zero outside the window and on padding, and ``positions`` is
    ``p_i``. A row with no real source token gets zero weights, a zero context and zero
    gradients. ``first_step`` (keyword) is the decoder step of ``decoder_states[:, 0]``,
    for local-m during step-by-step decoding.

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_dec, H_enc).
        positions: (N, T_dec).  window_weights: (N, T_dec, 2D + 1).
        W_p: (H_dec, A).  v_p: (A,).
    """

    def __init__(self, score: str, encoder_size: int, decoder_size: int,
                 attention_size: int | None = None, *, kind: str = "local-m",
                 window: int = 2, rng=None, dtype=np.float64) -> None:
        super().__init__()
        spec = attention_spec(kind)
        if not spec.local:
            raise ValueError("LocalAttention: kind must be 'local-m' or 'local-p', "
                             f"got {kind!r}")
        if int(window) < 1:
            raise ValueError(f"window must be >= 1 (the half-width D), got {window}")
        rng = init_rng(rng)
        self.kind, self.window = kind, int(window)
        self.predictive = spec.positions == "predicted"
        self.sigma = self.window / 2
        score_layer = make_score(score, encoder_size, decoder_size, attention_size,
                                 rng=rng, dtype=dtype)
        self.score = self.add_child("score", score_layer)
        self.encoder_size = score_layer.encoder_size
        self.decoder_size = score_layer.decoder_size
        if self.predictive:
            self.add_params(initializers.local_position(rng, self.decoder_size,
                                                        attention_size), dtype)
        self.positions = None
        self.window_weights = None
        self._cache = None

    @property
    def attention_weights(self) -> np.ndarray | None:
        """The window weights in place: (N, T_dec, T_enc), zero outside the window."""
        if self._cache is None:
            return None
        index, inside, T_enc = (self._cache[k] for k in ("index", "inside", "T_enc"))
        N, T_dec, W = index.shape
        full = np.zeros((N, T_dec, T_enc), dtype=self.window_weights.dtype)
        rows, steps = np.arange(N)[:, None], np.arange(T_dec)[None, :]
        gather = np.clip(index, 0, T_enc - 1)
        weights = np.where(inside, self.window_weights, 0)
        for k in range(W):  # one offset k writes every (n, i) once: no collisions
            full[rows, steps, gather[:, :, k]] += weights[:, :, k]
        return full

    def _aligned_positions(self, decoder_states, lengths, first_step, dtype):
        """``p_i``, and what its gradient needs (local-p's hidden layer and gate)."""
        T_dec = decoder_states.shape[1]
        if not self.predictive:
            return monotonic_positions(lengths, T_dec, first_step, dtype), None
        W_p, v_p = (as_dtype(self.params[k], dtype) for k in ("W_p", "v_p"))
        hidden = np.tanh(decoder_states @ W_p)  # (N, T_dec, A)
        gate = sigmoid(hidden @ v_p)  # (N, T_dec)
        return lengths[:, None].astype(dtype) * gate, (hidden, gate)

    def _window(self, encoder_states, positions, lengths):
        """The ``2D + 1`` positions ``j`` around ``round(p_i)``, which of them hold real tokens,
        and their states: (N, T_dec, W) twice, (N, T_dec, W, H_enc)."""
        D = self.window
        centres = np.floor(positions + 0.5).astype(np.int64)  # (N, T_dec): round(p_i)
        index = centres[:, :, None] + np.arange(-D, D + 1)  # (N, T_dec, W): positions j
        inside = (index >= 0) & (index < lengths[:, None, None])  # real tokens only
        gather = np.clip(index, 0, encoder_states.shape[1] - 1)
        windows = encoder_states[np.arange(len(index))[:, None, None], gather]
        return index, inside, windows

    def _gaussian(self, distance: np.ndarray) -> np.ndarray:
        """``exp(-(j - p_i)^2 / (2 sigma^2))`` for local-p, as in Luong et al.; local-m: 1 (its
        window is the plain softmax)."""
        if not self.predictive:
            return np.ones_like(distance)
        return np.exp(-distance * distance / distance.dtype.type(2 * self.sigma ** 2))

    def forward(self, encoder_states: np.ndarray, decoder_states: np.ndarray,
                mask: np.ndarray | None = None, *, first_step: int = 0) -> np.ndarray:
        dtype = check_attention_inputs(self, encoder_states, decoder_states, mask)
        N, T_enc, H_enc = encoder_states.shape
        lengths = np.full(N, T_enc) if mask is None else mask.sum(axis=1)  # (N,): S_n
        positions, position_cache = self._aligned_positions(decoder_states, lengths, first_step, dtype)
        index, inside, windows = self._window(encoder_states, positions, lengths)
        N, T_dec, W = index.shape
        # Every (n, i) is a batch row of its own for the score: one query, the W keys of its window.
        scores = self.score.forward(windows.reshape(N * T_dec, W, H_enc),
                                    decoder_states.reshape(N * T_dec, 1, -1))
        aligned = masked_softmax(scores.reshape(N, T_dec, W), inside)  # softmax over the window
        distance = index.astype(dtype) - positions[:, :, None]  # j - p_i
        gaussian = self._gaussian(distance)
        weights = aligned * gaussian  # (N, T_dec, W)
        self.positions, self.window_weights = positions, weights
        self._cache = dict(decoder_states=decoder_states, windows=windows, index=index, inside=inside,
                           aligned=aligned, gaussian=gaussian, distance=distance, lengths=lengths,
                           position_cache=position_cache, T_enc=T_enc)
        return (weights[:, :, None, :] @ windows)[:, :, 0]  # c_i: (N, T_dec, H_enc)

    def backward(self, d_context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = self._cache
        windows, aligned, gaussian = c["windows"], c["aligned"], c["gaussian"]
        N, T_dec, W, H_enc = windows.shape
        check_array("d_context", d_context, (N, T_dec, H_enc))

        # c_i = sum_j alpha_ij h_j: h_j is read as a value; alpha_ij gets h_j . dc_i.
        d_weights = (windows @ d_context[:, :, :, None])[..., 0]  # (N, T_dec, W)
        d_windows = self.window_weights[:, :, :, None] * d_context[:, :, None, :]
        # alpha = softmax(e) * gaussian: the softmax's part goes into the score ...
        d_scores = softmax_backward(aligned, d_weights * gaussian)  # (N, T_dec, W)
        d_keys, d_queries = self.score.backward(d_scores.reshape(N * T_dec, 1, W))
        d_windows += d_keys.reshape(N, T_dec, W, H_enc)
        d_decoder = d_queries.reshape(N, T_dec, -1)
        # ... and the Gaussian's into p_i (local-p only: local-m's p_i is fixed), with
        # d gaussian / d p_i = gaussian (j - p_i) / sigma^2.
        if self.predictive:
            d_positions = (d_weights * aligned * gaussian * c["distance"]).sum(axis=-1)
            d_positions /= self.sigma ** 2
            d_decoder = d_decoder + self._position_backward(d_positions)
        return self._scatter(d_windows), d_decoder

    def _position_backward(self, d_positions: np.ndarray) -> np.ndarray:
        """Back through ``p = S sigmoid(v_p . tanh(s W_p))``: writes the gradients of
        ``W_p`` and ``v_p``, returns the decoder states'. d_positions: (N, T_dec)."""
        hidden, gate = self._cache["position_cache"]
        decoder_states, lengths = self._cache["decoder_states"], self._cache["lengths"]
        dtype = d_positions.dtype
        d_gate = d_positions * lengths[:, None].astype(dtype) * gate * (1 - gate)
        A, H_dec = hidden.shape[-1], decoder_states.shape[-1]
        self.grads["v_p"][...] = d_gate.reshape(1, -1) @ hidden.reshape(-1, A)
        d_hidden = d_gate[:, :, None] * as_dtype(self.params["v_p"], dtype)
        d_hidden *= 1 - hidden * hidden  # (N, T_dec, A)
        states = decoder_states.reshape(-1, H_dec)
        self.grads["W_p"][...] = states.T @ d_hidden.reshape(-1, A)
        return d_hidden @ as_dtype(self.params["W_p"], dtype).T

    def _scatter(self, d_windows: np.ndarray) -> np.ndarray:
        """The windows' gradients added back where they were read: (N, T_enc, H_enc).

        Within one decoder step the window's real positions are distinct (the others go
        to a spare row ``T_enc``), so one step at a time an indexed ``+=`` is exact:
        ``T_dec`` small scatters instead of one slow ``np.add.at``.
        """
        index, inside, T_enc = (self._cache[k] for k in ("index", "inside", "T_enc"))
        N, T_dec, _, H_enc = d_windows.shape
        d_encoder = np.zeros((N, T_enc + 1, H_enc), dtype=d_windows.dtype)
        positions = np.where(inside, index, T_enc)  # (N, T_dec, W): inside, 0 <= j < T_enc
        rows = np.arange(N)[:, None]
        for i in range(T_dec):
            d_encoder[rows, positions[:, i]] += d_windows[:, i]
        return d_encoder[:, :T_enc]
