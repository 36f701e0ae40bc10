"""The Transformer (Vaswani et al. 2017), built from the course's pieces, every backward pass by hand.

The lectures' "option 2" alignment already has its parts: a query ``q = W_Q s`` and keys
``k_j = W_K h_j`` (linear maps), scores ``q . k_j`` (scaled by ``1/sqrt(d_k)``), a softmax, a
weighted sum. Self-attention asks every position of one sequence to attend over the same sequence;
multi-head attention runs ``h`` such attentions side by side on ``d_k = d_model / h``-wide slices
and joins them::

    Q = X_q W_q + b_q,   K = X_k W_k + b_k,   V = X_k W_v + b_v          (N, T, d_model)
    head_m = softmax(Q_m K_m^T / sqrt(d_k) + mask) V_m                     (N, T_q, d_k), m = 1..h
    MultiHead(X_q, X_k) = [head_1 ; ... ; head_h] W_o + b_o                (N, T_q, d_model)

Around it: ``LayerNorm``, the ``PositionalEncoding`` (sinusoids: attention itself is blind to
order), the position-wise ``FeedForward`` and the residual connections of chapter 7. The layers are
**pre-norm**: ``x + Sublayer(LayerNorm(x))``, with one more LayerNorm after the last layer. The
original paper normalised after the residual sum (post-norm, ``LayerNorm(x + Sublayer(x))``;
``norm_first=False`` here); pre-norm keeps an identity path from the loss to every layer, so it
trains without the paper's learning-rate warm-up, which matters for short runs on a CPU with a
constant-rate Adam (Xiong et al. 2020). Dropout is left out, as everywhere in the course.

Masks are True where a position takes part: ``key_mask`` (N, T_k) marks the real (not padded)
keys; ``causal=True`` lets query ``i`` see only keys ``j <= i`` (the decoder must not read the
future it is asked to predict).
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.configs import TransformerConfig
from ..core.initializers import init_rng
from ..core.shapes import ShapeError, check_array
from .base import Layer, as_dtype, float_dtype
from .layers import (
    Affine,
    Embedding,
    SoftmaxCrossEntropy,
    masked_softmax,
    softmax,
    softmax_backward,
)

__all__ = [
    "LAYER_NORM_EPS",
    "positional_encoding",
    "attention_mask",
    "LayerNorm",
    "PositionalEncoding",
    "FeedForward",
    "MultiHeadAttention",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerSeq2seq",
    "LayerCache",
    "KeyValueCache",
    "TransformerConfig",
]

LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default


def positional_encoding(T: int, d_model: int, dtype=np.float64) -> np.ndarray:
    """The sinusoids: ``PE[t, 2i] = sin(t / 10000^(2i/d))``, and
    ``PE[t, 2i+1] = cos(t / 10000^(2i/d))``.

    Each pair of columns turns at its own frequency, so every position gets a distinct
    code, and ``PE[t + k]`` is a fixed rotation of ``PE[t]`` whatever ``t``: an offset
    is easy to attend to.

    Shapes:
        returns: (T, d_model).
    """
    position = np.arange(T, dtype=np.float64)[:, None]  # (T, 1)
    even = np.arange(0, d_model, 2, dtype=np.float64)  # 2i
    frequency = np.exp(-np.log(10000.0) * even / d_model)  # 1 / 10000^(2i/d)
    table = np.zeros((T, d_model))
    table[:, 0::2] = np.sin(position * frequency)
    table[:, 1::2] = np.cos(position * frequency[: d_model // 2])
    return table.astype(dtype)


def attention_mask(
    key_mask: np.ndarray | None, T_q: int, T_k: int, causal: bool
) -> np.ndarray | None:
    """Where each query may attend, broadcastable to the scores (N, h, T_q, T_k), or
    None for everywhere.

    Shapes:
        key_mask: (N, T_k) bool or None.
        returns: (N, 1, T_q, T_k), (1, 1, T_q, T_k) or None.
    """
    mask = None if key_mask is None else key_mask[:, None, None, :]  # (N, 1, 1, T_k)
    if causal:
        past = np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)  # j <= i
        mask = past[None, None] if mask is None else mask & past
    return mask


def _affine(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``x W + b`` over the last axis, as one 2-D matrix product (not one per batch row)."""
    out = x.reshape(-1, x.shape[-1]) @ W
    if b is not None:
        out += b
    return out.reshape(*x.shape[:-1], W.shape[1])


