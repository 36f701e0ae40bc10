"""Tests for attention_course/tasks/copy.py: the copy-task training of the NTM and its LSTM baseline.

The page of chapter 10 loads a checkpoint of the full-size NTM (``attention-course train --task copy
--model ntm``; ``benchmarks/ntm_copy.py`` measures it over seeds); here a smaller instance is trained
from scratch to a stated accuracy, and the behaviours the page shows are asserted on it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_course.data import generate_copy_task
from attention_course.tasks.copy import (COPY_FORMAT, CopyTrainConfig, bit_accuracy, build_copy_model,
                                       copy_model_config, evaluate_lengths, load_copy_checkpoint, predict,
                                       save_copy_checkpoint, train_copy)

SMALL = {"controller_size": 32, "memory_size": 16, "memory_width": 8}


def test_bit_accuracy_counts_the_output_phase_only():
    from attention_course.numpy_track.base import Layer

    data = generate_copy_task(3, seed=0, max_length=4)

    class Echo(Layer):  # logits that are right exactly where the targets are 1, and wrong off the mask
        def __init__(self):
            super().__init__()
            self.add_param("w", np.zeros(1, dtype=np.float32))

        def forward(self, inputs):
            T = inputs.shape[1]
            logits = np.where(data.targets[:, :T] > 0.5, 1.0, -1.0)
            logits[~data.target_mask[:, :T]] = 5.0
            return logits

    assert bit_accuracy(Echo(), data) == 1.0
    flipped = Echo()
    flipped.forward = lambda inputs: -Echo().forward(inputs)
    assert bit_accuracy(flipped, data) == 0.0


def test_config_and_model_errors():
    with pytest.raises(ValueError, match="give at least one of max_steps, max_seconds, max_cpu_seconds, target_accuracy"):
        CopyTrainConfig()
    with pytest.raises(ValueError, match="min_length <= max_length"):
        CopyTrainConfig(max_steps=1, min_length=5, max_length=4)
    with pytest.raises(ValueError, match="expected one of \\['ntm', 'lstm'\\]"):
        copy_model_config("gru")
    with pytest.raises(ValueError, match="lstm: unknown sizes \\['memory_size'\\]"):
        copy_model_config("lstm", memory_size=3)


def test_the_tracks_start_from_the_same_weights_and_compute_the_same():
    data = generate_copy_task(4, seed=1, max_length=6)
    for kind, sizes in (("ntm", SMALL), ("lstm", {"hidden_size": 12})):
        config = copy_model_config(kind, **sizes)
        logits = [predict(build_copy_model(kind, config, track, seed=5), data.inputs) for track in ("numpy", "torch")]
        np.testing.assert_allclose(logits[0], logits[1], rtol=1e-4, atol=1e-5, err_msg=kind)


def test_a_checkpoint_round_trip_on_the_numpy_track(tmp_path):
    config = copy_model_config("ntm", **SMALL)
    model = build_copy_model("ntm", config, "numpy", seed=2)
    train_copy(model, CopyTrainConfig(max_steps=2, max_length=3, seed=2, test_size=8))
    save_copy_checkpoint(tmp_path, "ntm", config, model, extra={"note": "two steps"})
    description = json.loads((tmp_path / "config.json").read_text())
    assert description["format"] == COPY_FORMAT and description["note"] == "two steps"
    data = generate_copy_task(3, seed=4, max_length=5)
    for track in ("numpy", "torch"):
        loaded, _ = load_copy_checkpoint(tmp_path, track)
        np.testing.assert_allclose(predict(loaded, data.inputs), predict(model, data.inputs), rtol=1e-4, atol=1e-5)


def test_a_missing_checkpoint_is_a_clear_error(tmp_path):
    from attention_course.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match="is not a copy-task checkpoint: config.json is missing"):
        load_copy_checkpoint(tmp_path)


@pytest.mark.slow
def test_a_small_ntm_learns_to_copy_and_generalises_where_the_lstm_does_not():
    """The stated accuracy: >= 98% of the bits of lengths 1-5 within 1,000 steps, >= 85% at length 10 (never
    trained on). An LSTM of the same controller width, trained for as many steps, stays below both."""
    pytest.importorskip("torch")
    config = CopyTrainConfig(lr=0.005, max_length=5, max_steps=1000, target_accuracy=0.99, eval_every=50, seed=0,
                             test_size=128)
    ntm = build_copy_model("ntm", copy_model_config("ntm", **SMALL), "torch", seed=0)
    result = train_copy(ntm, config)
    assert result.test_bit_accuracy >= 0.98, result.evaluations
    assert result.stopped_because == "target accuracy reached" and result.first_reaching(0.99)[0] == result.steps
    generalised = evaluate_lengths(ntm, [10])[10]
    assert generalised >= 0.85
    lstm = build_copy_model("lstm", copy_model_config("lstm", hidden_size=32), "torch", seed=0)
    baseline = train_copy(lstm, CopyTrainConfig(lr=0.005, max_length=5, max_steps=result.steps, eval_every=50,
                                                seed=0, test_size=128))
    assert baseline.test_bit_accuracy < 0.9
    assert evaluate_lengths(lstm, [10])[10] < generalised - 0.15
    # the weightings the page draws: while reading, the write head moves one location a step
    data = generate_copy_task(1, seed=7, min_length=5, max_length=5)
    import torch

    with torch.no_grad():
        ntm(torch.from_numpy(data.inputs[:, :11]), record=True)
    writes = ntm.write_weights[0, :5, 0].numpy().argmax(axis=-1)
    assert len(set(writes.tolist())) == 5, writes  # five vectors, five locations


def test_the_committed_checkpoints_copy_as_the_page_says():
    """The checkpoints chapter 10 loads (made by ``attention-course train --task copy``): the NTM copies
    lengths 1-20 to >= 99% of the bits and length 40 (never trained on) to >= 95%; the LSTM trained for as
    long does not. On fresh sequences (other seeds than the command's own evaluation)."""
    pytest.importorskip("torch")
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "book" / "results"
    ntm, description = load_copy_checkpoint(results / "copy_ntm" / "checkpoint")
    lstm, baseline = load_copy_checkpoint(results / "copy_lstm" / "checkpoint")
    assert description["model"] == "ntm" and baseline["model"] == "lstm"
    assert description["trained"]["command"].startswith("attention-course train --task copy --model ntm")
    assert baseline["trained"]["train_seconds"] == pytest.approx(description["trained"]["train_seconds"], rel=0.01)
    assert bit_accuracy(ntm, generate_copy_task(64, seed=123, min_length=1, max_length=20)) >= 0.99
    at_40 = {name: evaluate_lengths(model, [40], n=32, seed=321)[40] for name, model in (("ntm", ntm), ("lstm", lstm))}
    assert at_40["ntm"] >= 0.95 and at_40["lstm"] < 0.8, at_40


@pytest.mark.parametrize("track", ["numpy", pytest.param("torch", marks=pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="torch is not installed"))])
def test_training_keeps_the_best_evaluation_and_times_each(track):
    config = CopyTrainConfig(lr=0.01, max_length=3, max_steps=5, eval_every=2, seed=1, test_size=16)
    model = build_copy_model("lstm", copy_model_config("lstm", hidden_size=6), track, seed=1)
    result = train_copy(model, config)
    assert [step for step, _, _ in result.evaluations] == [2, 4, 5] and result.steps == 5
    assert len(result.losses) == 5 and result.stopped_because == "max_steps reached"
    assert len(result.evaluation_cpu_seconds) == 3
    # the final evaluation is stamped when the stopping rule fired: the training time, not counting it
    assert result.evaluations[-1][1] == round(result.train_seconds, 3)
    assert result.evaluation_cpu_seconds[-1] == round(result.cpu_seconds, 3)
    best = max(accuracy for _, _, accuracy in result.evaluations)
    assert result.test_bit_accuracy == best
    assert result.best_step in (2, 4, 5) and dict((s, a) for s, _, a in result.evaluations)[result.best_step] == best
    test = generate_copy_task(16, seed=config.seed + 10_000, max_length=3)
    assert bit_accuracy(model, test) == pytest.approx(best), "the weights kept are the best evaluation's"


def test_a_damaged_checkpoint_is_a_clear_error(tmp_path):
    from attention_course.checkpoint import CheckpointError

    config = copy_model_config("lstm", hidden_size=4)
    save_copy_checkpoint(tmp_path, "lstm", config, build_copy_model("lstm", config, "numpy"))
    description = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**description, "config": {**config, "hidden_size": 5}}))
    with pytest.raises(CheckpointError, match="damaged copy-task checkpoint"):
        load_copy_checkpoint(tmp_path, "numpy")
    (tmp_path / "config.json").write_text(json.dumps({**description, "format": "something else"}))
    with pytest.raises(CheckpointError, match="not a copy-task checkpoint"):
        load_copy_checkpoint(tmp_path, "numpy")


def test_the_old_module_names_are_gone():
    """``attention_course.ntm_copy`` and ``attention_course.applications`` were the tasks' old names."""
    import importlib.util

    assert importlib.util.find_spec("attention_course.ntm_copy") is None
    assert importlib.util.find_spec("attention_course.applications") is None
