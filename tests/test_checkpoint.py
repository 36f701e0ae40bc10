"""Tests for attention_course/checkpoint.py: one format for both tracks, and checkpoints written before load.

``tests/fixtures/checkpoints_v1`` holds tiny models saved by the code of commit f57ca3d, with the
test loss and greedy outputs they gave then (``expected.json``). Loading them with today's code,
in either track, must give the same numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attention_course.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.tracks import TrackError, get_track

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_v1"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
NAMES = sorted(name for name in EXPECTED if name != "test_sources")
TRACKS = ["numpy", pytest.param("torch", marks=pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="torch is not installed"))]


def fixture_batch(source_vocab, target_vocab):
    _, test_pairs = generate_dates(300, 8, seed=3)
    assert [source for source, _ in test_pairs] == EXPECTED["test_sources"], "the fixture's data is regenerated"
    return encode_pairs(test_pairs, source_vocab, target_vocab)


def loss(track: str, model, batch) -> float:
    fields = (batch.source, batch.source_mask, batch.decoder_input, batch.decoder_target, batch.target_mask)
    if track == "numpy":
        return model.forward(*fields)
    import torch

    with torch.no_grad():
        return float(model(*(torch.from_numpy(field) for field in fields)))


@pytest.mark.parametrize("track", TRACKS)
@pytest.mark.parametrize("name", NAMES)
def test_checkpoints_written_before_load_and_compute_the_same(name, track):
    model, source_vocab, target_vocab, description = load_checkpoint(FIXTURES / name, track)
    batch = fixture_batch(source_vocab, target_vocab)
    expected = EXPECTED[name]
    tolerance = 1e-12 if description["config"]["dtype"] == "float64" else 1e-5
    assert loss(track, model, batch) == pytest.approx(expected["loss"], abs=tolerance)
    outputs = get_track(track).greedy_decode(model, batch, target_vocab, description["max_output_length"]).texts
    assert outputs == expected["outputs"]


@pytest.mark.parametrize("track", TRACKS)
def test_a_checkpoint_round_trips_through_either_track(tmp_path, track):
    pairs, _ = generate_dates(40, 0, seed=1)
    source_vocab, target_vocab = build_vocabularies(pairs)
    _, _, _, description = load_checkpoint(FIXTURES / "attention_gru", "numpy")
    from attention_course.core.configs import Seq2seqConfig

    config = Seq2seqConfig(**description["config"])
    implementation = get_track(track)
    model = implementation.build_model("attention", config, seed=5)
    weights = implementation.weights(model)
    save_checkpoint(tmp_path / "saved", "attention", config, weights, source_vocab, target_vocab, 11)
    for other in ("numpy", track):
        loaded, _, _, _ = load_checkpoint(tmp_path / "saved", other)
        again = get_track(other).weights(loaded)
        assert sorted(again) == sorted(weights)
        for key, value in weights.items():
            np.testing.assert_array_equal(again[key], value, err_msg=key)


def test_damaged_and_foreign_checkpoints_get_one_clear_error(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURES / "attention_gru", copy)
    with np.load(copy / "weights.npz") as stored:
        weights = {name: stored[name] for name in stored.files}
    first = sorted(weights)[0]
    weights[first] = np.zeros((1, 1))
    np.savez(copy / "weights.npz", **weights)
    with pytest.raises(CheckpointError, match=rf"damaged checkpoint .*{first}"):
        load_checkpoint(copy, "numpy")
    (copy / "weights.npz").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="damaged checkpoint"):
        load_checkpoint(copy, "numpy")
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load_checkpoint(tmp_path / "nowhere", "numpy")
    with pytest.raises(TrackError, match="track: expected one of"):
        load_checkpoint(FIXTURES / "attention_gru", "jax")
