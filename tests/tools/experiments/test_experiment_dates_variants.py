"""tools/experiments/dates_variants.py: a small instance from scratch, the parameter matching,
and the committed results chapters 4 to 7 plot."""

from __future__ import annotations

import json

import pytest

from tools.experiments import dates_variants
from tools.experiments.common import RESULTS

SMALL = dates_variants.Setting(n_train=2000, n_test=100, max_steps=100, eval_every=25)


@pytest.fixture(scope="module")
def data():
    return dates_variants.load_dates(SMALL)


@pytest.mark.slow
def test_one_run_records_a_curve_and_learns(data):
    variant = dates_variants.Variant("general", {"score": "general"})
    record = dates_variants.run_variant(variant, seed=0, setting=SMALL, data=data)
    assert [step for step, _ in record["curve"]] == [25, 50, 75, 100]
    assert len(record["loss_curve"]) == 4
    assert record["steps_to_99"] is None or record["steps_to_99"] % 25 == 0
    # it learns: the last evaluation is better than the first, and the loss fell
    assert record["curve"][-1][1] > record["curve"][0][1], record["curve"]
    assert record["loss_curve"][-1] < record["loss_curve"][0]


def test_matched_variants_have_nearly_the_parameters_they_match(data):
    vocabularies = data[2]
    encoder = {v.name: v for v in dates_variants.variants("encoder", vocabularies)}
    target = dates_variants.parameters(vocabularies, encoder["bidirectional"].changes)
    matched = dates_variants.parameters(vocabularies,
                                        encoder["unidirectional, same parameters"].changes)
    same_h = dates_variants.parameters(vocabularies, encoder["unidirectional, same H"].changes)
    assert abs(matched - target) / target < 0.03
    assert abs(same_h - target) / target > 0.1  # without matching, the counts differ


def test_skips_add_no_parameters(data):
    vocabularies = data[2]
    counts = {v.name: dates_variants.parameters(vocabularies, v.changes)
              for v in dates_variants.variants("skips", vocabularies)}
    assert counts["4 layers"] == counts["4 layers + skips"]
    assert counts["8 layers"] == counts["8 layers + skips"] > counts["4 layers"]


@pytest.mark.parametrize("comparison", ["scores", "encoder", "decoder", "skips"])
def test_the_committed_results_hold_what_the_chapters_plot(comparison):
    path = RESULTS / f"dates_{comparison}.json"
    results = json.loads(path.read_text())
    records = results["records"]
    assert results["command"].startswith(".venv/bin/python -m tools.experiments.dates_variants")
    variants = {r["variant"] for r in records}
    assert len(variants) >= 2
    for variant in variants:
        runs = [r for r in records if r["variant"] == variant]
        assert len({r["seed"] for r in runs}) >= 3, variant
        assert len({len(r["curve"]) for r in runs}) == 1
        assert all(0.0 <= accuracy <= 1.0 for r in runs for _, accuracy in r["curve"])
