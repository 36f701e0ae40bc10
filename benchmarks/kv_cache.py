"""Greedy decoding of the Transformer with a key/value cache against without one, on both tracks.

Without a cache, step ``t`` runs the decoder over all ``t`` tokens written so far (the causal mask
makes the earlier positions' results the same as at the step before, and they are thrown away):
the projections and feed-forward layers do ``O(t)`` work, self-attention ``O(t^2)``, so a whole
output of ``T`` tokens costs ``O(T^2)`` and ``O(T^3)``. With the cache, step ``t`` runs the newest
token only and reads the earlier keys and values: ``O(1)`` and ``O(t)``, ``O(T)`` and ``O(T^2)`` in
all. Both are timed in the same run, on the same untrained model (the track's default sizes:
d_model 64, 4 heads, 2 + 2 layers, feed-forward 256; seed 0), float32, one thread, decoding a batch
of N random sources of T_enc tokens for exactly T_out steps (no early stop)::

    .venv/bin/python benchmarks/kv_cache.py [--N 32] [--T-enc 20] [--lengths 8,16,32,64]
                                            [--tracks numpy,torch] [--out FILE.json]

Prints, per track and output length, the milliseconds of one greedy decoding of the batch without
and with the cache, their ratio (uncached / cached), and whether the two wrote the same tokens.
``--out`` also writes the rows as JSON (``book/results/kv_cache.json`` is what chapter 10 shows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from _timing import time_call
from attention_course.core.configs import TransformerConfig
from attention_course.tracks import get_track

VOCABULARY = 40  # source and target symbols, about as many as the dates task's


def model_and_source(track: str, N: int, T_enc: int, seed: int = 0):
    """The track's Transformer at its default sizes (float32, seed ``seed``) and N random sources."""
    config = TransformerConfig(VOCABULARY, VOCABULARY, dtype="float32")
    model = get_track(track).build_model("transformer", config, seed)
    rng = np.random.default_rng(seed)
    source = rng.integers(3, VOCABULARY, (N, T_enc))
    lengths = rng.integers(T_enc // 2, T_enc + 1, N)
    mask = np.arange(T_enc)[None, :] < lengths[:, None]
    if track == "torch":
        import torch

        model.eval()
        return model, torch.from_numpy(source), torch.from_numpy(mask)
    return model, source, mask


def measure(track: str, N: int, T_enc: int, T_out: int, repeats: int = 3) -> dict:
    """Seconds of one greedy decoding without and with the cache, and whether the tokens agree."""
    model, source, mask = model_and_source(track, N, T_enc)

    def decode(use_cache: bool):
        return model.generate(source, mask, 1, T_out, None, use_cache=use_cache)[0]

    same = bool((np.asarray(decode(True)) == np.asarray(decode(False))).all())
    uncached = time_call(lambda: decode(False), repeats=repeats, min_seconds=0.05)
    cached = time_call(lambda: decode(True), repeats=repeats, min_seconds=0.05)
    return {"track": track, "N": N, "T_enc": T_enc, "T_out": T_out, "uncached_ms": 1e3 * uncached,
            "cached_ms": 1e3 * cached, "ratio": uncached / cached, "same_tokens": same}


def run(N: int = 32, T_enc: int = 20, lengths=(8, 16, 32, 64), tracks=("numpy", "torch"), repeats: int = 3):
    rows = []
    with threadpool_limits(1):
        torch = None
        if "torch" in tracks:
            import torch

            threads = torch.get_num_threads()
            torch.set_num_threads(1)
        try:
            for track in tracks:
                for T_out in lengths:
                    rows.append(measure(track, N, T_enc, T_out, repeats))
        finally:
            if torch is not None:
                torch.set_num_threads(threads)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--N", type=int, default=32)
    parser.add_argument("--T-enc", type=int, default=20)
    parser.add_argument("--lengths", default="8,16,32,64", help="output lengths, comma-separated")
    parser.add_argument("--tracks", default="numpy,torch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = run(args.N, args.T_enc, [int(x) for x in args.lengths.split(",")], tuple(args.tracks.split(",")),
               args.repeats)
    print(f"Transformer (d_model 64, 4 heads, 2 + 2 layers), N={args.N} sources of up to {args.T_enc} tokens, "
          "float32, one thread; milliseconds of one greedy decoding of the batch")
    print(f"{'track':6} {'T_out':>6} {'uncached':>10} {'cached':>9} {'ratio':>7}  same tokens")
    for row in rows:
        print(f"{row['track']:6} {row['T_out']:6d} {row['uncached_ms']:10.1f} {row['cached_ms']:9.1f} "
              f"{row['ratio']:7.2f}  {row['same_tokens']}")
    if args.out is not None:
        import torch

        command = " ".join([".venv/bin/python benchmarks/kv_cache.py", *sys.argv[1:]])
        machine = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
                   "processor": platform.machine(), "cpus": os.cpu_count()}
        args.out.write_text(json.dumps({"experiment": "kv_cache", "command": command, "machine": machine,
                                        "load_average_before": round(load, 2), "rows": rows}, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
