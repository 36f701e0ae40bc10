"""Tests for attention_course/tasks/common.py: the options that apply, stopping rules, what a track changes."""

import argparse

import pytest

from attention_course.core.configs import OptionError
from attention_course.tasks import common, get_task
from attention_course.tracks import get_track


def test_options_that_do_not_apply_are_named():
    from attention_course.cli import build_parser

    args = build_parser().parse_args(["train", "--task", "babi", "--score", "dot", "--cell", "lstm"])
    assert common.given_options(args) == {"task", "score", "cell"}
    with pytest.raises(OptionError, match="--cell, --score: not an option of the 'babi' task"):
        common.check_options(args, {"task"})
    assert common.check_options(args, {"task", "score", "cell"}) == {"task", "score", "cell"}


def test_a_task_command_checks_the_model_and_asks_the_track_about_the_device():
    from attention_course.cli import build_parser

    args = build_parser().parse_args(["train", "--task", "caption", "--model", "mean"])
    with pytest.raises(OptionError, match="--model mean: the 'caption' task has one model"):
        common.check_task_command(args, get_task("caption"), common.TASK_OPTIONS, "has one model")
    args = build_parser().parse_args(["train", "--task", "caption", "--device", "cuda"])
    with pytest.raises(OptionError, match="the NumPy track runs on the CPU"):  # numpy_track.track.check_options
        common.check_task_command(args, get_task("caption"), common.TASK_OPTIONS, "has one model")


def test_stopping_rules_fall_back_to_the_tasks_own():
    args = argparse.Namespace(epochs=None, max_steps=None, max_seconds=None, max_cpu_seconds=None,
                              target_accuracy=None)
    assert common.stopping_rules(args, {"epochs": 6}) == {"epochs": 6, "max_steps": None, "max_seconds": None,
                                                          "max_cpu_seconds": None, "target_accuracy": None}
    args.max_steps = 3
    assert common.stopping_rules(args, {"epochs": 6})["epochs"] is None


def test_track_settings_take_the_tracks_gru_form_and_its_own_values():
    pytest.importorskip("torch")
    numpy_settings = common.track_settings(get_track("numpy"), "caption", {"lr": 0.01, "epochs": 20})
    torch_settings = common.track_settings(get_track("torch"), "caption", {"lr": 0.01, "epochs": 20})
    assert numpy_settings["reset_after"] is False and torch_settings["reset_after"] is True
    assert numpy_settings["inputs"] == "features" and numpy_settings["lr"] == 0.01
    assert torch_settings["inputs"] == "images" and torch_settings["lr"] == 0.003 and torch_settings["epochs"] == 30
    assert common.track_settings(get_track("numpy"), "babi", {"lr": 0.01}) == {"reset_after": False, "lr": 0.01}