class LayerNorm(Layer):
    """Normalise each position over its features, then scale and shift:
    ``y = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta``, with ``mu`` and ``sigma^2`` the
    mean and variance over the last axis.

    Shapes:
        x: (..., D).  gamma, beta: (D,).  returns: (..., D).
    """

    def __init__(self, size: int, *, dtype=np.float64) -> None:
        super().__init__()
        self.size = size
        self.add_params({"gamma": np.ones(size), "beta": np.zeros(size)}, dtype)
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        dtype = float_dtype(x, "x")
        if x.shape[-1:] != (self.size,):
            raise ShapeError(f"x: expected shape (..., {self.size}), got {x.shape}")
        centred = x - x.mean(axis=-1, keepdims=True)
        variance = (centred * centred).mean(axis=-1, keepdims=True)
        inverse_std = 1.0 / np.sqrt(variance + dtype.type(LAYER_NORM_EPS))
        normalised = centred * inverse_std  # x^
        self._cache = (normalised, inverse_std)
        gamma, beta = (as_dtype(self.params[name], dtype) for name in ("gamma", "beta"))
        return normalised * gamma + beta

    def backward(self, dy: np.ndarray) -> np.ndarray:
        normalised, inverse_std = self._cache
        D = self.size
        self.grads["gamma"][...] = (dy * normalised).reshape(-1, D).sum(axis=0)
        self.grads["beta"][...] = dy.reshape(-1, D).sum(axis=0)
        d_normalised = dy * as_dtype(self.params["gamma"], dy.dtype)
        # dx = (1/sigma) (dx^ - mean(dx^) - x^ mean(dx^ x^)): mu and sigma depend on
        # every x of the row.
        mean_d = d_normalised.mean(axis=-1, keepdims=True)
        mean_dx = (d_normalised * normalised).mean(axis=-1, keepdims=True)
        return inverse_std * (d_normalised - mean_d - normalised * mean_dx)


