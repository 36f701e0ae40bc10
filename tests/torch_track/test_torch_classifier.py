"""Tests for attention_course/torch_track/classifier.py: parity of the classifier with the NumPy track."""

import numpy as np
import pytest
import torch

from attention_course.core.configs import ClassifierConfig
from attention_course.numpy_track.classifier import SequenceClassifier as NumpyClassifier
from attention_course.torch_track.classifier import SequenceClassifier


def config(pooling, num_classes=2, reset_after=False):
    return ClassifierConfig(11, num_classes=num_classes, embed_dim=3, hidden_size=2, attention_size=3,
                            pooling=pooling, reset_after=reset_after, dtype="float64")


@pytest.mark.parametrize("pooling", ["attention", "mean", "last"])
@pytest.mark.parametrize(("num_classes", "reset_after"), [(2, False), (2, True), (3, True)])
def test_model_parity(parity, rng, pooling, num_classes, reset_after):
    c = config(pooling, num_classes, reset_after)
    numpy_model = NumpyClassifier(c, rng=np.random.default_rng(4))
    module = SequenceClassifier(c, rng=np.random.default_rng(4))
    parity.assert_same_parameters(numpy_model, module)  # the same initial weights for a seed
    module = parity.copied(numpy_model, module, rng)
    ids = rng.integers(3, 11, (3, 6))
    mask = parity.lengths_mask([6, 4, 1], 6)
    batch = {"ids": ids, "mask": mask, "labels": rng.integers(0, num_classes, 3)}
    parity.model_parity(numpy_model, module, batch)
    parity.assert_close("probabilities", module.predict(torch.from_numpy(ids), torch.from_numpy(mask)),
                        numpy_model.predict(ids, mask))
    if pooling != "last":
        parity.assert_close("pooling weights", module.pooling_weights(torch.from_numpy(ids), torch.from_numpy(mask)),
                            numpy_model.pooling_weights(ids, mask))


def test_the_fused_kernel_gives_the_loop_s_result(rng):
    c = config("attention", reset_after=True)
    fused, loop = SequenceClassifier(c, rng=1), SequenceClassifier(c, rng=1, fused=False)
    ids = torch.from_numpy(rng.integers(3, 11, (3, 6)))
    mask = torch.arange(6)[None, :] < torch.tensor([6, 2, 4])[:, None]
    torch.testing.assert_close(fused.predict(ids, mask), loop.predict(ids, mask))
