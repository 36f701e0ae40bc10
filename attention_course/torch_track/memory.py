"""End-to-end memory networks in torch (Sukhbaatar et al. 2015), chapter 9.

The same names, parameters, equations and initial values as
``attention_course.numpy_track.memory`` (read its docstring): adjacent weight tying over
``embedding_0 .. embedding_K``, position encoding, temporal encoding ``temporal_0 ..
temporal_K``; autograd does the backward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core import initializers
from ..core.configs import MemoryConfig
from ..core.initializers import init_rng
from .base import check_tensor, register_params, resolve_dtype
from .layers import masked_softmax

__all__ = ["MemN2N", "position_encoding", "sentence_ages"]

PAD_ID = 0


def position_encoding(word_mask: torch.Tensor, embed_dim: int, dtype=torch.float32) -> torch.Tensor:
    """``l_kj = (1 - j/J) - (k/d)(1 - 2j/J)`` for every real word, zero on padding.

    Shapes:
        word_mask: (..., W) bool.  returns: (..., W, d).
    """
    J = word_mask.sum(dim=-1, keepdim=True).to(dtype)
    j = torch.cumsum(word_mask.to(torch.int64), dim=-1).to(dtype)
    k = torch.arange(1, embed_dim + 1, dtype=dtype, device=word_mask.device) / embed_dim
    ratio = (j / J.clamp_min(1)).unsqueeze(-1)  # (..., W, 1)
    weights = (1 - ratio) - k * (1 - 2 * ratio)
    return weights * word_mask.unsqueeze(-1).to(dtype)


def sentence_ages(story_mask: torch.Tensor) -> torch.Tensor:
    """0 for a story's last sentence, 1 for the one before, ...; 0 on padding.  (N, S) -> (N, S)."""
    lengths = story_mask.sum(dim=1, keepdim=True)
    steps = torch.arange(story_mask.shape[1], device=story_mask.device)
    return torch.where(story_mask, lengths - 1 - steps, torch.zeros_like(steps))


class MemN2N(nn.Module):
    """An end-to-end memory network: adjacent weight tying, position and temporal encoding.

    ``forward(stories, story_mask, questions, answers)`` returns the mean cross-entropy;
    ``predict`` the answer probabilities (N, V); ``attend`` the weights of every hop (N, K, S),
    which ``attention_weights`` (detached) also holds after any call.

    Shapes:
        stories: (N, S, W) int, 0 = padding.  story_mask: (N, S) bool.  questions: (N, W_q) int.
        answers: (N,) int.  returns: a 0-d tensor.
    """

    def __init__(self, config: MemoryConfig, rng=None) -> None:
        super().__init__()
        c = self.config = config
        register_params(self, initializers.memory(init_rng(rng), c.hops, c.vocab_size, c.embed_dim, c.max_sentences,
                                                  temporal=c.temporal_encoding), resolve_dtype(c.dtype))
        self.attention_weights = None

    def _word_weights(self, words: torch.Tensor) -> torch.Tensor:
        mask = words != PAD_ID
        dtype = self.embedding_0.dtype  # follows .to(dtype), like the memories it weighs
        if self.config.position_encoding:
            return position_encoding(mask, self.config.embed_dim, dtype)
        return mask.unsqueeze(-1).to(dtype).expand(*mask.shape, self.config.embed_dim)

    def _logits(self, stories, story_mask, questions) -> torch.Tensor:
        c = self.config
        sizes = check_tensor("stories", stories, ("N", c.max_sentences, "W"), kind="int")
        check_tensor("story_mask", story_mask, ("N", c.max_sentences), sizes, kind="bool")
        check_tensor("questions", questions, ("N", None), sizes, kind="int")
        story_weights = self._word_weights(stories)  # (N, S, W, d)
        ages = sentence_ages(story_mask)
        real = story_mask.unsqueeze(-1).to(story_weights.dtype)
        memories = []
        for k in range(c.hops + 1):
            memory = (story_weights * F.embedding(stories, getattr(self, f"embedding_{k}"))).sum(dim=2)  # (N, S, d)
            if c.temporal_encoding:
                memory = memory + F.embedding(ages, getattr(self, f"temporal_{k}")) * real
            memories.append(memory)
        u = (self._word_weights(questions) * F.embedding(questions, self.embedding_0)).sum(dim=1)  # (N, d)
        weights = []
        for hop in range(1, c.hops + 1):
            p = masked_softmax(torch.einsum("nsd,nd->ns", memories[hop - 1], u), story_mask)  # (N, S)
            u = u + torch.einsum("ns,nsd->nd", p, memories[hop])
            weights.append(p)
        self.attention_weights = torch.stack(weights, dim=1).detach()  # (N, K, S)
        return u @ getattr(self, f"embedding_{c.hops}").t()  # (N, V)

    def forward(self, stories: torch.Tensor, story_mask: torch.Tensor, questions: torch.Tensor,
                answers: torch.Tensor) -> torch.Tensor:
        logits = self._logits(stories, story_mask, questions)
        check_tensor("answers", answers, (stories.shape[0],), kind="int")
        return F.cross_entropy(logits, answers)

    @torch.no_grad()
    def attend(self, stories: torch.Tensor, story_mask: torch.Tensor, questions: torch.Tensor) -> torch.Tensor:
        """The attention weights of every hop over the sentences, (N, K, S)."""
        self._logits(stories, story_mask, questions)
        return self.attention_weights

    @torch.no_grad()
    def predict(self, stories: torch.Tensor, story_mask: torch.Tensor, questions: torch.Tensor) -> torch.Tensor:
        """The probability of every word as the answer, (N, V)."""
        return torch.softmax(self._logits(stories, story_mask, questions), dim=-1)