class PositionalEncoding(Layer):
    """Token embeddings scaled by ``sqrt(d_model)``, plus the sinusoids: ``x sqrt(d) + PE[:T]``.

    Shapes:
        x: (N, T, d_model).  returns: (N, T, d_model).
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self._table = np.zeros((0, d_model))

    def table(self, T: int, dtype) -> np.ndarray:
        if len(self._table) < T or self._table.dtype != dtype:
            self._table = positional_encoding(
                max(T, 2 * len(self._table)), self.d_model, dtype
            )
        return self._table[:T]

    def forward(self, x: np.ndarray, start: int = 0) -> np.ndarray:
        """``start``: the position of ``x[:, 0]`` (a decoder that writes one token at a time)."""
        dtype = float_dtype(x, "x")
        check_array("x", x, (None, None, self.d_model))
        T = x.shape[1]
        return x * dtype.type(np.sqrt(self.d_model)) + self.table(start + T, dtype)[start:]

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout * dout.dtype.type(np.sqrt(self.d_model))


class FeedForward(Layer):
    """The position-wise feed-forward layer, ``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``: the
    same two affine maps at every position (``expand``: d_model to d_ff, ``contract``: back).

    Shapes:
        x: (..., d_model).  returns: (..., d_model).
    """

    def __init__(
        self, d_model: int, inner_size: int, *, rng=None, dtype=np.float64
    ) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.expand = self.add_child(
            "expand", Affine(d_model, inner_size, rng=rng, dtype=dtype)
        )
        self.contract = self.add_child(
            "contract", Affine(inner_size, d_model, rng=rng, dtype=dtype)
        )
        self._active = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        hidden = self.expand.forward(x)
        np.maximum(hidden, 0, out=hidden)
        self._active = hidden > 0
        return self.contract.forward(hidden)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        d_hidden = self.contract.backward(dout)
        d_hidden *= self._active
        return self.expand.backward(d_hidden)


class MultiHeadAttention(Layer):
    """Multi-head scaled dot-product attention (the module docstring has the equations).

    ``forward(query, source=None, key_mask=None, *, causal=False)``: with ``source=None``,
    self-attention (queries, keys and values all from ``query``); otherwise the keys and values
    come from ``source`` (the decoder's cross-attention over the encoder's states).
    ``backward(d_out)`` returns ``d_query`` for self-attention (the sum over its three roles),
    or ``(d_query, d_source)``. After ``forward``, ``attention_weights`` holds every head's
    weights.

    Parameters ``W_q, W_k, W_v, W_o`` (d_model, d_model) and their biases; in
    ``torch.nn.MultiheadAttention`` terms, ``in_proj_weight = [W_q ; W_k ; W_v]^T`` and
    ``out_proj.weight = W_o^T``.

    Shapes:
        query: (N, T_q, d_model).  source: (N, T_k, d_model) or None (then T_k = T_q).
        key_mask: (N, T_k) bool or None.  returns: (N, T_q, d_model).
        attention_weights: (N, h, T_q, T_k).
    """

    def __init__(
        self, d_model: int, num_heads: int, *, rng=None, dtype=np.float64
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(
                f"d_model must be a multiple of num_heads, "
                f"got {d_model} and {num_heads}"
            )
        rng = init_rng(rng)
        self.d_model, self.num_heads = d_model, num_heads
        self.head_size = d_model // num_heads
        for name in ("q", "k", "v", "o"):
            initial = initializers.affine(rng, d_model, d_model)
            self.add_params(
                {f"W_{name}": initial["W"], f"b_{name}": initial["b"]}, dtype
            )
        self.attention_weights = None
        self._cache = None

    def _split_heads(self, x: np.ndarray) -> np.ndarray:
        N, T, _ = x.shape
        x = x.reshape(N, T, self.num_heads, self.head_size)
        return x.transpose(0, 2, 1, 3)  # (N, h, T, d_k)

    def _merge_heads(self, x: np.ndarray) -> np.ndarray:
        N, h, T, d_k = x.shape
        return x.transpose(0, 2, 1, 3).reshape(N, T, h * d_k)  # (N, T, d_model)

    def _weights(self, names: str, dtype) -> tuple[np.ndarray, np.ndarray]:
        """``[W_a ; W_b ...]`` side by side and their biases, for one product of several maps."""
        W = np.concatenate(
            [as_dtype(self.params[f"W_{n}"], dtype) for n in names], axis=1
        )
        b = np.concatenate([as_dtype(self.params[f"b_{n}"], dtype) for n in names])
        return W, b

    def _check(self, query, source, key_mask, causal) -> tuple[int, int, int]:
        float_dtype(query, "query")
        sizes = check_array("query", query, ("N", "T_q", self.d_model))
        if source is not None:
            float_dtype(source, "source")
            check_array("source", source, ("N", "T_k", self.d_model), sizes)
        N, T_q, _ = query.shape
        T_k = T_q if source is None else source.shape[1]
        if key_mask is not None:
            check_array("key_mask", key_mask, (N, T_k), kind="bool")
        if causal and T_q > T_k:
            raise ShapeError(
                f"causal: needs at least as many keys as queries, "
                f"got T_q={T_q}, T_k={T_k}"
            )
        return N, T_q, T_k

    def _projections(self, query: np.ndarray, source: np.ndarray | None):
        """``Q, K, V`` (N, T, d_model) each: for self-attention (``source=None``) one product
        ``query [W_q ; W_k ; W_v]``; else ``query W_q`` and ``source [W_k ; W_v]``."""
        dtype = query.dtype
        if source is None:
            return np.split(_affine(query, *self._weights("qkv", dtype)), 3, axis=-1)
        K, V = np.split(_affine(source, *self._weights("kv", dtype)), 2, axis=-1)
        return _affine(query, *self._weights("q", dtype)), K, V

    def forward(self, query: np.ndarray, source: np.ndarray | None = None,
                key_mask: np.ndarray | None = None, *, causal: bool = False) -> np.ndarray:
        N, T_q, T_k = self._check(query, source, key_mask, causal)
        Q, K, V = self._projections(query, source)  # (N, T, d_model)
        scale = query.dtype.type(1.0 / np.sqrt(self.head_size))
        Q_heads = self._split_heads(Q) * scale  # (N, h, T_q, d_k): scaled here, not the scores
        K_heads, V_heads = self._split_heads(K), self._split_heads(V)  # (N, h, T_k, d_k)
        scores = Q_heads @ K_heads.swapaxes(-1, -2)  # (N, h, T_q, T_k)
        mask = attention_mask(key_mask, T_q, T_k, causal)
        weights = softmax(scores) if mask is None else masked_softmax(scores, mask)
        concat = self._merge_heads(weights @ V_heads)  # (N, T_q, d_model): [head_1 ; ... ; head_h]
        self.attention_weights = weights
        self._cache = (query, source, Q_heads, K_heads, V_heads, weights, concat, scale)
        return _affine(concat, *self._weights("o", query.dtype))

    def backward(self, d_out: np.ndarray):
        query, source, Q_heads, K_heads, V_heads, weights, concat, scale = self._cache
        dtype = d_out.dtype
        self._param_grads("o", concat, d_out)
        d_concat = _affine(d_out, as_dtype(self.params["W_o"], dtype).T)
        d_heads = self._split_heads(d_concat)  # (N, h, T_q, d_k)
        d_weights = d_heads @ V_heads.swapaxes(-1, -2)  # (N, h, T_q, T_k)
        d_V = self._merge_heads(weights.swapaxes(-1, -2) @ d_heads)  # (N, T_k, d_model)
        d_scores = softmax_backward(weights, d_weights)
        d_Q = self._merge_heads(d_scores @ K_heads) * scale  # (N, T_q, d_model)
        d_K = self._merge_heads(d_scores.swapaxes(-1, -2) @ Q_heads)  # (N, T_k, d_model)
        if source is None:  # the three projections of one input: their gradients add up
            d_qkv = np.concatenate([d_Q, d_K, d_V], axis=-1)
            self._param_grads("qkv", query, d_qkv)
            return _affine(d_qkv, self._weights("qkv", dtype)[0].T)
        d_kv = np.concatenate([d_K, d_V], axis=-1)
        self._param_grads("q", query, d_Q)
        self._param_grads("kv", source, d_kv)
        d_query = _affine(d_Q, as_dtype(self.params["W_q"], dtype).T)
        return d_query, _affine(d_kv, self._weights("kv", dtype)[0].T)

    def keys_values(self, source: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every head's keys and values of ``source`` (N, T, d_model): (N, h, T, d_k) each."""
        K, V = np.split(_affine(source, *self._weights("kv", source.dtype)), 2, axis=-1)
        return self._split_heads(K), self._split_heads(V)

    def attend(self, query: np.ndarray, keys: np.ndarray, values: np.ndarray,
               key_mask: np.ndarray | None = None) -> np.ndarray:
        """``query`` (N, T_q, d_model) against keys and values already split into heads
        (``keys_values``; a decoder's cache): the same computation as ``forward``, for decoding
        (nothing is kept for a backward pass). Sets ``attention_weights``.

        Shapes:
            keys, values: (N, h, T_k, d_k).  key_mask: (N, T_k) bool or None.
            returns: (N, T_q, d_model).
        """
        dtype = query.dtype
        scale = dtype.type(1.0 / np.sqrt(self.head_size))
        Q_heads = self._split_heads(_affine(query, *self._weights("q", dtype))) * scale  # (N, h, T_q, d_k)
        scores = Q_heads @ keys.swapaxes(-1, -2)  # (N, h, T_q, T_k)
        mask = attention_mask(key_mask, query.shape[1], keys.shape[2], False)
        weights = softmax(scores) if mask is None else masked_softmax(scores, mask)
        self.attention_weights = weights
        return _affine(self._merge_heads(weights @ values), *self._weights("o", dtype))

    def _param_grads(self, names: str, x: np.ndarray, d_y: np.ndarray) -> None:
        """The gradients of ``y = x [W_a ; W_b ...] + [b_a ; b_b ...]``, per map."""
        d = self.d_model
        x2, d_y2 = x.reshape(-1, d), d_y.reshape(-1, d_y.shape[-1])
        d_W, d_b = x2.T @ d_y2, d_y2.sum(axis=0)
        for i, name in enumerate(names):
            self.grads[f"W_{name}"][...] = d_W[:, i * d : (i + 1) * d]
            self.grads[f"b_{name}"][...] = d_b[i * d : (i + 1) * d]


