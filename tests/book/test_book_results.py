"""attention_course.book: the results of the experiments (``load_results``, ``over_seeds``) and
the Sphinx hook that keeps one copy of each script on a page."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from attention_course import book

RECORDS = [
    {"model": "plain", "seed": 0, "exact_match": 0.5, "by_length": [1.0, 0.5, None]},
    {"model": "plain", "seed": 1, "exact_match": 0.7, "by_length": [1.0, 0.7, 0.1]},
    {"model": "attention", "seed": 0, "exact_match": 1.0, "by_length": [1.0, 1.0, 1.0]},
]


def test_over_seeds_gives_mean_spread_and_seeds_of_numbers_and_lists():
    mean, sd, seeds = book.over_seeds(RECORDS, "exact_match", model="plain")
    assert (mean, seeds) == (pytest.approx(0.6), [0, 1])
    assert sd == pytest.approx(np.std([0.5, 0.7], ddof=1))
    mean, sd, _ = book.over_seeds(RECORDS, "by_length", model="plain")
    assert mean[:2] == pytest.approx([1.0, 0.6]) and np.isnan(mean[2])
    mean, sd, seeds = book.over_seeds(RECORDS, "exact_match", model="attention")
    assert (mean, sd, seeds) == (1.0, 0.0, [0])


def test_over_seeds_names_a_selection_that_matches_nothing():
    with pytest.raises(ValueError, match="transformer"):
        book.over_seeds(RECORDS, "exact_match", model="transformer")


def test_load_results_reads_results_beside_the_page_first(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "demo.json").write_text(json.dumps({"records": [1, 2]}))
    monkeypatch.chdir(tmp_path)
    assert book.load_results("demo") == {"records": [1, 2]}
    with pytest.raises(FileNotFoundError, match="tools/experiments"):
        book.load_results("no_such_experiment")


def test_the_committed_results_of_chapters_1_to_7_load():
    names = ["bottleneck", "dates_scores", "dates_encoder", "dates_decoder", "dates_skips",
             "translation_bleu", "transformer_vs_rnn"]
    for name in names:
        results = book.load_results(name)
        assert results["records"], name
        assert results["command"].startswith(".venv/bin/python -m tools.experiments."), name


def test_every_results_file_a_page_loads_exists_and_says_where_it_comes_from():
    """A page's ``load_results("NAME")`` finds book/results/NAME.json, and each file names the
    command that made it, or, for figures quoted from an earlier run, says so."""
    import re

    from book_helpers import ROOT

    loaded = {name for page in (ROOT / "book").glob("*.md")
              for name in re.findall(r'load_results\("(\w+)"\)', page.read_text(encoding="utf-8"))}
    assert {"gpu_checks", "transformer_constant_rate", "multihead_attention"} <= loaded
    for name in sorted(loaded):
        results = book.load_results(name)
        command = results.get("command") or results.get("meta", {}).get("command")
        assert command, f"{name}: no command"
        if "provenance" in results:
            assert "quoted" in results["provenance"].lower() or "earlier run" in results["provenance"], name


def test_a_page_keeps_one_copy_of_each_script():
    def script(filename, **attributes):
        return SimpleNamespace(filename=filename, attributes=attributes, priority=500)

    config = script(None, body="const THEBE_JS_URL = 1")
    scripts = [config, script("a.js"), script("", body="const THEBE_JS_URL = 1"),
               script("a.js", **{"async": "async"}), script(None, body="var x = 2")]
    context = {"script_files": scripts}
    book._one_copy_of_each_script(None, "page", "page.html", context, None)
    assert context["script_files"] is scripts  # changed in place, as Sphinx renders it
    assert [(s.filename, s.attributes) for s in scripts] == [
        (None, {"body": "const THEBE_JS_URL = 1"}), ("a.js", {}), ("a.js", {"async": "async"}),
        (None, {"body": "var x = 2"})]


def test_cpu_timings_take_turns_and_the_best_is_the_least():
    calls = []
    spin = {"short": 1_000, "long": 200_000}

    def work(name):
        def run():
            calls.append(name)
            sum(range(spin[name]))
        return run

    times = book.cpu_timings({name: work(name) for name in spin}, repeats=4)
    assert calls == ["short", "long"] + ["short", "long"] * 4  # a warm-up each, then turns
    assert {name: len(values) for name, values in times.items()} == {"short": 4, "long": 4}
    best = book.cpu_seconds({name: work(name) for name in spin}, repeats=3)
    assert set(best) == set(spin) and best["short"] < best["long"]
    assert min(times["long"]) > 0


@pytest.mark.parametrize("repeats", [0, -1, 2.5])
def test_cpu_timings_refuse_a_count_that_is_not_one_or_more(repeats):
    with pytest.raises(ValueError, match="repeats must be"):
        book.cpu_timings({"f": lambda: None}, repeats=repeats)
