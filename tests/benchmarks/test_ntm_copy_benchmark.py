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


def test_a_run_trained_in_a_temporary_folder_is_recorded_without_it(benchmark):
    record = {"command": "attention-course train --task copy --model lstm --seed 2 --out /tmp/xyz/lstm-2",
              "checkpoint": "/tmp/xyz/lstm-2/checkpoint", "steps": 5}
    portable = benchmark.portable(record, "lstm", 2)
    assert portable == {"command": "attention-course train --task copy --model lstm --seed 2 "
                                   "--out runs/copy-lstm-2", "steps": 5}
    inside = {"command": "attention-course train --out book/results/copy_ntm",
              "checkpoint": "book/results/copy_ntm/checkpoint"}
    assert benchmark.portable(inside, "ntm", 0) == inside


def test_resume_keeps_the_runs_and_commands_of_an_earlier_file(benchmark, tmp_path, monkeypatch, capsys):
    out = tmp_path / "ntm_copy.json"
    committed = json.loads((RESULTS / "ntm_copy.json").read_text())
    monkeypatch.setattr(sys, "argv", ["ntm_copy.py", "--resume", str(RESULTS / "ntm_copy.json"), "--seeds",
                                      "--out", str(out)])
    benchmark.main()
    summary = json.loads(out.read_text())
    assert summary["seeds"] == committed["seeds"] and summary["ntm"] == committed["ntm"]
    assert summary["earlier_commands"][-1] == committed["command"]
    monkeypatch.setattr(sys, "argv", ["ntm_copy.py", "--resume", str(RESULTS / "ntm_copy.json"), "--seeds",
                                      "--baseline-seeds", "7"])
    with pytest.raises(SystemExit, match="--baseline-seeds 7"):
        benchmark.main()


def test_the_committed_results_have_what_the_page_reads():
    text = (RESULTS / "ntm_copy.json").read_text()
    assert "/tmp" not in text  # every recorded command can be run again from the repository
    summary = json.loads(text)
    for command in [summary["command"], *summary["earlier_commands"]]:
        assert command.startswith("benchmarks/ntm_copy.py")
    assert len(summary["seeds"]) >= 3
    for run in summary["runs"]:
        assert run["ntm"]["model"] == "ntm" and run["ntm"]["steps_to_99"] is not None
        assert set(run["ntm"]["bit_accuracy_by_length"]) >= {"40"}
        # The baseline of every seed: an LSTM of as many parameters, trained for as long as that NTM.
        lstm = run["lstm"]
        assert lstm["model"] == "lstm" and lstm["seed"] == run["seed"]
        assert abs(lstm["parameters"] - run["ntm"]["parameters"]) < 0.05 * run["ntm"]["parameters"]
        assert lstm["train_config"]["max_seconds"] == pytest.approx(run["ntm"]["train_seconds"], abs=0.01)
        assert set(lstm["bit_accuracy_by_length"]) == set(run["ntm"]["bit_accuracy_by_length"])
    assert summary["lstm"]["seeds"] == summary["ntm"]["seeds"] == summary["seeds"]