class _Sublayer:
    """A residual sub-layer: pre-norm ``x + f(LN(x))``, or post-norm ``LN(x + f(x))``."""

    def __init__(self, norm: LayerNorm, norm_first: bool) -> None:
        self.norm, self.norm_first = norm, norm_first

    def forward(self, x: np.ndarray, function) -> np.ndarray:
        if self.norm_first:
            return x + function(self.norm.forward(x))
        return self.norm.forward(x + function(x))

    def backward(self, dout: np.ndarray, function_backward) -> np.ndarray:
        """``function_backward(d_f)`` returns the gradient of f's input."""
        if self.norm_first:
            return dout + self.norm.backward(function_backward(dout))
        d_sum = self.norm.backward(dout)
        return d_sum + function_backward(d_sum)


def _attention(c: TransformerConfig, rng, dtype) -> MultiHeadAttention:
    return MultiHeadAttention(c.d_model, c.num_heads, rng=rng, dtype=dtype)


class TransformerEncoderLayer(Layer):
    """Self-attention, then the feed-forward layer, each in a residual sub-layer.

    Pre-norm (``norm_first=True``): ``x = x + SelfAttn(LN_1(x))``, ``x = x + FFN(LN_2(x))``.
    Post-norm: ``x = LN_1(x + SelfAttn(x))``, ``x = LN_2(x + FFN(x))``.

    Shapes:
        x: (N, T_enc, d_model).  mask: (N, T_enc) bool or None.
        returns: (N, T_enc, d_model).
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c, dtype = config, np.dtype(config.dtype)
        self.self_attention = self.add_child(
            "self_attention", _attention(c, rng, dtype)
        )
        self.feed_forward = self.add_child(
            "feed_forward", FeedForward(c.d_model, c.inner_size, rng=rng, dtype=dtype)
        )
        self.norm_1 = self.add_child("norm_1", LayerNorm(c.d_model, dtype=dtype))
        self.norm_2 = self.add_child("norm_2", LayerNorm(c.d_model, dtype=dtype))
        self._attend = _Sublayer(self.norm_1, c.norm_first)
        self._transform = _Sublayer(self.norm_2, c.norm_first)

    def forward(self, x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        x = self._attend.forward(
            x, lambda y: self.self_attention.forward(y, key_mask=mask)
        )
        return self._transform.forward(x, self.feed_forward.forward)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx = self._transform.backward(dout, self.feed_forward.backward)
        return self._attend.backward(dx, self.self_attention.backward)


class TransformerDecoderLayer(Layer):
    """Causal self-attention, cross-attention over the encoder's states, the feed-forward layer.

    Pre-norm: ``y = y + SelfAttn(LN_1(y), causal)``, ``y = y + CrossAttn(LN_2(y), z)``
    (``z`` the encoder's output, its padding masked), ``y = y + FFN(LN_3(y))``; post-norm as in
    the encoder layer.

    Shapes:
        y: (N, T_dec, d_model).  encoder_states: (N, T_enc, d_model).
        source_mask: (N, T_enc) bool or None.
        returns: (N, T_dec, d_model); ``backward`` returns ``(dy, d_encoder_states)``.
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c, dtype = config, np.dtype(config.dtype)
        self.self_attention = self.add_child(
            "self_attention", _attention(c, rng, dtype)
        )
        self.cross_attention = self.add_child(
            "cross_attention", _attention(c, rng, dtype)
        )
        self.feed_forward = self.add_child(
            "feed_forward", FeedForward(c.d_model, c.inner_size, rng=rng, dtype=dtype)
        )
        self.norm_1, self.norm_2, self.norm_3 = (
            self.add_child(f"norm_{i}", LayerNorm(c.d_model, dtype=dtype))
            for i in (1, 2, 3)
        )
        self._attend_self = _Sublayer(self.norm_1, c.norm_first)
        self._attend_source = _Sublayer(self.norm_2, c.norm_first)
        self._transform = _Sublayer(self.norm_3, c.norm_first)
        self._d_encoder_states = None

    def forward(
        self,
        y: np.ndarray,
        encoder_states: np.ndarray,
        source_mask: np.ndarray | None = None,
    ) -> np.ndarray:
        y = self._attend_self.forward(
            y, lambda x: self.self_attention.forward(x, causal=True)
        )
        y = self._attend_source.forward(
            y, lambda x: self.cross_attention.forward(x, encoder_states, source_mask)
        )
        return self._transform.forward(y, self.feed_forward.forward)

    def step(self, y: np.ndarray, encoder_states: np.ndarray, source_mask: np.ndarray | None,
             cache: "LayerCache") -> np.ndarray:
        """``forward`` for the newest position only, ``y`` (N, 1, d_model): its key and value join
        the cache of the earlier positions', which its query attends over (they are all in its
        past: no mask); the encoder's keys and values come from the cache too."""
        def self_attention(x):
            cache.append(*self.self_attention.keys_values(x))  # (N, h, 1, d_k) each
            return self.self_attention.attend(x, cache.keys, cache.values)

        def cross_attention(x):
            return self.cross_attention.attend(x, *cache.source(self.cross_attention, encoder_states),
                                               source_mask)

        y = self._attend_self.forward(y, self_attention)
        y = self._attend_source.forward(y, cross_attention)
        return self._transform.forward(y, self.feed_forward.forward)

    def _cross_backward(self, d_out: np.ndarray) -> np.ndarray:
        d_query, self._d_encoder_states = self.cross_attention.backward(d_out)
        return d_query

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dy = self._transform.backward(dout, self.feed_forward.backward)
        dy = self._attend_source.backward(dy, self._cross_backward)
        dy = self._attend_self.backward(dy, self.self_attention.backward)
        return dy, self._d_encoder_states


class LayerCache:
    """What one decoder layer keeps between decoding steps: the keys and values of every position
    written so far (its self-attention's), and those of the encoder's states (its
    cross-attention's, computed at the first step).

    Shapes:
        keys, values: (N, h, t, d_k) after t steps.
    """

    def __init__(self) -> None:
        self.keys = self.values = None
        self._source = None

    def append(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add the newest position's keys and values (N, h, 1, d_k) after the earlier ones'."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = np.concatenate([self.keys, keys], axis=2)
            self.values = np.concatenate([self.values, values], axis=2)

    def source(self, attention: MultiHeadAttention, encoder_states: np.ndarray):
        """The encoder states' keys and values for ``attention``, computed once."""
        if self._source is None:
            self._source = attention.keys_values(encoder_states)
        return self._source


class KeyValueCache:
    """A ``LayerCache`` per decoder layer, and the number of positions decoded so far."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(num_layers)]
        self.length = 0


class TransformerEncoder(Layer):
    """Source embedding with positions, the encoder layers, and (pre-norm) a final LayerNorm.

    Shapes:
        source: (N, T_enc) int.  mask: (N, T_enc) bool or None.
        returns: (N, T_enc, d_model).
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = np.dtype(c.dtype)
        self.embed = self.add_child(
            "embed", Embedding(c.source_vocab_size, c.d_model, rng=rng, dtype=dtype)
        )
        self.positions = PositionalEncoding(c.d_model)
        self.layers = [
            self.add_child(f"layers.{i}", TransformerEncoderLayer(c, rng))
            for i in range(c.num_layers)
        ]
        self.norm = (
            self.add_child("norm", LayerNorm(c.d_model, dtype=dtype))
            if c.norm_first
            else None
        )

    @property
    def attention_weights(self) -> list[np.ndarray]:
        """Every layer's self-attention weights, (N, h, T_enc, T_enc) each."""
        return [layer.self_attention.attention_weights for layer in self.layers]

    def forward(self, source: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        check_array("source", source, ("N", None), kind="int")
        if mask is not None:
            check_array("mask", mask, source.shape, kind="bool")
        x = self.positions.forward(self.embed.forward(source))
        for layer in self.layers:
            x = layer.forward(x, mask)
        return x if self.norm is None else self.norm.forward(x)

    def backward(self, d_states: np.ndarray) -> None:
        dx = d_states if self.norm is None else self.norm.backward(d_states)
        for layer in reversed(self.layers):
            dx = layer.backward(dx)
        self.embed.backward(self.positions.backward(dx))


class TransformerDecoder(Layer):
    """Target embedding with positions, the decoder layers, (pre-norm) a final LayerNorm, and
    the affine map to the vocabulary.

    Shapes:
        decoder_input: (N, T_dec) int.  encoder_states: (N, T_enc, d_model).
        source_mask: (N, T_enc) bool or None.  returns logits: (N, T_dec, V).
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = np.dtype(c.dtype)
        self.embed = self.add_child(
            "embed", Embedding(c.target_vocab_size, c.d_model, rng=rng, dtype=dtype)
        )
        self.positions = PositionalEncoding(c.d_model)
        self.layers = [
            self.add_child(f"layers.{i}", TransformerDecoderLayer(c, rng))
            for i in range(c.num_layers)
        ]
        self.norm = (
            self.add_child("norm", LayerNorm(c.d_model, dtype=dtype))
            if c.norm_first
            else None
        )
        self.out = self.add_child(
            "out", Affine(c.d_model, c.target_vocab_size, rng=rng, dtype=dtype)
        )

    def forward(
        self,
        decoder_input: np.ndarray,
        encoder_states: np.ndarray,
        source_mask: np.ndarray | None = None,
    ) -> np.ndarray:
        check_array("decoder_input", decoder_input, ("N", None), kind="int")
        y = self.positions.forward(self.embed.forward(decoder_input))
        for layer in self.layers:
            y = layer.forward(y, encoder_states, source_mask)
        if self.norm is not None:
            y = self.norm.forward(y)
        return self.out.forward(y)

    def step(self, ids: np.ndarray, encoder_states: np.ndarray, source_mask: np.ndarray | None,
             cache: KeyValueCache) -> np.ndarray:
        """The logits (N, V) of the next token after ``ids`` (N,), the newest token: one position
        through every layer, the earlier ones' keys and values read from ``cache``."""
        y = self.positions.forward(self.embed.forward(ids[:, None]), start=cache.length)  # (N, 1, d)
        for layer, layer_cache in zip(self.layers, cache.layers):
            y = layer.step(y, encoder_states, source_mask, layer_cache)
        cache.length += 1
        if self.norm is not None:
            y = self.norm.forward(y)
        return self.out.forward(y)[:, 0]

    def backward(self, d_logits: np.ndarray) -> np.ndarray:
        """Returns the encoder states' gradient (the sum over the layers' cross-attentions)."""
        dy = self.out.backward(d_logits)
        if self.norm is not None:
            dy = self.norm.backward(dy)
        d_encoder_states = 0
        for layer in reversed(self.layers):
            dy, d_states = layer.backward(dy)
            d_encoder_states = d_encoder_states + d_states
        self.embed.backward(self.positions.backward(dy))
        return d_encoder_states


class TransformerSeq2seq(Layer):
    """The Transformer as a seq2seq model, with ``AttentionSeq2seq``'s interface.

    ``forward(source, source_mask, decoder_input, decoder_target, target_mask=None)`` returns
    the mean cross-entropy of the target tokens under teacher forcing (every target step at
    once: the decoder's causal mask stands in for the recurrence); ``generate`` decodes
    greedily.

    Built from ``config`` (``TransformerConfig``): vocabulary sizes, ``d_model``,
    ``num_heads``, ``num_layers``, ``feedforward_size``, ``norm_first``, ``dtype``.
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        self.encoder = self.add_child("encoder", TransformerEncoder(config, rng))
        self.decoder = self.add_child("decoder", TransformerDecoder(config, rng))
        self.loss_layer = SoftmaxCrossEntropy(config.label_smoothing)

    def forward(
        self, source, source_mask, decoder_input, decoder_target, target_mask=None
    ) -> float:
        sizes = check_array("source", source, ("N", None), kind="int")
        check_array(
            "decoder_target", decoder_target, decoder_input.shape, sizes, kind="int"
        )
        encoder_states = self.encoder.forward(source, source_mask)
        logits = self.decoder.forward(decoder_input, encoder_states, source_mask)
        return self.loss_layer.forward(logits, decoder_target, target_mask)

    def backward(self, dloss: float = 1.0) -> None:
        self.encoder.backward(self.decoder.backward(self.loss_layer.backward(dloss)))

    def attention_maps(self) -> dict[str, np.ndarray]:
        """Every layer's and head's weights from the last forward pass, L layers each:
        ``"encoder"`` (L, N, h, T_enc, T_enc), ``"decoder"`` (L, N, h, T_dec, T_dec) (causal:
        zero above the diagonal) and ``"cross"`` (L, N, h, T_dec, T_enc)."""
        layers = self.decoder.layers
        return {
            "encoder": np.stack(self.encoder.attention_weights),
            "decoder": np.stack(
                [layer.self_attention.attention_weights for layer in layers]
            ),
            "cross": np.stack(
                [layer.cross_attention.attention_weights for layer in layers]
            ),
        }

    def generate(self, source, source_mask, start_id: int, max_length: int, stop_id: int | None = None, *,
                 all_weights: bool = False, use_cache: bool = True):
        """Greedy decoding: append the most likely token, one step at a time; stop once every row
        has written ``stop_id``.

        With ``use_cache`` (the default) each step runs the decoder on the newest token only,
        reading the keys and values of the earlier ones from a ``KeyValueCache``
        (``_decode_cached``); without, each step runs it again over the whole prefix written so
        far (``_decode_uncached``). Both write the same tokens.

        Returns ids (N, T_out) and the last layer's cross-attention averaged over the heads
        (N, T_out, T_enc), the alignment the other models show; with ``all_weights=True``,
        every layer's and head's weights instead (as ``attention_maps``, for the whole output).
        """
        encoder_states = self.encoder.forward(source, source_mask)
        decode = self._decode_cached if use_cache else self._decode_uncached
        ids, maps = decode(encoder_states, source_mask, start_id, max_length, stop_id)
        maps["encoder"] = np.stack(self.encoder.attention_weights)
        return ids, (maps if all_weights else maps["cross"][-1].mean(axis=1))

    def _decode_cached(self, encoder_states, source_mask, start_id, max_length, stop_id):
        N = encoder_states.shape[0]
        cache = KeyValueCache(len(self.decoder.layers))
        ids = np.full((N, 1), start_id, dtype=np.int64)
        finished = np.zeros(N, dtype=bool)
        steps = []  # each step's weights: (L, N, h, 1, t) self-attention, (L, N, h, 1, T_enc) cross
        for _ in range(max_length):
            logits = self.decoder.step(ids[:, -1], encoder_states, source_mask, cache)  # (N, V)
            next_ids = logits.argmax(axis=-1)  # (N,)
            ids = np.concatenate([ids, next_ids[:, None]], axis=1)
            steps.append([(layer.self_attention.attention_weights, layer.cross_attention.attention_weights)
                          for layer in self.decoder.layers])
            if stop_id is not None:
                finished |= next_ids == stop_id
                if finished.all():
                    break
        return ids[:, 1:], _maps_from_steps(steps)

    def _decode_uncached(self, encoder_states, source_mask, start_id, max_length, stop_id):
        N = encoder_states.shape[0]
        ids = np.full((N, 1), start_id, dtype=np.int64)
        finished = np.zeros(N, dtype=bool)
        for _ in range(max_length):
            logits = self.decoder.forward(ids, encoder_states, source_mask)  # the whole prefix again
            next_ids = logits[:, -1].argmax(axis=-1)  # (N,)
            ids = np.concatenate([ids, next_ids[:, None]], axis=1)
            if stop_id is not None:
                finished |= next_ids == stop_id
                if finished.all():
                    break
        # Causal: the last pass's weights in row i are those of step i, so one more
        # pass over the output has them all.
        self.decoder.forward(ids[:, :-1], encoder_states, source_mask)
        maps = self.attention_maps()
        return ids[:, 1:], {"decoder": maps["decoder"], "cross": maps["cross"]}


def _maps_from_steps(steps: list) -> dict[str, np.ndarray]:
    """Every layer's and head's weights of a cached decoding, one step a row: ``"decoder"``
    (L, N, h, T_out, T_out), zero above the diagonal, and ``"cross"`` (L, N, h, T_out, T_enc)."""
    T_out = len(steps)
    layers = []
    for index in range(len(steps[0])):
        own = [step[index][0] for step in steps]  # (N, h, 1, t + 1) at step t
        rows = [np.pad(w, [(0, 0), (0, 0), (0, 0), (0, T_out - w.shape[-1])]) for w in own]
        cross = [step[index][1] for step in steps]  # (N, h, 1, T_enc)
        layers.append((np.concatenate(rows, axis=2), np.concatenate(cross, axis=2)))
    return {"decoder": np.stack([own for own, _ in layers]), "cross": np.stack([cross for _, cross in layers])}
