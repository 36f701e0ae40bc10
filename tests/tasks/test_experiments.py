"""Tests for attention_course/tasks/experiments.py: the comparisons the book's page loads."""

import json
from pathlib import Path

import pytest

from attention_course.tasks import experiments

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
    # Made before chapter 9's tasks moved to attention_course.tasks, by the same code under its old
    # name (attention_course.applications.experiments, since removed); the page shows the command as
    # it runs today.
    assert results["command"] == experiments.COMMAND.replace("tasks.experiments", "applications.experiments")
    check_structure(results)


def test_update_reruns_only_the_rows_asked_for_and_keeps_the_rest(tmp_path):
    out = tmp_path / "results.json"
    numpy_row = {"track": "numpy", "coverage_weight": 0.0, "seed": 0, "object_hit_rate": 0.5, "steps": -1}
    torch_row = {"track": "torch", "coverage_weight": 0.0, "seed": 0, "object_hit_rate": 0.5, "steps": -1}
    previous = {"command": experiments.COMMAND, "seeds": [0], "quick": True, "classify": ["kept"],
                "caption": [torch_row, numpy_row], "babi": ["kept"], "seconds": 1.0}
    out.write_text(json.dumps(previous))
    argv = ["--out", str(out), "--quick", "--seeds", "0", "--parts", "caption", "--caption-tracks", "torch",
            "--update"]
    assert experiments.main(argv) == 0
    results = json.loads(out.read_text())
    assert results["command"] == experiments.COMMAND and results["classify"] == results["babi"] == ["kept"]
    numpy_rows, torch_rows = results["caption"][:1], results["caption"][1:]
    assert numpy_rows == [numpy_row]
    assert len(torch_rows) == 1 and torch_rows[0]["track"] == "torch" and torch_rows[0]["steps"] == 3
    assert results["updates"][-1]["command"].endswith("--caption-tracks torch --update")
    assert results["updates"][-1]["seeds"] == [0]
    with pytest.raises(ValueError, match="quick"):
        experiments.update(previous, {**previous, "quick": False}, "again", ("torch",))


def test_the_recorded_commands_run_under_the_modules_name_today(tmp_path):
    """The page shows the recorded commands with ``attention_course.applications`` (the old name, removed)
    as ``attention_course.tasks``: that command runs."""
    import subprocess
    import sys

    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"command": experiments.COMMAND}
    for command in [results["command"]] + [update["command"] for update in results.get("updates", [])]:
        program = command.replace("attention_course.applications.", "attention_course.tasks.").split(" --out")[0]
        assert program.split() == ["python", "-m", "attention_course.tasks.experiments"], command
    completed = subprocess.run([sys.executable, "-m", "attention_course.tasks.experiments", "--help"],
                               capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert completed.returncode == 0, completed.stderr
    assert "--caption-tracks" in completed.stdout
