"""The Transformer in torch: the same layers, parameter names, equations and initial values as
``attention_course.numpy_track.transformer`` (read its docstring); autograd does the backward pass.

``MultiHeadAttention`` runs ``F.scaled_dot_product_attention`` (fused kernels, flash attention on
a GPU) whenever the weights are not asked for (``need_weights=False``, the default while
training); otherwise it computes them step by step and keeps them. Given the same weights it
computes what ``torch.nn.MultiheadAttention`` does (``in_proj_weight = [W_q ; W_k ; W_v]^T``,
``out_proj.weight = W_o^T``, and torch's masks say True where ours say False).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..core import initializers
from ..core.configs import TransformerConfig
from ..core.initializers import init_rng
from .base import ShapeError, check_tensor, register_params, resolve_dtype
from .functional import (
    scaled_dot_product_attention,
    scaled_dot_product_attention_reference,
)
from .layers import Affine, Embedding, SoftmaxCrossEntropy

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

LAYER_NORM_EPS = 1e-5


def positional_encoding(
    T: int, d_model: int, *, like: torch.Tensor | None = None
) -> torch.Tensor:
    """``PE[t, 2i] = sin(t / 10000^(2i/d))``, ``PE[t, 2i+1] = cos(t / 10000^(2i/d))``, on ``like``'s
    device and dtype (float32 on the CPU without it). Computed in float64, then cast.

    Shapes:
        returns: (T, d_model).
    """
    device = like.device if like is not None else None
    position = torch.arange(T, dtype=torch.float64, device=device).unsqueeze(
        1
    )  # (T, 1)
    frequency = torch.exp(
        -math.log(10000.0)
        * torch.arange(0, d_model, 2, dtype=torch.float64, device=device)
        / d_model
    )
    table = torch.zeros(T, d_model, dtype=torch.float64, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table.to(like.dtype if like is not None else torch.float32)


def attention_mask(
    key_mask: torch.Tensor | None, T_q: int, T_k: int, causal: bool, device=None
) -> torch.Tensor | None:
    """True where a query may attend a key, broadcastable to (N, h, T_q, T_k), or None for everywhere.

    Shapes:
        key_mask: (N, T_k) bool or None.  returns: (N, 1, T_q, T_k), (1, 1, T_q, T_k) or None.
    """
    mask = None if key_mask is None else key_mask[:, None, None, :]  # (N, 1, 1, T_k)
    if causal:
        device = key_mask.device if key_mask is not None else device
        past = torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(T_k - T_q)[
            None, None
        ]
        mask = past if mask is None else mask & past
    return mask


class LayerNorm(nn.Module):
    """``y = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta`` over the last axis (``F.layer_norm``).

    Shapes:
        x: (..., D).  gamma, beta: (D,).  returns: (..., D).
    """

    def __init__(self, size: int, *, dtype=torch.float32) -> None:
        super().__init__()
        import numpy as np

        self.size = size
        register_params(self, {"gamma": np.ones(size), "beta": np.zeros(size)}, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1:] != (self.size,):
            raise ShapeError(
                f"x: expected shape (..., {self.size}), got {tuple(x.shape)}"
            )
        return F.layer_norm(x, (self.size,), self.gamma, self.beta, LAYER_NORM_EPS)


class PositionalEncoding(nn.Module):
    """``x sqrt(d_model) + PE[:T]``.

    Shapes:
        x: (N, T, d_model).  returns: (N, T, d_model).
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self._table = None

    def table(self, T: int, like: torch.Tensor) -> torch.Tensor:
        cached = self._table
        if (
            cached is None
            or len(cached) < T
            or cached.dtype != like.dtype
            or cached.device != like.device
        ):
            self._table = positional_encoding(
                max(T, 2 * (0 if cached is None else len(cached))),
                self.d_model,
                like=like,
            )
        return self._table[:T]

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``start``: the position of ``x[:, 0]`` (a decoder that writes one token at a time)."""
        check_tensor("x", x, (None, None, self.d_model))
        return x * math.sqrt(self.d_model) + self.table(start + x.shape[1], x)[start:]


class FeedForward(nn.Module):
    """``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`` at every position (``expand``, then ``contract``).

    Shapes:
        x: (..., d_model).  returns: (..., d_model).
    """

    def __init__(
        self, d_model: int, inner_size: int, *, rng=None, dtype=torch.float32
    ) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.expand = Affine(d_model, inner_size, rng=rng, dtype=dtype)
        self.contract = Affine(inner_size, d_model, rng=rng, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.contract(torch.relu(self.expand(x)))


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention, self- (``source=None``) or cross-attention.

    ``need_weights=True`` computes the weights step by step and keeps them in
    ``attention_weights`` (N, h, T_q, T_k); otherwise ``F.scaled_dot_product_attention`` runs and
    ``attention_weights`` is None.

    Shapes:
        query: (N, T_q, d_model).  source: (N, T_k, d_model) or None.  key_mask: (N, T_k) bool or None.
        returns: (N, T_q, d_model).
    """

    def __init__(
        self, d_model: int, num_heads: int, *, rng=None, dtype=torch.float32
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(
                f"d_model must be a multiple of num_heads, got {d_model} and {num_heads}"
            )
        rng = init_rng(rng)
        self.d_model, self.num_heads, self.head_size = (
            d_model,
            num_heads,
            d_model // num_heads,
        )
        for name in ("q", "k", "v", "o"):
            initial = initializers.affine(rng, d_model, d_model)
            register_params(
                self, {f"W_{name}": initial["W"], f"b_{name}": initial["b"]}, dtype
            )
        self.attention_weights = None

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        N, T, _ = x.shape
        return x.view(N, T, self.num_heads, self.head_size).transpose(
            1, 2
        )  # (N, h, T, d_k)

    def forward(
        self,
        query: torch.Tensor,
        source: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
        *,
        causal: bool = False,
        need_weights: bool = False,
    ) -> torch.Tensor:
        d = self.d_model
        sizes = check_tensor("query", query, ("N", "T_q", d))
        if source is not None:
            check_tensor("source", source, ("N", "T_k", d), sizes)
        N, T_q, _ = query.shape
        T_k = T_q if source is None else source.shape[1]
        if key_mask is not None:
            check_tensor("key_mask", key_mask, (N, T_k), kind="bool")
        if causal and T_q > T_k:
            raise ShapeError(f"causal: needs at least as many keys as queries, "
                             f"got T_q={T_q}, T_k={T_k}")
        if source is None:  # one product for the three projections
            W_qkv = torch.cat([self.W_q, self.W_k, self.W_v], dim=1)
            Q, K, V = (query @ W_qkv + torch.cat([self.b_q, self.b_k, self.b_v])).chunk(
                3, dim=-1
            )
        else:
            Q = query @ self.W_q + self.b_q
            K, V = (
                source @ torch.cat([self.W_k, self.W_v], dim=1)
                + torch.cat([self.b_k, self.b_v])
            ).chunk(2, dim=-1)
        Q, K, V = (
            self._split_heads(x.contiguous()) for x in (Q, K, V)
        )  # (N, h, T, d_k)
        mask = attention_mask(key_mask, T_q, T_k, causal, device=query.device)
        if need_weights:
            heads, self.attention_weights = scaled_dot_product_attention_reference(
                Q, K, V, mask
            )
        else:
            self.attention_weights = None
            heads = scaled_dot_product_attention(Q, K, V, mask)  # (N, h, T_q, d_k)
        concat = heads.transpose(1, 2).reshape(N, T_q, d)  # (N, T_q, d_model)
        return concat @ self.W_o + self.b_o

    def keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every head's keys and values of ``source`` (N, T, d_model): (N, h, T, d_k) each."""
        K, V = (source @ torch.cat([self.W_k, self.W_v], dim=1) + torch.cat([self.b_k, self.b_v])).chunk(2, dim=-1)
        return self._split_heads(K.contiguous()), self._split_heads(V.contiguous())

    def attend(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``query`` (N, T_q, d_model) against keys and values already split into heads
        (``keys_values``; a decoder's cache), keeping the weights in ``attention_weights``.

        Shapes:
            keys, values: (N, h, T_k, d_k).  key_mask: (N, T_k) bool or None.  returns: (N, T_q, d_model).
        """
        N, T_q, _ = query.shape
        Q = self._split_heads(query @ self.W_q + self.b_q)  # (N, h, T_q, d_k)
        mask = attention_mask(key_mask, T_q, keys.shape[2], False, device=query.device)
        heads, self.attention_weights = scaled_dot_product_attention_reference(Q, keys, values, mask)
        return heads.transpose(1, 2).reshape(N, T_q, self.d_model) @ self.W_o + self.b_o


class _Sublayer:
    """``x + f(LN(x))`` (pre-norm) or ``LN(x + f(x))`` (post-norm)."""

    @staticmethod
    def apply(
        x: torch.Tensor, norm: LayerNorm, norm_first: bool, function
    ) -> torch.Tensor:
        return x + function(norm(x)) if norm_first else norm(x + function(x))


class TransformerEncoderLayer(nn.Module):
    """Pre-norm: ``x = x + SelfAttn(LN_1(x))``, ``x = x + FFN(LN_2(x))`` (post-norm: ``LN(x + f(x))``).

    Shapes:
        x: (N, T_enc, d_model).  mask: (N, T_enc) bool or None.  returns: (N, T_enc, d_model).
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c, dtype = config, resolve_dtype(config.dtype)
        self.norm_first = c.norm_first
        self.self_attention = MultiHeadAttention(
            c.d_model, c.num_heads, rng=rng, dtype=dtype
        )
        self.feed_forward = FeedForward(c.d_model, c.inner_size, rng=rng, dtype=dtype)
        self.norm_1 = LayerNorm(c.d_model, dtype=dtype)
        self.norm_2 = LayerNorm(c.d_model, dtype=dtype)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        x = _Sublayer.apply(
            x,
            self.norm_1,
            self.norm_first,
            lambda y: self.self_attention(y, None, mask, need_weights=need_weights),
        )
        return _Sublayer.apply(x, self.norm_2, self.norm_first, self.feed_forward)


class TransformerDecoderLayer(nn.Module):
    """Pre-norm: ``y = y + SelfAttn(LN_1(y), causal)``, ``y = y + CrossAttn(LN_2(y), z, source_mask)``,
    ``y = y + FFN(LN_3(y))``.

    Shapes:
        y: (N, T_dec, d_model).  encoder_states: (N, T_enc, d_model).  source_mask: (N, T_enc) bool or None.
        returns: (N, T_dec, d_model).
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c, dtype = config, resolve_dtype(config.dtype)
        self.norm_first = c.norm_first
        self.self_attention = MultiHeadAttention(
            c.d_model, c.num_heads, rng=rng, dtype=dtype
        )
        self.cross_attention = MultiHeadAttention(
            c.d_model, c.num_heads, rng=rng, dtype=dtype
        )
        self.feed_forward = FeedForward(c.d_model, c.inner_size, rng=rng, dtype=dtype)
        self.norm_1 = LayerNorm(c.d_model, dtype=dtype)
        self.norm_2 = LayerNorm(c.d_model, dtype=dtype)
        self.norm_3 = LayerNorm(c.d_model, dtype=dtype)

    def forward(
        self,
        y: torch.Tensor,
        encoder_states: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        y = _Sublayer.apply(
            y,
            self.norm_1,
            self.norm_first,
            lambda x: self.self_attention(
                x, None, None, causal=True, need_weights=need_weights
            ),
        )
        y = _Sublayer.apply(
            y,
            self.norm_2,
            self.norm_first,
            lambda x: self.cross_attention(
                x, encoder_states, source_mask, need_weights=need_weights
            ),
        )
        return _Sublayer.apply(y, self.norm_3, self.norm_first, self.feed_forward)

    def step(self, y: torch.Tensor, encoder_states: torch.Tensor, source_mask: torch.Tensor | None,
             cache: "LayerCache") -> torch.Tensor:
        """``forward`` for the newest position only, ``y`` (N, 1, d_model), the earlier positions'
        keys and values (and the encoder's) read from ``cache`` (see the NumPy track's)."""
        def self_attention(x):
            cache.append(*self.self_attention.keys_values(x))  # (N, h, 1, d_k) each
            return self.self_attention.attend(x, cache.keys, cache.values)

        def cross_attention(x):
            return self.cross_attention.attend(x, *cache.source(self.cross_attention, encoder_states), source_mask)

        y = _Sublayer.apply(y, self.norm_1, self.norm_first, self_attention)
        y = _Sublayer.apply(y, self.norm_2, self.norm_first, cross_attention)
        return _Sublayer.apply(y, self.norm_3, self.norm_first, self.feed_forward)


class LayerCache:
    """What one decoder layer keeps between decoding steps: its self-attention's keys and values
    of every position written so far, and its cross-attention's of the encoder's states.

    Shapes:
        keys, values: (N, h, t, d_k) after t steps.
    """

    def __init__(self) -> None:
        self.keys = self.values = None
        self._source = None

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Add the newest position's keys and values (N, h, 1, d_k) after the earlier ones'."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)
            self.values = torch.cat([self.values, values], dim=2)

    def source(self, attention: MultiHeadAttention, encoder_states: torch.Tensor):
        """The encoder states' keys and values for ``attention``, computed once."""
        if self._source is None:
            self._source = attention.keys_values(encoder_states)
        return self._source


class KeyValueCache:
    """A ``LayerCache`` per decoder layer, and the number of positions decoded so far."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(num_layers)]
        self.length = 0


class TransformerEncoder(nn.Module):
    """Source embedding with positions, the encoder layers, (pre-norm) a final LayerNorm.

    Shapes:
        source: (N, T_enc) int.  mask: (N, T_enc) bool or None.  returns: (N, T_enc, d_model).
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        self.embed = Embedding(c.source_vocab_size, c.d_model, rng=rng, dtype=dtype)
        self.positions = PositionalEncoding(c.d_model)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(c, rng) for _ in range(c.num_layers)
        )
        self.norm = LayerNorm(c.d_model, dtype=dtype) if c.norm_first else None

    @property
    def attention_weights(self) -> list:
        return [layer.self_attention.attention_weights for layer in self.layers]

    def forward(
        self,
        source: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        check_tensor("source", source, ("N", None), kind="int")
        if mask is not None:
            check_tensor("mask", mask, tuple(source.shape), kind="bool")
        x = self.positions(self.embed(source))
        for layer in self.layers:
            x = layer(x, mask, need_weights)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(nn.Module):
    """Target embedding with positions, the decoder layers, (pre-norm) a final LayerNorm, the output map.

    Shapes:
        decoder_input: (N, T_dec) int.  encoder_states: (N, T_enc, d_model).
        source_mask: (N, T_enc) bool or None.  returns logits: (N, T_dec, V).
    """

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        self.embed = Embedding(c.target_vocab_size, c.d_model, rng=rng, dtype=dtype)
        self.positions = PositionalEncoding(c.d_model)
        self.layers = nn.ModuleList(
            TransformerDecoderLayer(c, rng) for _ in range(c.num_layers)
        )
        self.norm = LayerNorm(c.d_model, dtype=dtype) if c.norm_first else None
        self.out = Affine(c.d_model, c.target_vocab_size, rng=rng, dtype=dtype)

    def forward(
        self,
        decoder_input: torch.Tensor,
        encoder_states: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        check_tensor("decoder_input", decoder_input, ("N", None), kind="int")
        y = self.positions(self.embed(decoder_input))
        for layer in self.layers:
            y = layer(y, encoder_states, source_mask, need_weights)
        return self.out(y if self.norm is None else self.norm(y))

    def step(self, ids: torch.Tensor, encoder_states: torch.Tensor, source_mask: torch.Tensor | None,
             cache: KeyValueCache) -> torch.Tensor:
        """The logits (N, V) of the next token after ``ids`` (N,), the newest token: one position
        through every layer, the earlier ones' keys and values read from ``cache``."""
        y = self.positions(self.embed(ids.unsqueeze(1)), start=cache.length)  # (N, 1, d_model)
        for layer, layer_cache in zip(self.layers, cache.layers):
            y = layer.step(y, encoder_states, source_mask, layer_cache)
        cache.length += 1
        return self.out(y if self.norm is None else self.norm(y))[:, 0]


class TransformerSeq2seq(nn.Module):
    """The Transformer as a seq2seq model, with ``AttentionSeq2seq``'s interface (see the NumPy track's)."""

    def __init__(self, config: TransformerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        self.encoder = TransformerEncoder(config, rng)
        self.decoder = TransformerDecoder(config, rng)
        self.loss_layer = SoftmaxCrossEntropy(config.label_smoothing)

    def forward(
        self, source, source_mask, decoder_input, decoder_target, target_mask=None
    ) -> torch.Tensor:
        """The mean cross-entropy of the target tokens under teacher forcing."""
        sizes = check_tensor("source", source, ("N", None), kind="int")
        check_tensor(
            "decoder_target",
            decoder_target,
            tuple(decoder_input.shape),
            sizes,
            kind="int",
        )
        need_weights = not self.training
        encoder_states = self.encoder(source, source_mask, need_weights)
        logits = self.decoder(decoder_input, encoder_states, source_mask, need_weights)
        return self.loss_layer(logits, decoder_target, target_mask)

    def attention_maps(self) -> dict[str, torch.Tensor]:
        """Every layer's and head's weights from the last pass that kept them (``need_weights``):
        ``"encoder"`` (L, N, h, T_enc, T_enc), ``"decoder"`` (L, N, h, T_dec, T_dec), ``"cross"`` (L, N, h, T_dec, T_enc)."""
        layers = self.decoder.layers
        return {
            "encoder": torch.stack(self.encoder.attention_weights),
            "decoder": torch.stack(
                [layer.self_attention.attention_weights for layer in layers]
            ),
            "cross": torch.stack(
                [layer.cross_attention.attention_weights for layer in layers]
            ),
        }

    @torch.no_grad()
    def generate(self, source, source_mask, start_id: int, max_length: int, stop_id: int | None = None, *,
                 all_weights: bool = False, use_cache: bool = True):
        """Greedy decoding, with a key/value cache (``use_cache``, the default) or running the decoder
        over the whole prefix at every step (see the NumPy track's). Returns ids (N, T_out) and the last
        layer's cross-attention averaged over the heads (N, T_out, T_enc); with ``all_weights=True``,
        ``attention_maps`` for the whole output."""
        encoder_states = self.encoder(source, source_mask, need_weights=True)
        decode = self._decode_cached if use_cache else self._decode_uncached
        ids, maps = decode(encoder_states, source_mask, start_id, max_length, stop_id)
        maps["encoder"] = torch.stack(self.encoder.attention_weights)
        return ids, (maps if all_weights else maps["cross"][-1].mean(dim=1))

    def _decode_cached(self, encoder_states, source_mask, start_id, max_length, stop_id):
        N = encoder_states.shape[0]
        device = encoder_states.device
        cache = KeyValueCache(len(self.decoder.layers))
        ids = torch.full((N, 1), start_id, dtype=torch.long, device=device)
        finished = torch.zeros(N, dtype=torch.bool, device=device)
        steps = []
        for _ in range(max_length):
            next_ids = self.decoder.step(ids[:, -1], encoder_states, source_mask, cache).argmax(dim=-1)  # (N,)
            ids = torch.cat([ids, next_ids.unsqueeze(1)], dim=1)
            steps.append([(layer.self_attention.attention_weights, layer.cross_attention.attention_weights)
                          for layer in self.decoder.layers])
            if stop_id is not None:
                finished |= next_ids == stop_id
                if bool(finished.all()):
                    break
        return ids[:, 1:], _maps_from_steps(steps)

    def _decode_uncached(self, encoder_states, source_mask, start_id, max_length, stop_id):
        N = encoder_states.shape[0]
        ids = torch.full((N, 1), start_id, dtype=torch.long, device=encoder_states.device)
        finished = torch.zeros(N, dtype=torch.bool, device=encoder_states.device)
        for _ in range(max_length):
            next_ids = self.decoder(ids, encoder_states, source_mask)[:, -1].argmax(dim=-1)  # (N,)
            ids = torch.cat([ids, next_ids.unsqueeze(1)], dim=1)
            if stop_id is not None:
                finished |= next_ids == stop_id
                if bool(finished.all()):
                    break
        # The causal mask makes the last pass's weights of row i those of step i.
        self.decoder(ids[:, :-1], encoder_states, source_mask, need_weights=True)
        maps = self.attention_maps()
        return ids[:, 1:], {"decoder": maps["decoder"], "cross": maps["cross"]}


def _maps_from_steps(steps: list) -> dict[str, torch.Tensor]:
    """Every layer's and head's weights of a cached decoding, one step a row: ``"decoder"``
    (L, N, h, T_out, T_out), zero above the diagonal, and ``"cross"`` (L, N, h, T_out, T_enc)."""
    T_out = len(steps)
    own, cross = [], []
    for index in range(len(steps[0])):
        rows = [F.pad(step[index][0], (0, T_out - step[index][0].shape[-1])) for step in steps]
        own.append(torch.cat(rows, dim=2))
        cross.append(torch.cat([step[index][1] for step in steps], dim=2))
    return {"decoder": torch.stack(own), "cross": torch.stack(cross)}
