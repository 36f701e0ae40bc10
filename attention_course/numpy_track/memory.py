"""End-to-end memory networks for question answering (Sukhbaatar et al. 2015), chapter 9.

A story is a set of memories, one per sentence. The question asks; attention over the memories
answers, possibly in several hops, each hop asking again with what the previous one found::

    m_i^k = sum_j l_j * E_{k-1}[x_ij] + T_{k-1}[age_i]     # input memory of hop k   (N, S, d)
    c_i^k = sum_j l_j * E_k[x_ij] + T_k[age_i]             # output memory of hop k  (N, S, d)
    u^1 = sum_j l_j * E_0[q_j]                              # the question            (N, d)
    p^k = softmax_i(m_i^k . u^k)                            # attention over memories (N, S)
    o^k = sum_i p_i^k c_i^k,    u^{k+1} = u^k + o^k
    p(answer) = softmax(E_K u^{K+1})                        # logits (N, V)

``E_0 .. E_K`` (``embedding_k``, V x d) are the paper's *adjacent* weight tying: hop k's output
embedding is hop k+1's input embedding, the question's embedding is the first hop's input
embedding, and the answer is read with the last output embedding. ``l_j`` is the *position
encoding* ``l_kj = (1 - j/J) - (k/d)(1 - 2j/J)`` for word j of a sentence of J words and
component k (without it, a sentence is a bag of words); ``T_k`` (``temporal_k``, S x d) is the
*temporal encoding*, indexed by a sentence's age (0 for the story's last sentence), so that the
model can tell a newer fact from an older one ("mary went to the kitchen", then "mary went to
the garden").

Padding: word id 0 is padding (``stories != 0`` marks the real words), and ``story_mask``
(N, S) marks the real sentences; padded sentences get zero attention.
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.configs import MemoryConfig
from ..core.initializers import init_rng
from ..core.shapes import check_array
from .base import Layer, as_dtype
from .layers import SoftmaxCrossEntropy, masked_softmax, softmax, softmax_backward

__all__ = ["MemN2N", "position_encoding", "sentence_ages"]

PAD_ID = 0


def position_encoding(word_mask: np.ndarray, embed_dim: int,
                      dtype=np.float64) -> np.ndarray:
    """The weights ``l_kj = (1 - j/J) - (k/d)(1 - 2j/J)`` of every word, 0 on padding.

    ``j = 1 .. J`` counts the real words of each sentence (``J`` of them),
    ``k = 1 .. d`` the embedding's components.

    Shapes:
        word_mask: (..., W) bool.  returns: (..., W, d).
    """
    J = word_mask.sum(axis=-1, keepdims=True).astype(dtype)  # (..., 1)
    j = np.cumsum(word_mask, axis=-1).astype(dtype)  # (..., W): 1, 2, ... on real words
    k = np.arange(1, embed_dim + 1, dtype=dtype) / embed_dim  # (d,)
    ratio = (j / np.maximum(J, 1))[..., None]  # (..., W, 1)
    weights = (1 - ratio) - k * (1 - 2 * ratio)
    return weights * word_mask[..., None]


def sentence_ages(story_mask: np.ndarray) -> np.ndarray:
    """Each sentence's age: 0 for a story's last sentence, 1 for the one before, ...; 0 on padding.

    Shapes:
        story_mask: (N, S) bool, real sentences first.  returns: (N, S) int64.
    """
    lengths = story_mask.sum(axis=1, keepdims=True)
    return np.where(story_mask, lengths - 1 - np.arange(story_mask.shape[1]), 0).astype(np.int64)


class MemN2N(Layer):
    """An end-to-end memory network with adjacent weight tying, position and temporal encoding.

    ``forward(stories, story_mask, questions, answers)`` returns the mean cross-entropy of the
    answers; ``backward()`` fills every gradient; ``predict(stories, story_mask, questions)``
    returns the answer probabilities; ``attend`` the weights of every hop. After ``forward``,
    ``attention_weights`` holds them too.

    Built from ``config`` (a ``MemoryConfig``): ``vocab_size``, ``max_sentences`` (S),
    ``embed_dim`` (d), ``hops`` (K), ``position_encoding``, ``temporal_encoding``, ``dtype``.

    Shapes:
        stories: (N, S, W) int, 0 = padding.  story_mask: (N, S) bool.  questions: (N, W_q) int.
        answers: (N,) int.  embedding_k: (V, d).  temporal_k: (S, d).
        returns: the loss (a float); ``predict``: (N, V); ``attention_weights``: (N, K, S).
    """

    def __init__(self, config: MemoryConfig, rng=None) -> None:
        super().__init__()
        c = self.config = config
        self.add_params(initializers.memory(init_rng(rng), c.hops, c.vocab_size, c.embed_dim, c.max_sentences,
                                            temporal=c.temporal_encoding), np.dtype(c.dtype))
        self.loss_layer = SoftmaxCrossEntropy()
        self.attention_weights = None
        self._cache = None

    def _encodings(self, stories, story_mask, questions, dtype):
        c = self.config
        sizes = check_array("stories", stories, ("N", c.max_sentences, "W"), kind="int")
        check_array("story_mask", story_mask, ("N", c.max_sentences), sizes, kind="bool")
        check_array("questions", questions, ("N", None), sizes, kind="int")
        story_words, question_words = stories != PAD_ID, questions != PAD_ID
        if c.position_encoding:
            story_weights = position_encoding(story_words, c.embed_dim, dtype)  # (N, S, W, d)
            question_weights = position_encoding(question_words, c.embed_dim, dtype)  # (N, W_q, d)
        else:
            story_weights = np.broadcast_to(story_words[..., None], story_words.shape + (c.embed_dim,)).astype(dtype)
            question_weights = np.broadcast_to(question_words[..., None],
                                               question_words.shape + (c.embed_dim,)).astype(dtype)
        return story_weights, question_weights, sentence_ages(story_mask)

    def _memories(self, k: int, stories, story_weights, ages, story_mask, dtype):
        """``sum_j l_j * E_k[x_ij] + T_k[age_i]`` for every sentence: (N, S, d)."""
        E = as_dtype(self.params[f"embedding_{k}"], dtype)
        memories = (story_weights * E[stories]).sum(axis=2)  # (N, S, d)
        if self.config.temporal_encoding:
            T_k = as_dtype(self.params[f"temporal_{k}"], dtype)
            memories += T_k[ages] * story_mask[..., None]  # padded sentences get none
        return memories

    def _run(self, stories, story_mask, questions, dtype):
        story_weights, question_weights, ages = self._encodings(
            stories, story_mask, questions, dtype)
        K = self.config.hops
        # memories[k]: hop k+1's input memory and hop k's output memory (adjacent tying)
        memories = [self._memories(k, stories, story_weights, ages, story_mask, dtype)
                    for k in range(K + 1)]
        E_0 = as_dtype(self.params["embedding_0"], dtype)
        u = (question_weights * E_0[questions]).sum(axis=1)  # (N, d)
        queries, weights = [u], []
        for hop in range(1, K + 1):
            scores = np.einsum("nsd,nd->ns", memories[hop - 1], u)  # m_i . u
            p = masked_softmax(scores, story_mask)  # (N, S)
            u = u + np.einsum("ns,nsd->nd", p, memories[hop])  # u + o
            queries.append(u)
            weights.append(p)
        self.attention_weights = np.stack(weights, axis=1)  # (N, K, S)
        logits = u @ as_dtype(self.params[f"embedding_{K}"], dtype).T  # (N, V)
        cache = (story_weights, question_weights, ages, memories, queries, weights)
        return logits, cache

    def forward(self, stories: np.ndarray, story_mask: np.ndarray, questions: np.ndarray,
                answers: np.ndarray) -> float:
        dtype = np.dtype(self.config.dtype)
        logits, cache = self._run(stories, story_mask, questions, dtype)
        check_array("answers", answers, (stories.shape[0],), kind="int")
        self._cache = (stories, story_mask, questions, cache)
        return self.loss_layer.forward(logits, answers)

    def backward(self, dloss: float = 1.0) -> None:
        stories, story_mask, questions, cache = self._cache
        story_weights, question_weights, ages, memories, queries, weights = cache
        K = self.config.hops
        d_logits = self.loss_layer.backward(dloss)  # (N, V)
        E_last = self.params[f"embedding_{K}"]
        for grad in self.grads.values():
            grad[...] = 0
        self.grads[f"embedding_{K}"] += d_logits.T @ queries[K]
        du = d_logits @ E_last.astype(d_logits.dtype)  # (N, d)
        d_memories = [np.zeros_like(m) for m in memories]
        for hop in range(K, 0, -1):
            p, u = weights[hop - 1], queries[hop - 1]
            # o^k = sum_i p_i c_i: into the output memories and the weights
            d_memories[hop] += p[:, :, None] * du[:, None, :]
            dp = np.einsum("nsd,nd->ns", memories[hop], du)
            d_scores = softmax_backward(p, dp)  # (N, S), zero on padded sentences
            # scores m_i . u: into the input memories and the query; u^{k+1} = u^k + o^k passes du on
            d_memories[hop - 1] += d_scores[:, :, None] * u[:, None, :]
            du = du + np.einsum("ns,nsd->nd", d_scores, memories[hop - 1])
        d = self.config.embed_dim
        for k in range(K + 1):
            # memory = sum_j l_j * E_k[x_ij] (+ T_k[age_i]): scatter back into the rows of E_k
            per_word = story_weights * d_memories[k][:, :, None, :]  # (N, S, W, d)
            np.add.at(self.grads[f"embedding_{k}"], stories.reshape(-1), per_word.reshape(-1, d))
            if self.config.temporal_encoding:
                np.add.at(self.grads[f"temporal_{k}"], ages[story_mask], d_memories[k][story_mask])
        per_word = question_weights * du[:, None, :]  # (N, W_q, d)
        np.add.at(self.grads["embedding_0"], questions.reshape(-1), per_word.reshape(-1, d))

    def attend(self, stories: np.ndarray, story_mask: np.ndarray, questions: np.ndarray) -> np.ndarray:
        """The attention weights of every hop over the sentences, (N, K, S)."""
        self._run(stories, story_mask, questions, np.dtype(self.config.dtype))
        return self.attention_weights

    def predict(self, stories: np.ndarray, story_mask: np.ndarray, questions: np.ndarray) -> np.ndarray:
        """The probability of every word as the answer, (N, V)."""
        logits, _ = self._run(stories, story_mask, questions, np.dtype(self.config.dtype))
        return softmax(logits)
