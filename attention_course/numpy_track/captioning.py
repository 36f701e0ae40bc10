"""Soft visual attention for image captioning ("show, attend and tell", Xu et al. 2015), chapter 9.

The image is a grid of ``L`` feature vectors ``f_1 .. f_L`` (``features``, N x L x D_f), one per
cell of a grid laid over it. The decoder writes the caption one word at a time; before each
word it looks at the grid with the state it has so far (Bahdanau's order: attend, then step)::

    h_0 = tanh(mean_l(f_l) W_init + b_init)
    e_tl = v_a . tanh(h_{t-1} W_a + f_l U_a)          # additive score, (N, L)
    alpha_t = softmax_l(e_tl),   z_t = sum_l alpha_tl f_l
    h_t = GRU([E y_{t-1} ; z_t], h_{t-1})
    p(y_t | y_<t, image) = softmax(tanh([h_t ; z_t] W_c + b_c) W_o + b_o)

Training minimises the cross-entropy of the caption plus Xu et al.'s doubly stochastic
regulariser ``lambda sum_l (1 - sum_t alpha_tl)^2`` (averaged over the batch): the weights of
every step sum to one over the cells by the softmax, and the regulariser asks that every cell
also receive about one unit of attention over the whole caption, so that no part of the image
is ignored.

With teacher forcing the decoder reads ``<bos> w_1 .. w_L`` and predicts ``w_1 .. w_L <eos>``
(``attention_course.data.captions.encode_captions``); ``target_mask`` marks the real steps.
Xu et al. use an LSTM; here the course's GRU (the lectures' form, or torch's with
``reset_after``).
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.configs import CaptionerConfig
from ..core.initializers import init_rng
from ..core.shapes import check_array
from .base import Layer, as_dtype, float_dtype
from .layers import Affine, Embedding, SoftmaxCrossEntropy, softmax, softmax_backward
from .recurrent import GRUCell

__all__ = ["GridAttention", "StaticImage", "CaptionDecoder", "coverage_penalty"]


class GridAttention(Layer):
    """Additive soft attention of a decoder state over a grid of features, one step at a time.

    ``keys = project(features)`` once per image (``f_l U_a``); then at every step
    ``step(features, keys, h_prev)`` gives ``(context, alpha, cache)``:
    ``alpha_l = softmax_l(v_a . tanh(h_prev W_a + f_l U_a))``, ``context = sum_l alpha_l f_l``.
    A decoder calls ``step`` once per word, so the caches are returned, not kept:
    ``step_backward(d_context, d_alpha, cache)`` returns ``(d_features, d_keys, d_h_prev)`` and
    *adds* to the gradients of ``W_a`` and ``v_a``; ``project_backward`` adds to ``U_a``'s. Zero
    them (``zero_grads()``) before a backward pass.

    Shapes:
        features: (N, L, D_f).  keys: (N, L, A).  h_prev: (N, H).
        W_a: (H, A).  U_a: (D_f, A).  v_a: (A,).
        returns: context (N, D_f), alpha (N, L).
    """

    def __init__(self, feature_size: int, hidden_size: int, attention_size: int, *, rng=None,
                 dtype=np.float64) -> None:
        super().__init__()
        self.feature_size, self.hidden_size = feature_size, hidden_size
        self.add_params(initializers.score(init_rng(rng), "additive", feature_size, hidden_size, attention_size),
                        dtype)
        self.attention_size = self.params["v_a"].shape[0]

    def project(self, features: np.ndarray) -> np.ndarray:
        """``f_l U_a`` for every cell: (N, L, A)."""
        float_dtype(features, "features")
        check_array("features", features, ("N", "L", self.feature_size))
        return features @ as_dtype(self.params["U_a"], features.dtype)

    def project_backward(self, features: np.ndarray, d_keys: np.ndarray) -> np.ndarray:
        """Adds ``U_a``'s gradient; returns the gradient of ``features`` through the keys."""
        D, A = self.feature_size, self.attention_size
        self.grads["U_a"] += features.reshape(-1, D).T @ d_keys.reshape(-1, A)
        return d_keys @ as_dtype(self.params["U_a"], d_keys.dtype).T

    def step(self, features: np.ndarray, keys: np.ndarray, h_prev: np.ndarray):
        """One decoder step's weights over the cells and its context."""
        dtype = features.dtype
        W, v = as_dtype(self.params["W_a"], dtype), as_dtype(self.params["v_a"], dtype)
        hidden = np.tanh(keys + (h_prev @ W)[:, None, :])  # (N, L, A)
        alpha = softmax(hidden @ v)  # (N, L)
        context = np.einsum("nl,nld->nd", alpha, features)  # (N, D_f)
        return context, alpha, (features, h_prev, hidden, alpha)

    def step_backward(self, d_context: np.ndarray, d_alpha: np.ndarray | None, cache):
        """Returns ``(d_features, d_keys, d_h_prev)``; adds to ``W_a``'s and ``v_a``'s gradients."""
        features, h_prev, hidden, alpha = cache
        dtype = d_context.dtype
        W, v = as_dtype(self.params["W_a"], dtype), as_dtype(self.params["v_a"], dtype)
        d_features = alpha[:, :, None] * d_context[:, None, :]  # through the weighted sum
        d_weights = np.einsum("nd,nld->nl", d_context, features)  # (N, L)
        if d_alpha is not None:
            d_weights = d_weights + d_alpha
        d_scores = softmax_backward(alpha, d_weights)  # (N, L)
        A = self.attention_size
        self.grads["v_a"] += d_scores.reshape(-1) @ hidden.reshape(-1, A)
        d_keys = d_scores[:, :, None] * v * (1 - hidden * hidden)  # (N, L, A)
        d_query = d_keys.sum(axis=1)  # (N, A)
        self.grads["W_a"] += h_prev.T @ d_query
        return d_features, d_keys, d_query @ W.T


