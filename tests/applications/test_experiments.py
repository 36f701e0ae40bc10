"""Tests for attention_course/applications/experiments.py: the comparisons the book's page loads."""

import json
from pathlib import Path

import pytest

from attention_course.applications import experiments

RESULTS = Path(__file__).resolve().parents[2] / "book" / "results" / "09_applications.json"


def check_structure(results: dict) -> None:
    seeds = results["seeds"]
    classify = results["classify"]
    assert {(row["variant"], row["pooling"]) for row in classify} == {
        (variant, pooling) for variant in ("majority", "keyword", "order") for pooling in ("attention", "mean", "last")}
    assert len(classify) == 9 * len(seeds)
    for row in classify:
        assert 0 <= row["test_accuracy"] <= 1 and row["n_parameters"] > 0
        assert (row["planted_share"] is None) == (row["pooling"] == "last")
    caption = results["caption"]
    assert {(row["track"], row["coverage_weight"]) for row in caption} == {
        ("numpy", 0.0), ("numpy", 0.001), ("numpy", 0.01), ("torch", 0.0)}
    for row in caption:
        assert 0 <= row["object_hit_rate"] <= 1 and set(row["object_hit_rate_by_word"]) == {"colour", "shape"}
    babi = results["babi"]
    assert {row["hops"] for row in babi} == {1, 3}
    for row in babi:
        assert all(len(rates) == row["hops"] for rates in row["supporting_hit_rate_by_hop"].values())


def test_a_small_instance_runs_end_to_end(tmp_path):
    out = tmp_path / "results.json"
    assert experiments.main(["--out", str(out), "--quick", "--seeds", "0"]) == 0
    results = json.loads(out.read_text())
    assert results["quick"] and results["command"].endswith("--quick")
    check_structure(results)


@pytest.mark.skipif(not RESULTS.exists(), reason="the book's results are not there yet")
def test_the_committed_results_are_a_full_run_over_three_seeds():
    results = json.loads(RESULTS.read_text())
    assert not results["quick"] and len(results["seeds"]) >= 3
    assert results["command"] == experiments.COMMAND
    check_structure(results)
