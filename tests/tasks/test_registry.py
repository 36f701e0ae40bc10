"""Tests for attention_course/tasks/__init__.py: the registry of tasks that the command line consults."""

import json

import pytest

from attention_course.cli import build_parser, main
from attention_course.tasks import FILES, TASKS, TaskError, get_task, model_choices
from attention_course.training import TrainResult, result_summary


def test_every_task_names_a_module_that_trains_it_and_a_function_for_its_data():
    for task in (*TASKS.values(), FILES):
        assert callable(task.load().train_command), task.name
        assert callable(task.make_data()), task.name
        assert task.models and task.metric in task.summary, task.name


def test_the_command_line_offers_what_the_registry_holds(capsys):
    parser = build_parser()
    for name, task in TASKS.items():
        for model in task.models:
            args = parser.parse_args(["train", "--task", name, "--model", model])
            assert (args.task, args.model) == (name, model)
    assert model_choices()[:3] == ["attention", "seq2seq", "transformer"] and "ntm" in model_choices()
    for option in (["--task", "chess"], ["--model", "resnet"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["train", *option])
        assert "invalid choice" in capsys.readouterr().err


def test_an_unknown_task_is_named():
    with pytest.raises(TaskError, match=r"task: expected one of \['babi', .*\], got 'chess'"):
        get_task("chess")


SMALL = {"copy": ["--model", "ntm", "--hidden-size", "8", "--max-steps", "2"],
         "translation": ["--n-train", "64", "--n-test", "8", "--max-steps", "2", "--hidden-size", "8"],
         "dates": ["--n-train", "64", "--n-test", "8", "--max-steps", "2", "--hidden-size", "8"]}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_each_tasks_summary_has_the_fields_the_registry_names(name, tmp_path, capsys):
    task = get_task(name)
    argv = SMALL.get(name, ["--n-train", "64", "--n-test", "16", "--max-steps", "2"])
    code = main(["train", "--task", name, "--out", str(tmp_path), "--no-progress", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert set(task.summary) <= set(summary), sorted(set(task.summary) - set(summary))
    assert 0 <= summary[task.metric] <= 1
    if name != "copy":  # the copy task reports its own training figures (CPU seconds to 99%, ...)
        assert set(result_summary(TrainResult())) <= set(summary)
    assert summary["task"] == name and summary["steps"] == 2
