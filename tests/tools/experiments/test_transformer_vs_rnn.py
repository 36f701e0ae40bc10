"""tools/experiments/transformer_vs_rnn.py: a small instance from scratch, and the results file the page reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from tools.experiments import transformer_vs_rnn  # noqa: E402


def test_a_small_run_records_what_the_page_draws(tmp_path):
    out = tmp_path / "results.json"
    transformer_vs_rnn.main(["--tasks", "dates", "--seeds", "0", "--max-steps", "dates=4", "--n-test", "50",
                             "--out", str(out)])
    results = json.loads(out.read_text())
    assert results["experiment"] == "transformer_vs_rnn" and "tools.experiments.transformer_vs_rnn" in results["command"]
    assert results["complete"] and results["settings"]["max_steps"] == {"dates": 4}
    records = {record["model"]: record for record in results["records"]}
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
    for record in results["records"]:
        assert record["process_cpu_seconds"] > 0 and record["evaluations"]
        assert record["reached"] == (record["test_exact_match"] >= settings["target_accuracy"])
    first = [r for r in results["records"] if r["task"] == "dates" and r["seed"] == settings["seeds"][0]]
    assert {r["model"] for r in first if r.get("attention")} == {"attention", "transformer"}
