"""Seeded initial values, as plain float64 NumPy arrays keyed by parameter name.

Both tracks take their starting weights from here (the NumPy track casts them to its dtype, the
torch track wraps them in ``nn.Parameter``), so for one seed they start from identical weights
without building each other's layers. The values are drawn from ``rng`` in a fixed order: a
model built part by part in the same order consumes the same random numbers on either track.

The ranges follow PyTorch's defaults where the course has a torch counterpart: recurrent weights
and ``Affine`` uniform in ``±1/sqrt(fan)``, embeddings normal with standard deviation 0.1, biases 0.
"""

from __future__ import annotations

import numpy as np

from .registries import cell_spec, score_sizes, score_spec

__all__ = ["init_rng", "embedding", "affine", "recurrent_cell", "score", "local_position", "learned_baseline",
           "uniform_embedding", "attention_pooling", "memory"]

Params = dict[str, np.ndarray]


def init_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    """A Generator from a Generator, a seed, or None (seed 0: every layer is deterministic)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(0 if rng is None else rng)


def embedding(rng: np.random.Generator, vocab_size: int, embed_dim: int) -> Params:
    """``W`` (V, D), normal with standard deviation 0.1."""
    return {"W": rng.standard_normal((vocab_size, embed_dim)) * 0.1}


def affine(rng: np.random.Generator, in_features: int, out_features: int, bias: bool = True) -> Params:
    """``W`` (D_in, D_out) uniform in ``±1/sqrt(D_in)``; ``b`` (D_out,) zero."""
    scale = 1.0 / np.sqrt(in_features)
    params = {"W": rng.uniform(-scale, scale, (in_features, out_features))}
    if bias:
        params["b"] = np.zeros(out_features)
    return params


def recurrent_cell(rng: np.random.Generator, cell: str, input_size: int, hidden_size: int) -> Params:
    """``W_x`` (D, G*H) and ``W_h`` (H, G*H) uniform in ``±1/sqrt(H)``; ``b`` (G*H,) zero; the GRU also ``b_h``.

    ``G`` is the number of gate blocks (1 for the RNN, 4 for the LSTM, 3 for the GRU).
    """
    if input_size < 1 or hidden_size < 1:
        raise ValueError(f"input_size and hidden_size must be >= 1, got {input_size} and {hidden_size}")
    G, H = cell_spec(cell).num_gates, hidden_size
    bound = 1.0 / np.sqrt(H)
    params = {
        "W_x": rng.uniform(-bound, bound, (input_size, G * H)),
        "W_h": rng.uniform(-bound, bound, (H, G * H)),
        "b": np.zeros(G * H),
    }
    if cell == "gru":  # a recurrent bias of its own: in torch's form the reset gate scales it, r * (h W_hn + b_hn)
        params["b_h"] = np.zeros(G * H)
    return params


def score(rng: np.random.Generator, name: str, encoder_size: int, decoder_size: int,
          attention_size: int | None = None) -> Params:
    """The parameters of the score function ``name`` (none for ``dot`` and ``scaled_dot``).

    ``general``: ``W_a`` (H_dec, H_enc) uniform in ``±1/sqrt(H_dec)``. ``additive``: ``W_a``
    (H_dec, A), ``U_a`` (H_enc, A), ``v_a`` (A,), each uniform in ``±1/sqrt(fan_in)``;
    ``A = attention_size``, by default ``H_dec``.
    """
    encoder_size, decoder_size = score_sizes(name, encoder_size, decoder_size)
    if not score_spec(name).parameters:
        return {}
    if name == "general":
        bound = 1.0 / np.sqrt(decoder_size)
        return {"W_a": rng.uniform(-bound, bound, (decoder_size, encoder_size))}
    A = attention_size or decoder_size
    return {
        "W_a": rng.uniform(-1, 1, (decoder_size, A)) / np.sqrt(decoder_size),
        "U_a": rng.uniform(-1, 1, (encoder_size, A)) / np.sqrt(encoder_size),
        "v_a": rng.uniform(-1, 1, A) / np.sqrt(A),
    }


def local_position(rng: np.random.Generator, decoder_size: int, attention_size: int | None = None) -> Params:
    """Local-p's aligned position ``p_i = S sigmoid(v_p^T tanh(W_p s_i))``: ``W_p`` (H_dec, A) and
    ``v_p`` (A,), each uniform in ``±1/sqrt(fan_in)`` (as the additive score); ``A`` by default ``H_dec``."""
    if decoder_size < 1:
        raise ValueError(f"decoder_size must be >= 1, got {decoder_size}")
    A = attention_size or decoder_size
    return {
        "W_p": rng.uniform(-1, 1, (decoder_size, A)) / np.sqrt(decoder_size),
        "v_p": rng.uniform(-1, 1, A) / np.sqrt(A),
    }


def learned_baseline(decoder_size: int) -> Params:
    """Hard attention's learned REINFORCE baseline ``b_i = s_i . v_b + b_b``: ``v_b`` (H_dec,) and
    ``b_b`` (1,), both zero (it starts as no baseline, and draws nothing from the generator)."""
    return {"v_b": np.zeros(decoder_size), "b_b": np.zeros(1)}


def uniform_embedding(rng: np.random.Generator, vocab_size: int, embed_dim: int, bound: float = 1.0) -> Params:
    """``W`` (V, D) uniform in ``±bound``: the lectures' classifier draws its embeddings this way
    (``tf.random_uniform([vocabulary_size, EMBEDDING_DIM], -1.0, 1.0)``)."""
    return {"W": rng.uniform(-bound, bound, (vocab_size, embed_dim))}


def attention_pooling(rng: np.random.Generator, input_size: int, attention_size: int) -> Params:
    """``W_proj`` (H, A), ``b_proj`` (A,), ``u_query`` (A,): normal with standard deviation 0.1.

    The lectures' TensorFlow code draws its ``w_omega``, ``b_omega`` and ``u_omega`` the same way
    (``tf.random_normal(..., stddev=0.1)``).
    """
    if input_size < 1 or attention_size < 1:
        raise ValueError(f"input_size and attention_size must be >= 1, got {input_size} and {attention_size}")
    return {
        "W_proj": rng.standard_normal((input_size, attention_size)) * 0.1,
        "b_proj": rng.standard_normal(attention_size) * 0.1,
        "u_query": rng.standard_normal(attention_size) * 0.1,
    }


def memory(rng: np.random.Generator, hops: int, vocab_size: int, embed_dim: int, max_sentences: int,
           temporal: bool = True) -> Params:
    """An end-to-end memory network's ``embedding_0 .. embedding_K`` (V, d) and, with ``temporal``,
    ``temporal_0 .. temporal_K`` (S, d); ``K = hops``. Normal with standard deviation 0.1, as in
    Sukhbaatar et al. (2015)."""
    params = {f"embedding_{k}": rng.standard_normal((vocab_size, embed_dim)) * 0.1 for k in range(hops + 1)}
    if temporal:
        params.update({f"temporal_{k}": rng.standard_normal((max_sentences, embed_dim)) * 0.1
                       for k in range(hops + 1)})
    return params
