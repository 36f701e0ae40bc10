"""Time to 99% test exact match on dates: the course's tracks against a plain PyTorch model.

All run in the same invocation, one after the other, each in a fresh process (so each
process's peak memory is its own), on the same data (``generate_dates(20000, 1000, seed)``),
evaluated on the whole test set every 25 steps, for each seed given:

* ``numpy``: ``attention-course train --track numpy`` (bidirectional GRU encoder, GRU decoder,
  general-score attention, Adam; the track's defaults);
* ``torch``: ``attention-course train --track torch --device D`` (the same model in torch, with
  the fused recurrent kernels; the track's defaults);
* ``plain``: ``benchmarks/baselines/plain_torch_seq2seq.py --device D`` (bidirectional GRU
  encoder, step-by-step GRUCell decoder with additive attention, batch 128, Adam).

    .venv/bin/python benchmarks/dates_time_to_accuracy.py [--seeds 0 1 2] [--tracks numpy torch]
    python3 benchmarks/dates_time_to_accuracy.py --tracks torch --device cuda   # on a GPU

Goals: on this 2-core CPU the NumPy track no slower than the plain model (issue 2), the torch
track at most half its time (issue 3), NumPy peak memory <= 500 MB; on an H100/H200 the torch
track at most 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from attention_course.tasks import get_task

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"numpy": 1.0, "torch": 0.5}
TASK = get_task("dates")  # the registry's: its data, and the figure its summary is judged by


def run_json(command: list[str], timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def course_track(track: str, seed: int, args, out: Path) -> dict:
    command = [sys.executable, "-m", "attention_course", "train", "--task", TASK.name, "--track", track,
               "--seed", str(seed),
               "--target-accuracy", str(args.target_accuracy), "--max-seconds", str(args.max_seconds),
               "--eval-every", "25", "--out", str(out / f"{track}-{seed}"), "--no-progress"]
    if track == "torch":
        command += ["--device", args.device]
    return run_json(command, timeout=args.max_seconds + 300)


def plain_torch(seed: int, args) -> dict:
    return run_json([sys.executable, "benchmarks/baselines/plain_torch_seq2seq.py", "--seed", str(seed),
                     "--target-accuracy", str(args.target_accuracy), "--max-seconds", str(args.max_seconds),
                     "--device", args.device], timeout=args.max_seconds + 300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tracks", nargs="+", choices=["numpy", "torch"], default=["numpy", "torch"])
    parser.add_argument("--device", default="cpu", help="for the torch track and the plain model")
    parser.add_argument("--target-accuracy", type=float, default=0.99)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    args = parser.parse_args()

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            row = {"seed": seed, "plain": plain_torch(seed, args)}
            for track in args.tracks:
                row[track] = course_track(track, seed, args, Path(tmp))
            runs.append(row)
            parts = [f"{name} {r['steps']} steps {r['train_seconds']:.2f} s (exact match {r[TASK.metric]:.3f})"
                     for name, r in row.items() if name != "seed"]
            print(f"seed {seed}: " + " | ".join(parts), flush=True)
    summary = {"device": args.device, "runs": runs}
    plain = statistics.median(r["plain"]["train_seconds"] for r in runs)
    summary["median_plain_seconds"] = plain
    print(f"median time to {args.target_accuracy:.0%} ({args.device}): plain torch {plain:.2f} s")
    for track in args.tracks:
        median = statistics.median(r[track]["train_seconds"] for r in runs)
        reached = all(r[track][TASK.metric] >= args.target_accuracy for r in runs)
        peak = max(r[track]["peak_rss_mb"] for r in runs)
        goal = f"goal <= {GOALS[track]:.2f}" if args.device == "cpu" else "GPU goal: <= 2 s"
        print(f"  {track} track {median:.2f} s, ratio to plain {median / plain:.2f} ({goal}); peak RSS {peak:.0f} MB; "
              f"reached the target in every run: {reached}")
        summary[f"median_{track}_seconds"] = median
        summary[f"{track}_ratio"] = median / plain
        summary[f"{track}_peak_rss_mb"] = peak
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