class StaticImage(Layer):
    """The baseline without attention: every step reads the same vector, the mean of the grid's
    features (``context = (1/L) sum_l f_l``, as if ``alpha_l = 1/L`` whatever the state).

    The interface of ``GridAttention`` (``project``, ``step``, ``step_backward``,
    ``project_backward``), with no parameters and no keys (``attention_size`` 0).

    Shapes:
        features: (N, L, D_f).  returns: context (N, D_f), alpha (N, L), all 1/L.
    """

    attention_size = 0

    def __init__(self, feature_size: int) -> None:
        super().__init__()
        self.feature_size = feature_size

    def project(self, features: np.ndarray) -> np.ndarray:
        float_dtype(features, "features")
        check_array("features", features, ("N", "L", self.feature_size))
        return features[:, :, :0]  # no keys: (N, L, 0)

    def project_backward(self, features: np.ndarray, d_keys: np.ndarray) -> np.ndarray:
        return np.zeros_like(features)

    def step(self, features: np.ndarray, keys: np.ndarray, h_prev: np.ndarray):
        """The image's one vector, whatever ``h_prev``."""
        N, L, _ = features.shape
        return features.mean(axis=1), np.full((N, L), 1 / L, dtype=features.dtype), (features.shape, h_prev)

    def step_backward(self, d_context: np.ndarray, d_alpha: np.ndarray | None, cache):
        """Returns ``(d_features, d_keys, d_h_prev)``: the mean's gradient, nothing else."""
        (N, L, D), h_prev = cache
        d_features = np.broadcast_to(d_context[:, None, :] / L, (N, L, D))
        return d_features, np.zeros((N, L, 0), dtype=d_context.dtype), np.zeros_like(h_prev)


def make_image_context(config: CaptionerConfig, rng=None) -> Layer:
    """What the decoder reads of the image at each word, as ``config.context`` says."""
    c = config
    if c.context == "static":
        return StaticImage(c.feature_size)
    return GridAttention(c.feature_size, c.hidden_size, c.attention_size, rng=rng, dtype=np.dtype(c.dtype))


def coverage_penalty(attention_weights: np.ndarray, step_mask: np.ndarray | None,
                     weight: float):
    """Xu et al.'s doubly stochastic regulariser and its gradient.

    ``penalty = weight * (1 / N) sum_n sum_l (1 - sum_{t real} alpha_ntl)^2``; padded
    steps (``step_mask`` False) take no part.

    Shapes:
        attention_weights: (N, T, L).  step_mask: (N, T) bool or None.
        returns: (penalty: float, d_attention_weights: (N, T, L)).
    """
    N, T, L = attention_weights.shape
    dtype = attention_weights.dtype
    real = np.ones((N, T), dtype) if step_mask is None else step_mask.astype(dtype)
    totals = np.einsum("nt,ntl->nl", real, attention_weights)  # (N, L): per cell
    shortfall = 1 - totals
    penalty = weight * float((shortfall * shortfall).sum()) / N
    d_weights = (-2 * weight / N) * shortfall[:, None, :] * real[:, :, None]
    return penalty, d_weights


