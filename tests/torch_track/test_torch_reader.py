"""Tests for attention_course/torch_track/reader.py: parity of the attentive reader with the NumPy track."""

import numpy as np
import pytest
import torch

from attention_course.core.configs import ReaderConfig
from attention_course.numpy_track import reader as np_reader
from attention_course.torch_track import reader as th_reader


@pytest.mark.parametrize("reset_after", [False, True])
def test_model_parity(parity, rng, reset_after):
    c = ReaderConfig(9, num_entities=4, embed_dim=3, hidden_size=2, reset_after=reset_after, dtype="float64")
    numpy_model = np_reader.AttentiveReader(c, rng=3)
    module = th_reader.AttentiveReader(c, rng=3)
    parity.assert_same_parameters(numpy_model, module)  # the same initial weights for a seed
    stories = rng.integers(1, 9, (3, 6))
    story_mask = parity.lengths_mask([6, 4, 2], 6)
    stories[~story_mask] = 0
    questions = rng.integers(1, 9, (3, 3))
    question_mask = parity.lengths_mask([3, 3, 2], 3)
    batch = {"stories": stories, "story_mask": story_mask, "questions": questions, "question_mask": question_mask,
             "answers": np.array([1, 0, 3])}
    module = parity.copied(numpy_model, module, rng)
    parity.model_parity(numpy_model, module, batch)
    parity.assert_close("attention", module.attention_weights, numpy_model.attention_weights)
    inputs = [batch[name] for name in ("stories", "story_mask", "questions", "question_mask")]
    parity.assert_close("probabilities", module.predict(*[torch.from_numpy(a) for a in inputs]),
                        numpy_model.predict(*inputs))
