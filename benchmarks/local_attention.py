"""Global against local attention as the source grows: forward + backward time per decoder step.

Global attention scores every source position at every decoder step, so a step costs
``O(T_enc H)``; local attention (local-m, local-p) scores the ``2D + 1`` positions of its window
only, ``O(D H)``. Both are timed in the same run, on the NumPy track and the torch track (CPU),
for sources of growing length, with the general score:

    .venv/bin/python benchmarks/local_attention.py [--N 32] [--T-dec 16] [--H 64] [--window 4]
                                                   [--lengths 32,128,512,2048] [--json]

Prints, for every source length, the microseconds per decoder step (batch of N) of each layer and
the ratio global / local; local's time should stay flat while global's grows with T_enc.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from threadpoolctl import threadpool_limits

from _timing import time_call
from attention_course.numpy_track import LocalAttention, TimeAttention

KINDS = ("global", "local-m", "local-p")


def numpy_layer(kind: str, H: int, window: int):
    if kind == "global":
        return TimeAttention("general", H, H, rng=0, dtype=np.float32)
    return LocalAttention("general", H, H, kind=kind, window=window, rng=0, dtype=np.float32)


def torch_layer(kind: str, H: int, window: int):
    import torch

    from attention_course.torch_track import LocalAttention as TorchLocal
    from attention_course.torch_track import TimeAttention as TorchTime

    if kind == "global":
        return TorchTime("general", H, H, rng=0, dtype=torch.float32)
    return TorchLocal("general", H, H, kind=kind, window=window, rng=0, dtype=torch.float32)


def measure_numpy(kind: str, N: int, T_enc: int, T_dec: int, H: int, window: int, repeats: int = 5) -> float:
    """Seconds per forward + backward of one call (all T_dec steps)."""
    rng = np.random.default_rng(0)
    encoder_states = rng.standard_normal((N, T_enc, H)).astype(np.float32)
    decoder_states = rng.standard_normal((N, T_dec, H)).astype(np.float32)
    d_context = rng.standard_normal((N, T_dec, H)).astype(np.float32)
    layer = numpy_layer(kind, H, window)

    def step():
        layer.forward(encoder_states, decoder_states)
        layer.backward(d_context)

    return time_call(step, repeats=repeats, min_seconds=0.05)


def measure_torch(kind: str, N: int, T_enc: int, T_dec: int, H: int, window: int, repeats: int = 5) -> float:
    import torch

    generator = torch.Generator().manual_seed(0)
    encoder_states = torch.randn(N, T_enc, H, generator=generator, requires_grad=True)
    decoder_states = torch.randn(N, T_dec, H, generator=generator, requires_grad=True)
    d_context = torch.randn(N, T_dec, H, generator=generator)
    layer = torch_layer(kind, H, window)

    def step():
        context = layer(encoder_states, decoder_states)
        context.backward(d_context)

    return time_call(step, repeats=repeats, min_seconds=0.05)


def run(N: int = 32, T_dec: int = 16, H: int = 64, window: int = 4, lengths=(32, 128, 512, 2048),
        tracks=("numpy", "torch"), repeats: int = 5) -> list[dict]:
    """One row per (track, source length): microseconds per decoder step of each kind, one BLAS thread."""
    rows = []
    with threadpool_limits(1):
        if "torch" in tracks:
            import torch

            threads = torch.get_num_threads()
            torch.set_num_threads(1)
        try:
            for track in tracks:
                measure = measure_numpy if track == "numpy" else measure_torch
                for T_enc in lengths:
                    row = {"track": track, "T_enc": T_enc}
                    for kind in KINDS:
                        row[kind] = measure(kind, N, T_enc, T_dec, H, window, repeats) / T_dec * 1e6
                    rows.append(row)
        finally:
            if "torch" in tracks:
                torch.set_num_threads(threads)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--N", type=int, default=32)
    parser.add_argument("--T-dec", type=int, default=16)
    parser.add_argument("--H", type=int, default=64)
    parser.add_argument("--window", type=int, default=4, help="local attention's half-width D")
    parser.add_argument("--lengths", default="32,128,512,2048", help="source lengths, comma-separated")
    parser.add_argument("--tracks", default="numpy,torch")
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = parser.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    rows = run(args.N, args.T_dec, args.H, args.window, lengths, tuple(args.tracks.split(",")))
    print(f"N={args.N} T_dec={args.T_dec} H={args.H} D={args.window} (window {2 * args.window + 1}), general score, "
          "float32, one thread; microseconds per decoder step (forward + backward, whole batch)")
    print(f"{'track':6} {'T_enc':>6} {'global':>9} {'local-m':>9} {'local-p':>9} {'global/local-m':>15}")
    for row in rows:
        print(f"{row['track']:6} {row['T_enc']:6d} {row['global']:9.1f} {row['local-m']:9.1f} {row['local-p']:9.1f} "
              f"{row['global'] / row['local-m']:15.2f}")
    for track in sorted({row["track"] for row in rows}):
        mine = [row for row in rows if row["track"] == track]
        first, last = mine[0], mine[-1]
        growth = last["T_enc"] / first["T_enc"]
        print(f"{track}: source {growth:.0f}x longer -> global {last['global'] / first['global']:.1f}x slower, "
              f"local-m {last['local-m'] / first['local-m']:.2f}x, local-p {last['local-p'] / first['local-p']:.2f}x")
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
