"""tools/experiments/translation_bleu.py: a small instance from scratch, and the committed
results chapter 6 plots."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tools.experiments import translation_bleu
from tools.experiments.common import RESULTS

SMALL = translation_bleu.Setting(n_train=1500, n_test=200, max_length=10, budgets=(150, 300),
                                 plain_budgets=(150, 300), hidden_size=32, embed_dim=16,
                                 alignment_examples=2)


@pytest.fixture(scope="module")
def small_runs():
    return translation_bleu.run(["plain", "luong"], [0], SMALL)


@pytest.mark.slow
def test_records_per_model_and_budget_with_bleu_by_length(small_runs):
    assert [(r["model"], r["budget"]) for r in small_runs] == [
        ("plain", 150), ("plain", 300), ("luong", 150), ("luong", 300)]
    bins = translation_bleu.bins(SMALL)
    for record in small_runs:
        assert [b["lengths"] for b in record["by_length"]] == [list(b) for b in bins]
        assert sum(b["sentences"] for b in record["by_length"]) == SMALL.n_test
        assert 0.0 <= record["bleu"] <= 100.0


@pytest.mark.slow
def test_attention_translates_better_and_its_alignments_match_the_gold_shapes(small_runs):
    final = {r["model"]: r for r in small_runs if r["budget"] == 300}
    assert final["luong"]["bleu"] > final["plain"]["bleu"] + 10, (
        final["luong"]["bleu"], final["plain"]["bleu"])
    assert "alignment_agreement" not in final["plain"]
    examples = final["luong"]["alignments"]
    assert len(examples) == 2
    for example in examples:
        gold = np.array(example["gold"])
        weights = np.array(example["weights"])
        assert gold.shape[0] == gold.shape[1] == len(example["source"].split())
        assert weights.shape[1] == gold.shape[1]
        assert np.allclose(weights.sum(axis=1), 1.0, atol=0.01)


def test_bleu_is_sacrebleus():
    reference = "lo farmo lo miko vidu"
    assert translation_bleu.bleu([reference], [reference]) == pytest.approx(100.0)
    assert translation_bleu.bleu(["un hundo dormu et kuru"], [reference]) < 1.0


def test_the_committed_results_hold_what_chapter_6_plots():
    results = json.loads((RESULTS / "translation_bleu.json").read_text())
    records = results["records"]
    settings = results["settings"]
    assert results["command"].startswith(".venv/bin/python -m tools.experiments.translation_bleu")
    assert len(settings["seeds"]) >= 3
    for model in settings["models"]:
        budgets = settings["plain_budgets"] if model == "plain" else settings["budgets"]
        for budget in budgets:
            found = {r["seed"] for r in records if r["model"] == model and r["budget"] == budget}
            assert found == set(settings["seeds"]), (model, budget)
    assert any("alignments" in r for r in records if r["model"] != "plain")
