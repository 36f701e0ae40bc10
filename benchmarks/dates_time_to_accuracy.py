"""Time to 99% test exact match on dates: the course's NumPy track against a plain PyTorch model.

Both run in the same invocation, one after the other, each in a fresh process (so each
process's peak memory is its own), on the same data (``generate_dates(20000, 1000, seed)``),
evaluated on the whole test set every 25 steps, for each seed given:

* ``numpy``: ``attention-course train --track numpy`` (bidirectional GRU encoder, GRU decoder,
  general-score attention, Adam; its defaults);
* ``plain torch``: ``benchmarks/baselines/plain_torch_seq2seq.py`` (bidirectional GRU encoder,
  step-by-step GRUCell decoder with additive attention, batch 128, Adam).

    .venv/bin/python benchmarks/dates_time_to_accuracy.py [--seeds 0 1 2]

Goal (issue 2): the NumPy track no slower than the plain PyTorch model; peak memory <= 500 MB.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_json(command: list[str], timeout: float) -> dict:
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def numpy_track(seed: int, target: float, max_seconds: float, out: Path, extra: list[str]) -> dict:
    return run_json([sys.executable, "-m", "attention_course", "train", "--track", "numpy", "--seed", str(seed),
                     "--target-accuracy", str(target), "--max-seconds", str(max_seconds), "--eval-every", "25",
                     "--out", str(out / f"numpy-{seed}"), "--no-progress", *extra], timeout=max_seconds + 300)


def plain_torch(seed: int, target: float, max_seconds: float) -> dict:
    return run_json([sys.executable, "benchmarks/baselines/plain_torch_seq2seq.py", "--seed", str(seed),
                     "--target-accuracy", str(target), "--max-seconds", str(max_seconds)], timeout=max_seconds + 300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target-accuracy", type=float, default=0.99)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--numpy-args", default="", help="extra options for 'attention-course train'")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            ours = numpy_track(seed, args.target_accuracy, args.max_seconds, Path(tmp), args.numpy_args.split())
            base = plain_torch(seed, args.target_accuracy, args.max_seconds)
            rows.append((seed, ours, base))
            print(f"seed {seed}: numpy {ours['steps']} steps {ours['train_seconds']:.1f} s "
                  f"(exact match {ours['test_exact_match']:.3f}, peak {ours['peak_rss_mb']:.0f} MB) | "
                  f"plain torch {base['steps']} steps {base['train_seconds']:.1f} s "
                  f"(exact match {base['test_exact_match']:.3f}) | ratio numpy/torch "
                  f"{ours['train_seconds'] / base['train_seconds']:.2f}", flush=True)
    median_ours = statistics.median(r[1]["train_seconds"] for r in rows)
    median_base = statistics.median(r[2]["train_seconds"] for r in rows)
    peak = max(r[1]["peak_rss_mb"] for r in rows)
    reached = all(r[1]["test_exact_match"] >= args.target_accuracy for r in rows)
    print(f"median time to {args.target_accuracy:.0%}: numpy {median_ours:.1f} s, plain torch {median_base:.1f} s, "
          f"ratio {median_ours / median_base:.2f} (goal <= 1.00); numpy peak RSS {peak:.0f} MB (goal <= 500); "
          f"numpy reached the target in every run: {reached}")
    print(json.dumps({"median_numpy_seconds": median_ours, "median_plain_torch_seconds": median_base,
                      "ratio": median_ours / median_base, "numpy_peak_rss_mb": peak, "numpy_reached": reached,
                      "runs": [{"seed": s, "numpy": o, "plain_torch": b} for s, o, b in rows]}))


if __name__ == "__main__":
    main()
