"""``benchmarks/ntm_copy.py`` (chapter 10's NTM over seeds): it counts an earlier run of the command,
estimates CPU seconds from a measured step cost, and writes the file the page reads."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "book" / "results"


@pytest.fixture(scope="module")
def benchmark():
    spec = importlib.util.spec_from_file_location("ntm_copy_benchmark", ROOT / "benchmarks" / "ntm_copy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_seconds_are_measured_or_estimated_from_the_step_cost(benchmark):
    cost = {"cpu_seconds_per_step": 0.1}
    assert benchmark.cpu_to_99({"cpu_seconds_to_99": 12.0, "steps_to_99": 500}, cost) == 12.0
    assert benchmark.cpu_to_99({"steps_to_99": 500}, cost) == 50.0
    assert benchmark.cpu_to_99({"steps_to_99": None}, cost) is None
    assert benchmark.cpu_to_99({"steps_to_99": 500}, None) is None


def test_an_included_run_and_a_step_cost_make_the_file_the_page_reads(benchmark, tmp_path, monkeypatch, capsys):
    out = tmp_path / "ntm_copy.json"
    monkeypatch.setattr(sys, "argv", ["ntm_copy.py", "--include", str(RESULTS / "copy_ntm" / "checkpoint"),
                                      str(RESULTS / "copy_lstm" / "checkpoint"), "--seeds", "--step-cost", "3",
                                      "--out", str(out)])
    benchmark.main()
    summary = json.loads(out.read_text())
    assert summary["seeds"] == [0] and summary["runs"][0]["source"].startswith("included from")
    assert summary["step_cost"]["steps"] == 3 and 0 < summary["step_cost"]["cpu_seconds_per_step"] < 10
    ntm = summary["ntm"]
    assert ntm["steps_to_99"] == [summary["runs"][0]["ntm"]["steps_to_99"]]
    assert ntm["cpu_seconds_to_99_estimated"] == [True]
    assert ntm["cpu_seconds_to_99"][0] == pytest.approx(
        ntm["steps_to_99"][0] * summary["step_cost"]["cpu_seconds_per_step"], rel=1e-3)
    assert summary["lstm"]["bit_accuracy_40"][0] < 0.95 <= ntm["bit_accuracy_40"][0]
    assert "goal (every seed" in capsys.readouterr().out


def test_the_committed_results_have_what_the_page_reads():
    summary = json.loads((RESULTS / "ntm_copy.json").read_text())
    assert summary["command"].startswith("benchmarks/ntm_copy.py")
    for run in summary["runs"]:
        assert run["ntm"]["model"] == "ntm" and run["ntm"]["steps_to_99"] is not None
        assert set(run["ntm"]["bit_accuracy_by_length"]) >= {"40"}
        assert run["lstm"] is None or run["lstm"]["model"] == "lstm"
