"""``benchmarks/multihead_attention.py`` (chapter 10): at small shapes its three implementations agree (it
checks that before it times anything), and the committed results hold the ratio the issue asks for."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def benchmark():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the script imports its sibling _timing as a script would
    try:
        spec = importlib.util.spec_from_file_location("multihead_attention_benchmark",
                                                      ROOT / "benchmarks" / "multihead_attention.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


@pytest.mark.parametrize("causal", [False, True])
def test_a_small_measurement(benchmark, causal, monkeypatch):
    calls = []

    def time_once(function, **_):  # what matters here is that each step runs, not how long it takes
        calls.append(function())
        return 0.001 * len(calls)

    monkeypatch.setattr(benchmark, "time_call", time_once)
    result = benchmark.measure(2, 8, 16, 4, causal)
    assert len(calls) == 3
    for name in ("numpy", "torch_nn", "torch_track"):
        assert result[f"{name}_ms"] > 0 and result[f"{name}_gflops"] > 0
    assert result["numpy_over_torch_nn"] == pytest.approx(result["numpy_ms"] / result["torch_nn_ms"])


def test_the_committed_results():
    results = json.loads((ROOT / "book" / "results" / "multihead_attention.json").read_text())
    assert results["command"].startswith("benchmarks/multihead_attention.py")
    assert set(results["results"]) == {"default threads, no mask", "default threads, causal", "1 thread, no mask",
                                       "1 thread, causal"}
    for row in results["results"].values():
        assert row["numpy_over_torch_nn"] <= 2.0  # the goal: within 2x of torch's CPU autograd
        assert 0 < row["numpy_share_of_matmul"] < 2
