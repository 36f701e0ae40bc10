"""tools/experiments/heads.py, cloze.py and caption_baseline.py: a small instance of each from scratch, and the
results files the pages read."""

from __future__ import annotations

import json

import pytest

from tools.experiments import caption_baseline, cloze, heads
from tools.experiments.common import load_results


def test_heads_trains_one_and_four_heads_at_the_same_parameters(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "heads.json"
    heads.main(["--heads", "1", "4", "--seeds", "0", "--max-steps", "4", "--eval-every", "2", "--n-test", "20",
                "--out", str(out)])
    results = json.loads(out.read_text())
    assert results["complete"] and "tools.experiments.heads" in results["command"]
    one, four = results["records"]
    assert (one["heads"], four["heads"]) == (1, 4) and one["parameters"] == four["parameters"] > 100_000
    assert [step for step, _ in one["evaluations"]] == [2, 4] and one["steps"] == 4


def test_cloze_records_where_the_attention_lands(tmp_path):
    out = tmp_path / "cloze.json"
    cloze.main(["--seeds", "0", "1", "--n-train", "200", "--epochs", "1", "--out", str(out)])
    results = json.loads(out.read_text())
    assert results["complete"] and [r["seed"] for r in results["records"]] == [0, 1]
    first = results["records"][0]
    assert set(cloze.SUMMARY) <= set(first) and "examples" not in results["records"][1]
    assert sorted(e["blank"] for e in first["examples"]) == ["object", "object", "subject", "subject"]
    for example in first["examples"]:
        assert len(example["weights"]) == len(example["story"])
        assert example["story"][example["answer_position"]] == example["answer"]


def test_caption_baseline_trains_both_captioners(tmp_path):
    out = tmp_path / "captions.json"
    caption_baseline.main(["--seeds", "0", "--max-steps", "2", "--out", str(out)])
    results = json.loads(out.read_text())
    records = {r["model"]: r for r in results["records"]}
    assert results["complete"] and sorted(records) == ["attention", "static"]
    assert records["static"]["object_hit_rate"] is None and records["attention"]["object_hit_rate"] is not None
    assert records["static"]["n_parameters"] < records["attention"]["n_parameters"]
    assert set(records["static"]["exact_match_by_objects"]) == {"1", "2", "3"}


@pytest.mark.parametrize("name, seeds", [("cloze", 5), ("caption_baseline", 5), ("heads", 3)])
def test_the_committed_results_are_complete_runs_over_seeds(name, seeds):
    results = load_results(name)
    assert results["complete"] and len(results["settings"]["seeds"]) >= seeds
    assert results["command"] == f".venv/bin/python -m tools.experiments.{name}"
