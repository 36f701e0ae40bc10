"""Tests for attention_course/tasks/caption.py: each object word looks at its object."""

import numpy as np
import pytest

from attention_course.tasks import caption
from attention_course.data.captions import generate_captions

QUICK = dict(n_train=2000, n_validation=100, n_test=200, epochs=12)


@pytest.fixture(scope="module")
def numpy_run():
    return caption.train(track="numpy", seed=0, **QUICK)


def test_object_words_look_at_their_objects(numpy_run):
    summary = numpy_run.summary
    # the measure: for at least 90% of the object words, the largest weight lies on the object
    assert summary["object_hit_rate"] >= 0.9
    assert min(summary["object_hit_rate_by_word"].values()) >= 0.85
    assert summary["test_exact_match"] >= 0.5 and summary["test_bleu"] >= 60


def test_object_hits_reads_the_generators_ground_truth():
    data = generate_captions(20, seed=3)
    g = 4
    regions = data.word_regions(g).reshape(20, data.word_objects.shape[1], g * g)
    T, L = data.word_objects.shape[1] + 1, g * g
    on_target = np.zeros((20, T, L))
    on_target[:, :-1] = regions  # all weight on the object's cells: every object word hits
    assert caption.object_hits(on_target, data, g).all()
    elsewhere = np.zeros((20, T, L))
    elsewhere[:, :-1] = (regions == 0) * 1.0  # all weight off the object: every object word misses
    assert not caption.object_hits(elsewhere, data, g).any()


def test_bleu_is_sacrebleus():
    assert caption.bleu(["a red circle above a blue square"], ["a red circle above a blue square"]) == pytest.approx(100)
    assert caption.bleu(["a red circle"], ["a green square above a blue triangle"]) < 10


def test_patch_features_are_the_cells_pixels_and_places():
    data = generate_captions(3, seed=0)
    features = caption.patch_features(data.images)
    assert features.shape == (3, 16, 4 * 4 * 3 + 8) and features.dtype == np.float32
    # cell (1, 2): its 16x16 pixels pooled to 4x4 blocks, then row 1 and column 2 one-hot
    cell = data.images[0, 16:32, 32:48].reshape(4, 4, 4, 4, 3).mean(axis=(1, 3))
    np.testing.assert_allclose(features[0, 6, :48], cell.reshape(-1), rtol=1e-6)
    np.testing.assert_array_equal(features[0, 6, 48:], [0, 1, 0, 0, 0, 0, 1, 0])


def test_the_torch_track_trains_its_cnn_end_to_end_and_is_measured_alike():
    run = caption.train(track="torch", seed=0, n_train=64, n_validation=16, n_test=16, max_steps=2)
    summary = run.summary
    assert summary["track"] == "torch" and summary["steps"] == 2
    assert 0 <= summary["object_hit_rate"] <= 1 and run.extra["measured"]["attention"].shape[2] == 16
