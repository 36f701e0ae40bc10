"""TimeAttention forward+backward: the course's batched layer against the step-by-step repeat-and-sum one.

Shapes are the classic ones (N=128, T_enc=29, T_dec=10, H=256, float32, dot score). Both are
timed in the same run, with the BLAS thread count the process has and with one thread, and
the course's layer is also put against the machine's own large matrix product (GFLOP/s).

    .venv/bin/python benchmarks/time_attention.py

Goal (issue 2): at least 15x faster than the repeat-and-sum baseline.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from _timing import time_call
from attention_course.numpy_track import TimeAttention
from baselines.repeat_attention import RepeatTimeAttention


def matmul_gflops(size: int = 2048, dtype=np.float32) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(dtype)
    b = rng.standard_normal((size, size)).astype(dtype)
    seconds = time_call(lambda: a @ b, repeats=3, min_seconds=0.3)
    return 2 * size ** 3 / seconds / 1e9


def measure(N: int, T_enc: int, T_dec: int, H: int, dtype) -> dict:
    rng = np.random.default_rng(0)
    encoder_states = rng.standard_normal((N, T_enc, H)).astype(dtype)
    decoder_states = rng.standard_normal((N, T_dec, H)).astype(dtype)
    d_context = rng.standard_normal((N, T_dec, H)).astype(dtype)

    ours, baseline = TimeAttention("dot"), RepeatTimeAttention()

    def run(layer):
        def step():
            layer.forward(encoder_states, decoder_states)
            layer.backward(d_context)
        return step

    # Same answer first: a speed-up of a wrong result is worth nothing.
    context = ours.forward(encoder_states, decoder_states)
    np.testing.assert_allclose(context, baseline.forward(encoder_states, decoder_states), rtol=1e-4, atol=1e-4)
    t_ours = time_call(run(ours))
    t_base = time_call(run(baseline), repeats=5)
    # Six batched (T_dec x T_enc x H) products: scores, context, and four in backward.
    flops = 6 * 2 * N * T_dec * T_enc * H
    return {"ours_ms": t_ours * 1e3, "repeat_ms": t_base * 1e3, "speedup": t_base / t_ours,
            "ours_gflops": flops / t_ours / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--N", type=int, default=128)
    parser.add_argument("--T-enc", type=int, default=29)
    parser.add_argument("--T-dec", type=int, default=10)
    parser.add_argument("--H", type=int, default=256)
    args = parser.parse_args()
    blas = [f"{info.get('internal_api')} {info.get('version')} ({info.get('architecture')}, {info.get('num_threads')} threads)"
            for info in threadpool_info() if info.get("user_api") == "blas"]
    print(f"BLAS: {'; '.join(blas) or 'unknown'}")
    print(f"shapes: N={args.N} T_enc={args.T_enc} T_dec={args.T_dec} H={args.H} float32, dot score, forward+backward")
    results = {}
    for label, threads in (("default threads", None), ("1 thread", 1)):
        with threadpool_limits(threads):  # None: leave the thread count as it is
            peak = matmul_gflops()
            r = measure(args.N, args.T_enc, args.T_dec, args.H, np.float32)
        r["matmul_gflops"] = peak
        r["fraction_of_peak"] = r["ours_gflops"] / peak
        results[label] = r
        print(f"[{label}] TimeAttention {r['ours_ms']:.2f} ms vs repeat-and-sum {r['repeat_ms']:.1f} ms: "
              f"{r['speedup']:.1f}x faster (goal >= 15x); {r['ours_gflops']:.1f} GFLOP/s = "
              f"{100 * r['fraction_of_peak']:.0f}% of a 2048^2 matmul's {peak:.1f} GFLOP/s")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
