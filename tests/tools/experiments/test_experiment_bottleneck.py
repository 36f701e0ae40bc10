"""tools/experiments/bottleneck.py: a small instance from scratch, and the committed results
the chapter 1 page plots."""

from __future__ import annotations

import json

import pytest

from tools.experiments import bottleneck
from tools.experiments.common import RESULTS

SMALL = bottleneck.Condition(part="test", task="reverse", model="plain", hidden_size=32,
                             min_length=3, max_length=8, budgets=(200, 400), n_train=1500,
                             n_test=300, n_train_scored=300)


@pytest.fixture(scope="module")
def small_runs():
    import dataclasses

    return {model: bottleneck.run_condition(dataclasses.replace(SMALL, model=model), seed=0)
            for model in ("plain", "attention")}


@pytest.mark.slow
def test_a_record_per_budget_and_split_with_every_length(small_runs):
    for records in small_runs.values():
        assert [(r["budget"], r["split"]) for r in records] == [
            (200, "test"), (200, "train"), (400, "test"), (400, "train")]
        for record in records:
            assert record["lengths"] == list(range(3, 9))
            assert len(record["by_length"]) == 6
            assert 0.0 <= record["exact_match"] <= 1.0
            assert record["parameters"] > 0


@pytest.mark.slow
def test_attention_beats_the_bottleneck_within_the_same_budget(small_runs):
    final = {model: next(r for r in records if r["budget"] == 400 and r["split"] == "test")
             for model, records in small_runs.items()}
    assert final["attention"]["exact_match"] >= final["plain"]["exact_match"] + 0.3, final
    # the plain model's accuracy falls with the length of the source
    by_length = final["plain"]["by_length"]
    assert by_length[0] > by_length[-1], by_length


def test_the_plan_has_the_chapter_and_the_capacity_parts():
    budgets = bottleneck.plan("budgets")
    assert {(c.task, c.model) for c in budgets} == {("reverse", "plain"), ("reverse", "attention"),
                                                    ("copy", "plain")}
    capacity = bottleneck.plan("capacity")
    assert {c.hidden_size for c in capacity} == {16, 64} and {c.max_length for c in capacity} == {30}


def test_the_committed_results_hold_what_chapter_1_plots():
    results = json.loads((RESULTS / "bottleneck.json").read_text())
    assert results["command"].startswith(".venv/bin/python -m tools.experiments.bottleneck")
    records = results["records"]
    seeds = set(results["settings"]["seeds"])
    assert len(seeds) >= 3
    for condition in bottleneck.plan("all"):
        for budget in condition.budgets:
            for split in ("train", "test"):
                found = {r["seed"] for r in records if r["part"] == condition.part
                         and r["task"] == condition.task and r["model"] == condition.model
                         and r["hidden_size"] == condition.hidden_size and r["budget"] == budget
                         and r["split"] == split}
                assert found == seeds, (condition, budget, split, found)
