"""Tests for attention_course/core/initializers.py: both tracks start from the same weights, the ones they always had.

``tests/fixtures/checkpoints_v1/initial_weights.json`` holds fingerprints of the initial weights
the code of commit f57ca3d built for seed 11 (when the torch track still copied them from NumPy
layers). Both tracks must reproduce them bit for bit.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from attention_course.core import initializers
from attention_course.core.configs import Seq2seqConfig
from attention_course.tracks import get_track

FIXTURES = Path(__file__).parent.parent / "fixtures" / "checkpoints_v1"
_spec = importlib.util.spec_from_file_location("initial_weights", FIXTURES / "initial_weights.py")
initial_weights = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(initial_weights)


@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_each_track_builds_the_weights_it_always_built(track):
    if track == "torch":
        pytest.importorskip("torch")
    implementation = get_track(track)

    def build(kind, options, seed):
        config = Seq2seqConfig(19, 13, dtype="float64", **options)
        return implementation.weights(implementation.build_model(kind, config, seed=seed))

    expected = json.loads((FIXTURES / "initial_weights.json").read_text())
    assert initial_weights.fingerprints(build) == expected


def test_the_fingerprint_sees_a_changed_value():
    weights = {"a": np.zeros(3), "b": np.ones((2, 2))}
    changed = {"a": np.zeros(3), "b": np.ones((2, 2))}
    changed["b"][1, 1] = np.nextafter(1.0, 2.0)
    assert initial_weights.fingerprint(weights) != initial_weights.fingerprint(changed)


def test_values_are_float64_and_drawn_in_order():
    rng = np.random.default_rng(3)
    first = initializers.recurrent_cell(rng, "gru", 4, 5)
    assert list(first) == ["W_x", "W_h", "b", "b_h"]
    assert first["W_x"].shape == (4, 15) and first["W_h"].shape == (5, 15) and first["b_h"].shape == (15,)
    assert all(value.dtype == np.float64 for value in first.values())
    assert np.abs(first["W_x"]).max() <= 1 / np.sqrt(5)
    again = initializers.recurrent_cell(np.random.default_rng(3), "gru", 4, 5)
    assert all(np.array_equal(first[name], again[name]) for name in first)
    assert initializers.score(rng, "dot", 4, 4) == {}
    additive = initializers.score(rng, "additive", 3, 4, attention_size=2)
    assert {name: value.shape for name, value in additive.items()} == {"W_a": (4, 2), "U_a": (3, 2), "v_a": (2,)}
    with pytest.raises(ValueError, match="input_size and hidden_size must be >= 1"):
        initializers.recurrent_cell(rng, "lstm", 0, 3)