class CaptionDecoder(Layer):
    """A caption decoder with soft attention over a feature grid, and its training loss.

    ``forward(features, decoder_input, decoder_target, target_mask)`` returns the mean
    cross-entropy of the real target words plus the doubly stochastic regulariser
    (``config.coverage_weight``); ``backward()`` fills every gradient and returns the gradient
    of ``features``; ``generate(...)`` decodes greedily. After either, ``attention_weights``
    holds ``alpha`` for every step, (N, T, L).

    Built from ``config`` (a ``CaptionerConfig``): ``vocab_size``, ``feature_size`` (D_f),
    ``embed_dim``, ``hidden_size``, ``attention_size``, ``coverage_weight``, ``reset_after``,
    ``context`` (``"static"``: the baseline without attention, ``StaticImage``), ``dtype``; weights
    drawn in the order embed, init, attention, cell, combine, out (as on the torch track).

    Shapes:
        features: (N, L, D_f).  decoder_input, decoder_target: (N, T) int.  target_mask: (N, T) bool.
        returns: the loss (a float); ``attention_weights``: (N, T, L).
    """

    def __init__(self, config: CaptionerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = np.dtype(c.dtype)
        E, D, H = c.embed_dim, c.feature_size, c.hidden_size
        self.embed = self.add_child("embed", Embedding(c.vocab_size, E, rng=rng, dtype=dtype))
        self.init = self.add_child("init", Affine(D, H, rng=rng, dtype=dtype))
        self.attention = self.add_child("attention", make_image_context(c, rng))
        self.cell = self.add_child("cell", GRUCell(E + D, H, reset_after=c.reset_after, rng=rng, dtype=dtype))
        self.combine = self.add_child("combine", Affine(H + D, H, rng=rng, dtype=dtype))
        self.out = self.add_child("out", Affine(H, c.vocab_size, rng=rng, dtype=dtype))
        self.loss_layer = SoftmaxCrossEntropy()
        self.attention_weights = None
        self._cache = None

    def _initial_state(self, features: np.ndarray) -> np.ndarray:
        return np.tanh(self.init.forward(features.mean(axis=1)))  # (N, H)

    def _check(self, features, decoder_input) -> dict:
        float_dtype(features, "features")
        sizes = check_array("features", features, ("N", "L", self.config.feature_size))
        check_array("decoder_input", decoder_input, ("N", "T"), sizes, kind="int")
        return sizes

    def _step(self, features, keys, h, embedded, p):
        """Attend with ``h``, then one GRU step on ``[E y ; z]``."""
        context, alpha, attention_cache = self.attention.step(features, keys, h)
        x = np.concatenate([embedded, context], axis=1)  # (N, E + D_f)
        W_x, b = (as_dtype(self.cell.params[name], x.dtype) for name in ("W_x", "b"))
        (h_new,), cell_cache = self.cell._step(x @ W_x + b, (h,), p)
        return h_new, context, alpha, (attention_cache, x, cell_cache)

    def _output(self, states: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        self._attentional = np.tanh(self.combine.forward(np.concatenate([states, contexts], axis=-1)))
        return self.out.forward(self._attentional)  # (N, T, V)

    def _run(self, features: np.ndarray, decoder_input: np.ndarray):
        """Every step, teacher forced: states, contexts, weights, what backward needs."""
        self._check(features, decoder_input)
        h0 = h = self._initial_state(features)
        keys = self.attention.project(features)  # (N, L, A)
        embedded = self.embed.forward(decoder_input)  # (N, T, E)
        p = self.cell._recurrent_params(features.dtype)
        states, contexts, alphas, step_caches = [], [], [], []
        for t in range(decoder_input.shape[1]):
            h, context, alpha, cache = self._step(features, keys, h, embedded[:, t], p)
            states.append(h)
            contexts.append(context)
            alphas.append(alpha)
            step_caches.append(cache)
        self.attention_weights = np.stack(alphas, axis=1)  # (N, T, L)
        states = np.stack(states, axis=1)  # (N, T, H)
        contexts = np.stack(contexts, axis=1)  # (N, T, D_f)
        return states, contexts, (h0, step_caches, p)

    def attend(self, features: np.ndarray, decoder_input: np.ndarray) -> np.ndarray:
        """The weights of every step under teacher forcing, (N, T, L): where each word looks."""
        self._run(features, decoder_input)
        return self.attention_weights

    def forward(self, features: np.ndarray, decoder_input: np.ndarray, decoder_target: np.ndarray,
                target_mask: np.ndarray | None = None) -> float:
        states, contexts, (h0, step_caches, p) = self._run(features, decoder_input)
        check_array("decoder_target", decoder_target, decoder_input.shape, kind="int")
        if target_mask is not None:
            check_array("target_mask", target_mask, decoder_input.shape, kind="bool")
        logits = self._output(states, contexts)
        loss = self.loss_layer.forward(logits, decoder_target, target_mask)
        penalty, d_alphas = coverage_penalty(self.attention_weights, target_mask, self.config.coverage_weight)
        self._cache = (features, h0, step_caches, p, d_alphas)
        return loss + penalty

    def backward(self, dloss: float = 1.0) -> np.ndarray:
        features, h0, step_caches, p, d_alphas = self._cache
        H, E = self.config.hidden_size, self.config.embed_dim
        d_attentional = self.out.backward(self.loss_layer.backward(dloss))
        d_joined = self.combine.backward(d_attentional * (1 - self._attentional * self._attentional))
        d_states, d_contexts = d_joined[..., :H], d_joined[..., H:]  # (N, T, H), (N, T, D_f)
        d_alphas = d_alphas * dloss
        self.attention.zero_grads()
        cell = self.cell
        dW_h = np.zeros_like(p["W_h"])
        dW_x, db, db_h = (np.zeros_like(cell.params[name], dtype=features.dtype) for name in ("W_x", "b", "b_h"))
        W_x = as_dtype(cell.params["W_x"], features.dtype)
        d_features = np.zeros_like(features)
        d_keys = np.zeros(features.shape[:2] + (self.attention.attention_size,), dtype=features.dtype)
        d_embedded = np.zeros(d_states.shape[:2] + (E,), dtype=features.dtype)
        dh = np.zeros_like(h0)
        for t in range(len(step_caches) - 1, -1, -1):
            attention_cache, x, cell_cache = step_caches[t]
            dxw, (dh_prev,), d_recurrent_bias = cell._step_backward(cell_cache, (dh + d_states[:, t],), p, dW_h)
            dW_x += x.T @ dxw
            db += dxw.sum(axis=0)
            db_h += d_recurrent_bias.sum(axis=0)
            dx = dxw @ W_x.T  # (N, E + D_f)
            d_embedded[:, t] = dx[:, :E]
            d_feat, d_k, dh_attention = self.attention.step_backward(dx[:, E:] + d_contexts[:, t], d_alphas[:, t],
                                                                     attention_cache)
            d_features += d_feat
            d_keys += d_k
            dh = dh_prev + dh_attention
        for name, grad in (("W_x", dW_x), ("W_h", dW_h), ("b", db), ("b_h", db_h)):
            cell.grads[name][...] = grad
        self.embed.backward(d_embedded)
        d_features += self.attention.project_backward(features, d_keys)
        d_mean = self.init.backward(dh * (1 - h0 * h0))  # (N, D_f)
        d_features += d_mean[:, None, :] / features.shape[1]
        return d_features

    def generate(self, features: np.ndarray, start_id: int, max_length: int,
                 stop_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Greedy decoding: feed back the likeliest word. Returns ids (N, T_out) and alpha (N, T_out, L).

        Stops early once every caption has produced ``stop_id``.
        """
        float_dtype(features, "features")
        check_array("features", features, ("N", "L", self.config.feature_size))
        N = features.shape[0]
        h = self._initial_state(features)
        keys = self.attention.project(features)
        p = self.cell._recurrent_params(features.dtype)
        ids = np.full(N, start_id, dtype=np.int64)
        out, alphas = [], []
        finished = np.zeros(N, dtype=bool)
        for _ in range(max_length):
            h, context, alpha, _ = self._step(features, keys, h, self.embed.forward(ids), p)
            logits = self._output(h[:, None], context[:, None])[:, 0]  # (N, V)
            ids = logits.argmax(axis=-1)
            out.append(ids)
            alphas.append(alpha)
            if stop_id is not None:
                finished |= ids == stop_id
                if finished.all():
                    break
        return np.stack(out, axis=1), np.stack(alphas, axis=1)
