"""Tests for attention_course/torch_track/memory.py: parity of the memory network with the NumPy track."""

import numpy as np
import pytest
import torch

from attention_course.core.configs import MemoryConfig
from attention_course.numpy_track import memory as np_memory
from attention_course.torch_track import memory as th_memory


@pytest.mark.parametrize("position", [True, False])
@pytest.mark.parametrize("temporal", [True, False])
def test_model_parity(parity, rng, position, temporal):
    c = MemoryConfig(9, max_sentences=5, embed_dim=4, hops=3, position_encoding=position,
                     temporal_encoding=temporal, dtype="float64")
    numpy_model = np_memory.MemN2N(c, rng=2)
    module = th_memory.MemN2N(c, rng=2)
    parity.assert_same_parameters(numpy_model, module)
    stories = rng.integers(1, 9, (3, 5, 4))
    stories[0, 2, 3] = 0
    story_mask = parity.lengths_mask([5, 3, 1], 5)
    stories[~story_mask] = 0
    questions = rng.integers(1, 9, (3, 3))
    batch = {"stories": stories, "story_mask": story_mask, "questions": questions,
             "answers": rng.integers(0, 9, 3)}
    parity.model_parity(numpy_model, module, batch)
    parity.assert_close("hop weights", module.attention_weights, numpy_model.attention_weights)
    tensors = [torch.from_numpy(batch[name]) for name in ("stories", "story_mask", "questions")]
    parity.assert_close("answer probabilities", module.predict(*tensors),
                        numpy_model.predict(batch["stories"], batch["story_mask"], batch["questions"]))


def test_position_encoding_and_ages_agree_with_the_numpy_track(rng):
    mask = rng.random((4, 6)) < 0.7
    torch.testing.assert_close(th_memory.position_encoding(torch.from_numpy(mask), 5, torch.float64),
                               torch.from_numpy(np_memory.position_encoding(mask, 5)))
    story_mask = np.arange(6)[None, :] < np.array([6, 3, 0, 1])[:, None]
    np.testing.assert_array_equal(th_memory.sentence_ages(torch.from_numpy(story_mask)).numpy(),
                                  np_memory.sentence_ages(story_mask))


def test_the_model_follows_to_dtype(rng):
    c = MemoryConfig(9, max_sentences=5, embed_dim=4, hops=2)
    module = th_memory.MemN2N(c, rng=1).to(torch.float64)  # built in float32, then converted
    reference = th_memory.MemN2N(MemoryConfig(9, max_sentences=5, embed_dim=4, hops=2, dtype="float64"), rng=1)
    reference.load_state_dict(module.state_dict())
    stories = torch.from_numpy(rng.integers(1, 9, (2, 5, 4)))
    story_mask = torch.ones(2, 5, dtype=torch.bool)
    questions = torch.from_numpy(rng.integers(1, 9, (2, 3)))
    probabilities = module.predict(stories, story_mask, questions)
    assert probabilities.dtype == torch.float64
    torch.testing.assert_close(probabilities, reference.predict(stories, story_mask, questions))
