"""tools/experiments/transformer_vs_rnn.py: a small instance from scratch, and the results file the page reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from tools.experiments import transformer_vs_rnn  # noqa: E402


def _earlier_results(out, **settings) -> dict:
    """A results file of an earlier run (records abridged): translation with both models, and
    dates with the RNN only."""
    settings = {"tasks": ["dates", "translation"], "seeds": [0], "target_accuracy": 0.99, "max_cpu_seconds": 1800.0,
                "max_steps": {"dates": 4, "translation": 7}, "n_test": 50, "eval_every": 25, **settings}
    records = [{"task": "translation", "model": model, "seed": 0, "steps": 7} for model in ("attention", "transformer")]
    records.append({"task": "dates", "model": "attention", "seed": 0, "steps": 4})
    commands = {"translation attention": "earlier translation command",
                "translation transformer": "earlier translation command", "dates attention": "earlier dates command"}
    earlier = {"command": "earlier command", "settings": settings, "records": records, "commands": commands}
    out.write_text(json.dumps(earlier))
    return earlier


def test_a_small_run_records_what_the_page_draws(tmp_path):
    out = tmp_path / "results.json"
    earlier = _earlier_results(out)
    # --update: the transformer on dates is trained now, and the RNN on dates, whose record is
    # replaced; the translation records of the file are kept.
    transformer_vs_rnn.main(["--tasks", "dates", "--seeds", "0", "--max-steps", "dates=4", "--n-test", "50",
                             "--eval-every", "25", "--out", str(out), "--update"])
    results = json.loads(out.read_text())
    assert results["experiment"] == "transformer_vs_rnn" and "tools.experiments.transformer_vs_rnn" in results["command"]
    assert results["complete"] and results["settings"]["max_steps"] == {"dates": 4, "translation": 7}
    assert results["settings"]["tasks"] == ["dates", "translation"]
    assert results["settings"]["transformer_recipe"]["warmup_steps"] >= 1
    assert 0 < results["settings"]["transformer_recipe"]["label_smoothing"] < 1
    assert results["commands"] == {"dates attention": results["command"], "dates transformer": results["command"],
                                   "translation attention": "earlier translation command",
                                   "translation transformer": "earlier translation command"}
    assert [r for r in results["records"] if r["task"] == "translation"] == earlier["records"][:2]
    records = {record["model"]: record for record in results["records"] if record["task"] == "dates"}
    assert sorted(records) == ["attention", "transformer"]
    for record in records.values():
        assert record["task"] == "dates" and record["seed"] == 0 and record["parameters"] > 10_000
        assert record["evaluations"] and record["steps"] >= record["evaluations"][-1][0]
        assert 0 <= record["test_exact_match"] <= 1
        assert record["steps"] == 4 and record["process_cpu_seconds"] > 0
        assert [entry["source"] for entry in record["attention"]] == [
            list(text) for text in transformer_vs_rnn.EXAMPLES["dates"]]
    maps = records["transformer"]["attention"][0]
    cross = np.array(maps["cross"])  # (layers, heads, T_out, T_enc)
    assert cross.shape[:2] == (2, 4) and cross.shape[3] == len("september 27, 1994")
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=0.01)
    decoder = np.array(maps["decoder"])
    np.testing.assert_array_equal(np.triu(decoder, k=1), 0)  # causal
    alignment = np.array(records["attention"]["attention"][0]["alignment"])
    assert alignment.shape[:2] == (1, 1) and alignment.shape[3] == len("september 27, 1994")


def test_update_needs_the_same_settings(tmp_path):
    out = tmp_path / "results.json"
    with pytest.raises(SystemExit, match="does not exist"):
        transformer_vs_rnn.main(["--tasks", "dates", "--update", "--out", str(out)])
    _earlier_results(out, n_test=300)
    with pytest.raises(SystemExit, match="n_test 50 differs"):
        transformer_vs_rnn.main(["--tasks", "dates", "--seeds", "0", "--n-test", "50", "--update", "--out", str(out)])
    _earlier_results(out)
    # the transformer on dates again, with another step limit than the RNN's kept record had
    with pytest.raises(SystemExit, match="step limit 9 differs"):
        transformer_vs_rnn.main(["--tasks", "dates", "--models", "transformer", "--seeds", "0", "--n-test", "50",
                                 "--max-steps", "dates=9", "--update", "--out", str(out)])


def test_step_limits_per_task():
    assert transformer_vs_rnn._steps_by_task(["300"], ["dates", "translation"]) == {"dates": 300, "translation": 300}
    assert transformer_vs_rnn._steps_by_task(["dates=8", "translation=5"], ["dates"]) == {"dates": 8, "translation": 5}
    with pytest.raises(SystemExit, match="no task 'copy'"):
        transformer_vs_rnn._steps_by_task(["copy=3"], ["dates"])


def test_the_committed_results_have_every_run_the_page_reads():
    from tools.experiments.common import RESULTS

    results = json.loads((RESULTS / "transformer_vs_rnn.json").read_text())
    settings = results["settings"]
    assert results["complete"] and len(settings["seeds"]) >= 3
    runs = {(r["task"], r["model"], r["seed"]) for r in results["records"]}
    assert runs == {(task, model, seed) for task in settings["tasks"] for model in settings["models"]
                    for seed in settings["seeds"]}
    assert set(settings["tasks"]) == {"dates", "translation"}
    assert set(results["commands"]) == {f"{task} {model}" for task in settings["tasks"] for model in settings["models"]}
    assert all("tools.experiments.transformer_vs_rnn" in command for command in results["commands"].values())
    # an experiment stopped early and resumed says so, with the command that resumed it
    assert all("--resume" in command for command in results.get("resumed_by", []))
    # Translation had room to reach 99% (what the page reports steps and time to).
    assert settings["max_steps"]["translation"] >= 2000
    for record in results["records"]:
        assert record["process_cpu_seconds"] > 0 and record["evaluations"]
        assert record["reached"] == (record["test_exact_match"] >= settings["target_accuracy"])
        if not record["reached"]:  # a run that did not reach 99% ran to its limit
            assert record["stopped_because"] in ("max_steps reached", "max_seconds reached")
            if record["stopped_because"] == "max_steps reached":
                assert record["steps"] == settings["max_steps"][record["task"]]
    first = [r for r in results["records"] if r["task"] == "dates" and r["seed"] == settings["seeds"][0]]
    assert {r["model"] for r in first if r.get("attention")} == {"attention", "transformer"}


def test_resume_runs_only_the_missing_runs_and_keeps_the_rest(tmp_path):
    out = tmp_path / "results.json"
    with pytest.raises(SystemExit, match="does not exist"):
        transformer_vs_rnn.main(["--resume", "--out", str(out)])
    from tools.experiments.common import write_results

    settings = {"tasks": ["dates"], "seeds": [0], "models": ["attention", "transformer"], "target_accuracy": 0.99,
                "max_cpu_seconds": 1800.0, "max_steps": {"dates": 4}, "n_test": 50, "eval_every": 25,
                "transformer_recipe": transformer_vs_rnn.transformer_recipe()}
    kept = {"task": "dates", "model": "attention", "seed": 0, "steps": 4, "marker": "kept as it was"}
    commands = {"dates attention": "the first command", "dates transformer": "the first command"}
    write_results(out, "transformer_vs_rnn", settings, [kept], 100.0, "the first command", commands=commands,
                  complete=False)
    arguments = ["--tasks", "dates", "--seeds", "0", "--max-steps", "dates=4", "--n-test", "50", "--eval-every", "25",
                 "--out", str(out), "--resume"]
    with pytest.raises(SystemExit, match="choose one"):
        transformer_vs_rnn.main(arguments + ["--update"])
    with pytest.raises(SystemExit, match="step limit 5 differs"):
        transformer_vs_rnn.main([*arguments[:5], "dates=5", *arguments[6:]])
    transformer_vs_rnn.main(arguments)
    results = json.loads(out.read_text())
    assert results["records"][0] == kept   # not run again
    assert [(r["model"], r["steps"]) for r in results["records"][1:]] == [("transformer", 4)]
    assert results["complete"] and results["command"] == "the first command" and results["commands"] == commands
    assert results["seconds"] > 100.0 and "--resume" in results["resumed_by"][0]
