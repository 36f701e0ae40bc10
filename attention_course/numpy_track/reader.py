"""An attentive reader for cloze questions (Hermann et al. 2015; the simpler form of Chen, Bolton &
Manning 2016), chapter 9.

A story ``d_1 .. d_T`` and a question with a blank (``@placeholder``). A bidirectional GRU reads the
story into states ``p_i``, another reads the question, whose encoding ``u`` is its forward state
after the last word and its backward state at the first; the question asks the story::

    alpha_i = softmax_i(p_i^T W_a u)          # the general score, over the real words
    r = sum_i alpha_i p_i                     # (N, 2H)
    p(answer = e | story, question) = softmax_e(r W_o + b_o)      # one logit per entity marker

Nothing tells the attention where to look: it is trained only through the answer, and where it lands
(on the answer's mention in the sentence the question restates, or elsewhere) is a measurement.
"""

from __future__ import annotations

import numpy as np

from ..core.configs import ReaderConfig
from ..core.initializers import init_rng
from ..core.shapes import check_array
from .attention import Attention
from .base import Layer
from .layers import Affine, Embedding, SoftmaxCrossEntropy, softmax
from .seq2seq import make_recurrent

__all__ = ["AttentiveReader", "ReaderConfig"]


class AttentiveReader(Layer):
    """Story and question encoders, the question's attention over the story, a softmax over entities.

    ``forward(stories, story_mask, questions, question_mask, answers)`` returns the mean
    cross-entropy of the answers; ``backward()`` fills every gradient; ``predict(...)`` gives the
    probability of each entity, ``attend(...)`` the weights ``alpha`` (also in
    ``attention_weights`` after a call). Built from ``config`` (a ``ReaderConfig``); the weights are
    drawn in the order embedding, story encoder, question encoder, attention, output (as on the
    torch track). One embedding serves the story and the question.

    Shapes:
        stories: (N, T) int.  story_mask: (N, T) bool.  questions: (N, T_q) int.  question_mask: (N, T_q) bool.
        answers: (N,) int, the answer's index among the entities.
        returns: the loss (a float); ``predict``: (N, num_entities); ``attend``: (N, T).
    """

    def __init__(self, config: ReaderConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype, P = np.dtype(c.dtype), c.state_size
        self.embed = self.add_child("embed", Embedding(c.vocab_size, c.embed_dim, rng=rng, dtype=dtype))
        self.story_rnn, self.question_rnn = (
            self.add_child(name, make_recurrent("gru", c.embed_dim, c.hidden_size, bidirectional=True,
                                                reset_after=c.reset_after, rng=rng, dtype=dtype))
            for name in ("story_rnn", "question_rnn"))
        self.attention = self.add_child("attention", Attention("general", P, P, rng=rng, dtype=dtype))
        self.out = self.add_child("out", Affine(P, c.num_entities, rng=rng, dtype=dtype))
        self.loss_layer = SoftmaxCrossEntropy()
        self._question_shape = None

    @property
    def attention_weights(self) -> np.ndarray | None:
        """``alpha`` (N, T) of the last call."""
        return self.attention.attention_weights

    def _check(self, stories, story_mask, questions, question_mask) -> None:
        sizes = check_array("stories", stories, ("N", "T"), kind="int")
        check_array("story_mask", story_mask, ("N", "T"), sizes, kind="bool")
        check_array("questions", questions, ("N", "T_q"), sizes, kind="int")
        check_array("question_mask", question_mask, ("N", "T_q"), sizes, kind="bool")

    def logits(self, stories, story_mask, questions, question_mask) -> np.ndarray:
        """One logit per entity: (N, num_entities)."""
        self._check(stories, story_mask, questions, question_mask)
        T = stories.shape[1]
        embedded = self.embed.forward(np.concatenate([stories, questions], axis=1))  # one lookup for both
        states = self.story_rnn.forward(embedded[:, :T], story_mask)  # p_i: (N, T, 2H)
        question_states = self.question_rnn.forward(embedded[:, T:], question_mask)
        self._question_shape = question_states.shape
        ((forward_last, backward_first),) = self.question_rnn.final_state
        u = np.concatenate([forward_last, backward_first], axis=-1)  # (N, 2H)
        read = self.attention.forward(states, u, story_mask)  # r = sum_i alpha_i p_i: (N, 2H)
        return self.out.forward(read)

    def forward(self, stories, story_mask, questions, question_mask, answers) -> float:
        logits = self.logits(stories, story_mask, questions, question_mask)
        check_array("answers", answers, (len(stories),), kind="int")
        return self.loss_layer.forward(logits, answers)

    def backward(self, dloss: float = 1.0) -> None:
        d_read = self.out.backward(self.loss_layer.backward(dloss))
        d_states, d_u = self.attention.backward(d_read)
        H = self.config.hidden_size
        d_question = self.question_rnn.backward(np.zeros(self._question_shape, dtype=d_u.dtype),
                                                [(d_u[:, :H], d_u[:, H:])])
        d_story = self.story_rnn.backward(d_states)
        self.embed.backward(np.concatenate([d_story, d_question], axis=1))

    def attend(self, stories, story_mask, questions, question_mask) -> np.ndarray:
        """The weights ``alpha`` over the story's words: (N, T)."""
        self.logits(stories, story_mask, questions, question_mask)
        return self.attention_weights

    def predict(self, stories, story_mask, questions, question_mask) -> np.ndarray:
        """The probability of each entity: (N, num_entities)."""
        return softmax(self.logits(stories, story_mask, questions, question_mask))
