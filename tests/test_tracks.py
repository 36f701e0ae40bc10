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
        assert all(callable(getattr(module, attr)) for attr in public[name]
                   if attr not in ("NAME", "DEFAULTS", "MODEL_DEFAULTS", "TASK_DEFAULTS", "LOSSES", "MODELS"))
    for table in ("DEFAULTS", "MODEL_DEFAULTS", "TASK_DEFAULTS", "LOSSES", "MODELS"):
        keys = [set(getattr(get_track(name), table)) for name in TRACKS]
        assert keys[0] == keys[1], f"{table}: both tracks have the same keys"
    assert {get_track(name).TASK_DEFAULTS["caption"]["inputs"] for name in TRACKS} == {"features", "images"}


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


# --- what the tasks ask of a track: build, fit, call, count -------------------------------------

def small_configs():
    from attention_course.core.configs import CaptionerConfig, ClassifierConfig, MemoryConfig, NTMConfig

    return {
        "classifier": ClassifierConfig(11, embed_dim=3, hidden_size=4, attention_size=3, reset_after=True),
        "captioner": CaptionerConfig(9, 56, embed_dim=4, hidden_size=5, attention_size=3, reset_after=True),
        "memory": MemoryConfig(12, 4, embed_dim=5, hops=2),
        "ntm": NTMConfig(input_size=3, output_size=2, controller_size=6, memory_size=5, memory_width=4),
        "lstm": {"input_size": 3, "output_size": 2, "hidden_size": 6, "dtype": "float32"},
    }


@pytest.mark.parametrize("kind", ["classifier", "memory", "ntm", "lstm"])
def test_both_tracks_build_every_kind_of_model_with_the_same_weights(kind):
    config = small_configs()[kind]
    models = {name: get_track(name).build_model(kind, config, seed=3) for name in TRACKS}
    counts = {name: get_track(name).num_parameters(model) for name, model in models.items()}
    assert counts["numpy"] == counts["torch"] > 0
    weights = {name: get_track(name).weights(model) for name, model in models.items()}
    assert sorted(weights["numpy"]) == sorted(weights["torch"])
    for name, value in weights["numpy"].items():
        np.testing.assert_allclose(value, weights["torch"][name], rtol=1e-6, err_msg=name)


def test_the_captioner_is_the_tracks_choice_around_the_same_decoder():
    """NumPy: the decoder over given features; torch: a CNN from the pixels, then the same decoder."""
    config = small_configs()["captioner"]
    numpy_weights = get_track("numpy").weights(get_track("numpy").build_model("captioner", config))
    torch_weights = get_track("torch").weights(get_track("torch").build_model("captioner", config))
    decoder = {name.removeprefix("decoder."): value.shape for name, value in torch_weights.items()
               if name.startswith("decoder.")}
    assert decoder == {name: value.shape for name, value in numpy_weights.items()}
    assert any(name.startswith("encoder.convolutions.") for name in torch_weights)


def test_a_model_is_built_from_its_own_config():
    with pytest.raises(ValueError, match="model 'classifier': expected a ClassifierConfig, got a MemoryConfig"):
        get_track("numpy").build_model("classifier", small_configs()["memory"])


@pytest.mark.parametrize("name", list(TRACKS))
def test_call_in_chunks_gives_what_one_call_gives_as_numpy(name, rng):
    track = get_track(name)
    model = track.build_model("classifier", small_configs()["classifier"], seed=0)
    ids = rng.integers(3, 11, (7, 5))
    mask = np.arange(5)[None, :] < rng.integers(1, 6, 7)[:, None]
    whole = track.call(model, "predict", ids, mask)
    assert isinstance(whole, np.ndarray) and whole.shape == (7, 2)
    np.testing.assert_allclose(track.call(model, "predict", ids, mask, batch_size=3), whole, rtol=1e-6)
    np.testing.assert_allclose(whole.sum(axis=1), 1.0, rtol=1e-5)


def test_both_tracks_call_alike():
    config = small_configs()["ntm"]
    inputs = np.random.default_rng(0).random((4, 6, 3)).astype(np.float64)  # float64: each takes its model's dtype
    logits = [get_track(name).call(get_track(name).build_model("ntm", config, seed=1), "forward", inputs)
              for name in TRACKS]
    assert all(out.dtype == np.float32 for out in logits)
    np.testing.assert_allclose(logits[0], logits[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(TRACKS))
def test_fit_trains_on_named_arrays_and_keeps_the_best_evaluation(name, rng):
    from attention_course.training import TrainConfig

    track = get_track(name)
    model = track.build_model("classifier", small_configs()["classifier"], seed=0)
    ids = rng.integers(3, 11, (64, 5))
    labels = (ids[:, 0] > 6).astype(np.int64)  # the first word decides
    data = {"ids": ids, "mask": np.ones((64, 5), dtype=bool), "labels": labels}
    accuracies = []

    def evaluate():
        accuracies.append(float((track.call(model, "predict", ids, data["mask"]).argmax(1) == labels).mean()))
        return accuracies[-1]

    result = track.fit(model, data, TrainConfig(batch_size=16, lr=0.05, epochs=15, eval_every=4), evaluate)
    assert result.steps == 60 and result.losses[-1] < result.losses[0] / 3
    assert max(accuracy for _, accuracy in result.evaluations) >= 0.9
    assert len(result.evaluation_seconds) == len(result.evaluation_cpu_seconds) == len(result.evaluations)
    assert evaluate() == result.test_exact_match, "the weights kept are those of the evaluation reported"


def test_fit_on_fresh_batches_with_a_loss_is_the_same_on_both_tracks():
    """The copy task's way: a fresh batch at every step, the loss a layer on the model's outputs."""
    from attention_course.training import TrainConfig

    config = small_configs()["lstm"]
    losses = {}
    for name in TRACKS:
        track = get_track(name)
        rng = np.random.default_rng(5)

        def draw():
            inputs = rng.random((8, 4, 3)).astype(np.float32)
            return {"inputs": inputs, "targets": (inputs[:, :, :2] > 0.5).astype(np.float32),
                    "mask": np.ones((8, 4), dtype=bool)}

        model = track.build_model("lstm", config, seed=2)
        result = track.fit(model, draw, TrainConfig(max_steps=12, lr=0.01), loss="bit_cross_entropy")
        assert result.steps == 12 and result.stopped_because == "max_steps reached"
        assert sorted(track.weights(model)) == sorted(track.weights(track.build_model("lstm", config))), \
            "the model keeps its own parameter names"
        losses[name] = result.losses
    np.testing.assert_allclose(losses["numpy"], losses["torch"], rtol=1e-4)
    assert losses["numpy"][-1] < losses["numpy"][0]
    with pytest.raises(ValueError, match="no epochs"):
        get_track("numpy").fit(get_track("numpy").build_model("lstm", config), lambda: {}, TrainConfig(epochs=1),
                               loss="bit_cross_entropy")
