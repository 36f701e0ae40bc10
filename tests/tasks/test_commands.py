"""``attention-course train --task classify|caption|babi|cloze``: the JSON summary last, options checked."""

import json

import pytest

from attention_course.cli import main


def run_main(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("task", "track", "key"), [
    ("classify", "numpy", "planted_attention_share"),
    ("classify-order", "torch", "planted_attention_share"),
    ("caption", "numpy", "object_hit_rate"),
    ("babi", "torch", "supporting_hit_rate_by_hop"),
    ("cloze", "numpy", "mention_hit_rate"),
    ("cloze", "torch", "near_mention_hit_rate_by_blank"),
])
def test_train_prints_the_json_summary_last(capsys, tmp_path, task, track, key):
    code, out, err = run_main(capsys, "train", "--task", task, "--track", track, "--n-train", "64", "--n-test", "32",
                              "--max-steps", "3", "--out", str(tmp_path), "--no-progress", "--seed", "1")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["task"] == task and summary["track"] == track and summary["steps"] == 3
    assert key in summary and summary["n_train"] == 64 and summary["seed"] == 1
    history = json.loads((tmp_path / "history.json").read_text())
    assert len(history["losses"]) == 3


@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_the_static_captioner_is_chosen_with_model(capsys, tmp_path, track):
    code, out, err = run_main(capsys, "train", "--task", "caption", "--model", "static", "--track", track,
                              "--n-train", "64", "--n-test", "32", "--max-steps", "2", "--out", str(tmp_path),
                              "--no-progress")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["model"] == "static" and summary["object_hit_rate"] is None  # no weights to look with


def test_the_pooling_is_chosen_with_model(capsys, tmp_path):
    code, out, _ = run_main(capsys, "train", "--task", "classify-keyword", "--model", "last", "--n-train", "64",
                            "--n-test", "32", "--max-steps", "2", "--out", str(tmp_path), "--no-progress")
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["model"] == "last" and summary["planted_attention_share"] is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--task", "classify", "--score", "dot"], "--score: not an option of the 'classify' task"),
    (["--task", "caption", "--model", "mean"], "the 'caption' task trains attention or static"),
    (["--task", "cloze", "--model", "static"], "the 'cloze' task has one model, the attentive reader"),
    (["--task", "babi", "--cell", "lstm"], "--cell: not an option of the 'babi' task"),
    (["--task", "babi", "--hidden-size", "8"], "--hidden-size: not an option of the 'babi' task"),
    (["--task", "caption", "--device", "cuda"], "NumPy track runs on the CPU"),
    (["--task", "dates", "--model", "mean"], "--model mean pools a classifier's states"),
])
def test_options_that_do_not_apply_are_one_line_errors(capsys, argv, message):
    code, out, err = run_main(capsys, "train", *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1
