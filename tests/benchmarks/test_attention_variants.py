"""A small instance of every part of ``benchmarks/attention_variants.py`` (the experiments behind
chapter 8's figures): the script runs, and its results have the shape the book reads."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

SMALL = {
    "alignments": dict(n_train=300, n_test=20, max_length=8, steps=20, embed_dim=8, hidden_size=8, batch_size=32,
                       lr=0.01, window=1, examples=1),
    "soft_hard": dict(n_train=300, n_test=20, steps=20, eval_every=10, embed_dim=8, hidden_size=8, batch_size=32,
                      lr=0.02),
    "variance": dict(at_steps=(10, 20), batch=16, draws=6),
}


@pytest.fixture(scope="module")
def experiments():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its sibling helpers as a script would
    try:
        spec = importlib.util.spec_from_file_location("attention_variants", BENCHMARKS / "attention_variants.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_every_part_runs_and_writes_what_the_book_reads(experiments):
    results = experiments.run(("alignments", "soft_hard", "variance"), seeds=[0], settings=SMALL,
                              log=lambda message: None)
    alignments = results["alignments"]
    assert {run["attention"] for run in alignments["runs"]} == {"global", "local-m", "local-p"}
    assert len(alignments["runs"]) == 3 and all(run["steps"] == 20 for run in alignments["runs"])
    assert alignments["summary"]["local-p"]["parameters"] > alignments["summary"]["local-m"]["parameters"]
    example = alignments["examples"][0]
    gold = np.array(example["gold"])
    assert gold.shape == (len(example["target"]), len(example["source"])) and (gold.sum(axis=1) == 1).all()
    local_m = np.array(example["local-m"]["weights"])  # (words + <eos>, source words)
    T_out, T_enc = local_m.shape
    distance = np.abs(np.arange(T_enc) - np.minimum(np.arange(T_out), T_enc - 1)[:, None])
    assert np.all(local_m[distance > 1] == 0), "local-m's weights stay in the window of D = 1"
    assert local_m.shape == (len(example["target"]) + 1, len(example["source"])), "a row per word and <eos>"
    assert np.allclose(np.array(example["global"]["weights"]).sum(axis=1), 1, atol=1e-3)
    soft_hard = results["soft_hard"]
    assert {run["variant"] for run in soft_hard["runs"]} == set(experiments.HARD_VARIANTS)
    assert all([step for step, _ in run["evaluations"]] == [10, 20] for run in soft_hard["runs"])
    variance = results["variance"]
    assert set(variance) == {"moving_average", "learned", "settings"}
    for baseline in ("moving_average", "learned"):
        points = variance[baseline]["points"]
        assert [point["step"] for point in points] == [10, 20]
        assert all(point["with_baseline"] > 0 and point["gumbel"] > 0 for point in points)
    for point in variance["moving_average"]["points"]:
        # the same samples: early on the losses are far from zero, and the moving average
        # (about the mean loss) takes most of the variance away
        assert point["baseline_value"] > 1 and point["without_baseline"] > 2 * point["with_baseline"], point
