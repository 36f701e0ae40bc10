"""Tests for attention_course/tracks.py and each track's ``track`` module: the one interface callers use."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.core.configs import OptionError, Seq2seqConfig
from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.tracks import TRACKS, TrackError, get_track, track_of

torch = pytest.importorskip("torch")


def test_every_track_module_has_the_same_interface():
    public = {name: set(get_track(name).__all__) for name in TRACKS}
    assert public["numpy"] == public["torch"]
    for name in TRACKS:
        module = get_track(name)
        assert module.NAME == name
        assert all(callable(getattr(module, attr)) for attr in public[name] if attr not in ("NAME", "DEFAULTS"))


def test_unknown_tracks_and_foreign_models_are_refused():
    with pytest.raises(TrackError, match=r"track: expected one of \['numpy', 'torch'\], got 'jax'"):
        get_track("jax")
    with pytest.raises(TrackError, match="a dict is not a model of any track"):
        track_of({})


def test_options_that_do_not_apply_are_refused_by_name():
    with pytest.raises(OptionError, match="--track torch"):
        get_track("numpy").check_options("cuda")
    with pytest.raises(OptionError, match="amp"):
        get_track("numpy").check_options(None, amp=True)
    with pytest.raises(OptionError, match="amp"):
        get_track("torch").check_options("cpu", amp=True)
    assert get_track("numpy").default_batch_size() == get_track("torch").default_batch_size("cpu") == 128


def test_both_tracks_decode_the_same_model_alike():
    pairs, _ = generate_dates(12, 0, seed=2)
    source_vocab, target_vocab = build_vocabularies(pairs)
    batch = encode_pairs(pairs, source_vocab, target_vocab)
    config = Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=6, hidden_size=5, dtype="float64",
                           reset_after=True)
    results = {}
    for name in TRACKS:
        track = get_track(name)
        model = track.build_model("attention", config, seed=4)
        assert track_of(model) is track
        results[name] = (track.greedy_decode(model, batch, target_vocab, 11), track.encode(model, batch))
    (numpy_decoded, numpy_states), (torch_decoded, torch_states) = results["numpy"], results["torch"]
    assert numpy_decoded.texts == torch_decoded.texts
    np.testing.assert_array_equal(numpy_decoded.ids, torch_decoded.ids)
    np.testing.assert_allclose(numpy_decoded.attention_weights, torch_decoded.attention_weights, atol=1e-12)
    np.testing.assert_allclose(numpy_states, torch_states, atol=1e-12)
