"""``benchmarks/kv_cache.py`` (chapter 10): a small measurement on both tracks runs, compares the tokens of the two
ways of decoding, and reports the ratio; the committed results hold what the page quotes."""

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
        spec = importlib.util.spec_from_file_location("kv_cache_benchmark", ROOT / "benchmarks" / "kv_cache.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_a_small_measurement(benchmark, monkeypatch, track):
    calls = []

    def time_once(function, **_):  # what matters here is that both ways run, not how long they take
        calls.append(function())
        return 0.001 * len(calls)

    monkeypatch.setattr(benchmark, "time_call", time_once)
    row = benchmark.measure(track, N=3, T_enc=6, T_out=5)
    assert len(calls) == 2 and row["same_tokens"] is True
    assert row["uncached_ms"] == pytest.approx(1.0) and row["cached_ms"] == pytest.approx(2.0)
    assert row["ratio"] == pytest.approx(0.5) and row["T_out"] == 5 and row["track"] == track


def test_the_committed_results():
    results = json.loads((ROOT / "book" / "results" / "kv_cache.json").read_text())
    assert results["command"].startswith(".venv/bin/python benchmarks/kv_cache.py")
    rows = results["rows"]
    assert {row["track"] for row in rows} == {"numpy", "torch"} and all(row["same_tokens"] for row in rows)
    for row in rows:
        assert row["ratio"] == pytest.approx(row["uncached_ms"] / row["cached_ms"])
