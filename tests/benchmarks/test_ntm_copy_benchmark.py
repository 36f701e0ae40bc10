"""``benchmarks/ntm_copy.py`` (chapter 10's NTM over seeds): it counts an earlier run of the command,
gives each LSTM baseline its NTM's CPU seconds, and writes the file the page reads."""

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


def test_an_included_run_makes_the_file_the_page_reads(benchmark, tmp_path, monkeypatch, capsys):
    out = tmp_path / "ntm_copy.json"
    monkeypatch.setattr(sys, "argv", ["ntm_copy.py", "--include", str(RESULTS / "copy_ntm" / "checkpoint"),
                                      str(RESULTS / "copy_lstm" / "checkpoint"), "--seeds", "--out", str(out)])
    benchmark.main()
    summary = json.loads(out.read_text())
    assert summary["seeds"] == [0] and summary["runs"][0]["source"].startswith("included from")
    ntm, trained = summary["ntm"], summary["runs"][0]["ntm"]
    assert ntm["steps_to_99"] == [trained["steps_to_99"]] and ntm["cpu_seconds"] == [trained["cpu_seconds"]]
    assert ntm["cpu_seconds_to_99"] == [trained["cpu_seconds_to_99"]]
    assert summary["lstm"]["bit_accuracy_40"][0] < 0.95 <= ntm["bit_accuracy_40"][0]
    assert summary["goal_met_cpu_time"] == (trained["cpu_seconds_to_99"] <= 600)
    assert "goal (every seed" in capsys.readouterr().out


def test_the_baselines_budget_is_its_ntms_cpu_seconds(benchmark):
    assert benchmark.cpu_budget({"cpu_seconds": 123.4, "train_seconds": 400.0}, 1) == 123.4
    with pytest.raises(SystemExit, match="seed 3: its NTM's run did not record its CPU seconds"):
        benchmark.cpu_budget({"train_seconds": 400.0}, 3)


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
        # The baseline of every seed: an LSTM of as many parameters, trained for as many CPU seconds
        # as that NTM (the budget stops it within a step of it).
        lstm = run["lstm"]
        assert lstm["model"] == "lstm" and lstm["seed"] == run["seed"]
        assert abs(lstm["parameters"] - run["ntm"]["parameters"]) < 0.05 * run["ntm"]["parameters"]
        assert lstm["train_config"]["max_cpu_seconds"] == pytest.approx(run["ntm"]["cpu_seconds"], abs=0.01)
        assert lstm["stopped_because"] == "max_cpu_seconds reached"
        assert lstm["cpu_seconds"] == pytest.approx(run["ntm"]["cpu_seconds"], rel=0.02)
        # The NTM's budget: the goal's ten minutes of CPU time.
        assert run["ntm"]["train_config"]["max_cpu_seconds"] == 600
        assert set(lstm["bit_accuracy_by_length"]) == set(run["ntm"]["bit_accuracy_by_length"])
    assert summary["lstm"]["seeds"] == summary["ntm"]["seeds"] == summary["seeds"]
