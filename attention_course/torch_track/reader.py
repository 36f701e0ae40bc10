"""An attentive reader for cloze questions in torch: the same names, parameters, equations and initial
values as ``attention_course.numpy_track.reader`` (read its docstring); autograd does the backward pass::

    alpha_i = softmax_i(p_i^T W_a u),   r = sum_i alpha_i p_i,   p(answer = e) = softmax_e(r W_o + b_o)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core.configs import ReaderConfig
from ..core.initializers import init_rng
from .attention import Attention
from .base import check_tensor, resolve_dtype
from .layers import Affine, Embedding
from .seq2seq import make_recurrent

__all__ = ["AttentiveReader", "ReaderConfig"]


class AttentiveReader(nn.Module):
    """Story and question encoders, the question's attention over the story, a softmax over entities.

    ``forward(stories, story_mask, questions, question_mask, answers)`` returns the mean
    cross-entropy; ``predict`` the probabilities (N, num_entities); ``attend`` the weights (N, T);
    ``attention_weights`` holds them (detached) after any call.

    Shapes:
        stories: (N, T) int.  story_mask: (N, T) bool.  questions: (N, T_q) int.  question_mask: (N, T_q) bool.
        answers: (N,) int.  returns: a 0-d tensor.
    """

    def __init__(self, config: ReaderConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype, P = resolve_dtype(c.dtype), c.state_size
        self.embed = Embedding(c.vocab_size, c.embed_dim, rng=rng, dtype=dtype)
        self.story_rnn, self.question_rnn = (
            make_recurrent("gru", c.embed_dim, c.hidden_size, bidirectional=True, reset_after=c.reset_after,
                           fused=fused, rng=rng, dtype=dtype)
            for _ in range(2))
        self.attention = Attention("general", P, P, rng=rng, dtype=dtype)
        self.out = Affine(P, c.num_entities, rng=rng, dtype=dtype)

    @property
    def attention_weights(self) -> torch.Tensor | None:
        weights = self.attention.attention_weights
        return None if weights is None else weights.detach()

    def logits(self, stories, story_mask, questions, question_mask) -> torch.Tensor:
        """One logit per entity: (N, num_entities)."""
        sizes = check_tensor("stories", stories, ("N", "T"), kind="int")
        check_tensor("story_mask", story_mask, ("N", "T"), sizes, kind="bool")
        check_tensor("questions", questions, ("N", "T_q"), sizes, kind="int")
        check_tensor("question_mask", question_mask, ("N", "T_q"), sizes, kind="bool")
        states = self.story_rnn(self.embed(stories), story_mask)  # p_i: (N, T, 2H)
        self.question_rnn(self.embed(questions), question_mask)
        ((forward_last, backward_first),) = self.question_rnn.final_state
        u = torch.cat([forward_last, backward_first], dim=-1)  # (N, 2H)
        return self.out(self.attention(states, u, story_mask))

    def forward(self, stories, story_mask, questions, question_mask, answers) -> torch.Tensor:
        logits = self.logits(stories, story_mask, questions, question_mask)
        check_tensor("answers", answers, (stories.shape[0],), kind="int")
        return F.cross_entropy(logits, answers)

    @torch.no_grad()
    def attend(self, stories, story_mask, questions, question_mask) -> torch.Tensor:
        """The weights ``alpha`` over the story's words: (N, T)."""
        self.logits(stories, story_mask, questions, question_mask)
        return self.attention_weights

    @torch.no_grad()
    def predict(self, stories, story_mask, questions, question_mask) -> torch.Tensor:
        """The probability of each entity: (N, num_entities)."""
        return torch.softmax(self.logits(stories, story_mask, questions, question_mask), dim=-1)
