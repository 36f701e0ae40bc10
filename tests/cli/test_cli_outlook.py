"""The command line for chapter 10: ``--model transformer`` on the sequence tasks, ``--task copy`` with the NTM."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_course.cli import main

pytest.importorskip("torch")


def run_main(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_transformer_trains_and_its_checkpoint_runs_in_either_track(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, stderr = run_main(capsys, "train", "--model", "transformer", "--track", "torch", "--n-train", "256",
                                    "--n-test", "32", "--max-steps", "6", "--eval-every", "3", "--d-model", "16",
                                    "--heads", "2", "--layers", "1", "--out", str(out), "--no-progress")
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["model"] == "transformer" and summary["steps"] == 6
    assert "2 heads" not in stderr and "transformer (" in stderr
    description = json.loads((out / "checkpoint" / "config.json").read_text())
    assert description["config"]["d_model"] == 16 and description["config"]["num_heads"] == 2
    assert description["config"]["norm_first"] is True
    outputs = {}
    for track in ("numpy", "torch"):
        code, stdout, stderr = run_main(capsys, "translate", "--checkpoint", str(out / "checkpoint"), "--track", track,
                                        "--no-alignment", "september 27, 1994", "3 Mar 2020")
        assert code == 0, stderr
        outputs[track] = stdout
    assert outputs["numpy"] == outputs["torch"]
    assert (out / "alignments.png").stat().st_size > 5_000


def test_the_transformer_trains_on_the_numpy_track_too(tmp_path, capsys):
    code, stdout, stderr = run_main(capsys, "train", "--model", "transformer", "--n-train", "128", "--n-test", "16",
                                    "--max-steps", "3", "--d-model", "16", "--heads", "4", "--layers", "1",
                                    "--post-norm", "--out", str(tmp_path), "--no-progress")
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["track"] == "numpy" and np.isfinite(summary["final_loss"])
    assert json.loads((tmp_path / "checkpoint" / "config.json").read_text())["config"]["norm_first"] is False


@pytest.mark.parametrize("argv, message", [
    (["--heads", "2"], "--heads is an option of --model transformer; it does not apply to --model attention"),
    (["--model", "seq2seq", "--post-norm"], "--post-norm is an option of --model transformer"),
    (["--model", "transformer", "--hidden-size", "32"], "--hidden-size is an option of the recurrent models"),
    (["--model", "transformer", "--d-model", "30", "--heads", "4"], "d_model must be a multiple of num_heads"),
    (["--model", "ntm"], "--model ntm trains on --task copy"),
    (["--task", "copy"], "--model attention: the copy task trains --model ntm or --model lstm"),
    (["--task", "copy", "--model", "ntm", "--device", "cuda"], "the copy task trains on the CPU"),
])
def test_options_that_do_not_apply_are_one_line_errors(capsys, argv, message):
    code, stdout, stderr = run_main(capsys, "train", "--max-steps", "1", "--no-progress", *argv)
    assert code == 2
    assert message in stderr and len(stderr.strip().splitlines()) == 1, stderr


def test_the_copy_task_trains_the_ntm_and_writes_a_checkpoint_both_tracks_read(tmp_path, capsys):
    from attention_course.tasks.copy import COPY_FORMAT, load_copy_checkpoint, predict
    from attention_course.data import generate_copy_task

    code, stdout, stderr = run_main(capsys, "train", "--task", "copy", "--model", "ntm", "--track", "torch",
                                    "--max-steps", "2", "--hidden-size", "16", "--seed", "3", "--out", str(tmp_path),
                                    "--no-progress")
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["model"] == "ntm" and summary["steps"] == 2 and summary["seed"] == 3
    assert 0.3 < summary["test_bit_accuracy"] < 0.7  # two steps: still guessing
    assert sorted(map(int, summary["bit_accuracy_by_length"])) == [10, 20, 30, 40, 60, 80]
    assert summary["seconds_to_99"] is None and summary["cpu_seconds_to_99"] is None
    assert 0 < summary["cpu_seconds"] < 10 * summary["train_seconds"] + 1
    description = json.loads((tmp_path / "checkpoint" / "config.json").read_text())
    assert description["format"] == COPY_FORMAT and description["config"]["controller_size"] == 16
    assert (tmp_path / "checkpoint" / "weights.npz").stat().st_size < 1_000_000
    data = generate_copy_task(4, seed=0, max_length=6)
    logits = {}
    for track in ("numpy", "torch"):
        model, _ = load_copy_checkpoint(tmp_path / "checkpoint", track)
        logits[track] = predict(model, data.inputs)
    np.testing.assert_allclose(logits["numpy"], logits["torch"], rtol=1e-4, atol=1e-5)
    history = json.loads((tmp_path / "history.json").read_text())
    assert len(history["losses"]) == 2
    assert len(history["evaluation_cpu_seconds"]) == len(history["evaluations"]) == 1


def test_the_copy_task_trains_the_lstm_baseline(tmp_path, capsys):
    code, stdout, stderr = run_main(capsys, "train", "--task", "copy", "--model", "lstm", "--max-steps", "2",
                                    "--out", str(tmp_path), "--no-progress")
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["model"] == "lstm" and summary["track"] == "numpy"
    assert summary["parameters"] == 4 * 120 * (9 + 120) + 4 * 120 + 120 * 8 + 8


def test_the_copy_task_stops_at_a_cpu_seconds_budget(tmp_path, capsys):
    code, stdout, stderr = run_main(capsys, "train", "--task", "copy", "--model", "lstm", "--track", "torch",
                                    "--max-cpu-seconds", "0.5", "--out", str(tmp_path), "--no-progress")
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stopped_because"] == "max_cpu_seconds reached"
    assert summary["cpu_seconds"] >= 0.5 and summary["train_config"]["max_cpu_seconds"] == 0.5
    assert "--max-cpu-seconds 0.5 " in summary["command"]
